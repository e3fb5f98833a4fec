/* Invalidation of the kernel's caches, the notifier thread, poll on health. */
#include "fs/inval.h"
#include "base/log.h"
#include "base/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/fuse.h>

struct entry_job {
    fuse_ino_t parent;               /* the inode itself when inode */
    bool inode;                      /* inval_inode, offset 0 (else inval_entry) */
    char name[REG_NAME_MAX + 1];
    struct entry_job *next;
};

struct poller {
    uint64_t inst;
    void *fh;
    struct fuse_pollhandle *ph;
    struct poller *next;
};

struct fs_inval {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct entry_job *head, **tail;
    bool stop;                       /* under mu, read by send_entry (atomic) */
    bool helper_lost;                /* logged once (the notifier's own) */
    pthread_t th;
    struct poller *pollers;
};

static bool share_fd;                /* test-only: the old, wedging way */

void fs_inval_share_fd(bool share)
{
    share_fd = share;
}

/* Without the notification helper (fs/helper.c: a failed fork, or fs/
 * without cmd/): give this thread a table of one fd: at the session fd's
 * number, a clone of the connection (FUSE_DEV_IOC_CLONE), which libfuse's
 * notify calls then write to. Why: a notification can block in the kernel on a directory lock
 * held by a caller whose request a worker read. If the process is killed
 * then, the workers' /dev/fuse is closed as soon as they are gone -- its
 * unanswered requests end with ECONNABORTED, the caller drops the lock, this
 * thread goes on and dies too, and the last close aborts the connection. With
 * one shared table, this thread would keep /dev/fuse open itself: nothing
 * ends, the process stays a zombie and the mount wedged (issue 13). */
static int private_fd(struct fs *fs)
{
    int sfd = fuse_session_fd(fs->se);
    uint32_t master = (uint32_t)sfd;
    if (unshare(CLONE_FILES) < 0)
        return -errno;               /* nothing changed: the shared table */
    /* from here on only this thread's own table changes */
    int rc = 0, cfd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (cfd < 0 || ioctl(cfd, FUSE_DEV_IOC_CLONE, &master) < 0 || dup3(cfd, sfd, O_CLOEXEC) < 0)
        rc = -errno;                 /* then sfd stays the process's /dev/fuse */
    if (cfd >= 0)
        close(cfd);
    /* no other copy: neither the lock file nor any socket outlives the rest */
    if (sfd > 0)
        close_range(0, (unsigned)sfd - 1, 0);
    close_range((unsigned)sfd + 1, ~0u, 0);
    return rc;
}

/* j through the helper (fs/helper.c), waiting while its pipe is full
 * unless asked to stop; else, or if it died, in this thread. */
static void send_entry(struct fs *fs, struct fs_inval *v, const struct entry_job *j)
{
    int rc = -ENOTCONN;
    while (!share_fd && (rc = j->inode ? fs_helper_inval_inode(fs, j->parent)
                                       : fs_helper_inval_entry(fs, j->parent, j->name)) == -EAGAIN &&
           !__atomic_load_n(&v->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = { .fd = fs->helper_fd, .events = POLLOUT };
        poll(&p, 1, 100);
    }
    if (rc == -EPIPE && !v->helper_lost) {
        v->helper_lost = true;
        csifs_log(LOG_WARNING, "notifier: the notification helper is gone: writing "
                  "notifications itself (a kill may wait for the kernel)");
    }
    if ((rc == -ENOTCONN || rc == -EPIPE) && j->inode)
        fuse_lowlevel_notify_inval_inode(fs->se, j->parent, 0, 0);
    else if (rc == -ENOTCONN || rc == -EPIPE)
        /* -ENOENT: the kernel had nothing cached; nothing to do. */
        fuse_lowlevel_notify_inval_entry(fs->se, j->parent, j->name, strlen(j->name));
}

static void *notifier(void *arg)
{
    struct fs *fs = arg;
    struct fs_inval *v = fs->inval;
    /* with the helper, this thread writes only to its pipe */
    int rc = share_fd || fs->helper_fd >= 0 ? 0 : private_fd(fs);
    if (rc < 0)
        csifs_log(LOG_WARNING, "notifier: no private /dev/fuse clone (%s): a kill may wedge "
                "the mount", strerror(-rc));
    pthread_mutex_lock(&v->mu);
    for (;;) {
        while (!v->head && !v->stop)
            pthread_cond_wait(&v->cv, &v->mu);
        if (!v->head)
            break;
        struct entry_job *j = v->head;
        v->head = j->next;
        if (!v->head)
            v->tail = &v->head;
        pthread_mutex_unlock(&v->mu);
        send_entry(fs, v, j);
        free(j);
        pthread_mutex_lock(&v->mu);
    }
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

int fs_inval_start(struct fs *fs)
{
    struct fs_inval *v = calloc(1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, NULL);
    v->tail = &v->head;
    fs->inval = v;
    int rc = csifs_thread_start(&v->th, "csifs-inval", notifier, fs);
    if (rc) {
        fs->inval = NULL;
        free(v);
        return rc;
    }
    return 0;
}

void fs_inval_stop(struct fs *fs)
{
    struct fs_inval *v = fs->inval;
    if (!v)
        return;
    pthread_mutex_lock(&v->mu);
    __atomic_store_n(&v->stop, true, __ATOMIC_RELEASE);
    pthread_cond_signal(&v->cv);
    pthread_mutex_unlock(&v->mu);
    pthread_join(v->th, NULL);
    while (v->head) {
        struct entry_job *j = v->head;
        v->head = j->next;
        free(j);
    }
    while (v->pollers) {
        struct poller *p = v->pollers;
        v->pollers = p->next;
        fuse_pollhandle_destroy(p->ph);
        free(p);
    }
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    free(v);
    fs->inval = NULL;
}

static void enqueue(struct fs *fs, fuse_ino_t ino, bool is_inode, const char *name)
{
    struct fs_inval *v = fs->inval;
    struct entry_job *j = calloc(1, sizeof(*j));
    if (!v || !j) {
        free(j);
        return;
    }
    j->parent = ino;
    j->inode = is_inode;
    __atomic_add_fetch(&fs->inval_queued, 1, __ATOMIC_RELAXED);
    snprintf(j->name, sizeof(j->name), "%s", name);
    pthread_mutex_lock(&v->mu);
    *v->tail = j;
    v->tail = &j->next;
    pthread_cond_signal(&v->cv);
    pthread_mutex_unlock(&v->mu);
}

void fs_inval_entry(struct fs *fs, fuse_ino_t parent, const char *name)
{
    if (fs_lookups_known(fs, parent))   /* no dentry can be under an unknown dir */
        enqueue(fs, parent, false, name);
}

void fs_inval_inode_later(struct fs *fs, fuse_ino_t ino)
{
    enqueue(fs, ino, true, "");
}

static void inode(struct fs *fs, fuse_ino_t ino)
{
    if (!fs_lookups_known(fs, ino))
        return;                      /* the kernel holds nothing of it */
    int rc = fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
    __atomic_add_fetch(&fs->inval_sent[rc == -ENOENT], 1, __ATOMIC_RELAXED);
}

void fs_inval_inode(struct fs *fs, fuse_ino_t ino)
{
    inode(fs, ino);
}

/* Attribute inodes of an instance whose attr flags match mask (0: all). */
static void attrs(struct fs *fs, uint64_t inst, enum reg_type type, unsigned mask,
                  const enum reg_attr *only, int n)
{
    for (int a = 0; a < REG_NATTRS; a++) {
        bool pick = n ? false : (!mask || (reg_attrs[a].flags & mask));
        for (int k = 0; k < n; k++)
            pick |= only[k] == (enum reg_attr)a;
        if (pick && reg_attr_exists(type, (unsigned)a))
            inode(fs, fs_ino(inst, SLOT_ATTR0 + (unsigned)a));
    }
}

static void wake_pollers(struct fs *fs, uint64_t inst)
{
    struct fs_inval *v = fs->inval;
    pthread_mutex_lock(&v->mu);
    for (struct poller **pp = &v->pollers; *pp;) {
        struct poller *p = *pp;
        if (p->inst == inst) {
            *pp = p->next;
            fuse_lowlevel_notify_poll(p->ph);
            fuse_pollhandle_destroy(p->ph);
            free(p);
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&v->mu);
}

/* parent/name went away: its entry is invalidated, unless the change is
 * the caller's own RMDIR or UNLINK of that name, whose dentry the kernel
 * drops itself once it has the answer (the helper's invalidation would
 * wait for that on the directory's lock and find nothing left). */
static void gone(struct fs *fs, const struct reg_change *c, fuse_ino_t parent, const char *name)
{
    const struct reg_ring_key *k = c->req;
    if (k && (k->opcode == FUSE_RMDIR || k->opcode == FUSE_UNLINK) && k->parent == parent &&
        !strcmp(k->name, name))
        return;
    fs_inval_entry(fs, parent, name);
}

void fs_inval_change(struct fs *fs, const struct reg_change *c)
{
    fuse_ino_t type_dir = fs_ino(0, SLOT_TYPE0 + c->type);
    fuse_ino_t plugin_dir = fs_ino(c->plugin, SLOT_DIR), inst_dir = fs_ino(c->inst, SLOT_DIR);
    static const enum reg_attr fp[] = { REG_A_PROVIDER, REG_A_VERSION, REG_A_NODEID,
                                        REG_A_MAX_VOLUMES, REG_A_TOPOLOGY, REG_A_CAPABILITIES };
    static const enum reg_attr hist[] = { REG_A_HISTORY };
    struct reg_node n;
    switch (c->kind) {
    case REG_C_PLUGIN_ADD:
        inode(fs, type_dir);
        break;
    case REG_C_PLUGIN_DEL:
        inode(fs, type_dir);
        gone(fs, c, type_dir, c->plugin_name);
        break;
    case REG_C_INST_ADD:
        inode(fs, plugin_dir);
        break;
    case REG_C_INST_DEL:
        inode(fs, plugin_dir);
        gone(fs, c, plugin_dir, c->alloc_name);
        wake_pollers(fs, c->inst);
        break;
    case REG_C_CURRENT:
        inode(fs, fs_ino(c->plugin, fs_kinds[K_CURRENT].slot));
        inode(fs, plugin_dir);
        if (reg_current_get(fs->reg, c->plugin, NULL, 0) < 0)
            fs_inval_entry(fs, plugin_dir, fs_kinds[K_CURRENT].name);
        break;
    case REG_C_SOCKET:
        inode(fs, inst_dir);
        inode(fs, fs_ino(c->inst, fs_kinds[K_SOCKET].slot));
        attrs(fs, c->inst, c->type, 0, NULL, 0);
        if (reg_get(fs->reg, c->inst, &n) == 0 && !n.has_socket)
            gone(fs, c, inst_dir, fs_kinds[K_SOCKET].name);
        break;
    case REG_C_ATTR:
        /* a write changes the instance's mtime: every file in it */
        inode(fs, inst_dir);
        attrs(fs, c->inst, c->type, 0, NULL, 0);
        break;
    case REG_C_HEALTH:
        attrs(fs, c->inst, c->type, REG_AF_POLL, NULL, 0);
        wake_pollers(fs, c->inst);
        break;
    case REG_C_FINGERPRINT:
        attrs(fs, c->inst, c->type, 0, fp, (int)(sizeof(fp) / sizeof(fp[0])));
        break;
    case REG_C_HISTORY:
        attrs(fs, c->inst, c->type, 0, hist, 1);
        break;
    }
}

int fs_poll_arm(struct fs *fs, uint64_t inst, void *fh, struct fuse_pollhandle *ph)
{
    struct fs_inval *v = fs->inval;
    struct poller *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->inst = inst;
    p->fh = fh;
    p->ph = ph;
    fs_poll_forget(fs, fh);
    pthread_mutex_lock(&v->mu);
    p->next = v->pollers;
    v->pollers = p;
    pthread_mutex_unlock(&v->mu);
    return 0;
}

void fs_poll_forget(struct fs *fs, void *fh)
{
    struct fs_inval *v = fs->inval;
    if (!v)
        return;
    pthread_mutex_lock(&v->mu);
    for (struct poller **pp = &v->pollers; *pp;) {
        struct poller *p = *pp;
        if (p->fh == fh) {
            *pp = p->next;
            fuse_pollhandle_destroy(p->ph);
            free(p);
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&v->mu);
}

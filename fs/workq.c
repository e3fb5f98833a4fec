/* Writer threads for the committing handlers (workq.h). */
#include "fs/workq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum job_op { J_MKDIR, J_RMDIR, J_SYMLINK, J_UNLINK, J_RENAME, J_WRITE, J_SETATTR };

/* One queued request: its arguments, strings and data copied after it. */
struct job {
    struct job *next;
    enum job_op op;
    fuse_req_t req;
    fuse_ino_t ino, ino2;
    mode_t mode;
    unsigned flags;
    int to_set;
    off_t off;
    size_t size;
    struct stat st;
    struct fuse_file_info fi;
    bool has_fi;
    const char *s1, *s2, *data;
    char buf[];
};

struct fs_workq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *head, **tail;
    bool stop;
    int n, idle, queued;             /* writers; of them waiting; jobs waiting */
    pthread_t th[FS_WRITERS_MAX];
};

/* The session's table of committing handlers, as oplog and testopt wrapped
 * them (fs.c): what runs on a writer, or inline. */
static const struct fuse_lowlevel_ops *commit(fuse_req_t req)
{
    return &((struct fs *)fuse_req_userdata(req))->commit;
}

static void run(struct job *j)
{
    const struct fuse_lowlevel_ops *c = commit(j->req);
    struct fuse_file_info *fi = j->has_fi ? &j->fi : NULL;
    switch (j->op) {
    case J_MKDIR: c->mkdir(j->req, j->ino, j->s1, j->mode); break;
    case J_RMDIR: c->rmdir(j->req, j->ino, j->s1); break;
    case J_SYMLINK: c->symlink(j->req, j->s2, j->ino, j->s1); break;
    case J_UNLINK: c->unlink(j->req, j->ino, j->s1); break;
    case J_RENAME: c->rename(j->req, j->ino, j->s1, j->ino2, j->s2, j->flags); break;
    case J_WRITE: c->write(j->req, j->ino, j->data, j->size, j->off, fi); break;
    case J_SETATTR: c->setattr(j->req, j->ino, &j->st, j->to_set, fi); break;
    }
}

static void *writer(void *arg)
{
    struct fs_workq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop) {
            q->idle++;
            pthread_cond_wait(&q->cv, &q->mu);
            q->idle--;
        }
        struct job *j = q->head;
        if (!j)
            break;
        q->queued--;
        if (!(q->head = j->next))
            q->tail = &q->head;
        pthread_mutex_unlock(&q->mu);
        run(j);
        free(j);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int fs_workq_start(struct fs *fs)
{
    struct fs_workq *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->tail = &q->head;
    int rc = 0;
    while (rc == 0 && q->n < FS_WRITERS)
        if ((rc = pthread_create(&q->th[q->n], NULL, writer, q)) == 0)
            q->n++;
    __atomic_store_n(&fs->workq, q, __ATOMIC_RELEASE);
    return q->n ? 0 : -rc;           /* fewer writers still serve */
}

void fs_workq_stop(struct fs *fs)
{
    struct fs_workq *q = __atomic_exchange_n(&fs->workq, NULL, __ATOMIC_ACQ_REL);
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int k = 0; k < q->n; k++)
        pthread_join(q->th[k], NULL);
    while (q->head) {                /* no writer started: answer here */
        struct job *j = q->head;
        q->head = j->next;
        run(j);
        free(j);
    }
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* A job with room for two strings and size bytes; NULL: run inline. */
static struct job *job(fuse_req_t req, enum job_op op, const char *s1, const char *s2,
                       const void *data, size_t size)
{
    struct fs *fs = fuse_req_userdata(req);
    struct fs_workq *q = __atomic_load_n(&fs->workq, __ATOMIC_ACQUIRE);
    size_t l1 = s1 ? strlen(s1) + 1 : 0, l2 = s2 ? strlen(s2) + 1 : 0;
    struct job *j = q && q->n ? calloc(1, sizeof(*j) + l1 + l2 + size) : NULL;
    if (!j)
        return NULL;
    j->op = op;
    j->req = req;
    char *p = j->buf;
    if (s1)
        j->s1 = memcpy(p, s1, l1), p += l1;
    if (s2)
        j->s2 = memcpy(p, s2, l2), p += l2;
    if (size)
        memcpy(p, data, size);
    j->data = p;
    j->size = size;
    return j;
}

static void push(struct job *j)
{
    struct fs *fs = fuse_req_userdata(j->req);
    struct fs_workq *q = fs->workq;
    pthread_mutex_lock(&q->mu);
    *q->tail = j;
    q->tail = &j->next;
    /* More jobs waiting than idle writers: one more (a failure only leaves
     * the job for the next writer that is done). */
    if (++q->queued > q->idle && q->n < FS_WRITERS_MAX && !q->stop &&
        pthread_create(&q->th[q->n], NULL, writer, q) == 0)
        q->n++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void with_fi(struct job *j, const struct fuse_file_info *fi)
{
    if (fi) {
        j->fi = *fi;
        j->has_fi = true;
    }
}

void fs_q_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct job *j = job(req, J_MKDIR, name, NULL, NULL, 0);
    if (!j) {
        commit(req)->mkdir(req, parent, name, mode);
        return;
    }
    j->ino = parent;
    j->mode = mode;
    push(j);
}

void fs_q_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct job *j = job(req, J_RMDIR, name, NULL, NULL, 0);
    if (!j) {
        commit(req)->rmdir(req, parent, name);
        return;
    }
    j->ino = parent;
    push(j);
}

void fs_q_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    struct job *j = job(req, J_SYMLINK, name, target, NULL, 0);
    if (!j) {
        commit(req)->symlink(req, target, parent, name);
        return;
    }
    j->ino = parent;
    push(j);
}

void fs_q_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct job *j = job(req, J_UNLINK, name, NULL, NULL, 0);
    if (!j) {
        commit(req)->unlink(req, parent, name);
        return;
    }
    j->ino = parent;
    push(j);
}

void fs_q_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                 const char *newname, unsigned int flags)
{
    struct job *j = job(req, J_RENAME, name, newname, NULL, 0);
    if (!j) {
        commit(req)->rename(req, parent, name, newparent, newname, flags);
        return;
    }
    j->ino = parent;
    j->ino2 = newparent;
    j->flags = flags;
    push(j);
}

void fs_q_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                struct fuse_file_info *fi)
{
    struct job *j = job(req, J_WRITE, NULL, NULL, buf, size);
    if (!j) {
        commit(req)->write(req, ino, buf, size, off, fi);
        return;
    }
    j->ino = ino;
    j->off = off;
    with_fi(j, fi);
    push(j);
}

void fs_q_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                  struct fuse_file_info *fi)
{
    struct job *j = job(req, J_SETATTR, NULL, NULL, NULL, 0);
    if (!j) {
        commit(req)->setattr(req, ino, attr, to_set, fi);
        return;
    }
    j->ino = ino;
    j->st = *attr;
    j->to_set = to_set;
    with_fi(j, fi);
    push(j);
}

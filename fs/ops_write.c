/* Write-side handlers: mkdir, rmdir, symlink, unlink, rename, write, setattr.
 * Each resolves where it is asked to act, refuses what DESIGN section 5
 * refuses (the "where" rows before the "name" rows), then calls the kind's
 * operation (one registry call). Whatever is refused leaves everything as
 * it was.
 *
 * They run on the FUSE thread, which never waits for a commit: each
 * handler notes what its answer needs in a call (struct call) and hands it
 * to the registry with the mutation (reg_reply_set). A refusal is answered
 * at once; a queued mutation is answered by call_done after the commit
 * that holds it (DESIGN 7), with no registry lock held but notify_mu (the
 * subscribers' turn: registry.h), on the thread that
 * leads that commit: the registry's commit thread, or, when none was being
 * committed, this FUSE thread itself once it has let the loop go (a
 * request arriving meanwhile wakes the loop's second thread:
 * reg_lead_offer, fs_serve_defer; the commit thread's wake-up saved, and a
 * reader still never waits). The answer invalidates
 * nothing that can block: the entry invalidations of a change go to the
 * notifier thread (inval.h), which neither a FUSE thread nor the commit
 * thread waits for (DESIGN 10). No interrupt handler: once csifs has read
 * a request, the kernel keeps its caller waiting for the answer even on a
 * fatal signal (FUSE_INTERRUPT is only a hint), so an interrupted caller's
 * change commits and is answered as any other. An answer the kernel no
 * longer wants (the connection aborted, or the request resent to a
 * successor) fails with ENOENT, which libfuse ignores. At exit, fs_loop
 * waits for every call to be answered (fs_calls_drain). */
#include "fs/ops.h"
#include "fs/serve.h"
#include "fs/testopt.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A committing request until it is answered. */
struct call {
    fuse_req_t req;
    struct fs *fs;
    void (*answer)(struct call *c, int rc);
    struct fs_node dir;              /* mkdir, symlink, rename: where; setattr: the node */
    fuse_ino_t ino;                  /* the request's nodeid (setattr: the node) */
    size_t size;                     /* write */
    struct reg_ring_key key;         /* its mutation's, for the ring (DESIGN 13) */
    bool resent;                     /* FUSE_UNIQUE_RESEND: sent again after a takeover */
    char name[];                     /* mkdir, rmdir, symlink, unlink: the child; rename: the link */
};

static void answer_err(struct call *c, int rc)
{
    fuse_reply_err(c->req, -rc);
}

static void answer_child(struct call *c, int rc)
{
    fs_reply_child(c->req, c->fs, rc, &c->dir, c->name);
}

static void call_free(struct call *c)
{
    struct fs *fs = c->fs;
    free(c);
    fs_calls_add(fs, -1);
}

/* Exactly once (DESIGN 13): a request the kernel sent again after a
 * takeover (FUSE_UNIQUE_RESEND) whose mutation the ring holds committed
 * (same connection, opcode, nodeid and name) gets the recorded outcome,
 * answered as its commit would have been (a mkdir: its entry from the
 * registry, never EEXIST), instead of a second execution. Anything else
 * (a mismatch, a request never committed) runs as usual. */
static bool call_replayed(struct call *c, uint64_t unique)
{
    int rc;
    if (!(unique & FS_UNIQUE_RESEND) || reg_ring_find(c->fs->reg, &c->key, &rc) < 0)
        return false;
    int r = fs_resolve(c->fs, c->ino, &c->dir);
    r = r < 0 ? r : rc;
    csifs_log(LOG_INFO, "resent request %llu (opcode %u, %s) committed before the takeover: "
              "answered as recorded (%d): %s", (unsigned long long)c->key.unique, c->key.opcode,
              c->name[0] ? c->name : "no name", rc, r < 0 ? strerror(-r) : "success");
    c->answer(c, r);
    call_free(c);
    return true;
}

/* A call for req, counted until answered (fs_calls_drain), with its ring
 * key (the request's unique, opcode and nodeid from fs/serve.h, and name);
 * size for a write. NULL when answered already (no memory, or a resent
 * request replayed from the ring) or held for the next image. */
static struct call *call_open(fuse_req_t req, enum fs_op fop,
                              void (*answer)(struct call *, int), const char *name,
                              size_t size)
{
    struct fs *fs = fs_req(req, fop);
    /* An upgrade in place holds it (fs_hold_commits): never answered here.
     * libfuse keeps req on its session's list of requests in flight until
     * the execve that ends the upgrade (or the _exit when that fails): no
     * exit handler runs, so no leak check sees it, and the kernel sends the
     * request again to the new image (FUSE_NOTIFY_RESEND). */
    if (!fs_calls_open(fs))
        return NULL;
    size_t len = name ? strlen(name) + 1 : 1;
    struct call *c = calloc(1, sizeof(*c) + len);
    if (!c) {
        fuse_reply_err(req, ENOMEM);
        fs_calls_add(fs, -1);
        return NULL;
    }
    const struct fs_serve_hdr *h = fs_serve_hdr();
    *c = (struct call){ .req = req, .fs = fs, .answer = answer, .ino = h->nodeid, .size = size,
                        .key = { .unique = h->unique & ~FS_UNIQUE_RESEND, .parent = h->nodeid,
                                 .opcode = h->opcode },
                        .resent = h->unique & FS_UNIQUE_RESEND };
    if (name) {
        memcpy(c->name, name, len);
        if (len > sizeof(c->key.name))
            c->key.unique = 0;       /* never committed: no ring key */
        else
            memcpy(c->key.name, name, len);
    }
    return call_replayed(c, h->unique) ? NULL : c;
}

/* On the thread that leads the commit: the mutation's outcome, then the
 * answer. */
static void call_done(void *arg, int rc)
{
    struct call *c = arg;
    fs_testopt_before_reply(c->key.opcode, rc, true);
    fs_serve_kick(!reg_leads());     /* the caller's next request finds a reader awake */
    c->answer(c, rc);
    call_free(c);
}

/* Around the registry call of c's request: from call_begin on, a mutation
 * it submits is queued with c as its reply (REG_QUEUED); call_end answers
 * c now when it was not (refused, or nothing to commit). */
static void call_begin(struct call *c)
{
    reg_reply_set(call_done, c);
    reg_ring_set(&c->key);
    reg_lead_offer(fs_serve_can_defer());
}

/* This thread leads the commit, the FUSE loop let go (fs_serve_defer). */
static void lead(void *reg)
{
    reg_lead(reg);
}

static void call_end(struct call *c, int rc)
{
    reg_reply_set(NULL, NULL);
    reg_ring_set(NULL);
    reg_lead_offer(false);
    struct reg *reg = reg_lead_due();
    if (reg)
        fs_serve_defer(lead, reg);   /* answered after the loop is let go */
    if (rc == REG_QUEUED) {
        if (!reg)
            fs_serve_handed_off();   /* the commit thread answers */
        return;
    }
    fs_testopt_before_reply(c->key.opcode, rc, false);
    c->answer(c, rc);
    call_free(c);
}

/* A directory op (mkdir, rmdir): the parent's kind's operation. */
static void dir_op(fuse_req_t req, enum fs_op fop, fuse_ino_t parent, const char *name,
                   void (*answer)(struct call *, int))
{
    struct call *c = call_open(req, fop, answer, name, 0);
    if (!c)
        return;
    struct fs *fs = c->fs;
    int rc = fs_resolve(fs, parent, &c->dir);
    const struct fs_kind_def *k = &fs_kinds[c->dir.kind];
    int (*op)(struct fs *, const struct fs_node *, const char *) =
        rc < 0 ? NULL : fop == FS_OP_MKDIR ? k->mkdir : k->rmdir;
    call_begin(c);
    if (rc == 0)
        rc = op ? op(fs, &c->dir, name) : -EPERM;
    call_end(c, rc);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)mode;
    dir_op(req, FS_OP_MKDIR, parent, name, answer_child);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    dir_op(req, FS_OP_RMDIR, parent, name, answer_err);
}

static int check_target(const char *target)
{
    if (target[0] != '/')
        return csifs_why_set("socket target must be an absolute path"), -EINVAL;
    if (reg_value_check(target, strlen(target)) < 0)
        return -EINVAL;
    if (strlen(target) > REG_SOCKET_MAX)
        return csifs_why_set("socket target over 107 bytes (a unix socket address)"), -ENAMETOOLONG;
    return 0;
}

/* Pending links and a takeover (DESIGN 13): the symlink or unlink of a
 * pending link commits nothing, so the ring cannot answer it when it comes
 * again (FUSE_UNIQUE_RESEND) after its predecessor did it and died before
 * its answer; the memfd kept the link as that predecessor left it. Only a
 * resent request is answered from what it finds (a fresh one keeps its
 * errors, DESIGN 5), and the log says so. */
static void call_resend_note(const struct call *c, const char *what)
{
    csifs_log(LOG_INFO, "resent request %llu (opcode %u, %s): %s before the takeover: "
              "answered with success", (unsigned long long)c->key.unique, c->key.opcode,
              c->name, what);
}

/* A resent symlink that finds its own pending link (same instance, name
 * and target) made it: it succeeds with its entry, not EEXIST. */
static bool symlink_made(const struct call *c, const struct fs_node *n, const char *target)
{
    struct pending_link l;
    if (!c->resent || n->kind != K_PENDING || pending_get(&c->fs->pend, n->pending, &l) < 0 ||
        strcmp(l.target, target))
        return false;
    call_resend_note(c, "its pending link was made");
    return true;
}

/* A resent unlink of a name that is not in its instance dir: under a
 * valid name other than `socket` (whose unlink commits: the ring answers
 * it) only a pending link can be missing there (attributes and stats are
 * always there). The kernel looked the name up before the request and
 * holds the dir's lock until the answer, so the link was there and this
 * request removed it (or it expired since): 0, not ENOENT. */
static bool unlink_done(const struct call *c, const struct fs_node *dir, const char *name)
{
    bool gone = c->resent && fs_kinds[dir->kind].may_hold_links &&
                strcmp(name, fs_kinds[K_SOCKET].name) && reg_name_check(name) == 0;
    csifs_why_clear();               /* a bad name stays ENOENT, with no why */
    if (gone)
        call_resend_note(c, "its pending link was removed");
    return gone;
}

void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    struct call *c = call_open(req, FS_OP_SYMLINK, answer_child, name, 0);
    if (!c)
        return;
    struct fs *fs = c->fs;
    struct fs_node n;
    struct pending_link l;
    bool made = false;
    int rc = fs_resolve(fs, parent, &c->dir);
    if (rc == 0 && !fs_kinds[c->dir.kind].may_hold_links)
        rc = -EPERM;
    if (rc == 0 && fs_child(fs, &c->dir, name, &n) == 0) {
        made = symlink_made(c, &n, target);   /* then answered with its entry */
        rc = made ? 0 : -EEXIST;
    }
    if (rc == 0 && !made)
        rc = check_target(target);
    call_begin(c);
    if (rc == 0 && !made && !strcmp(name, fs_kinds[K_SOCKET].name))
        rc = reg_socket_set(fs->reg, c->dir.r.seq, target);
    else if (rc == 0 && !made && (rc = reg_name_check(name)) == 0)
        rc = pending_add(&fs->pend, c->dir.r.seq, name, target, &l);
    call_end(c, rc);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct call *c = call_open(req, FS_OP_UNLINK, answer_err, name, 0);
    if (!c)
        return;
    struct fs *fs = c->fs;
    struct fs_node dir, n;
    bool done = false;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0 && (rc = fs_child(fs, &dir, name, &n)) == -ENOENT)
        rc = (done = unlink_done(c, &dir, name)) ? 0 : rc;
    call_begin(c);
    if (rc == 0 && !done) {
        const struct fs_kind_def *k = &fs_kinds[n.kind];
        rc = k->unlink ? k->unlink(fs, &n, name) : k->fmt == S_IFDIR ? -EISDIR : -EPERM;
    }
    call_end(c, rc);
}

/* The socket is set: the pending link it came from goes. */
static void answer_rename(struct call *c, int rc)
{
    if (rc == 0)
        pending_del(&c->fs->pend, c->dir.r.seq, c->name);
    fuse_reply_err(c->req, -rc);
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                  fuse_ino_t newparent, const char *newname, unsigned int flags)
{
    struct call *c = call_open(req, FS_OP_RENAME, answer_rename, name, 0);
    if (!c)
        return;
    struct fs *fs = c->fs;
    struct fs_node *dir = &c->dir, n, old;
    struct pending_link l;
    int rc = fs_resolve(fs, parent, dir);
    /* Only a pending link renamed onto `socket` in its own dir. */
    if (rc == 0 && (parent != newparent || !fs_kinds[dir->kind].may_hold_links ||
                    strcmp(newname, fs_kinds[K_SOCKET].name) || (flags & ~RENAME_NOREPLACE)))
        rc = -EPERM;
    if (rc == 0 && fs_child(fs, dir, name, &n) < 0)
        rc = -ENOENT;
    if (rc == 0 && n.kind != K_PENDING)
        rc = -EPERM;
    if (rc == 0 && (flags & RENAME_NOREPLACE) && fs_child(fs, dir, newname, &old) == 0)
        rc = -EEXIST;
    if (rc == 0)
        rc = pending_get(&fs->pend, n.pending, &l);
    call_begin(c);
    if (rc == 0)
        rc = reg_socket_set(fs->reg, dir->r.seq, l.target);
    call_end(c, rc);
}

/* The kind's write, or why there is none. */
static int write_node(struct fs *fs, const struct fs_node *n, const char *buf, size_t len,
                      off_t off)
{
    const struct fs_kind_def *k = &fs_kinds[n->kind];
    if (!k->write)
        return k->fmt == S_IFREG ? -EACCES : -EPERM;
    return k->write(fs, n, buf, len, off);
}

static void answer_write(struct call *c, int rc)
{
    if (rc < 0)
        fuse_reply_err(c->req, -rc);
    else
        fuse_reply_write(c->req, c->size);
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi)
{
    struct call *c = call_open(req, FS_OP_WRITE, answer_write, NULL, size);
    if (!c)
        return;
    struct fs *fs = c->fs;
    const struct fs_fh *h = fs_fh_get(fs, fi->fh, ino);
    call_begin(c);
    call_end(c, h ? write_node(fs, &h->n, buf, size, off) : -EBADF);
}

/* The node's attributes as they are after the change. */
static void answer_setattr(struct call *c, int rc)
{
    struct fs_node n;
    struct stat st;
    if (rc == 0)
        rc = fs_resolve(c->fs, c->ino, &n);
    if (rc < 0) {
        fuse_reply_err(c->req, -rc);
        return;
    }
    fs_stat(c->fs, &n, &st);
    fuse_reply_attr(c->req, &st, c->fs->attr_timeout);
}

void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi)
{
    (void)fi;
    struct call *c = call_open(req, FS_OP_SETATTR, answer_setattr, NULL, 0);
    if (!c)
        return;
    struct fs *fs = c->fs;
    struct fs_node n;
    int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                FUSE_SET_ATTR_MTIME_NOW;
    c->ino = ino;
    int rc = fs_resolve(fs, ino, &n);
    call_begin(c);
    if (rc == 0 && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
        rc = -EPERM;
    else if (rc == 0 && !(to_set & FUSE_SET_ATTR_SIZE) && (to_set & times))
        rc = -EPERM;                 /* a time change that is not part of a size change */
    else if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
        /* a truncate is a write of nothing at the new size: the kind
         * refuses what is not writable, then any size but 0 (EINVAL) */
        rc = write_node(fs, &n, "", 0, attr->st_size);
    call_end(c, rc);
}

/* Nothing is made but by mkdir and symlink (DESIGN 5). */
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    (void)parent, (void)name, (void)mode, (void)rdev;
    fs_req(req, FS_OP_OTHER);
    fuse_reply_err(req, EPERM);
}

void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    (void)ino, (void)newparent, (void)newname;
    fs_req(req, FS_OP_OTHER);
    fuse_reply_err(req, EPERM);
}

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                  struct fuse_file_info *fi)
{
    (void)parent, (void)name, (void)mode, (void)fi;
    fs_req(req, FS_OP_OTHER);
    fuse_reply_err(req, EPERM);
}

/* Writer threads for the committing handlers (workq.h). */
#include "fs/workq.h"
#include "fs/serve.h"

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

/* Hand the job's arguments to the session's handler. */
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

/* Queue a copy of the job a (its strings and data copied after it), or,
 * when it cannot be queued, run a here. */
static void submit(struct job *a)
{
    struct fs *fs = fuse_req_userdata(a->req);
    struct fs_workq *q = __atomic_load_n(&fs->workq, __ATOMIC_ACQUIRE);
    size_t l1 = a->s1 ? strlen(a->s1) + 1 : 0, l2 = a->s2 ? strlen(a->s2) + 1 : 0;
    struct job *j = q && q->n ? malloc(sizeof(*j) + l1 + l2 + a->size) : NULL;
    if (!j) {
        run(a);
        return;
    }
    *j = *a;
    char *p = j->buf;
    if (a->s1)
        j->s1 = memcpy(p, a->s1, l1), p += l1;
    if (a->s2)
        j->s2 = memcpy(p, a->s2, l2), p += l2;
    if (a->size)
        memcpy(p, a->data, a->size);
    j->data = p;
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
    fs_serve_handed_off();
}

/* The fuse_lowlevel_ops entries: each names its arguments in a job. */
#define FI(fi) .fi = (fi) ? *(fi) : (struct fuse_file_info){ 0 }, .has_fi = (fi) != NULL

void fs_q_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    submit(&(struct job){ .op = J_MKDIR, .req = req, .ino = parent, .s1 = name, .mode = mode });
}

void fs_q_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    submit(&(struct job){ .op = J_RMDIR, .req = req, .ino = parent, .s1 = name });
}

void fs_q_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    submit(&(struct job){ .op = J_SYMLINK, .req = req, .ino = parent, .s1 = name, .s2 = target });
}

void fs_q_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    submit(&(struct job){ .op = J_UNLINK, .req = req, .ino = parent, .s1 = name });
}

void fs_q_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                 const char *newname, unsigned int flags)
{
    submit(&(struct job){ .op = J_RENAME, .req = req, .ino = parent, .s1 = name,
                          .ino2 = newparent, .s2 = newname, .flags = flags });
}

void fs_q_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                struct fuse_file_info *fi)
{
    submit(&(struct job){ .op = J_WRITE, .req = req, .ino = ino, .data = buf, .size = size,
                          .off = off, FI(fi) });
}

void fs_q_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                  struct fuse_file_info *fi)
{
    submit(&(struct job){ .op = J_SETATTR, .req = req, .ino = ino, .st = *attr,
                          .to_set = to_set, FI(fi) });
}

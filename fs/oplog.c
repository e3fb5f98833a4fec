/* Log lines for refused calls and registry changes. See oplog.h. */
#include "fs/oplog.h"
#include "fs/node.h"
#include "fs/serve.h"
#include "base/log.h"
#include "registry/events.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct fuse_lowlevel_ops orig;

#define PATH_CAP (4 * REG_NAME_MAX + 64)
#define ESC_CAP 1024

/* A name or socket target the caller gave, escaped as the events stream
 * escapes (ev_escape): a refused one may hold a newline or another control
 * character, which must not forge a log line. */
static const char *esc(const char *s, char *buf)
{
    ev_escape(s, buf, ESC_CAP, 0);
    return buf;
}

/* "csi-node/p/a/mount_point" of an inode, "?" when gone */
static const char *node_path(fuse_req_t req, fuse_ino_t ino, char *buf)
{
    struct fs_node n;
    if (fs_resolve(fuse_req_userdata(req), ino, &n) < 0)
        return strcpy(buf, "?");
    const char *t = n.kind == K_ROOT ? "." : reg_type_names[n.type];
    const char *leaf = fs_node_name(&n) ? fs_node_name(&n) : "?";
    switch (n.kind) {
    case K_ROOT: case K_TYPE: snprintf(buf, PATH_CAP, "%s", t); break;
    case K_PLUGIN: snprintf(buf, PATH_CAP, "%s/%s", t, n.r.plugin); break;
    case K_INST: snprintf(buf, PATH_CAP, "%s/%s/%s", t, n.r.plugin, n.r.alloc); break;
    default: snprintf(buf, PATH_CAP, "%s/%s/%s/%s", t, n.r.plugin, n.r.alloc, leaf);
    }
    return buf;
}

/* The caller of req as the registry's mutations record it (reg_caller_set):
 * uid and pid from the FUSE request. */
static struct reg_caller set_caller(fuse_req_t req)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    struct reg_caller c = { .uid = ctx->uid, .pid = ctx->pid };
    reg_caller_set(&c);
    return c;
}

/* The comm of the caller of the request this thread handles, read when a
 * validation refuses it (csifs_why_hook): the caller still waits for its
 * answer then, and may be gone once answered. */
static _Thread_local struct {
    int pid;
    bool known;                      /* comm is pid's ("" when unreadable) */
    char comm[32];
} caller_comm;

/* /proc/PID/comm of the last callers read, kept open and read again with
 * pread: a process that exec'd shows its new name, and one that ended
 * fails (ESRCH, even once its pid is reused), so the file is opened anew.
 * An open and a close saved per line (5 us of a commit's path here). Up to
 * COMM_FILES callers at once (writers in parallel: register_parallel); once
 * the FUSE loop has idled (comm_files_give_back), all but the last caller's
 * are closed, so an idle csifs holds one. The mutex is a leaf: nothing but
 * these calls runs under it. */
#define COMM_FILES 8
static struct {
    pthread_mutex_t mu;
    int last;                        /* the slot read last */
    struct { int pid, fd; } f[COMM_FILES];   /* pid 0: free */
} comm_files = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Under mu: the slot of pid, a free one, or else the next in turn that is
 * not the last read. */
static int comm_slot(int pid)
{
    static int turn;
    for (int k = 0; k < COMM_FILES; k++)
        if (comm_files.f[k].pid == pid)
            return k;
    for (int k = 0; k < COMM_FILES; k++)
        if (!comm_files.f[k].pid)
            return k;
    turn = (turn + 1) % COMM_FILES;
    return turn == comm_files.last ? (turn + 1) % COMM_FILES : turn;
}

static void comm_close(int k)
{
    if (comm_files.f[k].pid && comm_files.f[k].fd >= 0)
        close(comm_files.f[k].fd);
    comm_files.f[k].pid = 0;
    comm_files.f[k].fd = -1;         /* (unused while pid is 0) */
}

static ssize_t comm_read(int pid, char *buf, size_t cap)
{
    ssize_t n = -1;
    pthread_mutex_lock(&comm_files.mu);
    int k = comm_slot(pid);
    if (comm_files.f[k].pid == pid && comm_files.f[k].fd >= 0)
        n = pread(comm_files.f[k].fd, buf, cap, 0);
    if (n < 0) {
        char path[40];
        comm_close(k);
        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
        comm_files.f[k].pid = pid;
        comm_files.f[k].fd = open(path, O_RDONLY | O_CLOEXEC);
        n = comm_files.f[k].fd < 0 ? -1 : pread(comm_files.f[k].fd, buf, cap, 0);
    }
    comm_files.last = k;
    pthread_mutex_unlock(&comm_files.mu);
    return n;
}

/* The FUSE loop has idled (fs_serve_on_sleep): keep the last caller's comm
 * file only. */
static void comm_files_give_back(void)
{
    pthread_mutex_lock(&comm_files.mu);
    for (int k = 0; k < COMM_FILES; k++)
        if (k != comm_files.last)
            comm_close(k);
    pthread_mutex_unlock(&comm_files.mu);
}

/* pid's comm into buf ("" when unreadable). */
static const char *comm_of(int pid, char *buf, size_t cap)
{
    ssize_t n = pid > 0 ? comm_read(pid, buf, cap - 1) : -1;
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static void read_comm(void)
{
    caller_comm.known = true;
    comm_of(caller_comm.pid, caller_comm.comm, sizeof(caller_comm.comm));
}

/* " by uid U pid P (comm)", or "" for a change nobody asked for (a probe);
 * comm NULL or "": none known. */
static const char *by(const struct reg_caller *w, const char *comm, char *buf, size_t cap)
{
    if (!w->pid)
        return "";
    int n = snprintf(buf, cap, " by uid %u pid %d", (unsigned)w->uid, (int)w->pid);
    if (comm && *comm && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " (%s)", comm);
    return buf;
}

/* A refusal's caller's comm: read by read_comm at the refusal, or now. */
static const char *refused_comm(const struct reg_caller *w)
{
    if (!caller_comm.known || caller_comm.pid != (int)w->pid) {
        caller_comm.pid = (int)w->pid;
        read_comm();
    }
    caller_comm.known = false;
    return caller_comm.comm;
}

/* A refusal's level: a full store is an operator's problem (warning), the
 * rest the caller's (info). */
static int refusal_prio(const char *why)
{
    return !strcmp(why, REG_WHY_STORE_FULL) ? LOG_WARNING : LOG_INFO;
}

/* The handler replies before it returns; its thread's csifs_why() then says
 * why a validation refused it. The path is taken before: it may go. */
#define WRAPPED(call, fmt, ...)                                                   \
    do {                                                                          \
        char who_[96];                                                            \
        csifs_why_clear();                                                          \
        struct reg_caller w_ = set_caller(req);                                   \
        caller_comm.pid = (int)w_.pid;                                            \
        caller_comm.known = false;                                                \
        csifs_why_hook(read_comm);                                                \
        call;                                                                     \
        csifs_why_hook(NULL);                                                     \
        reg_caller_set(NULL);                                                     \
        if (*csifs_why()) {                                                         \
            csifs_log(refusal_prio(csifs_why()), "refused: " fmt "%s: %s", __VA_ARGS__, \
                    by(&w_, refused_comm(&w_), who_, sizeof(who_)), csifs_why()); \
        }                                                                         \
        csifs_why_clear();                                                          \
    } while (0)

static void w_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    char dir[PATH_CAP], e[ESC_CAP];
    node_path(req, parent, dir);
    WRAPPED(orig.mkdir(req, parent, name, mode), "mkdir %s/%s", dir, esc(name, e));
}

static void w_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    char dir[PATH_CAP], e[ESC_CAP];
    node_path(req, parent, dir);
    WRAPPED(orig.rmdir(req, parent, name), "rmdir %s/%s", dir, esc(name, e));
}

static void w_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    char dir[PATH_CAP], e[ESC_CAP];
    node_path(req, parent, dir);
    WRAPPED(orig.unlink(req, parent, name), "unlink %s/%s", dir, esc(name, e));
}

/* A symlink under another name in an instance dir is `ln -sfn`'s pending
 * link (DESIGN 5): its refusal is the socket's, logged under that name. */
static void w_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    char dir[PATH_CAP], e[ESC_CAP];
    node_path(req, parent, dir);
    WRAPPED(orig.symlink(req, target, parent, name), "socket %s -> %s", dir, esc(target, e));
    (void)name;
}

static void w_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                     const char *newname, unsigned int flags)
{
    char dir[PATH_CAP], e[ESC_CAP], e2[ESC_CAP];
    node_path(req, parent, dir);
    if (!strcmp(newname, "socket"))   /* ln -sfn's last step */
        WRAPPED(orig.rename(req, parent, name, newparent, newname, flags), "socket %s", dir);
    else
        WRAPPED(orig.rename(req, parent, name, newparent, newname, flags), "rename %s/%s to %s",
                dir, esc(name, e), esc(newname, e2));
}

static void w_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    char path[PATH_CAP];
    node_path(req, ino, path);
    WRAPPED(orig.write(req, ino, buf, size, off, fi), "write %s", path);
}

static void w_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                      struct fuse_file_info *fi)
{
    char path[PATH_CAP];
    node_path(req, ino, path);
    WRAPPED(orig.setattr(req, ino, attr, to_set, fi), "setattr %s", path);
}

void fs_oplog_wrap(struct fuse_lowlevel_ops *ops)
{
    orig = *ops;
    ops->mkdir = w_mkdir;
    ops->rmdir = w_rmdir;
    ops->unlink = w_unlink;
    ops->setattr = w_setattr;
    ops->symlink = w_symlink;
    ops->rename = w_rename;
    ops->write = w_write;
}

/* ---- registry changes ---- */

static const char *const health_names[] = { "unknown", "healthy", "unhealthy" };
static const char *const outcome_names[] = { "ok", "not_ready", "error" };
/* A health change's level (DESIGN 9): losing health warns, gaining it is
 * notable, the rest (unknown: a socket set, not yet probed) is info. */
static const int health_prio[] = { LOG_INFO, LOG_NOTICE, LOG_WARNING };

/* The level of c's line; -1 none. */
static int change_prio(const struct reg_change *c)
{
    switch (c->kind) {
    case REG_C_PLUGIN_ADD: case REG_C_PLUGIN_DEL: case REG_C_INST_ADD: case REG_C_INST_DEL:
    case REG_C_SOCKET: case REG_C_ATTR:
        return LOG_INFO;
    case REG_C_HEALTH: return health_prio[c->health];
    case REG_C_HISTORY: return LOG_DEBUG;
    case REG_C_CURRENT: return LOG_NOTICE;
    default: return -1;
    }
}

/* A change's line is written after its answer (reg_subscribe_after), off
 * its caller's wait, as a refusal's is. What it shows that may change
 * later (the caller's comm: a `mkdir` ends right after its answer; the
 * socket; the current) is read before the answer (note), into this
 * thread's queue, in change order: the same thread then writes the lines
 * in that order. When a batch has more lines than the queue holds, the
 * queued ones and the next are written before the answer instead (early),
 * still in order. */
#define NOTES 8
static _Thread_local struct {
    struct note {
        const struct reg_change *c;
        int pid;                     /* c's caller, comm its name */
        char comm[32];
        char v[REG_SOCKET_MAX + 64];
    } q[NOTES];
    unsigned head, n;
    unsigned early;                  /* lines written by note, still to be skipped */
} notes;

static void write_line(const struct reg_change *c, const struct note *e);

/* Whether c gets a line naming its caller. */
static bool names_caller(const struct reg_change *c)
{
    return c->who.pid && c->kind != REG_C_HEALTH && c->kind != REG_C_HISTORY;
}

static bool has_line(const struct reg_change *c)
{
    int prio = change_prio(c);
    return prio >= 0 && csifs_log_on(prio);
}

/* What c's line shows that may change later; prev: the note before it in
 * the queue, whose comm serves when the caller is the same (an rmdir that
 * also moved current). */
static void note_fill(struct reg *reg, const struct reg_change *c, struct note *e,
                      const struct note *prev)
{
    e->c = c;
    e->pid = c->who.pid;
    e->comm[0] = e->v[0] = '\0';
    if (names_caller(c) && prev && prev->pid == e->pid)
        memcpy(e->comm, prev->comm, sizeof(e->comm));
    else if (names_caller(c))
        comm_of(c->who.pid, e->comm, sizeof(e->comm));
    if (c->kind == REG_C_SOCKET && reg_socket_get(reg, c->inst, e->v, sizeof(e->v)) < 0)
        snprintf(e->v, sizeof(e->v), "(cleared)");
    if (c->kind == REG_C_CURRENT && reg_current_get(reg, c->plugin, e->v, sizeof(e->v)) < 0)
        snprintf(e->v, sizeof(e->v), "(none)");
}

static void note(const struct reg_change *c, void *arg)
{
    struct note own;
    if (!has_line(c))
        return;
    if (notes.n < NOTES) {
        const struct note *prev = notes.n ? &notes.q[(notes.head + notes.n - 1) % NOTES] : NULL;
        note_fill(arg, c, &notes.q[(notes.head + notes.n++) % NOTES], prev);
        return;
    }
    /* Full: the queued lines and this one now, in order; their answers'
     * turn skips them (early). */
    for (; notes.n; notes.n--, notes.head = (notes.head + 1) % NOTES, notes.early++)
        write_line(notes.q[notes.head].c, &notes.q[notes.head]);
    note_fill(arg, c, &own, NULL);
    write_line(c, &own);
    notes.early++;
}

static void on_change(const struct reg_change *c, void *arg)
{
    struct note own;
    if (notes.n && notes.q[notes.head].c == c) {
        write_line(c, &notes.q[notes.head]);
        notes.head = (notes.head + 1) % NOTES;
        notes.n--;
    } else if (!has_line(c)) {
        return;                      /* no line (the level is set once, at start) */
    } else if (notes.early) {
        notes.early--;               /* written by note */
    } else {                         /* none noted (a subscriber added meanwhile) */
        note_fill(arg, c, &own, NULL);
        write_line(c, &own);
    }
}

static void write_line(const struct reg_change *c, const struct note *e)
{
    const char *type = reg_type_names[c->type];
    char w[96];
    const char *who = names_caller(c) ? by(&c->who, e->comm, w, sizeof(w)) : "", *v = e->v;
    switch (c->kind) {
    case REG_C_PLUGIN_ADD:
        csifs_log(LOG_INFO, "registered %s/%s%s", type, c->plugin_name, who);
        break;
    case REG_C_PLUGIN_DEL:
        csifs_log(LOG_INFO, "deregistered %s/%s%s", type, c->plugin_name, who);
        break;
    case REG_C_INST_ADD:
        csifs_log(LOG_INFO, "registered %s/%s/%s%s", type, c->plugin_name, c->alloc_name, who);
        break;
    case REG_C_INST_DEL:
        csifs_log(LOG_INFO, "deregistered %s/%s/%s%s", type, c->plugin_name, c->alloc_name, who);
        break;
    case REG_C_SOCKET:
        csifs_log(LOG_INFO, "%s/%s/%s: socket %s%s", type, c->plugin_name, c->alloc_name, v, who);
        break;
    case REG_C_ATTR:
        csifs_log(LOG_INFO, "%s/%s/%s: %s written%s", type, c->plugin_name, c->alloc_name,
                reg_attrs[c->attr].name, who);
        break;
    case REG_C_HEALTH:
        csifs_log(health_prio[c->health], "%s/%s/%s: health %s (%s) ready %d", type,
                c->plugin_name, c->alloc_name, health_names[c->health], c->reason, c->ready);
        break;
    case REG_C_HISTORY:
        csifs_log(LOG_DEBUG, "%s/%s/%s: probe %s in %.3f ms (%s)", type, c->plugin_name,
                c->alloc_name, outcome_names[c->outcome], c->latency_us / 1000.0, c->reason);
        break;
    case REG_C_CURRENT:
        csifs_log(LOG_NOTICE, "%s/%s: current %s%s", type, c->plugin_name, v, who);
        break;
    default:
        break;
    }
}

int fs_oplog_subscribe(struct reg *reg)
{
    /* the line's first: a batch that sees only it reads the comm itself */
    int rc = reg_subscribe_after(reg, on_change, reg);
    if (rc == 0)
        fs_serve_on_sleep(comm_files_give_back);
    return rc < 0 ? rc : reg_subscribe(reg, note, reg);
}

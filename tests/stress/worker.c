/* A stress worker: random mutations and reads on the shared names, and the
 * invariant checks of stress.c; and the events reader. */
#include "tests/stress/stress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const types[2] = { "csi-controller", "csi-node" };
static const char *const files[] = {
    "health", "reason", "ready", "provider", "version", "capabilities", "mount_point",
    "container_mount_point", "registered", "history",
};

void st_violation(const struct st_env *e, int id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (e->sh->violations[id]++ < 10)
        fprintf(stderr, "stress: process %d: %s\n", id, msg);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* errno values a racing caller may legitimately get. */
static bool expected(int e)
{
    return e == 0 || e == ENOENT || e == EEXIST || e == ENOTEMPTY;
}

struct ctx {
    const struct st_env *e;
    int id;
    unsigned rng;
    char plugin[256], inst[512];    /* absolute paths of this op's names */
};

static int rnd(struct ctx *c, int n) { return rand_r(&c->rng) % n; }

static int ret(int r) { return r < 0 ? errno : 0; }

static int ln_sfn(struct ctx *c, const char *target)
{
    char link[600], tmp[600];
    snprintf(link, sizeof(link), "%s/socket", c->inst);
    if (symlink(target, link) == 0)
        return 0;
    if (errno != EEXIST)
        return errno;
    snprintf(tmp, sizeof(tmp), "%s/Cu%06d", c->inst, rnd(c, 1000000));
    if (symlink(target, tmp) != 0)
        return errno;
    if (rename(tmp, link) != 0) {
        int e = errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

static int write_attr(struct ctx *c)
{
    char p[600], v[64];
    snprintf(p, sizeof(p), "%s/%s", c->inst, rnd(c, 2) ? "mount_point" : "container_mount_point");
    int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int n = snprintf(v, sizeof(v), "/var/x/%d\n", rnd(c, 1000));
    int rc = write(fd, v, (size_t)n) == n ? 0 : errno;
    if (close(fd) != 0 && rc == 0)
        rc = errno;
    return rc;
}

/* Read every file of an instance (ENOENT when it went away). */
static int read_all(struct ctx *c)
{
    char p[600], buf[8192];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", c->inst, files[i]);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return errno;
        ssize_t n = read(fd, buf, sizeof(buf));
        int e = n < 0 ? errno : 0;
        close(fd);
        if (e)
            return e;
    }
    return 0;
}

/* The first line of a file, or "<strerror>". */
static void first_line(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
    if (n < 0)
        snprintf(buf, len, "<%s>", strerror(errno));
    else
        buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (fd >= 0)
        close(fd);
}

static ino_t ino_of(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0 ? st.st_ino : 0;
}

/* `current` names a ready instance or is absent. The name it gives is
 * stat'ed, current read again, then ready, then the name stat'ed again:
 * with the same inode both times (one registration all along: inodes come
 * from sequence numbers, never reused) and current naming it in between,
 * ready must read 1 (it is set before current can move there and never
 * cleared). A read that fails with ENOENT is an instance removed after the
 * open: the registry drops it before the rmdir's reply reaches the kernel,
 * which until then keeps the name's dentry (and so the same inode). */
static int check_current(struct ctx *c)
{
    char link[300], a[128], b[128], p[600], rp[700], r[8] = "";
    snprintf(link, sizeof(link), "%s/current", c->plugin);
    ssize_t n = readlink(link, a, sizeof(a) - 1);
    if (n < 0)
        return errno;
    a[n] = '\0';
    snprintf(p, sizeof(p), "%s/%s", c->plugin, a);
    ino_t i1 = ino_of(p);
    n = readlink(link, b, sizeof(b) - 1);
    b[n > 0 ? n : 0] = '\0';
    snprintf(rp, sizeof(rp), "%s/ready", p);
    int fd = open(rp, O_RDONLY | O_CLOEXEC), e = 0;
    ssize_t k = -1;
    char fresh[8] = "";
    if (fd >= 0) {
        k = read(fd, r, sizeof(r) - 1);
        e = errno;
        r[k > 0 ? k : 0] = '\0';
        if (k > 0 && strcmp(r, "1\n")) {
            /* the same file past the page cache: what csifs says now */
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            ssize_t f = pread(fd, fresh, sizeof(fresh) - 1, 0);
            fresh[f > 0 ? f : 0] = '\0';
            fresh[strcspn(fresh, "\n")] = '\0';
        }
        close(fd);
    }
    ino_t i2 = ino_of(p);
    bool removed = k < 0 && e == ENOENT;
    if (fd >= 0 && !removed && n > 0 && !strcmp(a, b) && i1 && i1 == i2 && strcmp(r, "1\n")) {
        /* what the same files say a moment later */
        char again[64], health[256], hp[700];
        usleep(100 * 1000);
        first_line(rp, again, sizeof(again));
        snprintf(hp, sizeof(hp), "%s/health", p);
        first_line(hp, health, sizeof(health));
        char cur[128] = "";
        ssize_t cn = readlink(link, cur, sizeof(cur) - 1);
        cur[cn > 0 ? cn : 0] = '\0';
        st_violation(c->e, c->id,
                     "%s -> %s (inode %llu), whose ready reads '%.1s' (read %zd%s%s), "
                     "'%s' past the page cache; 100 ms later ready '%s', health '%s', "
                     "inode %llu, current -> %s",
                     link, a, (unsigned long long)i1, r, k, k < 0 ? ": " : "",
                     k < 0 ? strerror(e) : "", fresh, again, health,
                     (unsigned long long)ino_of(p), cur);
    }
    return 0;
}

struct ent {
    char name[64];
    ino_t ino;
};

static int list(const char *dir, struct ent *v, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max)
        if (de->d_name[0] != '.') {
            snprintf(v[n].name, sizeof(v[n].name), "%.63s", de->d_name);
            v[n++].ino = de->d_ino;
        }
    closedir(d);
    return n;
}

static const struct ent *find(const struct ent *v, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].name, name))
            return &v[i];
    return NULL;
}

/* ls agrees with stat: an entry listed before and after with the same inode
 * stats as that inode in between; a name that stats as the same inode
 * before and after is listed in between. Not `current`: its inode is the
 * plugin's for good, so it may go (no ready instance left) and come back
 * (one became ready) with the same number in between. */
static int check_ls_stat(struct ctx *c)
{
    struct ent before[64], after[64];
    char p[600];
    struct stat st;
    ino_t pre[ST_ALLOCS];
    for (int a = 0; a < ST_ALLOCS; a++) {
        snprintf(p, sizeof(p), "%s/a%d", c->plugin, a);
        pre[a] = ino_of(p);
    }
    int nb = list(c->plugin, before, 64);
    if (nb < 0)
        return -nb;
    ino_t mid[64];
    for (int i = 0; i < nb; i++) {
        snprintf(p, sizeof(p), "%s/%.63s", c->plugin, before[i].name);
        mid[i] = lstat(p, &st) == 0 ? st.st_ino : 0;
    }
    int na = list(c->plugin, after, 64);
    for (int i = 0; na >= 0 && i < nb; i++) {
        const struct ent *x = find(after, na, before[i].name);
        if (x && x->ino == before[i].ino && mid[i] != before[i].ino &&
            strcmp(before[i].name, "current"))
            st_violation(c->e, c->id, "%s/%s listed as inode %llu, stats as %llu", c->plugin,
                         before[i].name, (unsigned long long)before[i].ino,
                         (unsigned long long)mid[i]);
    }
    for (int a = 0; a < ST_ALLOCS; a++) {
        char name[16];
        snprintf(name, sizeof(name), "a%d", a);
        snprintf(p, sizeof(p), "%s/%s", c->plugin, name);
        if (pre[a] && ino_of(p) == pre[a] && !find(before, nb, name))
            st_violation(c->e, c->id, "%s stats as inode %llu but ls does not list it", p,
                         (unsigned long long)pre[a]);
    }
    return 0;
}

static int one_op(struct ctx *c, int op)
{
    char p[600];
    switch (op) {
    case 0: return ret(mkdir(c->plugin, 0755));
    case 1: return ret(rmdir(c->plugin));
    case 2: case 3: return ret(mkdir(c->inst, 0755));
    case 4: return ret(rmdir(c->inst));
    case 5: case 6: {
        int t = rnd(c, 3);
        return ln_sfn(c, t < 2 ? c->e->socks[t] : "/nonexistent/stress.sock");
    }
    case 7: snprintf(p, sizeof(p), "%s/socket", c->inst); return ret(unlink(p));
    case 8: return write_attr(c);
    case 9:
        snprintf(p, sizeof(p), "%s/%s", c->inst, rnd(c, 2) ? "mount_point" : "container_mount_point");
        return ret(truncate(p, 0));
    case 10: return read_all(c);
    case 11: return check_current(c);
    default: return check_ls_stat(c);
    }
}
#define NOPS 13

int st_worker(const struct st_env *e, int id, unsigned seed)
{
    struct ctx c = { .e = e, .id = id, .rng = seed };
    while (!e->sh->stop) {
        int op = rnd(&c, NOPS);
        snprintf(c.plugin, sizeof(c.plugin), "%s/%s/s%d", e->mnt, types[rnd(&c, 2)],
                 rnd(&c, ST_PLUGINS));
        snprintf(c.inst, sizeof(c.inst), "%s/a%d", c.plugin, rnd(&c, ST_ALLOCS));
        int64_t t0 = now_ms();
        int rc = one_op(&c, op);
        int64_t dt = now_ms() - t0;
        e->sh->ops[id]++;
        if (dt > e->sh->max_op_ms[id])
            e->sh->max_op_ms[id] = dt;
        if (dt > ST_OP_MS)
            st_violation(e, id, "op %d on %s took %lld ms", op, c.inst, (long long)dt);
        if (!expected(rc))
            st_violation(e, id, "op %d on %s: %s", op, c.inst, strerror(rc));
    }
    return 0;
}

/* cat events: every line's seq strictly above the previous one's ("lost N"
 * lines aside). */
int st_events_reader(const struct st_env *e)
{
    const int id = ST_WORKERS;
    char path[600], buf[65536];
    snprintf(path, sizeof(path), "%s/events", e->mnt);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st_violation(e, id, "open %s: %s", path, strerror(errno));
        return 1;
    }
    size_t len = 0;
    unsigned long long last = 0;
    while (!e->sh->stop) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, 200) <= 0)
            continue;
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0) {
            st_violation(e, id, "read events: %s", n ? strerror(errno) : "end of file");
            break;
        }
        len += (size_t)n;
        buf[len] = '\0';
        char *l = buf, *nl;
        while ((nl = strchr(l, '\n'))) {
            *nl = '\0';
            unsigned long long s;
            if (strncmp(l, "lost ", 5) == 0) {
                /* a reader overtaken by the ring: allowed */
            } else if (sscanf(l, "%llu ", &s) != 1) {
                st_violation(e, id, "events line without seq: '%.80s'", l);
            } else {
                if (s <= last)
                    st_violation(e, id, "events seq %llu after %llu", s, last);
                last = s;
                e->sh->ops[id]++;
            }
            l = nl + 1;
        }
        len = strlen(l);
        memmove(buf, l, len);
        if (len == sizeof(buf) - 1)
            len = 0;
    }
    close(fd);
    return 0;
}

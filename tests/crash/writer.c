/* A crash-test writer: random mutations of its own names, each logged. */
#include "tests/crash/crash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *const cr_op_names[CR_NOPS] = {
    "pmk", "prm", "smk", "imk", "irm", "sock", "unsock", "attr", "trunc", "ready",
};
const char *const cr_attr_names[2] = { "mount_point", "container_mount_point" };
static const char *const types[2] = { "csi-controller", "csi-node" };

int cr_slot_type(int slot) { return slot / (2 * CR_K); }
bool cr_slot_own(int slot) { return (slot / CR_K) % 2 == 0; }
int cr_slot_k(int slot) { return slot % CR_K; }

static char *rot(void)
{
    static char bufs[8][512];
    static int n;
    return bufs[n++ % 8];
}

const char *cr_plugin_path(int w, int type, bool own)
{
    char *b = rot();
    if (own)
        snprintf(b, 512, "%s/p%d", types[type], w);
    else
        snprintf(b, 512, "%s/shared", types[type]);
    return b;
}

const char *cr_slot_path(int w, int slot)
{
    char *b = rot();
    snprintf(b, 512, "%s/w%d-%d", cr_plugin_path(w, cr_slot_type(slot), cr_slot_own(slot)), w,
             cr_slot_k(slot));
    return b;
}

const char *cr_target(const struct cr_env *e, int i)
{
    return i < 2 ? e->socks[i] : "/nonexistent/csifs-crash.sock";
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int neg(int r) { return r < 0 ? -errno : 0; }

/* ln -sfn target link: symlink, and on EEXIST a temporary link renamed over. */
static int ln_sfn(const char *target, const char *link, unsigned *rng)
{
    if (symlink(target, link) == 0)
        return 0;
    if (errno != EEXIST)
        return -errno;
    char tmp[600];
    const char *slash = strrchr(link, '/');
    snprintf(tmp, sizeof(tmp), "%.*s/Cu%06u", (int)(slash - link), link, rand_r(rng) % 1000000);
    if (symlink(target, tmp) != 0)
        return -errno;
    if (rename(tmp, link) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

/* Takeover mode: the real `ln -sfn target link` (coreutils: a temporary
 * link renamed over `socket`, DESIGN 5), its stderr appended to errpath. */
static int real_ln(const char *target, const char *link, const char *errpath)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execlp("ln", "ln", "-sfn", target, link, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0
         : CR_LN_FAILED(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static int write_attr(const char *path, const char *val)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char line[CR_VAL + 2];
    int n = snprintf(line, sizeof(line), "%s\n", val);
    int rc = write(fd, line, (size_t)n) == n ? 0 : -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

static int read_ready(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char c = 0;
    ssize_t n = read(fd, &c, 1);
    int rc = n < 0 ? -errno : c == '1';
    close(fd);
    return rc;
}

static int run(const struct cr_env *e, struct cr_rec *r, int w, unsigned *rng)
{
    char path[1024], sub[1100], err[1100];
    snprintf(path, sizeof(path), "%s/%s", e->mnt,
             r->op <= CR_SMK ? cr_plugin_path(w, r->slot, r->op != CR_SMK)
                             : cr_slot_path(w, r->slot));
    switch (r->op) {
    case CR_PMK: case CR_SMK: case CR_IMK: return neg(mkdir(path, 0755));
    case CR_PRM: case CR_IRM: return neg(rmdir(path));
    case CR_SOCK:
        snprintf(sub, sizeof(sub), "%s/socket", path);
        snprintf(err, sizeof(err), "%s/w%d.ln", e->logdir, w);
        return e->takeover ? real_ln(r->val, sub, err) : ln_sfn(r->val, sub, rng);
    case CR_UNSOCK:
        snprintf(sub, sizeof(sub), "%s/socket", path);
        return neg(unlink(sub));
    case CR_ATTR: case CR_TRUNC:
        snprintf(sub, sizeof(sub), "%s/%s", path, cr_attr_names[r->arg]);
        return r->op == CR_ATTR ? write_attr(sub, r->val) : neg(truncate(sub, 0));
    case CR_READY:
        snprintf(sub, sizeof(sub), "%s/ready", path);
        return read_ready(sub);
    default: return -EINVAL;
    }
}

/* Weights of each operation, in enum order. */
static const int weight[CR_NOPS] = { 4, 3, 1, 12, 6, 10, 3, 8, 3, 6 };

static void pick(struct cr_rec *r, const struct cr_env *e, int w, int n, unsigned *rng)
{
    int total = 0, x;
    for (int i = 0; i < CR_NOPS; i++)
        total += weight[i];
    x = rand_r(rng) % total;
    int op = 0;
    while (x >= weight[op])
        x -= weight[op++];
    memset(r, 0, sizeof(*r));
    r->op = (enum cr_op)op;
    r->slot = op <= CR_SMK ? rand_r(rng) % 2 : rand_r(rng) % CR_SLOTS;
    if (op == CR_SOCK) {
        r->arg = rand_r(rng) % 5 < 2 ? 2 : rand_r(rng) % 2;   /* mostly live sockets */
        snprintf(r->val, sizeof(r->val), "%s", cr_target(e, r->arg));
    } else if (op == CR_ATTR || op == CR_TRUNC) {
        r->arg = rand_r(rng) % 2;
        if (op == CR_ATTR)
            snprintf(r->val, sizeof(r->val), "/var/w%d/v%d", w, n);
    }
}

static bool exists(const char *path)
{
    return path && access(path, F_OK) == 0;
}

/* Takeover mode: while the pause file exists, say so and wait. */
static void pause_point(const struct cr_env *e, int w)
{
    if (!exists(e->pause))
        return;
    char ack[1024];
    snprintf(ack, sizeof(ack), "%s/w%d.paused", e->logdir, w);
    close(open(ack, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    while (exists(e->pause) && !exists(e->stop))
        usleep(2000);
    unlink(ack);
}

/* Takeover mode: `ln` must not fail, so it runs only on an instance the
 * writer knows is there (the others get a mkdir instead); have: which of
 * its slots exist, from its own answers. */
static void track(const struct cr_rec *r, bool have[CR_SLOTS])
{
    if (r->rc == 0 && r->op == CR_IMK)
        have[r->slot] = true;
    if (r->rc == 0 && r->op == CR_IRM)
        have[r->slot] = false;
}

int cr_writer(const struct cr_env *e, int w, uint64_t seed, int64_t run_ms)
{
    bool have[CR_SLOTS] = { false };
    unsigned rng = (unsigned)(seed * 7919 + (uint64_t)w * 104729);
    char logp[1024];
    snprintf(logp, sizeof(logp), "%s/w%d.log", e->logdir, w);
    int log = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0)
        return 2;
    int64_t end = now_ns() + run_ms * 1000000;
    char line[256];
    for (int n = 0; e->takeover ? !exists(e->stop) : now_ns() < end; n++) {
        struct cr_rec r;
        pause_point(e, w);
        pick(&r, e, w, n, &rng);
        if (e->takeover && r.op == CR_SOCK && !have[r.slot]) {
            r.op = CR_IMK;
            r.arg = 0;
            r.val[0] = '\0';
        }
        r.start_ns = now_ns();
        int len = snprintf(line, sizeof(line), "B %d %d %d %lld %s\n", r.op, r.slot, r.arg,
                           (long long)r.start_ns, r.val[0] ? r.val : "-");
        if (write(log, line, (size_t)len) != len)
            return 2;
        r.rc = run(e, &r, w, &rng);
        len = snprintf(line, sizeof(line), "E %d %lld\n", r.rc, (long long)now_ns());
        if (write(log, line, (size_t)len) != len)
            return 2;
        track(&r, have);
        if (!e->takeover && (r.rc == -ENOTCONN || r.rc == -ECONNABORTED))
            break;
    }
    close(log);
    return 0;
}

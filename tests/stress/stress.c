/* make stress STRESS_SECONDS=N: csifs-stress [SECONDS]
 *
 * build/asan/csifs -f with a test plugin serving two sockets; 8 workers do
 * random mkdir/rmdir of plugins and instances, ln -sfn / unlink of socket,
 * attribute writes and truncates and reads, on overlapping names in both
 * types, while an events reader follows `cat events`. Invariants, checked
 * throughout: `current` names a ready instance or is absent; events' seq
 * strictly increasing; `ls` agrees with `stat`; no operation takes over
 * 5 s; no errno but ENOENT, EEXIST, ENOTEMPTY; csifs stays up. At the end,
 * with everything removed: csifs's fd count and connected unix sockets back
 * to their idle level within 10 s (x CSIFS_TEST_SLACK), then SIGTERM: exit 0
 * and no sanitizer report in its log. Last line "stress: passed" or
 * "stress: FAILED (...)"; exit status 0 only when passed. The harness makes
 * no FUSE syscall itself and cleans up only its own processes and mount. */
#include "tests/stress/stress.h"
#include "tests/lib/mntwatch.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define FAIL(...) do { failures++; fprintf(stderr, "stress: " __VA_ARGS__); fputc('\n', stderr); } while (0)

/* Open fds of pid and how many of them are connected unix sockets. */
static void fd_counts(pid_t pid, int *fds, int *conns)
{
    char dir[64], p[400], l[128];
    unsigned long inos[4096];
    int ni = 0;
    *fds = *conns = 0;
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        (*fds)++;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        ssize_t n = readlink(p, l, sizeof(l) - 1);
        l[n > 0 ? n : 0] = '\0';
        if (ni < 4096 && sscanf(l, "socket:[%lu]", &inos[ni]) == 1)
            ni++;
    }
    closedir(d);
    FILE *f = fopen("/proc/net/unix", "re");
    char line[1024];
    while (f && fgets(line, sizeof(line), f)) {
        unsigned st;
        unsigned long ino;
        if (sscanf(line, "%*s %*s %*s %*s %*s %x %lu", &st, &ino) != 2 || st != 3)
            continue;                   /* 03: SS_CONNECTED */
        for (int i = 0; i < ni; i++)
            if (inos[i] == ino)
                (*conns)++;
    }
    if (f)
        fclose(f);
}

static int make_types(void *mnt)
{
    struct stat st;
    char p[600];
    snprintf(p, sizeof(p), "%s/csi-node", (char *)mnt);
    return stat(p, &st) == 0 ? 0 : 1;
}

/* Idle means with gRPC started (its threads and fds come with the first
 * channel): one instance probed healthy on a live socket, then removed. */
static int warm_up(void *arg)
{
    const struct st_env *e = arg;
    char p[600], l[700], r[8] = "";
    snprintf(p, sizeof(p), "%s/csi-node/warm-up", e->mnt);
    if (mkdir(p, 0755) != 0)
        return 1;
    snprintf(p, sizeof(p), "%s/csi-node/warm-up/a", e->mnt);
    snprintf(l, sizeof(l), "%s/socket", p);
    if (mkdir(p, 0755) != 0 || symlink(e->socks[0], l) != 0)
        return 1;
    snprintf(l, sizeof(l), "%s/ready", p);
    for (int64_t end = tu_now_ms() + tu_ms(10000); strcmp(r, "1\n") && tu_now_ms() < end;) {
        tu_sleep_ms(50);
        int fd = open(l, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, r, sizeof(r) - 1);
        r[n > 0 ? n : 0] = '\0';
        if (fd >= 0)
            close(fd);
    }
    if (strcmp(r, "1\n") || rmdir(p) != 0)
        return 1;
    snprintf(p, sizeof(p), "%s/csi-node/warm-up", e->mnt);
    return rmdir(p) != 0;
}

/* Remove every instance and plugin the workers left. */
static int remove_all(void *mnt)
{
    static const char *const types[2] = { "csi-controller", "csi-node" };
    char p[600];
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < ST_PLUGINS; s++) {
            for (int a = 0; a < ST_ALLOCS; a++) {
                snprintf(p, sizeof(p), "%s/%s/s%d/a%d", (char *)mnt, types[t], s, a);
                if (rmdir(p) != 0 && errno != ENOENT)
                    return 1;
            }
            snprintf(p, sizeof(p), "%s/%s/s%d", (char *)mnt, types[t], s);
            if (rmdir(p) != 0 && errno != ENOENT)
                return 1;
        }
    return 0;
}

static bool sanitizer_report(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd),
             "grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error' '%s/csifs.log' >&2", dir);
    return system(cmd) == 0;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 60;
    signal(SIGPIPE, SIG_IGN);
    char *dir = tu_tmpdir("stress"), mnt[512], state[512], sock[512], s0[520], s1[520];
    if (!dir)
        return 2;
    chmod(dir, 0755);
    snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
    snprintf(state, sizeof(state), "%s/state", dir);
    snprintf(sock, sizeof(sock), "%s/p.sock", dir);
    snprintf(s0, sizeof(s0), "%s.0", sock);
    snprintf(s1, sizeof(s1), "%s.1", sock);
    mkdir(mnt, 0755);
    struct st_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct st_env env = { .mnt = mnt, .socks = { s0, s1 }, .sh = sh };
    pid_t kids[ST_WORKERS + 1] = { 0 }, csifs = 0;
    struct tp_proc plugin;
    int conn = -1, idle_fds = 0, idle_conns = 0, fds = 0, conns = 0;
    uint64_t total = 0;
    int64_t max_ms = 0;
    if (sh == MAP_FAILED) {
        FAIL("mmap: %s", strerror(errno));
        goto out;
    }
    if (tp_start(&plugin, "--socket", sock, "--sockets", "2", NULL) != 0) {
        FAIL("the test plugin did not start");
        goto out;
    }
    char logp[600];
    snprintf(logp, sizeof(logp), "%s/csifs.log", dir);
    csifs = mw_spawn_csifs(mnt, state, logp);
    for (int64_t end = tu_now_ms() + tu_ms(10000); conn < 0 && tu_now_ms() < end; tu_sleep_ms(20))
        if ((conn = mw_conn(mnt)) >= 0 && mw_child(make_types, mnt, tu_ms(5000)) != 0)
            conn = -1;
    if (conn < 0) {
        FAIL("csifs did not serve %s", mnt);
        goto out;
    }
    if (mw_child(warm_up, &env, tu_ms(20000)) != 0) {
        FAIL("warm-up: an instance on a live socket did not become ready");
        goto out;
    }
    tu_sleep_ms(tu_ms(1000));
    fd_counts(csifs, &idle_fds, &idle_conns);
    printf("stress: %d s, 8 workers + events reader; csifs pid %d idle: %d fds, %d connections\n",
           secs, (int)csifs, idle_fds, idle_conns);
    fflush(stdout);
    for (int i = 0; i <= ST_WORKERS; i++)
        if ((kids[i] = fork()) == 0)
            _exit(i < ST_WORKERS ? st_worker(&env, i, (unsigned)(getpid() * 2654435761u))
                                 : st_events_reader(&env));
    int64_t t0 = tu_now_ms(), next = t0 + 10000;
    while (tu_now_ms() - t0 < secs * 1000LL) {
        tu_sleep_ms(200);
        int st;
        if (waitpid(csifs, &st, WNOHANG) == csifs) {
            csifs = 0;
            FAIL("csifs exited during the run (status 0x%x)", st);
            break;
        }
        if (tu_now_ms() >= next) {
            next += 10000;
            uint64_t ops = 0;
            for (int i = 0; i < ST_WORKERS; i++)
                ops += sh->ops[i];
            fd_counts(csifs, &fds, &conns);
            printf("stress: %llds: %llu ops, %llu events, csifs %d fds, %d connections\n",
                   (long long)(tu_now_ms() - t0) / 1000, (unsigned long long)ops,
                   (unsigned long long)sh->ops[ST_WORKERS], fds, conns);
            fflush(stdout);
        }
    }
    sh->stop = 1;
    for (int i = 0; i <= ST_WORKERS; i++) {
        if (mw_wait(kids[i], tu_ms(ST_OP_MS) + 5000) == -ETIMEDOUT) {
            FAIL("process %d did not stop (an operation hangs)", i);
            kill(kids[i], SIGKILL);
            mw_wait(kids[i], 1000);
        }
        kids[i] = 0;
        total += i < ST_WORKERS ? sh->ops[i] : 0;
        max_ms = sh->max_op_ms[i] > max_ms ? sh->max_op_ms[i] : max_ms;
        if (sh->violations[i])
            FAIL("process %d: %d violations", i, sh->violations[i]);
    }
    if (csifs && mw_child(remove_all, mnt, tu_ms(30000)) != 0)
        FAIL("removing what the workers left failed");
    for (int64_t end = tu_now_ms() + tu_ms(10000); csifs; tu_sleep_ms(100)) {
        fd_counts(csifs, &fds, &conns);
        if ((fds <= idle_fds && conns <= idle_conns) || tu_now_ms() > end)
            break;
    }
    if (csifs && (fds > idle_fds || conns > idle_conns))
        FAIL("csifs holds %d fds (idle %d) and %d connections (idle %d) after everything was removed",
             fds, idle_fds, conns, idle_conns);
    printf("stress: %llu ops, %llu events read, slowest op %lld ms; csifs at the end: %d fds, "
           "%d connections\n", (unsigned long long)total, (unsigned long long)sh->ops[ST_WORKERS],
           (long long)max_ms, fds, conns);
    if (csifs) {
        kill(csifs, SIGTERM);
        int st = mw_wait(csifs, tu_ms(10000));
        if (st == -ETIMEDOUT)
            FAIL("csifs did not exit on SIGTERM");
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            FAIL("csifs exit status 0x%x on SIGTERM", st);
        else
            csifs = 0;
    }
    if (sanitizer_report(dir))
        FAIL("sanitizer report in %s/csifs.log (above)", dir);
out:
    for (int i = 0; i <= ST_WORKERS; i++)
        if (kids[i] > 0) {
            kill(kids[i], SIGKILL);
            mw_wait(kids[i], 1000);
        }
    if (csifs > 0) {
        kill(csifs, SIGKILL);
        if (mw_wait(csifs, 2000) == -ETIMEDOUT && conn >= 0)
            mw_abort(conn);
        mw_wait(csifs, 2000);
    }
    tp_kill_all();
    mw_unmount_all(mnt);
    mw_reap_stuck(2000);
    if (!failures || !getenv("STRESS_KEEP"))
        tu_rmrf(dir);
    else
        printf("stress: kept %s\n", dir);
    if (failures)
        printf("stress: FAILED (%d)\n", failures);
    else
        printf("stress: passed\n");
    free(dir);
    return failures ? 1 : 0;
}

/* An event is readable only once the kernel's cache of what it names was
 * invalidated (DESIGN 2, 4, 10): a reader that never blocks follows
 * `events` and, at each `health` or `socket` event of an instance driven by
 * a real csi-test-plugin (started, kill -9'd, its socket unlinked and
 * linked again), at once reads the named files and checks they agree with
 * the event. Over many rounds. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#define ROUNDS 25
#define INST "csi-node/p/a"

static struct tf t;

static void teardown(void)
{
    tp_kill_all();
    tf_stop(&t);
}

TestSuite(events_order, .fini = teardown, .timeout = 300);

/* ---- the reader thread ---- */

enum { H_HEALTHY, H_OTHER, S_SET, S_CLEARED, NSEEN };

static struct {
    int ev, health, ready;           /* events (O_NONBLOCK), health and ready held open */
    char socket[4200];               /* <mnt>/INST/socket */
    volatile int stop;
    volatile int spin;               /* an action is in flight: read without pause */
    long seen[NSEEN];                /* events of INST by what they said */
    long checked;
    char fail[4096];                 /* the first disagreement, "" if none */
} rd;

static void failf(const char *line, const char *what, const char *got)
{
    if (!rd.fail[0])
        snprintf(rd.fail, sizeof(rd.fail), "%.64s read '%.256s' right after: %.2048s", what, got, line);
}

/* The value of key in an event line ("" if absent), unescaped. */
static void key_of(const char *line, const char *key, char *out, size_t cap)
{
    char pat[32];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    out[0] = '\0';
    if (!p)
        return;
    p += strlen(pat);
    size_t n = strcspn(p, " \n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    ev_unescape(out);
}

/* Read a held attribute file from offset 0 (the page cache if valid). */
static void held(int fd, char *out, size_t cap)
{
    ssize_t n = pread(fd, out, cap - 1, 0);
    if (n < 0)
        n = snprintf(out, cap, "-%s", strerror(errno));
    else if (n > 0 && out[n - 1] == '\n')
        n--;
    out[n] = '\0';
}

/* A file read after an event may already show the next change (the reader
 * is a few ms late; the prober can follow "unknown" with "healthy" within
 * 3 ms), whose event is not readable yet: such a read is stale only if the
 * next event of that kind (health or socket) says otherwise. Kept here
 * until that event comes. */
enum { K_HEALTH, K_SOCKET, NKINDS };
#define NLATER 3
static struct later {
    const char *key, *what;          /* key NULL: free */
    char got[256], line[1024];
} later[NKINDS][NLATER];

static void disagree(int kind, const char *line, const char *key, const char *what,
                     const char *got)
{
    for (int k = 0; k < NLATER; k++) {
        struct later *l = &later[kind][k];
        if (!l->key) {
            l->what = what;
            snprintf(l->got, sizeof(l->got), "%s", got);
            snprintf(l->line, sizeof(l->line), "%s", line);
            __atomic_store_n(&l->key, key, __ATOMIC_RELEASE);   /* settled() */
            return;
        }
    }
    failf(line, what, got);
}

/* At an event of kind: what disagreed with the previous one must be this. */
static void settle(int kind, const char *line)
{
    for (int k = 0; k < NLATER; k++) {
        struct later *l = &later[kind][k];
        char v[256];
        if (!l->key)
            continue;
        key_of(line, l->key, v, sizeof(v));
        if (strcmp(v, l->got))
            failf(l->line, l->what, l->got);
        __atomic_store_n(&l->key, NULL, __ATOMIC_RELEASE);
    }
}

static bool settled(void *arg)
{
    (void)arg;
    for (int i = 0; i < NKINDS; i++)
        for (int k = 0; k < NLATER; k++)
            if (__atomic_load_n(&later[i][k].key, __ATOMIC_ACQUIRE))
                return false;
    return true;
}

static void check_health(const char *line)
{
    char state[32], ready[8], got[256];
    settle(K_HEALTH, line);
    key_of(line, "state", state, sizeof(state));
    key_of(line, "ready", ready, sizeof(ready));
    held(rd.health, got, sizeof(got));
    if (strcmp(got, state))
        disagree(K_HEALTH, line, "state", "health", got);
    held(rd.ready, got, sizeof(got));
    if (strcmp(got, ready))
        disagree(K_HEALTH, line, "ready", "ready", got);
    /* and as `cat` would: a fresh open */
    char path[4200];
    snprintf(path, sizeof(path), "%s/" INST "/health", t.mnt);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        held(fd, got, sizeof(got));
        close(fd);
    } else {
        snprintf(got, sizeof(got), "-%s", strerror(errno));
    }
    if (strcmp(got, state))
        disagree(K_HEALTH, line, "state", "cat health", got);
    rd.checked++;
    __atomic_add_fetch(&rd.seen[strcmp(state, "healthy") ? H_OTHER : H_HEALTHY], 1,
                       __ATOMIC_RELEASE);
}

static void check_socket(const char *line)
{
    char target[200], got[200];
    settle(K_SOCKET, line);
    key_of(line, "target", target, sizeof(target));
    ssize_t n = readlink(rd.socket, got, sizeof(got) - 1);
    if (n < 0)
        snprintf(got, sizeof(got), "%s", errno == ENOENT ? "" : strerror(errno));
    else
        got[n] = '\0';
    if (strcmp(got, target))
        disagree(K_SOCKET, line, "target", "readlink socket", got);
    rd.checked++;
    __atomic_add_fetch(&rd.seen[target[0] ? S_SET : S_CLEARED], 1, __ATOMIC_RELEASE);
}

static void on_line(const char *line)
{
    if (strstr(line, " health " INST " "))
        check_health(line);
    else if (strstr(line, " socket " INST " "))
        check_socket(line);
}

static void *reader(void *arg)
{
    (void)arg;
    char buf[8192], line[8192];
    size_t len = 0;
    while (!rd.stop) {
        ssize_t n = read(rd.ev, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN) {
            /* caught up: pause only while nothing is expected */
            if (!rd.spin)
                poll(&(struct pollfd){ .fd = rd.ev, .events = POLLIN }, 1, 5);
            continue;
        }
        if (n <= 0) {
            failf("", "events", n < 0 ? strerror(errno) : "EOF");
            break;
        }
        for (ssize_t k = 0; k < n; k++) {
            if (buf[k] != '\n') {
                if (len < sizeof(line) - 1)
                    line[len++] = buf[k];
                continue;
            }
            line[len] = '\0';
            len = 0;
            on_line(line);
        }
    }
    return NULL;
}

/* ---- the driver ---- */

static long seen(int what)
{
    return __atomic_load_n(&rd.seen[what], __ATOMIC_ACQUIRE);
}

struct until {
    int what;
    long more_than;
};

static bool grew(void *arg)
{
    const struct until *u = arg;
    return seen(u->what) > u->more_than || rd.fail[0];
}

/* Run an action with the reader spinning, until an event of `what` is read. */
#define STEP(what, action)                                                          \
    do {                                                                            \
        struct until u_ = { (what), seen(what) };                                   \
        rd.spin = 1;                                                                \
        action;                                                                     \
        cr_assert(tu_wait_for(grew, &u_, 10000), "round %d: no %s event", round, #what); \
        rd.spin = 0;                                                                \
    } while (0)

static int open_attr(const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/" INST "/%s", t.mnt, name);
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0, "open %s: %s", name, strerror(errno));
    return fd;
}

Test(events_order, named_files_read_what_the_event_says)
{
    struct tf_opts o = { .tag = "evorder",
                         .extra_opts = "heartbeat=1s,probe_timeout=1s,health_timeout=60s" };
    cr_assert_eq(tf_spawn(&t, &o), 0, "tf_spawn");
    char sock[108];
    cr_assert_lt(snprintf(sock, sizeof(sock), "%s/plug.sock", t.dir), (int)sizeof(sock));
    cr_assert_eq(tf_sh(&t, "mkdir -p " INST " && ln -s '%s' " INST "/socket", sock), 0);
    snprintf(rd.socket, sizeof(rd.socket), "%s/" INST "/socket", t.mnt);
    rd.health = open_attr("health");
    rd.ready = open_attr("ready");
    char evp[4200];
    snprintf(evp, sizeof(evp), "%s/events", t.mnt);
    rd.ev = open(evp, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rd.ev, 0, "open events: %s", strerror(errno));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, reader, NULL), 0);

    struct tp_proc pl;
    for (int round = 0; round < ROUNDS && !rd.fail[0]; round++) {
        STEP(H_HEALTHY, cr_assert_eq(tp_start(&pl, "--socket", sock, "--type", "node",
                                              (const char *)NULL), 0, "tp_start"));
        STEP(H_OTHER, cr_assert_geq(tp_kill(&pl), 0));
        STEP(S_CLEARED, cr_assert_eq(tf_sh(&t, "rm " INST "/socket"), 0));
        STEP(S_SET, cr_assert_eq(tf_sh(&t, "ln -sfn '%s' " INST "/socket", sock), 0));
    }
    /* a read newer than the last event waits for the event that says so */
    bool confirmed = tu_wait_for(settled, NULL, 10000);
    rd.stop = 1;
    pthread_join(th, NULL);
    for (int i = 0; i < NKINDS; i++)
        for (int k = 0; k < NLATER; k++)
            if (later[i][k].key)
                failf(later[i][k].line, later[i][k].what, later[i][k].got);
    cr_assert(confirmed || rd.fail[0], "a read no later event confirmed");
    close(rd.ev);
    close(rd.health);
    close(rd.ready);
    cr_assert_str_eq(rd.fail, "", "%s", rd.fail);
    cr_assert_geq(seen(H_HEALTHY), ROUNDS);
    cr_assert_geq(rd.checked, 4 * ROUNDS);
}

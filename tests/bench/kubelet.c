/* kubelet_register: from a plugin turning healthy to its registration
 * socket's appearance in -o kubelet_dir= (DESIGN 14).
 *
 * One csifs (nosync: no commit is measured), one live test plugin (provider
 * kubelet.bench). Each registration: mkdir csi-node/k<i>/a and its socket
 * link; from the time stamp of the instance's `health ... state=healthy`
 * event (ms) to the moment inotify reports kubelet.bench-reg.sock renamed
 * into the dir (CLOCK_REALTIME ms); then rmdir, and its removal is awaited
 * before the next. A repetition's sample is the median of its
 * registrations; the note gives the worst one. */
#include "tests/bench/bench.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#define SOCK_NAME "kubelet.bench-reg.sock"
#define PER_REP_MAX 64

/* Wait for an inotify event of mask on SOCK_NAME: its wall time in ms, or
 * -1 after timeout_ms. */
static int64_t sock_event(int in, uint32_t mask, int timeout_ms)
{
    char buf[4096] __attribute__((aligned(8)));
    int64_t end = wall_ms() + timeout_ms;
    for (int64_t left; (left = end - wall_ms()) > 0;) {
        struct pollfd p = { .fd = in, .events = POLLIN };
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t n = read(in, buf, sizeof(buf));
        int64_t at = wall_ms();
        for (char *q = buf; n > 0 && q < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)q;
            q += sizeof(*ev) + ev->len;
            if ((ev->mask & mask) && ev->len && !strcmp(ev->name, SOCK_NAME))
                return at;
        }
    }
    return -1;
}

/* One registration k<i>: ms from healthy to the socket, or NAN. */
static double one(struct tf *t, int in, int evfd, int i, const char *sock)
{
    char needle[128];
    double ms = NAN;
    if (mkdirf(t, "csi-node/k%d", i) < 0 || mkdirf(t, "csi-node/k%d/a", i) < 0 ||
        symlinkf(t, sock, "csi-node/k%d/a/socket", i) < 0) {
        say("kubelet_register: cannot register k%d: %s", i, strerror(errno));
        return NAN;
    }
    int64_t at = sock_event(in, IN_MOVED_TO | IN_CREATE, 10000);
    snprintf(needle, sizeof(needle), " health csi-node/k%d/a state=healthy", i);
    int64_t healthy = event_time(evfd, needle, 5000);
    if (at < 0 || healthy < 0)
        say("kubelet_register: k%d: %s", i, at < 0 ? "no socket within 10 s"
                                                   : "no healthy event");
    else
        ms = (double)(at - healthy);
    char rel[64];
    snprintf(rel, sizeof(rel), "csi-node/k%d/a", i);
    if (rmdir(tf_path(t, rel)) < 0 || sock_event(in, IN_DELETE, 10000) < 0) {
        say("kubelet_register: k%d: the socket did not go", i);
        return NAN;
    }
    snprintf(rel, sizeof(rel), "csi-node/k%d", i);
    rmdir(tf_path(t, rel));
    return ms;
}

void bench_kubelet(void)
{
    if (!bench_wants(R_KUBELET_REGISTER))
        return;
    struct tf t = { 0 };
    struct tp_proc plug;
    char opts[4300], sock[4200], dir[4200];
    int per = cfg.quick ? 5 : 20, n = 0, in = -1, evfd = -1;
    double worst = NAN;
    if (!(t.dir = tu_tmpdir("bench-kubelet"))) {
        say("kubelet_register: no temp dir: %s", strerror(errno));
        return;
    }
    snprintf(dir, sizeof(dir), "%s/reg", t.dir);
    snprintf(opts, sizeof(opts), "nosync,kubelet_dir=%s", dir);
    say("kubelet: %d repetitions of %d registrations", cfg.reps, per);
    if (daemon_start(&t, "bench-kubelet", opts) < 0)
        return;
    snprintf(sock, sizeof(sock), "%s/plugin.sock", t.dir);
    in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    evfd = open(tf_path(&t, "events"), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (in < 0 || evfd < 0 || inotify_add_watch(in, dir, IN_MOVED_TO | IN_CREATE | IN_DELETE) < 0 ||
        tp_start(&plug, "--socket", sock, "--type", "node", "--name", "kubelet.bench", NULL) < 0) {
        say("kubelet_register: cannot set up: %s", strerror(errno));
        goto out;
    }
    for (int r = 0; r < cfg.reps; r++) {
        double v[PER_REP_MAX];
        int got = 0;
        for (int k = 0; k < per; k++) {
            double ms = one(&t, in, evfd, n++, sock);
            if (!isnan(ms)) {
                v[got++] = ms;
                worst = isnan(worst) || ms > worst ? ms : worst;
            }
        }
        if (got)
            bench_sample(R_KUBELET_REGISTER, bench_median(v, (size_t)got), NAN, NAN);
    }
    bench_note(R_KUBELET_REGISTER, "median of %d registrations a repetition; worst %.0f ms", per,
               worst);
    tp_stop(&plug);
out:
    if (in >= 0)
        close(in);
    if (evfd >= 0)
        close(evfd);
    daemon_stop(&t);
}

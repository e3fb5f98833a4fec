/* -o http= under a flood of idle connections (DESIGN 14): with 1,000
 * connections open and silent, /healthz from another client still answers.
 * (A connection limit of 64, or a per-IP limit, would lock it out.) */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/httpget.h"
#include "tests/lib/testutil.h"

#define IDLE 1000

static struct tf t;
static int idle[IDLE];

static void teardown(void)
{
    for (int k = 0; k < IDLE; k++)
        if (idle[k] > 0)
            close(idle[k]);
    tf_stop(&t);
}

TestSuite(http_flood, .fini = teardown, .timeout = 240);

Test(http_flood, healthz_answers_with_1000_idle_connections)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < IDLE + 200) {
        rl.rlim_cur = rl.rlim_max < IDLE + 200 ? rl.rlim_max : IDLE + 200;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    cr_assert_geq(rl.rlim_cur, IDLE + 100, "open-file limit %lu", (unsigned long)rl.rlim_cur);
    int port = th_free_port();
    char opts[64], body[4096];
    snprintf(opts, sizeof(opts), "http=%d", port);
    struct tf_opts o = { .tag = "http-flood", .extra_opts = opts };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    for (int k = 0; k < IDLE; k++) {
        idle[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(idle[k], 0);
        cr_assert_eq(connect(idle[k], (struct sockaddr *)&a, sizeof(a)), 0, "connect %d", k);
    }
    /* half of them sent a partial request: idle in the middle of a header */
    for (int k = 0; k < IDLE; k += 2)
        cr_assert_eq(write(idle[k], "GET /metrics HTTP/1.1\r\nHost: x", 30), 30);
    int64_t t0 = tu_now_ms();
    cr_assert_eq(th_get(port, "/healthz", body, sizeof(body)), 200, "/healthz: %s", body);
    cr_assert_str_eq(body, "ok\n");
    cr_assert_lt(tu_now_ms() - t0, tu_ms(5000), "/healthz took %lld ms",
                 (long long)(tu_now_ms() - t0));
    cr_assert_eq(th_get(port, "/metrics", body, sizeof(body)), 200);
    /* the idle ones are still open (none was refused to make room) */
    char c;
    int open_ = 0;
    for (int k = 1; k < IDLE; k += 2)
        open_ += recv(idle[k], &c, 1, MSG_DONTWAIT) < 0;
    cr_assert_eq(open_, IDLE / 2, "%d of the silent connections were closed", IDLE / 2 - open_);
}

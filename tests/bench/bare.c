/* The bare gRPC core baselines, run as a fresh child process
 * (`csifs-bench --child bare ...`) so that the driver itself never calls
 * grpc_init and can fork freely:
 *
 *   probe SOCKET COUNT INTERVAL_MS   COUNT synchronous Probe calls on one
 *                                    connected channel, INTERVAL_MS apart:
 *                                    prints the median latency in us
 *   channels SOCKET_BASE N           one channel to each SOCKET_BASE.<i>,
 *                                    i < N, with one Probe call done on it:
 *                                    prints the RSS growth per channel in KiB
 *   csi-probe SOCKET COUNT INTERVAL_MS   the same through csi/client.h, with
 *                                    the latency it reports: README evidence
 *   fanout SOCKET_BASE N SECONDS [go]   probe each of those N channels
 *                                    once a second for SECONDS, evenly
 *                                    spread: prints the p99 latency in ms,
 *                                    the CPU used (% of one core), the p50
 *                                    and the p99.9; with "go", the channels
 *                                    are dialled first and the SECONDS start
 *                                    when a byte (or EOF) comes on stdin
 *   csi-fanout ...                   the same through csi/client.h
 *   csi-channels SOCKET_BASE N       the same through csi/client.h (the
 *                                    channel arguments and queue thread that
 *                                    csifs uses): README evidence, not a row
 *   csi-fingerprint-channels ...     csi-channels, then the four csi-node
 *                                    fingerprint calls on each channel too
 *
 * No channel arguments, no completion-queue thread: a pluck queue and the
 * calling thread, the least a gRPC core client can be.
 */
#include "tests/bench/bench.h"
#include "csi/client.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static grpc_completion_queue *cq;
static grpc_channel_credentials *creds;

static grpc_channel *dial(const char *path)
{
    char target[8192];
    snprintf(target, sizeof(target), "unix:%s", path);
    return grpc_channel_create(target, creds, NULL);
}

/* One synchronous /csi.v1.Identity/Probe: its latency in us, or -1. */
static double probe(grpc_channel *ch)
{
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(5000, GPR_TIMESPAN));
    grpc_byte_buffer *req = grpc_raw_byte_buffer_create(NULL, 0), *reply = NULL;
    grpc_metadata_array head, trail;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_metadata_array_init(&head);
    grpc_metadata_array_init(&trail);
    double t0 = now_s();
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(
                                                   "/csi.v1.Identity/Probe"),
                                               NULL, deadline, NULL);
    grpc_op ops[] = {
        { .op = GRPC_OP_SEND_INITIAL_METADATA },
        { .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = req },
        { .op = GRPC_OP_SEND_CLOSE_FROM_CLIENT },
        { .op = GRPC_OP_RECV_INITIAL_METADATA,
          .data.recv_initial_metadata.recv_initial_metadata = &head },
        { .op = GRPC_OP_RECV_MESSAGE, .data.recv_message.recv_message = &reply },
        { .op = GRPC_OP_RECV_STATUS_ON_CLIENT,
          .data.recv_status_on_client = { &trail, &status, &details, NULL } },
    };
    bool ok = call && grpc_call_start_batch(call, ops, sizeof(ops) / sizeof(ops[0]), ops,
                                            NULL) == GRPC_CALL_OK &&
              grpc_completion_queue_pluck(cq, ops, deadline, NULL).type == GRPC_OP_COMPLETE &&
              status == GRPC_STATUS_OK;
    double us = (now_s() - t0) * 1e6;
    if (call)
        grpc_call_unref(call);
    grpc_byte_buffer_destroy(req);
    if (reply)
        grpc_byte_buffer_destroy(reply);
    grpc_metadata_array_destroy(&head);
    grpc_metadata_array_destroy(&trail);
    grpc_slice_unref(details);
    return ok ? us : -1;
}

static struct csi_client *client;
static struct csi_chan *csi_ch;

/* One Probe through csi/client.h: the latency it reports (us), or -1. */
static double csi_probe(grpc_channel *unused)
{
    (void)unused;
    struct csi_result res = { 0 };
    bool ok = csi_call_sync(csi_ch, CSI_PROBE, 5000, &res) == 0 && res.ok;
    double us = (double)res.latency_us;
    csi_result_clear(&res);
    return ok ? us : -1;
}

static int probe_main(const char *sock, int count, int interval_ms, double (*call)(grpc_channel *))
{
    grpc_channel *ch = call == probe ? dial(sock) : NULL;
    double v[1024];
    int n = 0;
    call(ch);                           /* connect */
    for (int k = 0; k < count && n < 1024; k++) {
        sleep_s(interval_ms / 1000.0);
        double us = call(ch);
        if (us >= 0)
            v[n++] = us;
    }
    printf("%.1f\n", bench_median(v, (size_t)n));
    return n ? 0 : 1;
}

/* Open channel i to path and make one Probe on it; false when it failed. */
typedef bool open_fn(int i, const char *path);

static grpc_channel **bare_chans;

static bool open_bare(int i, const char *path)
{
    return probe(bare_chans[i] = dial(path)) >= 0;
}

static int csi_methods = 1;      /* Probe; 5: the whole csi-node fingerprint too */
static struct csi_chan **csi_chs;  /* csi-fanout: the channels, kept */

static bool open_csi(int i, const char *path)
{
    struct csi_chan *ch;
    bool ok = csi_chan_open(client, path, &ch) == 0;
    if (ok && csi_chs)
        csi_chs[i] = ch;
    for (int m = 0; ok && m < csi_methods; m++) {
        struct csi_result res = { 0 };
        ok = csi_call_sync(ch, m, 5000, &res) == 0 && res.ok;
        csi_result_clear(&res);
    }
    return ok;
}

static int channels_main(const char *base, int n, open_fn *open_one)
{
    char path[4200];
    int failed = 0;
    sleep_s(0.2);
    long rss0 = proc_rss_kib(getpid());
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s.%d", base, i);
        failed += !open_one(i, path);
    }
    sleep_s(1);
    long rss1 = proc_rss_kib(getpid());
    printf("%.2f\n", (double)(rss1 - rss0) / n);
    return failed ? 1 : 0;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Probe channel i of the fanout: its latency in us, or -1. */
static double fan_bare(int i)
{
    return probe(bare_chans[i]);
}

static double fan_csi(int i)
{
    csi_ch = csi_chs[i];
    return csi_probe(NULL);
}

static int fanout_main(const char *base, int n, int seconds, bool go, open_fn *open_one,
                       double (*call)(int))
{
    double *lat = calloc((size_t)n * (size_t)seconds, sizeof(double));
    char path[4200];
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s.%d", base, i);
        if (!open_one(i, path))
            return 1;
    }
    char byte;
    if (go && (putchar('\n') == EOF || fflush(stdout) == EOF))
        return 1;
    while (go && read(STDIN_FILENO, &byte, 1) < 0 && errno == EINTR)
        ;
    double t0 = now_s(), c0 = cpu_s();
    for (int s = 0; s < seconds; s++)
        for (int i = 0; i < n; i++) {
            double wait = t0 + s + (double)i / n - now_s();
            if (wait > 0)
                sleep_s(wait);
            double us = call(i);
            if (us >= 0)
                lat[k++] = us / 1000;
        }
    double cpu = (cpu_s() - c0) / (now_s() - t0) * 100;
    /* p99 and CPU: the row's figures; p50 and p99.9 for its note */
    printf("%.3f %.1f %.3f %.3f\n", bench_pct(lat, k, 99), cpu, bench_pct(lat, k, 50),
           bench_pct(lat, k, 99.9));
    return k ? 0 : 1;
}

int bare_main(int argc, char **argv)
{
    grpc_init();
    cq = grpc_completion_queue_create_for_pluck(NULL);
    creds = grpc_insecure_credentials_create();
    int rc = 2;
    bool go = argc == 5 && !strcmp(argv[4], "go"), fan_args = argc == 4 || go;
    if (argc == 4 && !strcmp(argv[0], "probe"))
        rc = probe_main(argv[1], atoi(argv[2]), atoi(argv[3]), probe);
    else if (argc == 4 && !strcmp(argv[0], "csi-probe") && csi_client_new(&client) == 0 &&
             csi_chan_open(client, argv[1], &csi_ch) == 0)
        rc = probe_main(argv[1], atoi(argv[2]), atoi(argv[3]), csi_probe);
    else if (fan_args && !strcmp(argv[0], "fanout") &&
             (bare_chans = calloc((size_t)atoi(argv[2]) + 1, sizeof(*bare_chans))))
        rc = fanout_main(argv[1], atoi(argv[2]), atoi(argv[3]), go, open_bare, fan_bare);
    else if (fan_args && !strcmp(argv[0], "csi-fanout") && csi_client_new(&client) == 0 &&
             (csi_chs = calloc((size_t)atoi(argv[2]) + 1, sizeof(*csi_chs))))
        rc = fanout_main(argv[1], atoi(argv[2]), atoi(argv[3]), go, open_csi, fan_csi);
    else if (argc == 3 && !strcmp(argv[0], "channels")) {
        bare_chans = calloc((size_t)atoi(argv[2]) + 1, sizeof(*bare_chans));
        rc = channels_main(argv[1], atoi(argv[2]), open_bare);
    } else if (argc == 3 && !strncmp(argv[0], "csi-", 4) && csi_client_new(&client) == 0) {
        csi_methods = !strcmp(argv[0], "csi-fingerprint-channels") ? CSI_NODE_GET_CAPABILITIES + 1 : 1;
        rc = channels_main(argv[1], atoi(argv[2]), open_csi);
    }
    fflush(stdout);
    /* no orderly teardown: the process ends here */
    _exit(rc);
}

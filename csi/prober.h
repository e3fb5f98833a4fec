/* csi prober: drives every registered instance through the health table of
 * DESIGN section 3 (the schedule, the readiness gate, the fingerprint).
 *
 * One scheduler thread owns the per-instance state (a timer heap keyed by
 * due time); every CSI call is asynchronous on the csi client's
 * completion-queue thread, whose callbacks only queue the result for the
 * scheduler. Per instance, one round at a time:
 *
 *   Probe -> (not healthy: GetPluginInfo -> GetPluginCapabilities ->
 *             NodeGetInfo -> NodeGetCapabilities    under csi-node, or
 *             ControllerGetCapabilities              under csi-controller)
 *         -> one reg_probe_result (with the fingerprint when gathered, and
 *            the pid listening on the socket, learnt by a direct connect()).
 *
 * Schedule: a round at once when `socket` is set or changed (or its file is
 * created: an inotify watch on the socket's directory); while not healthy,
 * the next round 100 ms after the last one ended, doubling up to 5 s, and one
 * round as health_timeout passes; while healthy, on the heartbeat grid (the
 * phase from the seq, the next slot after the round ends). A dead plugin is
 * seen at once: a round starts when the channel's connection is lost (a
 * connectivity watch, no polling) and, after closing the channel, when the
 * socket file is removed or renamed away. Instances present when the prober
 * starts (restored) are spread over min(heartbeat, 5 s). Each call has the
 * deadline probe_timeout. A call that fails UNAVAILABLE is diagnosed by a
 * direct connect() to the socket on the scheduler thread ("connect:
 * <strerror>" when that fails too).
 *
 * The registry is only read and fed results from the scheduler thread,
 * never under a lock of the prober; the registry subscription only queues
 * the instance's seq. Nothing is ever dialled from a registry subscriber
 * (so never from a FUSE thread), and a socket inside the csifs mount works.
 * gRPC core is started (grpc_init) with the first channel, so a csifs with
 * nothing to probe has no gRPC thread waking it.
 */
#ifndef CSIFS_CSI_PROBER_H
#define CSIFS_CSI_PROBER_H

#include <stdint.h>

#include "registry/registry.h"

struct csi_prober_opts {
    int64_t heartbeat_ms;       /* 0 = CSIFS_HEARTBEAT_MS */
    int64_t probe_timeout_ms;   /* 0 = CSIFS_PROBE_TIMEOUT_MS */
    int64_t health_timeout_ms;  /* the registry's (reg_opts); 0 = CSIFS_HEALTH_TIMEOUT_MS */
    /* Logs what the prober cannot do (a failed commit, no memory); NULL:
     * stderr. */
    void (*log)(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
};

struct csi_prober;

/* Start the scheduler thread (the csi client, so grpc_init, follows with
 * the first channel: after any fork), subscribe to reg, and schedule the
 * instances reg already holds. reg must
 * outlive the prober, and with it every mutation of reg until
 * csi_prober_free (the subscription cannot be taken back). */
int csi_prober_start(struct csi_prober **out, struct reg *reg, const struct csi_prober_opts *o);
/* Stop the thread, close every channel, free the csi client (grpc_shutdown).
 * Later registry changes are ignored. Idempotent; NULL is a no-op. */
void csi_prober_stop(struct csi_prober *p);
/* Free what is left; after csi_prober_stop and after reg_close (or once
 * nothing mutates reg any more). NULL is a no-op. */
void csi_prober_free(struct csi_prober *p);

#endif

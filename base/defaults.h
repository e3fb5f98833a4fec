/* csifs: the defaults, clocks and duration format every module shares
 * (header only; no module state). */
#ifndef CSIFS_COMMON_DEFAULTS_H
#define CSIFS_COMMON_DEFAULTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define CSIFS_HEARTBEAT_MS      30000   /* -o heartbeat= */
#define CSIFS_PROBE_TIMEOUT_MS  5000    /* -o probe_timeout= */
#define CSIFS_HEALTH_TIMEOUT_MS 30000   /* -o health_timeout= */
#define CSIFS_EVENTS_RING       1024    /* -o events_ring= */
#define CSIFS_MAX_INSTANCES     10000   /* -o max_instances= (per plugin) */

static inline int64_t csifs_clock_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);    /* cannot fail for these clocks */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC in ns, us and ms; CLOCK_REALTIME in ns. */
static inline int64_t csifs_mono_ns(void) { return csifs_clock_ns(CLOCK_MONOTONIC); }
static inline int64_t csifs_mono_us(void) { return csifs_mono_ns() / 1000; }
static inline int64_t csifs_mono_ms(void) { return csifs_mono_ns() / 1000000; }
static inline int64_t csifs_real_ns(void) { return csifs_clock_ns(CLOCK_REALTIME); }

/* A duration as DESIGN writes it: "30s" when whole seconds, else "250ms". */
static inline const char *csifs_fmt_duration(int64_t ms, char *buf, size_t cap)
{
    if (ms % 1000 == 0)
        snprintf(buf, cap, "%llds", (long long)(ms / 1000));
    else
        snprintf(buf, cap, "%lldms", (long long)ms);
    return buf;
}

#endif

/* Process-wide counters (counters.h). */
#include "base/counters.h"

#include <time.h>

struct cnt cnt;

const int64_t cnt_bucket_us[CNT_NBUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
    1000000, 5000000,
};

const char *const cnt_mut_names[CNT_NMUT] = {
    [CNT_M_MKDIR] = "mkdir", [CNT_M_RMDIR] = "rmdir", [CNT_M_SOCKET] = "socket",
    [CNT_M_ATTR] = "attr", [CNT_M_FINGERPRINT] = "fingerprint", [CNT_M_READY] = "ready",
    [CNT_M_PROBE] = "probe",
};

void cnt_hist_observe(struct cnt_hist *h, int64_t us)
{
    int b = 0;
    while (b < CNT_NBUCKETS && us > cnt_bucket_us[b])
        b++;
    cnt_add(&h->bucket[b], 1);
    cnt_add(&h->sum_us, us > 0 ? (uint64_t)us : 0);
    cnt_add(&h->count, 1);
}

void cnt_hist_read(const struct cnt_hist *h, struct cnt_hist *out)
{
    out->count = 0;
    for (int b = 0; b <= CNT_NBUCKETS; b++) {
        out->bucket[b] = cnt_get(&h->bucket[b]);
        out->count += out->bucket[b];      /* count agrees with the buckets */
    }
    out->sum_us = cnt_get(&h->sum_us);
}

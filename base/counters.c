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

void cnt_observe(struct cnt_hist *h, int64_t us)
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

/* What a mutation was, by the first change it made (a probe result: by
 * whether it committed a fingerprint or readiness). */
static const enum cnt_mut by_change[] = {
    [REG_C_PLUGIN_ADD] = CNT_M_MKDIR, [REG_C_INST_ADD] = CNT_M_MKDIR,
    [REG_C_PLUGIN_DEL] = CNT_M_RMDIR, [REG_C_INST_DEL] = CNT_M_RMDIR,
    [REG_C_SOCKET] = CNT_M_SOCKET, [REG_C_ATTR] = CNT_M_ATTR,
    [REG_C_HEALTH] = CNT_M_PROBE, [REG_C_FINGERPRINT] = CNT_M_FINGERPRINT,
    [REG_C_CURRENT] = CNT_M_PROBE, [REG_C_HISTORY] = CNT_M_PROBE,
};

void reg_cnt_mutation(const struct reg_change *ch, int nch, bool commit)
{
    if (nch <= 0)
        return;
    enum cnt_mut op = by_change[ch[0].kind];
    if (op == CNT_M_PROBE && commit) {
        op = CNT_M_READY;
        for (int k = 0; k < nch; k++)
            if (ch[k].kind == REG_C_FINGERPRINT)
                op = CNT_M_FINGERPRINT;
    }
    cnt_add(&cnt.mutations[op], 1);
}


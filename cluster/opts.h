/* cluster options (-o cluster=URL ... , DESIGN 15): parsed here so that the
 * command line keeps one small hook. */
#ifndef CSIFS_CLUSTER_OPTS_H
#define CSIFS_CLUSTER_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/etcd.h"

#define CL_TTL_MS_DEFAULT 10000
#define CL_TTL_MS_MIN     2000          /* etcd's minimum lease TTL */
#define CL_PREFIX_DEFAULT "/csifs/v1"

struct cl_opts {
    char *urls[ETCD_MAX_ENDPOINTS];     /* cluster=, once per endpoint */
    int n_urls;
    char *node, *prefix, *ttl, *cacert, *cert, *key;
    int64_t ttl_ms;
    bool view;                          /* cluster_view */
};

/* One -o option: 1 when it is a cluster option (taken), 0 when not ours,
 * -EINVAL with a message in err. */
int cl_opts_take(struct cl_opts *o, const char *arg, char *err, size_t errlen);
/* After all options: defaults (node: the host name, prefix /csifs/v1, ttl
 * 10s) and checks (ttl at least 2s, a node name usable as a file name, a
 * prefix starting with '/', cluster_* without cluster=). 0 or -EINVAL. */
int cl_opts_finish(struct cl_opts *o, char *err, size_t errlen);
void cl_opts_free(struct cl_opts *o);
/* A node, type, plugin, or field name: 1-63 of [A-Za-z0-9._-], not "."
 * or "..". */
bool cl_name_ok(const char *s, size_t len);

#endif

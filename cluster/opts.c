/* cluster options: see opts.h. */
#include "cluster/opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "10", "10s", "1m" -> ms (whole seconds only: a lease's TTL is). */
static int parse_ttl(const char *s, int64_t *ms)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int64_t mul = !*end || !strcmp(end, "s") ? 1000 : !strcmp(end, "m") ? 60000 : 0;
    if (errno || end == s || *s == '-' || !mul || v > 1000000)
        return -EINVAL;
    *ms = v * mul;
    return 0;
}

#define BAD(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

static const struct {
    const char *name;                   /* with its '=' */
    size_t off;
} strs[] = {
    { "cluster_node=", offsetof(struct cl_opts, node) },
    { "cluster_prefix=", offsetof(struct cl_opts, prefix) },
    { "cluster_ttl=", offsetof(struct cl_opts, ttl) },
    { "cluster_cacert=", offsetof(struct cl_opts, cacert) },
    { "cluster_cert=", offsetof(struct cl_opts, cert) },
    { "cluster_key=", offsetof(struct cl_opts, key) },
};

bool cl_name_ok(const char *s, size_t len)
{
    if (len < 1 || len > 63 || (len == 1 && s[0] == '.') || (len == 2 && !memcmp(s, "..", 2)))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", s[i]) ||
            !s[i])
            return false;
    return true;
}

int cl_opts_take(struct cl_opts *o, const char *arg, char *err, size_t errlen)
{
    if (!strcmp(arg, "cluster_view")) {
        o->view = true;
        return 1;
    }
    if (!strncmp(arg, "cluster=", 8)) {
        if (o->n_urls == ETCD_MAX_ENDPOINTS)
            return BAD("too many cluster= endpoints (at most %d)", ETCD_MAX_ENDPOINTS);
        if (!(o->urls[o->n_urls] = strdup(arg + 8)))
            return BAD("out of memory");
        o->n_urls++;
        return 1;
    }
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        size_t l = strlen(strs[i].name);
        if (strncmp(arg, strs[i].name, l))
            continue;
        char **dst = (char **)((char *)o + strs[i].off);
        free(*dst);
        if (!(*dst = strdup(arg + l)))
            return BAD("out of memory");
        return 1;
    }
    return 0;
}

int cl_opts_finish(struct cl_opts *o, char *err, size_t errlen)
{
    o->ttl_ms = CL_TTL_MS_DEFAULT;
    if (!o->n_urls) {
        if (o->node || o->prefix || o->ttl || o->cacert || o->cert || o->key || o->view)
            return BAD("cluster_* options need cluster=URL");
        return 0;
    }
    if (o->ttl && parse_ttl(o->ttl, &o->ttl_ms) < 0)
        return BAD("bad cluster_ttl=%s (want whole seconds: N, Ns or Nm)", o->ttl);
    if (o->ttl_ms < CL_TTL_MS_MIN)
        return BAD("cluster_ttl=%s is under etcd's minimum of 2s", o->ttl);
    if (!o->node) {
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) < 0 || !(o->node = strdup(host)))
            return BAD("cannot get the host name: give cluster_node=");
        char *dot = strchr(o->node, '.');       /* the short name */
        if (dot && dot != o->node)
            *dot = '\0';
    }
    if (!cl_name_ok(o->node, strlen(o->node)))
        return BAD("bad cluster_node=%s (want 1-63 of [A-Za-z0-9._-])", o->node);
    if (!o->prefix && !(o->prefix = strdup(CL_PREFIX_DEFAULT)))
        return BAD("out of memory");
    size_t pl = strlen(o->prefix);
    while (pl > 1 && o->prefix[pl - 1] == '/')
        o->prefix[--pl] = '\0';
    if (o->prefix[0] != '/' || pl < 2 || strchr(o->prefix, '\n'))
        return BAD("bad cluster_prefix=%s (want an absolute key prefix, as /csifs/v1)",
                   o->prefix);
    /* the client's own checks, so a bad URL stops the start (exit 2) */
    struct etcd_opts eo = { (const char *const *)o->urls, o->n_urls, o->cacert, o->cert, o->key };
    if (etcd_opts_check(&eo) < 0)
        return BAD("%s", etcd_opts_why());
    return 0;
}

void cl_opts_free(struct cl_opts *o)
{
    for (int i = 0; i < o->n_urls; i++)
        free(o->urls[i]);
    free(o->node);
    free(o->prefix);
    free(o->ttl);
    free(o->cacert);
    free(o->cert);
    free(o->key);
    memset(o, 0, sizeof(*o));
}

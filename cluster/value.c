/* cluster keys and values: see value.h. */
#include "cluster/value.h"
#include "cluster/opts.h"
#include "registry/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cl_field_names[CL_NFIELDS] = {
    [CL_F_CURRENT] = "current", [CL_F_HEALTH] = "health", [CL_F_REASON] = "reason",
    [CL_F_NODEID] = "nodeid", [CL_F_PROVIDER] = "provider", [CL_F_VERSION] = "version",
    [CL_F_MAX_VOLUMES] = "max_volumes", [CL_F_TOPOLOGY] = "topology",
    [CL_F_INSTANCES] = "instances", [CL_F_HEALTHY] = "healthy", [CL_F_UPDATED] = "updated",
};

int cl_field_lookup(const char *name)
{
    for (int i = 0; i < CL_NFIELDS; i++)
        if (!strcmp(cl_field_names[i], name))
            return i;
    return -1;
}

/* The next '/'-separated name of [*p, end) into out (64 bytes): 0 or -EINVAL. */
static int take_name(const char **p, const char *end, char *out)
{
    const char *s = *p, *slash = memchr(s, '/', (size_t)(end - s));
    size_t n = (size_t)((slash ? slash : end) - s);
    if (!cl_name_ok(s, n))
        return -EINVAL;
    memcpy(out, s, n);
    out[n] = '\0';
    *p = slash ? slash + 1 : end;
    return slash && slash + 1 == end ? -EINVAL : 0;
}

int cl_key_parse(const char *prefix, const void *key, size_t len, struct cl_key *k)
{
    static const char hosts[] = "/hosts/";
    size_t pl = strlen(prefix), hl = sizeof(hosts) - 1;
    const char *s = key, *end = s + len;
    memset(k, 0, sizeof(*k));
    if (len <= pl + hl || memcmp(s, prefix, pl) || memcmp(s + pl, hosts, hl))
        return -EINVAL;
    s += pl + hl;
    char type[64];
    if (take_name(&s, end, k->node) || s == end || take_name(&s, end, type))
        return -EINVAL;
    if (s == end) {
        k->type = -1;
        return !strcmp(type, "info") ? 0 : -EINVAL;
    }
    if ((k->type = reg_type_parse(type)) < 0 || take_name(&s, end, k->plugin) || s != end)
        return -EINVAL;
    return 0;
}

char *cl_key_format(const char *prefix, const struct cl_key *k)
{
    char *key = NULL;
    int n = k->type < 0 ? asprintf(&key, "%s/hosts/%s/info", prefix, k->node)
                        : asprintf(&key, "%s/hosts/%s/%s/%s", prefix, k->node,
                                   reg_type_names[k->type], k->plugin);
    return n < 0 ? NULL : key;
}

int cl_value_format(const struct cl_record *r, char **out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -ENOMEM;
    for (int i = 0; i < CL_NFIELDS; i++)
        if (r->field[i])
            fprintf(f, "%s %s\n", cl_field_names[i], r->field[i]);
    if (fclose(f) != 0) {
        free(buf);
        return -ENOMEM;
    }
    *out = buf;
    return 0;
}

void cl_record_clear(struct cl_record *r)
{
    for (int i = 0; i < CL_NFIELDS; i++) {
        free(r->field[i]);
        r->field[i] = NULL;
    }
}

int cl_value_parse(const void *v, size_t len, struct cl_record *r)
{
    memset(r, 0, sizeof(*r));
    if (len > CL_VALUE_MAX || memchr(v, '\0', len))
        return -EINVAL;
    const char *s = v, *end = s + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s)), *le = nl ? nl : end;
        const char *sp = memchr(s, ' ', (size_t)(le - s));
        char name[32];
        size_t nlen = sp ? (size_t)(sp - s) : 0;
        if (!sp || nlen == 0 || nlen >= sizeof(name) ||
            reg_value_check(sp + 1, (size_t)(le - sp - 1)) < 0) {
            cl_record_clear(r);
            return -EINVAL;
        }
        memcpy(name, s, nlen);
        name[nlen] = '\0';
        int f = cl_field_lookup(name);
        if (f >= 0) {
            free(r->field[f]);
            if (!(r->field[f] = strndup(sp + 1, (size_t)(le - sp - 1)))) {
                cl_record_clear(r);
                return -ENOMEM;
            }
        }
        s = nl ? nl + 1 : end;
    }
    return 0;
}

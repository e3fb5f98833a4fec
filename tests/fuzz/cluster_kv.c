/* The cluster key and value parser (cluster/value.h), fed what any writer
 * under the prefix may put in etcd. Input: [selector][bytes]. Oracles: a
 * parsed key names a node (and a type and plugin) that are valid names and
 * rebuild the key byte for byte; a parsed value holds only field values
 * without control characters, each found in the input as "<name> <value>"
 * on a line of its own. */
#include "tests/fuzz/fuzz.h"
#include "cluster/opts.h"
#include "cluster/value.h"
#include "registry/registry.h"

#include <stdbool.h>

#define PREFIX "/csifs/v1"

static void key(const char *k, size_t n)
{
    struct cl_key ck;
    if (cl_key_parse(PREFIX, k, n, &ck) != 0)
        return;
    char re[300];
    int len = ck.type < 0 ? snprintf(re, sizeof(re), PREFIX "/hosts/%s/info", ck.node)
                          : snprintf(re, sizeof(re), PREFIX "/hosts/%s/%s/%s", ck.node,
                                     reg_type_names[ck.type], ck.plugin);
    if (!cl_name_ok(ck.node, strlen(ck.node)) ||
        (ck.type >= 0 && !cl_name_ok(ck.plugin, strlen(ck.plugin))))
        fuzz_fail("a key parsed into a bad name");
    if ((size_t)len != n || memcmp(re, k, n))
        fuzz_fail("key parsed as %s, which is not the input", re);
}

static void value(const char *v, size_t n)
{
    struct cl_record r;
    int rc = cl_value_parse(v, n, &r);
    if (rc != 0) {
        for (int i = 0; i < CL_NFIELDS; i++)
            if (r.field[i])
                fuzz_fail("a refused value left field %d set", i);
        return;
    }
    if (n > CL_VALUE_MAX)
        fuzz_fail("a value over %d bytes was accepted", CL_VALUE_MAX);
    for (int i = 0; i < CL_NFIELDS; i++) {
        if (!r.field[i])
            continue;
        size_t fl = strlen(r.field[i]);
        if (reg_value_check(r.field[i], fl) < 0)
            fuzz_fail("field %s holds a control character", cl_field_names[i]);
        char line[CL_VALUE_MAX + 64];
        int ll = snprintf(line, sizeof(line), "%s %s", cl_field_names[i], r.field[i]);
        bool found = false;
        for (const char *hit = v; !found && (hit = memmem(hit, n - (size_t)(hit - v), line,
                                                          (size_t)ll)); hit++)
            found = (hit == v || hit[-1] == '\n') && (hit + ll == v + n || hit[ll] == '\n');
        if (!found)
            fuzz_fail("field %s = '%s' is not a line of the input", cl_field_names[i],
                      r.field[i]);
    }
    cl_record_clear(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2)
        value((const char *)data + 1, size - 1);
    else
        key((const char *)data + 1, size - 1);
    return 0;
}

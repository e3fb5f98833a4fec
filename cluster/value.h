/* The cluster keys and values (DESIGN 15), written by the publisher and
 * read by the view:
 *   <prefix>/hosts/<node>/<type>/<plugin>   "name value" lines, one per field
 *   <prefix>/hosts/<node>/info              "name value" lines (instance, ...)
 * A value is at most CL_VALUE_MAX bytes of lines "<name> <value>\n"; a
 * field's value passes reg_value_check (no control characters) and may be
 * empty. Unknown field names are skipped (a newer writer); a repeated
 * field: the last wins. */
#ifndef CSIFS_CLUSTER_VALUE_H
#define CSIFS_CLUSTER_VALUE_H

#include <stdbool.h>
#include <stddef.h>

#define CL_VALUE_MAX 16384

enum cl_field {
    CL_F_CURRENT, CL_F_HEALTH, CL_F_REASON, CL_F_NODEID, CL_F_PROVIDER, CL_F_VERSION,
    CL_F_MAX_VOLUMES, CL_F_TOPOLOGY, CL_F_INSTANCES, CL_F_HEALTHY, CL_F_UPDATED, CL_NFIELDS
};
extern const char *const cl_field_names[CL_NFIELDS];
/* Field by file name, or -1. */
int cl_field_lookup(const char *name);

struct cl_key {
    char node[64];
    int type;                   /* enum reg_type; -1 for the node's info key */
    char plugin[64];            /* "" for info */
};

/* Parse a key under prefix: 0, or -EINVAL (not one of the two shapes, a
 * bad name, an unknown type). */
int cl_key_parse(const char *prefix, const void *key, size_t len, struct cl_key *k);
/* The key of k under prefix (the info key when k->type is -1), malloc'd;
 * NULL on ENOMEM. */
char *cl_key_format(const char *prefix, const struct cl_key *k);

/* Fields of a plugin's value; field[i] NULL when absent. */
struct cl_record {
    char *field[CL_NFIELDS];
};
/* Parse a value: 0, or -EINVAL (too long, a NUL, a line without a space,
 * a bad field value) with r cleared; -ENOMEM. */
int cl_value_parse(const void *v, size_t len, struct cl_record *r);
void cl_record_clear(struct cl_record *r);
/* The value of r's present fields, "<name> <value>\n" in field order,
 * malloc'd into *out: 0 or -ENOMEM. */
int cl_value_format(const struct cl_record *r, char **out);

#endif

/* walk: the whole registry in one pass under one read lock, for snapshots
 * that must agree with themselves (<mnt>/metrics, DESIGN section 11).
 *
 * begin runs first (read process-wide counters there: they then belong to
 * the same moment), then each plugin, newest first by type, followed by its
 * instances. Callbacks run with the registry's read lock held: they must not
 * call back into the registry, block or sleep. A non-zero return stops the
 * walk and is returned.
 */
#ifndef CSIFS_WALK_H
#define CSIFS_WALK_H

#include "registry/registry.h"

struct reg_walk_plugin {
    enum reg_type type;
    const char *name;
    uint32_t instances[REG_NHEALTH];  /* by health */
    const char *current;             /* alloc name, or NULL */
    enum reg_health current_health;  /* of current, when there is one */
    uint64_t probes[3];              /* by enum reg_outcome */
    uint64_t health_changes[REG_NHEALTH]; /* by the health entered */
};
struct reg_walk_inst {
    enum reg_type type;
    const char *plugin, *alloc;
    enum reg_health health;
    pid_t pid;                       /* 0 when unknown */
};
struct reg_walk_cb {
    int (*begin)(void *arg);
    int (*plugin)(const struct reg_walk_plugin *p, void *arg);
    int (*inst)(const struct reg_walk_inst *i, void *arg);
    void *arg;
};
int reg_walk(struct reg *reg, const struct reg_walk_cb *cb);

#endif

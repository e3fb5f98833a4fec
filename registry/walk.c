/* One pass over the model under the read lock (walk.h). */
#include "registry/walk.h"
#include "registry/model.h"

#include <string.h>

static int walk_plugin(const struct plugin *p, const struct reg_walk_cb *cb)
{
    struct reg_walk_plugin w = { .type = p->o.type, .name = p->o.name,
                                 .current = p->shown ? p->shown->o.name : NULL,
                                 .current_health = p->shown ? p->shown->health : REG_UNKNOWN };
    memcpy(w.probes, p->probes, sizeof(w.probes));
    memcpy(w.health_changes, p->health_changes, sizeof(w.health_changes));
    for (const struct obj *o = p->head; o; o = o->next)
        w.instances[model_as_inst((struct obj *)o)->health]++;
    int rc = cb->plugin ? cb->plugin(&w, cb->arg) : 0;
    for (const struct obj *o = p->head; o && rc == 0 && cb->inst; o = o->next) {
        const struct inst *i = model_as_inst((struct obj *)o);
        struct reg_walk_inst wi = { .type = o->type, .plugin = p->o.name, .alloc = o->name,
                                    .health = i->health, .pid = i->pid };
        rc = cb->inst(&wi, cb->arg);
    }
    return rc;
}

int reg_walk(struct reg *reg, const struct reg_walk_cb *cb)
{
    pthread_rwlock_rdlock(&reg->lock);
    int rc = cb->begin ? cb->begin(cb->arg) : 0;
    for (int t = 0; t < REG_NTYPES && rc == 0; t++)
        for (const struct obj *o = reg->types[t]; o && rc == 0; o = o->next)
            rc = walk_plugin(model_as_plugin((struct obj *)o), cb);
    pthread_rwlock_unlock(&reg->lock);
    return rc;
}

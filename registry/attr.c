/* The attribute files of an instance: one table, one show function each
 * (configfs style). Values are newline-terminated; an unset value is empty. */
#include "registry/model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct out {
    char *buf;
    size_t cap, len;                 /* len counts everything, even past cap */
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* A value on one line; nothing at all when unset or empty. */
static void line(struct out *o, const char *v)
{
    if (v && *v)
        put(o, "%s\n", v);
}

/* Lines already newline-terminated. */
static void lines(struct out *o, const char *v)
{
    if (v && *v)
        put(o, "%s", v);
}

static void show_health(const struct inst *i, struct out *o)
{
    line(o, reg_health_names[i->health]);
}
static void show_reason(const struct inst *i, struct out *o) { line(o, i->reason); }
static void show_ready(const struct inst *i, struct out *o) { line(o, i->ready ? "1" : "0"); }
static void show_provider(const struct inst *i, struct out *o) { line(o, i->fp.provider); }
static void show_version(const struct inst *i, struct out *o) { line(o, i->fp.version); }
static void show_nodeid(const struct inst *i, struct out *o) { line(o, i->fp.nodeid); }
static void show_topology(const struct inst *i, struct out *o) { lines(o, i->fp.topology); }
static void show_caps(const struct inst *i, struct out *o) { lines(o, i->fp.capabilities); }
static void show_mount(const struct inst *i, struct out *o)
{
    line(o, i->attr[INST_ATTR(REG_A_MOUNT_POINT)]);
}
static void show_cmount(const struct inst *i, struct out *o)
{
    line(o, i->attr[INST_ATTR(REG_A_CONTAINER_MOUNT_POINT)]);
}

static void show_max_volumes(const struct inst *i, struct out *o)
{
    if (i->fp.nodeid && *i->fp.nodeid)
        put(o, "%lld\n", (long long)i->fp.max_volumes);
}

static void utc(struct out *o, int64_t sec, int ms)
{
    struct tm tm;
    time_t t = (time_t)sec;
    gmtime_r(&t, &tm);
    put(o, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
        tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (ms >= 0)
        put(o, ".%03d", ms);
    put(o, "Z");
}

static void show_registered(const struct inst *i, struct out *o)
{
    utc(o, i->o.registered_ns / 1000000000, -1);
    put(o, "\n");
}

static void show_history(const struct inst *i, struct out *o)
{
    static const char *const outcome[] = { "ok", "not_ready", "error" };
    for (unsigned k = 0; i->hist && k < i->nhist; k++) {
        const struct hist *h = &i->hist[(i->hist_head + k) % REG_HISTORY];
        utc(o, h->at_ms / 1000, (int)(h->at_ms % 1000));
        /* "... 0.212ms ok", or "... 5000.000ms error: Probe timed out after 5s":
         * the reason only when it says more than the result */
        bool plain = h->outcome == REG_PROBE_OK && !strcmp(h->reason->s, "ok");
        put(o, " %lld.%03lldms %s%s%s\n", (long long)(h->latency_us / 1000),
            (long long)(h->latency_us % 1000), outcome[h->outcome], plain ? "" : ": ",
            plain ? "" : h->reason->s);
    }
}

#define RO 0u
#define RW REG_AF_WRITABLE
#define NODE REG_AF_NODE_ONLY
#define POLL REG_AF_POLL

const struct reg_attr_def reg_attrs[REG_NATTRS] = {
    [REG_A_HEALTH] = { "health", RO | POLL },
    [REG_A_REASON] = { "reason", RO | POLL },
    [REG_A_READY] = { "ready", RO | POLL },
    [REG_A_PROVIDER] = { "provider", RO },
    [REG_A_VERSION] = { "version", RO },
    [REG_A_NODEID] = { "nodeid", RO | NODE },
    [REG_A_MAX_VOLUMES] = { "max_volumes", RO | NODE },
    [REG_A_TOPOLOGY] = { "topology", RO | NODE },
    [REG_A_CAPABILITIES] = { "capabilities", RO },
    [REG_A_MOUNT_POINT] = { "mount_point", RW },
    [REG_A_CONTAINER_MOUNT_POINT] = { "container_mount_point", RW },
    [REG_A_REGISTERED] = { "registered", RO },
    [REG_A_HISTORY] = { "history", RO },
};

static void (*const show[REG_NATTRS])(const struct inst *, struct out *) = {
    [REG_A_HEALTH] = show_health,
    [REG_A_REASON] = show_reason,
    [REG_A_READY] = show_ready,
    [REG_A_PROVIDER] = show_provider,
    [REG_A_VERSION] = show_version,
    [REG_A_NODEID] = show_nodeid,
    [REG_A_MAX_VOLUMES] = show_max_volumes,
    [REG_A_TOPOLOGY] = show_topology,
    [REG_A_CAPABILITIES] = show_caps,
    [REG_A_MOUNT_POINT] = show_mount,
    [REG_A_CONTAINER_MOUNT_POINT] = show_cmount,
    [REG_A_REGISTERED] = show_registered,
    [REG_A_HISTORY] = show_history,
};

bool reg_attr_exists(enum reg_type type, unsigned a)
{
    return a < REG_NATTRS && (type == REG_NODE || !(reg_attrs[a].flags & REG_AF_NODE_ONLY));
}

int reg_attr_lookup(enum reg_type type, const char *name)
{
    for (int a = 0; a < REG_NATTRS; a++)
        if (!strcmp(reg_attrs[a].name, name) && reg_attr_exists(type, (unsigned)a))
            return a;
    return -ENOENT;
}

ssize_t reg_attr_show(struct reg *reg, uint64_t inst, enum reg_attr attr,
                      char *buf, size_t cap)
{
    if ((unsigned)attr >= REG_NATTRS)
        return -ENOENT;
    struct out o = { buf, cap, 0 };
    pthread_rwlock_rdlock(&reg->lock);
    struct inst *i = model_as_inst(model_by_seq(reg, inst));
    if (i && !reg_attr_exists(i->o.type, attr))
        i = NULL;
    if (i)
        show[attr](i, &o);
    pthread_rwlock_unlock(&reg->lock);
    if (!i)
        return -ENOENT;
    if (cap && o.len < cap)
        buf[o.len] = '\0';
    else if (cap)
        buf[cap - 1] = '\0';
    return (ssize_t)o.len;
}

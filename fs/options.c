#include "fs/options.h"

#include "registry/registry.h"

#include <errno.h>
#include <grp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Raw strings as fuse_opt fills them; converted after parsing. */
struct raw {
    char *state, *heartbeat, *probe_timeout, *health_timeout, *registrar, *ring, *max;
    int nosync, foreground, debug, help, version;
    char *mountpoint;
    int extra;                       /* a second non-option argument */
#ifdef CSIFS_TEST_OPTS
    char *dbg_commit_delay, *dbg_fail_commit;   /* test builds only */
#endif
};

enum { KEY_DEBUG, KEY_FOREGROUND, KEY_HELP, KEY_VERSION };

#define OPT(t, f) { t, offsetof(struct raw, f), 0 }
static const struct fuse_opt spec[] = {
    OPT("state=%s", state),
    OPT("heartbeat=%s", heartbeat),
    OPT("probe_timeout=%s", probe_timeout),
    OPT("health_timeout=%s", health_timeout),
    OPT("registrar_gid=%s", registrar),
    OPT("events_ring=%s", ring),
    OPT("max_instances=%s", max),
    { "nosync", offsetof(struct raw, nosync), 1 },
#ifdef CSIFS_TEST_OPTS
    OPT("debug_commit_delay_ms=%s", dbg_commit_delay),
    OPT("debug_fail_commit=%s", dbg_fail_commit),
#endif
    FUSE_OPT_KEY("-f", KEY_FOREGROUND),
    FUSE_OPT_KEY("-d", KEY_DEBUG),
    FUSE_OPT_KEY("debug", KEY_DEBUG),
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    FUSE_OPT_END
};

static int on_opt(void *data, const char *arg, int key, struct fuse_args *out)
{
    (void)out;
    struct raw *r = data;
    switch (key) {
    case KEY_DEBUG: r->debug = r->foreground = 1; return 1;   /* libfuse wants -d too */
    case KEY_FOREGROUND: r->foreground = 1; return 0;
    case KEY_HELP: r->help = 1; return 0;
    case KEY_VERSION: r->version = 1; return 0;
    case FUSE_OPT_KEY_NONOPT:
        if (r->mountpoint) {
            r->extra = 1;
            return 0;
        }
        r->mountpoint = strdup(arg);
        return 0;
    default:
        return 1;                    /* a FUSE option: keep it */
    }
}

int fs_parse_duration(const char *s, int64_t *ms)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -EINVAL;
    int64_t mul = !strcmp(end, "ms") ? 1 : (!*end || !strcmp(end, "s")) ? 1000
                  : !strcmp(end, "m") ? 60000 : 0;
    if (!mul || v > INT64_MAX / mul)
        return -EINVAL;
    *ms = v * mul;
    return 0;
}

static int parse_uint(const char *s, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > 1u << 30 || *s == '-')
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

static int parse_gid(const char *s, gid_t *gid)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*s && !*end && *s != '-') {
        *gid = (gid_t)v;
        return 0;
    }
    struct group *g = getgrnam(s);
    if (!g)
        return -EINVAL;
    *gid = g->gr_gid;
    return 0;
}

#define BAD(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

static int convert(struct raw *r, struct csifs_opts *o, char *err, size_t errlen)
{
    struct { const char *name, *val; int64_t *dst; } durs[] = {
        { "heartbeat", r->heartbeat, &o->heartbeat_ms },
        { "probe_timeout", r->probe_timeout, &o->probe_timeout_ms },
        { "health_timeout", r->health_timeout, &o->health_timeout_ms },
    };
    for (size_t k = 0; k < sizeof(durs) / sizeof(durs[0]); k++)
        if (durs[k].val && (fs_parse_duration(durs[k].val, durs[k].dst) < 0 || !*durs[k].dst))
            return BAD("bad duration %s=%s (want N, Nms, Ns or Nm)", durs[k].name, durs[k].val);
    if (r->ring && parse_uint(r->ring, &o->events_ring) < 0)
        return BAD("bad events_ring=%s (want a positive number)", r->ring);
    if (r->max && parse_uint(r->max, &o->max_instances) < 0)
        return BAD("bad max_instances=%s (want a positive number)", r->max);
    if (r->registrar) {
        if (parse_gid(r->registrar, &o->registrar_gid) < 0)
            return BAD("bad registrar_gid=%s (no such group)", r->registrar);
        o->has_registrar = true;
    }
    if (r->extra)
        return BAD("more than one mount point given");
#ifdef CSIFS_TEST_OPTS
    unsigned delay = 0;
    if (r->dbg_commit_delay && parse_uint(r->dbg_commit_delay, &delay) < 0)
        return BAD("bad debug_commit_delay_ms=%s", r->dbg_commit_delay);
    reg_test_commit_delay_ms = (int)delay;
    reg_test_fail_commit = r->dbg_fail_commit;   /* kept for the process's life */
    free(r->dbg_commit_delay);
#endif
    return 0;
}

int fs_parse_cmdline(int argc, char **argv, struct csifs_opts *o, char *err, size_t errlen)
{
    struct raw r = { 0 };
    memset(o, 0, sizeof(*o));
    o->fuse = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
    o->heartbeat_ms = 30000;
    o->probe_timeout_ms = 5000;
    o->health_timeout_ms = 30000;
    o->events_ring = 1024;
    o->max_instances = 10000;
    int rc = fuse_opt_parse(&o->fuse, &r, spec, on_opt) < 0 ? BAD("cannot parse options") : 0;
    if (rc == 0)
        rc = convert(&r, o, err, errlen);
    o->state = r.state ? r.state : strdup("/var/lib/csifs");
    o->mountpoint = r.mountpoint ? r.mountpoint : strdup("/run/csi");
    o->foreground = r.foreground;
    o->debug = r.debug;
    o->nosync = r.nosync;
    o->help = r.help;
    o->version = r.version;
    free(r.heartbeat);
    free(r.probe_timeout);
    free(r.health_timeout);
    free(r.registrar);
    free(r.ring);
    free(r.max);
    if (rc == 0 && (!o->state || !o->mountpoint))
        rc = BAD("out of memory");
    return rc;
}

void fs_opts_free(struct csifs_opts *o)
{
    free(o->state);
    free(o->mountpoint);
    fuse_opt_free_args(&o->fuse);
}

void fs_print_help(const char *prog)
{
    printf("usage: %s [-f] [-d] [-o opt[,opt...]] [MOUNTPOINT]\n"
           "\n"
           "The CSI plugin registry of this host as a filesystem (default /run/csi).\n"
           "\n"
           "  -f                     stay in the foreground\n"
           "  -d                     FUSE debug output (implies -f)\n"
           "  -h, --help             this text\n"
           "  -V, --version          print the version\n"
           "\n"
           "csifs options (-o):\n"
           "  state=DIR              LMDB state directory (default /var/lib/csifs)\n"
           "  heartbeat=DUR          probe interval while healthy (default 30s)\n"
           "  probe_timeout=DUR      deadline of every CSI call (default 5s)\n"
           "  health_timeout=DUR     time to become healthy (default 30s)\n"
           "  registrar_gid=GID      group (number or name) that may register\n"
           "  events_ring=N          events kept for replay (default 1024)\n"
           "  max_instances=N        instances per plugin (default 10000)\n"
           "  nosync                 commit without fsync (benchmarks only)\n"
           "DUR is N (seconds), Nms, Ns or Nm. Other -o options go to FUSE.\n",
           prog);
}

#include "cmd/options.h"
#include "fs/testopt.h"
#include "base/log.h"

#include "base/defaults.h"
#include "registry/registry.h"

#include <errno.h>
#include <grp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Raw strings as fuse_opt fills them; converted after parsing. */
struct raw {
    char *state, *heartbeat, *probe_timeout, *health_timeout, *registrar, *ring, *max, *level;
    char *log_file;
    char *http, *kubelet_dir;
    int nosync, foreground, debug, help, version;
    char *args[2];                   /* [SOURCE] MOUNTPOINT */
    int nargs;                       /* non-option arguments seen */
    char err[256];                   /* a test option refused */
    struct cl_opts *cluster;
#ifdef CSIFS_TEST_OPTS
    char *dbg_commit_delay, *dbg_fail_commit;   /* test builds only */
#endif
};

/* What mount(8) and fstab add that means nothing to csifs (DESIGN 9): taken
 * out. The mount flags libfuse knows (ro, nosuid, nodev, noexec...) go on. */
static const char *const generic_opts[] = {
    "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group", "nofail",
    "_netdev", "relatime", "strictatime", "lazytime", "nodiratime", "loud", "silent",
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
    OPT("log_level=%s", level),
    OPT("log_file=%s", log_file),
    OPT("http=%s", http),
    OPT("kubelet_dir=%s", kubelet_dir),
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

/* A csifs option in the wrong form (`state`, `heartbeat` without a value,
 * `nosync=1`): ours to refuse in our words, not FUSE's "unknown option". */
static int misformed(const char *arg, char *err, size_t errlen)
{
    size_t n = strcspn(arg, "=");
    for (const struct fuse_opt *s = spec; s->templ; s++) {
        size_t m = strcspn(s->templ, "=");
        if (s->templ[0] == '-' || m != n || strncmp(arg, s->templ, n))
            continue;
        if (s->templ[m])
            snprintf(err, errlen, "option %.*s needs a value (%.*s=...)", (int)n, arg, (int)n, arg);
        else
            snprintf(err, errlen, "option %.*s takes no value", (int)n, arg);
        return -1;
    }
    return 0;
}

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
        if (r->nargs < 2)
            r->args[r->nargs] = strdup(arg);
        r->nargs++;
        return 0;
    default:
        break;
    }
    for (size_t k = 0; k < sizeof(generic_opts) / sizeof(generic_opts[0]); k++)
        if (!strcmp(arg, generic_opts[k]))
            return 0;
    if (!strncmp(arg, "x-", 2) || !strncmp(arg, "comment=", 8))
        return 0;
    if (misformed(arg, r->err, sizeof(r->err)) < 0)
        return -1;
    int c = cl_opts_take(r->cluster, arg, r->err, sizeof(r->err));
    if (c)
        return c < 0 ? -1 : 0;
    int t = fs_testopt_parse(arg, r->err, sizeof(r->err));
    return t < 0 ? -1 : t > 0 ? 0 : 1;   /* else a FUSE option: keep it */
}

/* path against the cwd, without "." components, repeated or trailing '/'. */
static char *absolute(const char *path)
{
    char cwd[4096], *out = NULL;
    if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
        return NULL;
    if (asprintf(&out, "%s/%s", path[0] == '/' ? "" : cwd, path) < 0)
        return NULL;
    char *w = out;
    for (const char *p = out; *p;) {
        if (p[0] == '/' && (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || !p[2])))) {
            p += p[1] == '/' ? 1 : 2;
            continue;
        }
        *w++ = *p++;
    }
    while (w > out + 1 && w[-1] == '/')
        w--;
    if (w == out)
        *w++ = '/';
    *w = '\0';
    return out;
}

int csifs_duration_parse(const char *s, int64_t *ms)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -EINVAL;
    int64_t mul = !strcmp(end, "ms") ? 1 : (!*end || !strcmp(end, "s")) ? 1000
                  : !strcmp(end, "m") ? 60000 : !strcmp(end, "h") ? 3600000 : 0;
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
        if (durs[k].val && (csifs_duration_parse(durs[k].val, durs[k].dst) < 0 || !*durs[k].dst))
            return BAD("bad duration %s=%s (want N, Nms, Ns, Nm or Nh)", durs[k].name,
                       durs[k].val);
    if (r->ring && parse_uint(r->ring, &o->events_ring) < 0)
        return BAD("bad events_ring=%s (want a positive number)", r->ring);
    if (r->max && parse_uint(r->max, &o->max_instances) < 0)
        return BAD("bad max_instances=%s (want a positive number)", r->max);
    if (r->registrar) {
        if (parse_gid(r->registrar, &o->registrar_gid) < 0)
            return BAD("bad registrar_gid=%s (no such group)", r->registrar);
        o->has_registrar = true;
    }
    if (r->level && (o->log_level = csifs_log_level_parse(r->level)) < 0)
        return BAD("bad log_level=%s (want debug, info, notice, warning or err)", r->level);
    if (r->state && !*r->state)
        return BAD("empty state= (want the state directory, e.g. state=/var/lib/csifs)");
    if (r->log_file && !*r->log_file)
        return BAD("empty log_file= (want a file to append the log to)");
    if (r->nargs > 2)
        return BAD("too many arguments (want [SOURCE] MOUNTPOINT)");
    if (cl_opts_finish(&o->cluster, err, errlen) < 0)
        return -EINVAL;
#ifdef CSIFS_TEST_OPTS
    static char *fail_commit;        /* what reg_test_fail_commit points at */
    unsigned delay = 0;
    if (r->dbg_commit_delay && parse_uint(r->dbg_commit_delay, &delay) < 0)
        return BAD("bad debug_commit_delay_ms=%s", r->dbg_commit_delay);
    reg_test_commit_delay_ms = (int)delay;
    free(fail_commit);               /* kept for the process's life, or to the next parse */
    reg_test_fail_commit = fail_commit = r->dbg_fail_commit;
    r->dbg_fail_commit = NULL;
#endif
    return 0;
}

int csifs_cmdline_parse(int argc, char **argv, struct csifs_opts *o, char *err, size_t errlen)
{
    struct raw r = { 0 };
    memset(o, 0, sizeof(*o));
    o->fuse = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
    o->heartbeat_ms = CSIFS_HEARTBEAT_MS;
    o->probe_timeout_ms = CSIFS_PROBE_TIMEOUT_MS;
    o->health_timeout_ms = CSIFS_HEALTH_TIMEOUT_MS;
    o->events_ring = CSIFS_EVENTS_RING;
    o->max_instances = CSIFS_MAX_INSTANCES;
    o->log_level = LOG_INFO;
    r.cluster = &o->cluster;
    int rc = fuse_opt_parse(&o->fuse, &r, spec, on_opt) < 0
             ? BAD("%s", *r.err ? r.err : "cannot parse options") : 0;
    if (rc == 0)
        rc = convert(&r, o, err, errlen);
    /* mount.fuse3 runs `csifs SOURCE MOUNTPOINT`: the source means nothing */
    const char *mnt = r.nargs >= 2 ? r.args[1] : r.nargs == 1 ? r.args[0] : "/run/csi";
    o->state = absolute(r.state && *r.state ? r.state : "/var/lib/csifs");
    bool want_log_file = r.log_file && *r.log_file;
    o->log_file = want_log_file ? absolute(r.log_file) : NULL;
    free(r.log_file);
    o->mountpoint = absolute(mnt);
    free(r.state);
    free(r.args[0]);
    free(r.args[1]);
    o->foreground = r.foreground;
    o->debug = r.debug;
    o->nosync = r.nosync;
    o->help = r.help;
    o->version = r.version;
    o->http = r.http;                /* checked when bound (daemon) */
    o->kubelet_dir = r.kubelet_dir ? absolute(r.kubelet_dir) : NULL;
    if (rc == 0 && r.kubelet_dir && !o->kubelet_dir)
        rc = BAD("out of memory");
    free(r.kubelet_dir);
    free(r.heartbeat);
    free(r.probe_timeout);
    free(r.health_timeout);
    free(r.registrar);
    free(r.ring);
    free(r.max);
    free(r.level);
#ifdef CSIFS_TEST_OPTS
    free(r.dbg_commit_delay);        /* whether convert() took them or not */
    free(r.dbg_fail_commit);
#endif
    if (rc == 0 && (!o->state || !o->mountpoint || (want_log_file && !o->log_file)))
        rc = BAD("out of memory");
    return rc;
}

void csifs_opts_free(struct csifs_opts *o)
{
    free(o->state);
    free(o->log_file);
    free(o->mountpoint);
    free(o->http);
    cl_opts_free(&o->cluster);
    free(o->kubelet_dir);
    fuse_opt_free_args(&o->fuse);
}

void csifs_help_print(const char *prog)
{
    printf("usage: %s [-f] [-d] [-o opt[,opt...]] [[SOURCE] MOUNTPOINT]\n"
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
           "  http=[ADDR:]PORT       serve /metrics and /healthz over HTTP (ADDR default\n"
           "                         127.0.0.1; off by default)\n"
           "  cluster=URL            publish to etcd (http(s)://host:port; once per endpoint)\n"
           "  cluster_node=NAME      this host in the cluster (default the host name)\n"
           "  cluster_prefix=KEY     etcd key prefix (default /csifs/v1)\n"
           "  cluster_ttl=DUR        lease TTL, whole seconds, at least 2s (default 10s)\n"
           "  cluster_cacert=FILE    CA of https:// endpoints (PEM)\n"
           "  cluster_cert=FILE      client certificate (PEM), with cluster_key=FILE\n"
           "  cluster_view           every host's keys read-only under MNT/cluster/\n"
           "  kubelet_dir=DIR        register csi-node plugins with the kubelet there\n"
           "                         (/var/lib/kubelet/plugins_registry; off by default)\n"
           "  log_level=LEVEL        debug, info (default), notice, warning or err\n"
           "  log_file=PATH          also append the log to PATH (time-stamped)\n"
           "DUR is N (seconds), Nms, Ns, Nm or Nh. A SOURCE (as mount(8) gives) is ignored,\n"
           "and so are defaults, noauto, nofail, _netdev, x-* and comment=. Other -o\n"
           "options go to FUSE.\n",
           prog);
}

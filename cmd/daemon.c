/* csifs start-up, daemonizing, serving and stop. See daemon.h. */
#include "cluster/publish.h"
#include "cluster/view.h"
#include "csi/prober.h"
#include "cmd/daemon.h"
#include "fs/fs.h"
#include "cmd/mountpoint.h"
#include "fs/oplog.h"
#include "cmd/recover.h"
#include "cmd/upgrade.h"
#include "base/defaults.h"
#include "base/log.h"
#include "http/http.h"
#include "kubelet/kubelet.h"
#include "registry/store.h"
#include "takeover/state.h"
#include "takeover/takeover.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <fuse_log.h>

/* ---- libfuse's messages ---- */

static char fuse_last[512];          /* the last error libfuse logged */
static bool fuse_quiet;              /* while starting: kept for our message */

static char fuse_line[512];          /* libfuse may log a line in pieces */

static void fuse_log_fn(enum fuse_log_level level, const char *fmt, va_list ap)
{
    size_t n = strlen(fuse_line);
    vsnprintf(fuse_line + n, sizeof(fuse_line) - n, fmt, ap);
    char *nl = strchr(fuse_line, '\n');
    if (!nl && strlen(fuse_line) < sizeof(fuse_line) - 1)
        return;
    if (nl)
        *nl = '\0';
    if (level <= FUSE_LOG_ERR)
        snprintf(fuse_last, sizeof(fuse_last), "%s", fuse_line);
    if (!fuse_quiet || level > FUSE_LOG_ERR)
        csifs_log(level <= FUSE_LOG_ERR ? LOG_ERR : (int)level, "%s", fuse_line);
    fuse_line[0] = '\0';
}

/* ---- the word to the waiting parent (without -f) ---- */

struct run {
    struct csifs_opts *o;
    struct fs *fs;
    int report_fd;                   /* write end of the pipe, or -1 */
    int http_fd;                     /* -o http='s listening socket, or -1 */
    bool served;                     /* INIT answered (atomic) */
    struct tk_fds handed;            /* from the fd store (DESIGN 13), -1 none */
    struct tk_state state;           /* the state memfd */
    bool takeover;                   /* serving a handed connection */
};

/* status 0: serving; else msg is the failure. Only once. */
static void report(struct run *r, int status, const char *msg)
{
    if (r->report_fd < 0)
        return;
    char buf[1100];
    int n = snprintf(buf, sizeof(buf), "%c%s", status ? '1' : '0', msg);
    (void)!write(r->report_fd, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1));
    close(r->report_fd);
    r->report_fd = -1;
    if (status == 0) {               /* the parent is gone: stderr is nobody's */
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
            close(fd);
        }
        csifs_log_no_stderr();
    }
}

/* The parent: wait for the daemon's word; its exit status. */
static int await_word(int fd)
{
    char buf[1100];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(buf) - 1 && ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0 ||
                                     (n < 0 && errno == EINTR)))
        len += n > 0 ? (size_t)n : 0;
    buf[len] = '\0';
    close(fd);
    if (len && buf[0] == '0')
        return 0;
    fprintf(stderr, "csifs: %s\n", len ? buf + 1 : "the daemon died before serving");
    return 1;
}

/* Fork: the parent waits for the word and exits with it (as fuse_daemonize
 * does: nothing of the session may be torn down there); the child becomes
 * the daemon: -1. Else (no fork) 1. */
static int daemonize(struct run *r)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        csifs_log(LOG_ERR, "pipe: %s", strerror(errno));
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        csifs_log(LOG_ERR, "fork: %s", strerror(errno));
        return 1;
    }
    if (pid > 0) {                   /* its session and mount are the child's now */
        close(p[1]);
        _exit(await_word(p[0]));
    }
    close(p[0]);
    r->report_fd = p[1];
    setsid();
    if (chdir("/") < 0)
        csifs_log(LOG_WARNING, "chdir /: %s", strerror(errno));
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, 0), dup2(fd, 1);
        close(fd);
    }
    csifs_log_syslog();
    return -1;
}

/* ---- serving ---- */

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            csifs_log(LOG_WARNING, "cannot raise the open-file limit: %s", strerror(errno));
    }
}

/* ---- restart without unmount (DESIGN 13; takeover/) ---- */

/* A fresh connection: hand the fd and the state to the service manager. */
static void keep_fds(struct run *r)
{
    if (r->takeover || !tk_store_present())
        return;                      /* a handed one is in the store already */
    int rc = tk_store(fs_fd(r->fs), TK_FD_FUSE);
    if (rc == 0 && r->state.fd >= 0)
        rc = tk_store(r->state.fd, TK_FD_STATE);
    if (rc < 0)
        csifs_log(LOG_WARNING, "cannot keep the FUSE connection in the fd store: %s (a crash "
                  "will unmount)", strerror(-rc));
}

/* Drop what the store holds: a handed fd that is not used, or at a stop. */
static void drop_fds(void)
{
    tk_store_remove(TK_FD_FUSE);
    tk_store_remove(TK_FD_STATE);
}

/* Handed fds: keep them when they are this mount point's live connection
 * and its state; else close them, with a log line, for a fresh mount. */
static void check_handed(struct run *r)
{
    char why[512] = "", type[64];
    unsigned conn = 0;
    if (r->handed.fuse < 0) {
        if (r->handed.state >= 0)
            close(r->handed.state);
        r->handed.state = -1;
        return;
    }
    int rc = csifs_mount_find(r->o->mountpoint, type, sizeof(type), &conn);
    if (rc == 1 && strcmp(type, "fuse.csifs"))
        conn = 0;
    rc = tk_fd_check(r->handed.fuse, rc == 1 ? conn : 0, why, sizeof(why));
    if (rc == 0 && r->handed.state < 0) {
        snprintf(why, sizeof(why), "no state was handed with connection %u", conn);
        rc = -ENOENT;
    }
    if (rc == 0)
        rc = tk_state_adopt(&r->state, r->handed.state, why, sizeof(why));
    r->handed.state = -1;            /* the state's (or closed) now */
    if (rc == 0) {
        r->takeover = true;
        csifs_log(LOG_NOTICE, "%s: taking over FUSE connection %u", r->o->mountpoint, conn);
        return;
    }
    csifs_log(LOG_WARNING, "%s: %s: mounting afresh", r->o->mountpoint, why);
    close(r->handed.fuse);
    r->handed.fuse = -1;
    drop_fds();
}

/* After fs_attach: replay INIT, then tell the kernel what it holds may be
 * stale, and to send again what the predecessor read and did not answer. */
static int take_over(struct run *r, char *err, size_t errlen)
{
    int fd = fs_fd(r->fs), rc = fs_replay_init(r->fs);
    if (rc < 0) {
        snprintf(err, errlen, "%s: cannot replay the saved INIT: %s", r->o->mountpoint,
                 strerror(-rc));
        return rc;
    }
    if ((rc = tk_notify_epoch(fd)) < 0)
        csifs_log(LOG_WARNING, "FUSE_NOTIFY_INC_EPOCH: %s (cached names may be stale)",
                  strerror(-rc));
    unsigned long n = fs_inval_all_current(r->fs);
    if ((rc = tk_notify_resend(fd)) < 0)
        csifs_log(LOG_WARNING, "FUSE_NOTIFY_RESEND: %s", strerror(-rc));
    uint64_t kh[1024];
    unsigned np = fs_polled(r->fs, kh, sizeof(kh) / sizeof(kh[0]));
    for (unsigned k = 0; k < np; k++)
        tk_notify_poll(fd, kh[k]);
    csifs_log(LOG_INFO, "took over %s: %lu inode invalidations queued, %u pollers woken, requests "
              "in flight sent again", r->o->mountpoint, n, np);
    return 0;
}

/* The store's ring of committed requests is keyed by the connection's
 * nonce (DESIGN 13 "Exactly once"): a takeover keeps the one in the state
 * memfd; a fresh connection (its uniques start again) gets a new one and
 * an empty ring. Before any commit. */
static void start_ring(struct run *r, struct store *st)
{
    uint64_t *kept = tk_state_nonce(&r->state), nonce = 0;
    bool fresh = !r->takeover || !kept || !*kept;
    if (!fresh)
        nonce = *kept;
    else if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
        nonce = (uint64_t)csifs_mono_ns() ^ (uint64_t)getpid() << 40;
    nonce += !nonce;                 /* 0: none yet */
    if (kept)
        *kept = nonce;
    int rc = store_ring_start(st, nonce, fresh);
    if (rc < 0)
        csifs_log(LOG_WARNING, "%s: cannot empty the ring of committed requests: %s (its "
                  "records, of another connection, are never matched)", r->o->state,
                  strerror(-rc));
}

/* ---- SIGUSR2: upgrade in place (cmd/upgrade.h) ---- */

/* The loop ended for SIGUSR2, the registry and the store are closed: exec
 * the binary again on the same connection (and the kubelet sockets kept in
 * r->handed). Returns only on failure. */
static void upgrade(struct run *r)
{
    int rc = tk_upgrade_exec(fs_fd(r->fs), r->state.fd, r->handed.kub, r->handed.nkub);
    csifs_log(LOG_ERR, "upgrade: cannot exec csifs again: %s (exiting: a restart takes "
              "the connection over)", strerror(-rc));
    _exit(1);                        /* never unmount: the store keeps the connection */
}

/* fs_opts.on_init: INIT is answered, and the registry was attached and the
 * prober started before the loop began: the daemon serves. No thread ever
 * makes a request on our own mount: a kill while it waits would wedge it. */
static void on_init(void *arg)
{
    struct run *r = arg;
    __atomic_store_n(&r->served, true, __ATOMIC_RELEASE);
    report(r, 0, "");
    keep_fds(r);
    sd_notify(0, "READY=1");
    csifs_log(LOG_INFO, "serving %s (state %s, pid %ld)", r->o->mountpoint, r->o->state,
            (long)getpid());
}

/* Record pid, mount point and connection id in the lock file. */
static void note_lock(struct store *st, const char *mnt)
{
    char type[64];
    unsigned conn = 0;
    int rc = csifs_mount_find(mnt, type, sizeof(type), &conn);
    if (rc == 1)
        rc = store_lock_note(st, mnt, conn);
    if (rc < 0)
        csifs_log(LOG_WARNING, "%s: cannot record the connection in the lock file: %s", mnt,
                strerror(-rc));
}

/* -o http=: serve it from now on (a failure is logged: the mount serves). */
static struct http *start_http(struct run *r, struct reg *reg)
{
    if (r->http_fd < 0)
        return NULL;
    char type[64];
    unsigned conn = 0;
    char waiting[128];               /* fusectl mounted by csifs_conn_open */
    int wfd = csifs_mount_find(r->o->mountpoint, type, sizeof(type), &conn) == 1
              ? csifs_conn_open(conn, "waiting", O_RDONLY) : -ENOENT;
    if (wfd < 0)
        csifs_log(LOG_WARNING, "http: /healthz cannot read the FUSE connection's waiting "
                "requests: %s (it answers 200)", strerror(-wfd));
    else
        close(wfd);
    snprintf(waiting, sizeof(waiting), CSIFS_FUSECTL "/%u/waiting", conn);
    struct http *h = NULL;
    struct http_opts ho = { .listen_fd = r->http_fd, .waiting = wfd < 0 ? NULL : waiting,
                            .fs = r->fs, .reg = reg };
    int rc = http_start(&h, &ho);
    r->http_fd = -1;
    if (rc < 0)
        csifs_log(LOG_ERR, "http=%s: cannot serve: %s", r->o->http, strerror(-rc));
    return h;
}

static ssize_t kubelet_file(void *arg, enum reg_type type, const char *plugin, char *buf,
                            size_t cap, char *prov, size_t provcap)
{
    return kubelet_show(arg, type, plugin, buf, cap, prov, provcap);
}

/* -o kubelet_dir=: register csi-node plugins from now on; 0 or -errno. */
static int start_kubelet(struct run *r, struct reg *reg, struct kubelet **out, char *err,
                         size_t errlen)
{
    struct kubelet_opts ko = { .dir = r->o->kubelet_dir, .mountpoint = r->o->mountpoint,
                               .reg = reg, .handed = r->handed.kub, .n_handed = r->handed.nkub };
    r->handed.kub = NULL;            /* kubelet's from here on */
    r->handed.nkub = 0;
    if (!r->o->kubelet_dir) {
        if (ko.n_handed)
            csifs_log(LOG_NOTICE, "no kubelet_dir: %zu stored registration sockets closed",
                      ko.n_handed);
        tk_named_drop(ko.handed, ko.n_handed);
        return 0;
    }
    int rc = kubelet_start(out, &ko, err, errlen);
    if (rc == 0)
        fs_kubelet_source(kubelet_file, *out);
    return rc;
}

/* After the mount (and the fork): store, registry, prober, serve. */
static int serve(struct run *r)
{
    struct csifs_opts *o = r->o;
    char err[1024] = "";
    struct store *st = NULL;
    struct reg *reg = NULL;
    struct csi_prober *pr = NULL;
    struct cl_pub *pub = NULL;
    struct cl_view *view = NULL;
    raise_nofile();
    fs_helper_start(r->fs);          /* before the lock file and the store (DESIGN 13) */
    int64_t t0 = csifs_mono_us();
    /* main() ran store_check_forked on the state dir (store.h) */
    int rc = store_open(&st, o->state, (o->nosync ? STORE_NOSYNC : 0) | STORE_CHECKED, err,
                        sizeof(err));
    if (rc == 0)
        start_ring(r, st);
    struct reg_opts ro = { .events_ring = o->events_ring, .max_instances = o->max_instances,
                           .health_timeout_ms = o->health_timeout_ms,
                           .backend = st ? store_backend(st) : NULL };
    if (rc == 0 && (rc = reg_open(&reg, &ro)) < 0)
        snprintf(err, sizeof(err), "%s: cannot restore the registry: %s", o->state,
                 strerror(-rc));
    if (rc == 0) {
        unsigned long np, ni;
        reg_count(reg, &np, &ni);
        csifs_log(LOG_INFO, "restored %lu plugins, %lu instances from %s in %lld ms", np, ni,
                o->state, (long long)((csifs_mono_us() - t0) / 1000));
        note_lock(st, o->mountpoint);
    }
    if (rc == 0 && r->state.fd >= 0)
        tk_state_keep(&r->state, reg, r->takeover);   /* before serving and probing */
    if (rc == 0 && (rc = fs_oplog_subscribe(reg)) == 0 && (rc = fs_attach(r->fs, reg)) < 0)
        snprintf(err, sizeof(err), "cannot start the notifier: %s", strerror(-rc));
    if (rc == 0 && r->takeover)
        rc = take_over(r, err, sizeof(err));
    struct csi_prober_opts po = { .heartbeat_ms = o->heartbeat_ms,
                                  .probe_timeout_ms = o->probe_timeout_ms,
                                  .health_timeout_ms = o->health_timeout_ms, .log = csifs_log };
    if (rc == 0 && (rc = csi_prober_start(&pr, reg, &po)) < 0)
        snprintf(err, sizeof(err), "cannot start the prober: %s", strerror(-rc));
    if (rc == 0 && o->cluster.n_urls &&
        (rc = cl_pub_start(&pub, &o->cluster, reg, o->state, o->mountpoint, CSIFS_VERSION)) < 0)
        snprintf(err, sizeof(err), "cannot start the cluster publisher: %s", strerror(-rc));
    if (rc == 0 && o->cluster.view &&
        (rc = cl_view_start(&view, &o->cluster, pub, fs_cluster_changed, r->fs)) < 0)
        snprintf(err, sizeof(err), "cannot start the cluster view: %s", strerror(-rc));
    fs_cluster_attach(r->fs, view);
    struct kubelet *kub = NULL;
    if (rc == 0)
        rc = start_kubelet(r, reg, &kub, err, sizeof(err));
    struct http *http = rc == 0 ? start_http(r, reg) : NULL;
    if (rc == 0 && r->state.fd >= 0)
        csifs_upgrade_catch(&(struct csifs_upgrade){ .fs = r->fs, .reg = reg, .pr = pr,
                                                     .view = view });
    if (rc == 0)
        rc = fs_loop(r->fs, true);
    bool upgrading = csifs_upgrade_end();   /* the view and prober stopped, reg idle */
    http_stop(http);
    if (rc == 0 && upgrading) {
        csifs_log(LOG_NOTICE, "upgrade: executing csifs again on %s (pid %ld)", o->mountpoint,
                  (long)getpid());
        cl_view_free(view);          /* no thread may touch the registry past reg_close */
        fs_cluster_attach(r->fs, NULL);
        cl_pub_stop(pub, false);
        fs_kubelet_source(NULL, NULL);
        kubelet_stop_keep(kub, &r->handed.kub, &r->handed.nkub);   /* passed on */
        reg_close(reg);              /* nothing queued: its commit thread just ends */
        cl_pub_free(pub);
        csi_prober_free(pr);
        store_close(st);             /* the lock: the new image takes it */
        upgrade(r);
    }
    bool served = __atomic_load_n(&r->served, __ATOMIC_ACQUIRE);
    if (rc == 0 && !served) {
        rc = -EIO;
        snprintf(err, sizeof(err), "%s: the FUSE session ended before INIT", o->mountpoint);
    }
    if (served) {
        sd_notify(0, "STOPPING=1");
        csifs_log(LOG_INFO, "stopping: unmounting %s", o->mountpoint);
    }
    /* libfuse does not unmount a /dev/fd/N session: we do; and the store
     * lets the connection go, or a detached mount would stay connected */
    if (r->takeover && umount2(o->mountpoint, MNT_DETACH) < 0)
        csifs_log(LOG_WARNING, "%s: cannot unmount: %s", o->mountpoint, strerror(errno));
    if (served || r->takeover)
        drop_fds();
    /* Unmount first: a prober call dialling a socket inside the mount then
     * fails at once instead of waiting for a daemon that no longer serves;
     * and a failed start reports only once nothing is mounted. */
    fs_unmount(r->fs);
    if (rc < 0 && *err) {
        csifs_log(LOG_ERR, "%s", err);
        report(r, 1, err);
    }
    cl_view_free(view);              /* its invalidations are no-ops once unmounted */
    fs_cluster_attach(r->fs, NULL);
    cl_pub_stop(pub, true);          /* SIGTERM: the lease is revoked, the keys go */
    csi_prober_stop(pr);
    /* No mutation comes any more; the last one's reg_subscribe_after
     * subscribers (the kubelet's among them) may still run after its
     * FUSE answer: wait for them before freeing any subscriber. */
    reg_quiesce(reg);
    fs_kubelet_source(NULL, NULL);
    kubelet_stop(kub);
    fs_destroy(r->fs);
    reg_close(reg);
    cl_pub_free(pub);
    csi_prober_free(pr);
    store_close(st);
    tk_state_close(&r->state);
    if (served)
        csifs_log(LOG_INFO, "stopped");
    return rc < 0 ? 1 : 0;
}

/* Could the store be made or opened in state (it, or its parent when it
 * does not exist, a writable directory)? Caught before the mount point is
 * created: the daemon would fail there only after mounting. */
static int state_usable(const char *state, char *err, size_t errlen)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s", state);
    struct stat st;
    int e = 0;
    *err = '\0';
    if (stat(p, &st) < 0) {          /* store_open makes the last component only */
        char *slash = strrchr(p, '/');
        e = errno;
        if (e == ENOENT && slash) {
            *(slash == p ? slash + 1 : slash) = '\0';
            e = stat(p, &st) < 0 ? errno : 0;
        }
    }
    if (e == ENOENT && strcmp(p, state))
        snprintf(err, errlen, "state=%.400s: its parent directory %.400s does not exist "
                 "(csifs creates the state directory, not its parents)", state, p);
    if (!e && !S_ISDIR(st.st_mode))
        e = ENOTDIR;
    if (!e && access(p, W_OK | X_OK) < 0)
        e = errno;
    if (e && !*err)
        snprintf(err, errlen, "%.900s: %s", p, strerror(e));
    return -e;
}

int csifs_daemon_run(struct csifs_opts *o)
{
    csifs_log_set_level(o->log_level);
    if (o->foreground)
        csifs_log_stamp();             /* stderr: time and level, unless journald's */
    int lrc = o->log_file ? csifs_log_file(o->log_file) : 0;
    if (lrc < 0) {
        csifs_log(LOG_ERR, "log_file=%s: cannot open: %s", o->log_file, strerror(-lrc));
        return 1;
    }
    fuse_set_log_func(fuse_log_fn);
    fuse_quiet = true;
    char err[1024] = "";
    struct run r = { .o = o, .report_fd = -1, .http_fd = -1, .state = { .fd = -1 } };
    tk_fds_take(&r.handed);          /* before any fd of ours is opened */
    if (csifs_mountpoint_resolve(&o->mountpoint) < 0) {
        csifs_log(LOG_ERR, "out of memory");
        return 1;
    }
    struct fs_opts fo = { .mountpoint = o->mountpoint, .argc = o->fuse.argc,
                          .argv = o->fuse.argv, .has_registrar = o->has_registrar,
                          .registrar_gid = o->registrar_gid,
                          .on_init = on_init, .on_init_arg = &r };
    /* the FUSE options first: nothing is touched before they are known */
    if (fs_session(&r.fs, &fo) < 0) {
        csifs_log(LOG_WARNING, "%s (see --help)", *fuse_last ? fuse_last : "bad FUSE options");
        return 2;
    }
    check_handed(&r);
    struct fs_handover ho;
    int rc = r.takeover ? 0 : tk_state_make(&r.state);
    if (rc < 0)
        csifs_log(LOG_WARNING, "no state memfd: %s (a crash will unmount)", strerror(-rc));
    if (r.state.fd >= 0) {
        tk_state_handover(&r.state, &ho, r.takeover);
        if ((rc = fs_handover(r.fs, &ho)) < 0) {
            csifs_log(LOG_ERR, "cannot use the state memfd: %s", strerror(-rc));
            fs_destroy(r.fs);
            return 1;
        }
    }
    /* with a handed connection the old mount is never probed, unmounted
     * nor aborted (DESIGN 13): its holder is waited for */
    rc = r.takeover ? csifs_state_wait(o->state, err, sizeof(err))
                    : csifs_state_recover(o->state, o->mountpoint, false, err, sizeof(err));
    if (rc == 0)
        rc = store_check_forked(o->state, err, sizeof(err));   /* no thread yet */
    if (rc == 0)
        rc = state_usable(o->state, err, sizeof(err));
    if (rc == 0 && !r.takeover)
        rc = csifs_mountpoint_prepare(o->mountpoint, err, sizeof(err));
    if (rc == 0 && o->http && (rc = http_listen(o->http, &r.http_fd, err, sizeof(err))) < 0) {
        csifs_log(LOG_WARNING, "%s", err);   /* a refused start */
        fs_destroy(r.fs);
        return rc == -EINVAL ? 2 : 1;
    }
    if (rc == 0 && (rc = r.takeover ? fs_session_mount_fd(r.fs, r.handed.fuse)
                                    : fs_session_mount(r.fs)) < 0)
        snprintf(err, sizeof(err), "%s: cannot mount: %s", o->mountpoint,
                 *fuse_last ? fuse_last : strerror(-rc));
    fuse_quiet = false;
    if (rc < 0) {
        csifs_log(LOG_WARNING, "%s", err);   /* a refused start */
        fs_destroy(r.fs);
        return 1;
    }
    if (tk_upgraded() && !o->foreground)
        csifs_log_syslog();          /* the daemon's pid again: no second fork */
    else if (!o->foreground && (rc = daemonize(&r)) >= 0)
        return rc;                   /* the parent: the mount is the daemon's */
    return serve(&r);
}

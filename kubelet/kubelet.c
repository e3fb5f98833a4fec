/* The table of csi-node plugins and their registration (see kubelet.h):
 * the registry subscriber marks plugins, the worker (worker.c) brings each
 * to what the registry says, the cq thread (server.c) reports the
 * kubelet's verdicts. */
#include "kubelet/internal.h"
#include "base/log.h"
#include "base/thread.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct kentry *kub_find(struct kubelet *k, const char *plugin)
{
    for (size_t i = 0; i < k->n; i++)
        if (!strcmp(k->e[i].plugin, plugin))
            return &k->e[i];
    return NULL;
}

void kub_mark(struct kubelet *k, const char *plugin)
{
    struct kentry *e = kub_find(k, plugin);
    if (!e && k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        struct kentry *ne = realloc(k->e, cap * sizeof(*ne));
        if (!ne) {
            csifs_log(LOG_ERR, "kubelet: out of memory: csi-node/%s not followed", plugin);
            return;
        }
        k->e = ne;
        k->cap = cap;
    }
    if (!e) {
        e = &k->e[k->n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->plugin, sizeof(e->plugin), "%s", plugin);
    }
    e->dirty = k->any_dirty = true;
    kub_wake(k);
}

void kub_wake(struct kubelet *k)
{
    uint64_t one = 1;                /* an eventfd write does not wait */
    if (write(k->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        csifs_log(LOG_ERR, "kubelet: cannot wake the worker: %s", strerror(errno));
}

/* A registry change: what may change a plugin's registration. */
static void on_change(const struct reg_change *c, void *arg)
{
    struct kubelet *k = arg;
    if (c->type != REG_NODE || (c->kind != REG_C_CURRENT && c->kind != REG_C_FINGERPRINT &&
                                c->kind != REG_C_PLUGIN_DEL))
        return;
    pthread_mutex_lock(&k->mu);
    kub_mark(k, c->plugin_name);
    pthread_mutex_unlock(&k->mu);
}

void kub_report(struct kubelet *k, const char *plugin, const char *verdict)
{
    bool bad = !strncmp(verdict, "error", 5) || !strncmp(verdict, "conflict", 8);
    csifs_log(bad ? LOG_WARNING : LOG_INFO, "kubelet: csi-node/%s: %s", plugin,
              *verdict ? verdict : "unregistered");
    char path[REG_NAME_MAX + 16], state[32];
    snprintf(path, sizeof(path), "csi-node/%s", plugin);
    size_t n = strcspn(verdict, ":");
    snprintf(state, sizeof(state), "%.*s", (int)n, *verdict ? verdict : "unregistered");
    const char *reason = verdict[n] == ':' ? verdict + n + 1 + (verdict[n + 1] == ' ') : NULL;
    struct ev_kv kv[] = { { "state", state }, { NULL, NULL } };
    struct ev_ring *r = reg_events(k->reg);
    int64_t seq = ev_append(r, "kubelet", path, kv, reason);
    if (seq > 0)                     /* waits for earlier publishers: no lock held */
        ev_publish(r, (uint64_t)seq, (uint64_t)seq + 1);
}

void kub_verdict(struct ksrv *s, bool registered, const char *error)
{
    struct kubelet *k = s->k;
    char v[KUB_STATE_MAX];
    snprintf(v, sizeof(v), registered ? "registered" : "error: %s",
             *error ? error : "the kubelet did not register it");
    v[strcspn(v, "\n")] = '\0';      /* one line, as the file says */
    pthread_mutex_lock(&k->mu);
    struct kentry *e = kub_find(k, s->plugin);
    bool ours = e && e->srv == s && strcmp(e->state, v);
    if (ours)
        snprintf(e->state, sizeof(e->state), "%s", v);
    pthread_mutex_unlock(&k->mu);
    if (ours) {
        kv_save(k);
        kub_report(k, s->plugin, v);
    }
}

void kub_server_gone(struct kubelet *k)
{
    pthread_mutex_lock(&k->mu);
    if (--k->live == 0)
        pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

static int mark_listed(const struct reg_node *n, void *arg)
{
    struct kubelet *k = arg;
    pthread_mutex_lock(&k->mu);
    kub_mark(k, n->plugin);
    pthread_mutex_unlock(&k->mu);
    return 0;
}

int kubelet_start(struct kubelet **out, const struct kubelet_opts *o, char *err, size_t errlen)
{
    struct stat st;                  /* made when missing, as the kubelet would */
    int e = mkdir(o->dir, 0750) < 0 && errno != EEXIST ? errno : 0;
    if (!e && stat(o->dir, &st) < 0)
        e = errno;
    if (!e && !S_ISDIR(st.st_mode))
        e = ENOTDIR;
    struct kubelet *k = e ? NULL : calloc(1, sizeof(*k));
    if (!k) {
        tk_named_drop(o->handed, o->n_handed);   /* no socket of them is reachable */
        if (!e)
            return snprintf(err, errlen, "out of memory"), -ENOMEM;
        snprintf(err, errlen, "kubelet_dir=%s: %s", o->dir, strerror(e));
        return -e;
    }
    k->inh = o->handed;              /* the worker's once it runs */
    k->ninh = o->n_handed;
    snprintf(k->dir, sizeof(k->dir), "%s", o->dir);
    snprintf(k->mnt, sizeof(k->mnt), "%s", o->mountpoint);
    k->reg = o->reg;
    pthread_mutex_init(&k->mu, NULL);
    pthread_mutex_init(&k->save_mu, NULL);
    kv_open(k);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    k->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int rc = k->efd < 0 ? errno : 0;
    grpc_init();
    k->cq = grpc_completion_queue_create_for_next(NULL);
    if (rc == 0)
        k->have_cq = (rc = -csifs_thread_start(&k->cq_thread, "csifs-kubecq", ks_cq_main, k)) == 0;
    if (rc == 0)
        k->have_worker = (rc = -csifs_thread_start(&k->worker, "csifs-kubelet", kub_worker, k)) == 0;
    /* The last step that may fail: the registry has no unsubscribe, so a
     * subscribed k is never freed before the registry stops changing and
     * its last subscribers ran (cmd/daemon.c: reg_quiesce first). */
    if (rc == 0)
        rc = -reg_subscribe_after(k->reg, on_change, k);
    if (rc) {
        snprintf(err, errlen, "kubelet: cannot start: %s", strerror(rc));
        kubelet_stop(k);
        return -rc;
    }
    /* what is there now (every node plugin: it cannot fail); the subscriber
     * the rest */
    reg_list(k->reg, REG_NODE, 0, 0, mark_listed, k);
    pthread_mutex_lock(&k->mu);
    k->listed = true;
    kub_wake(k);
    pthread_mutex_unlock(&k->mu);
    *out = k;
    return 0;
}

/* Stop; with keep, the worker's kept sockets into *out, *n. */
static void stop(struct kubelet *k, bool keep, struct tk_named **out, size_t *n)
{
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    k->keep = keep;
    pthread_mutex_unlock(&k->mu);
    if (k->efd >= 0)
        kub_wake(k);
    if (k->have_worker)              /* it alone made servers; it closed them */
        pthread_join(k->worker, NULL);
    kv_close(k, keep);
    if (keep) {
        *out = k->kept;
        *n = k->nkept;
    } else {
        free(k->kept);
    }
    for (size_t i = 0; i < k->ninh; i++)   /* no worker ran: left in the store */
        close(k->inh[i].fd);
    free(k->inh);
    /* The queue may shut down only when no server can post on it. */
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += 10;
    int rc = 0;
    pthread_mutex_lock(&k->mu);
    while (k->live > 0 && rc == 0)
        rc = pthread_cond_timedwait(&k->cv, &k->mu, &dl);
    pthread_mutex_unlock(&k->mu);
    if (rc) {                        /* leaked rather than crashed */
        csifs_log(LOG_ERR, "kubelet: a registration server did not stop within 10 s");
        return;
    }
    grpc_completion_queue_shutdown(k->cq);
    if (k->have_cq)
        pthread_join(k->cq_thread, NULL);
    grpc_completion_queue_destroy(k->cq);
    grpc_shutdown();
    if (k->efd >= 0)
        close(k->efd);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    pthread_mutex_destroy(&k->save_mu);
    free(k->e);
    free(k);
}

void kubelet_stop(struct kubelet *k)
{
    if (k)
        stop(k, false, NULL, NULL);
}

void kubelet_stop_keep(struct kubelet *k, struct tk_named **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (k)
        stop(k, true, out, n);
}

ssize_t kubelet_show(struct kubelet *k, enum reg_type type, const char *plugin, char *buf,
                     size_t cap, char *prov, size_t provcap)
{
    if (type != REG_NODE)
        return -ENOENT;
    pthread_mutex_lock(&k->mu);
    struct kentry *e = kub_find(k, plugin);
    ssize_t n = snprintf(buf, cap, "%s\n", e && *e->state ? e->state : "unregistered");
    if (prov)
        snprintf(prov, provcap, "%s", e && *e->state ? e->provider : "");
    pthread_mutex_unlock(&k->mu);
    return n;
}

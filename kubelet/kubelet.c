/* The table of csi-node plugins and their registration (see kubelet.h):
 * the registry subscriber marks plugins, the worker brings each to what
 * the registry says, the cq thread reports the kubelet's verdicts. */
#include "kubelet/internal.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The entry of plugin, or NULL; with k->mu held. */
static struct kentry *find(struct kubelet *k, const char *plugin)
{
    for (size_t i = 0; i < k->n; i++)
        if (!strcmp(k->e[i].plugin, plugin))
            return &k->e[i];
    return NULL;
}

/* Mark plugin for the worker (adding its entry); with k->mu held. */
static void mark(struct kubelet *k, const char *plugin)
{
    struct kentry *e = find(k, plugin);
    if (!e && k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        struct kentry *ne = realloc(k->e, cap * sizeof(*ne));
        if (!ne) {
            reg_log(LOG_ERR, "kubelet: out of memory: csi-node/%s not followed", plugin);
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
    pthread_cond_signal(&k->cv);
}

static void on_change(const struct reg_change *c, void *arg)
{
    struct kubelet *k = arg;
    if (c->type != REG_NODE || (c->kind != REG_C_CURRENT && c->kind != REG_C_FINGERPRINT &&
                                c->kind != REG_C_PLUGIN_DEL))
        return;
    pthread_mutex_lock(&k->mu);
    mark(k, c->plugin_name);
    pthread_mutex_unlock(&k->mu);
}

/* A `kubelet` event: state the first word of the verdict, the rest as the
 * reason. No lock held (ev_publish may wait for the registry's publisher). */
static void emit(struct kubelet *k, const char *plugin, const char *verdict)
{
    char path[REG_NAME_MAX + 16], state[32];
    snprintf(path, sizeof(path), "csi-node/%s", plugin);
    size_t n = strcspn(verdict, ":");
    snprintf(state, sizeof(state), "%.*s", (int)n, *verdict ? verdict : "unregistered");
    const char *reason = verdict[n] == ':' ? verdict + n + 2 : NULL;
    struct ev_kv kv[] = { { "state", state }, { NULL, NULL } };
    struct ev_ring *r = reg_events(k->reg);
    int64_t seq = ev_append(r, "kubelet", path, kv, reason);
    if (seq > 0)
        ev_publish(r, (uint64_t)seq, (uint64_t)seq + 1);
}

void kub_verdict(struct ksrv *s, bool registered, const char *error)
{
    struct kubelet *k = s->k;
    char v[sizeof(((struct kentry *)0)->state)];
    snprintf(v, sizeof(v), registered ? "registered" : "error: %s",
             *error ? error : "the kubelet did not register it");
    pthread_mutex_lock(&k->mu);
    struct kentry *e = find(k, s->plugin);
    bool ours = e && e->srv == s;
    if (ours)
        snprintf(e->state, sizeof(e->state), "%s", v);
    pthread_mutex_unlock(&k->mu);
    if (ours) {
        reg_log(registered ? LOG_INFO : LOG_WARNING, "kubelet: csi-node/%s: %s", s->plugin, v);
        emit(k, s->plugin, v);
    }
}

/* The provider of plugin's current, "" when it has none. No lock held. */
static void wanted(struct kubelet *k, const char *plugin, char *prov, size_t cap)
{
    struct reg_node p;
    prov[0] = '\0';
    if (reg_plugin_lookup(k->reg, REG_NODE, plugin, &p) < 0 || !p.current ||
        reg_attr_show(k->reg, p.current, REG_A_PROVIDER, prov, cap) < 0)
        prov[0] = '\0';
    prov[strcspn(prov, "\n")] = '\0';
}

/* Bring e to provider prov (k->mu held): close, refuse or open its server;
 * its new verdict in e->state. */
static void apply(struct kubelet *k, struct kentry *e, const char *prov)
{
    if (e->srv && strcmp(e->srv->provider, prov)) {
        for (size_t i = 0; i < k->n; i++)   /* a loser of a conflict may take it now */
            if (&k->e[i] != e && !strcmp(k->e[i].provider, e->srv->provider))
                mark(k, k->e[i].plugin);
        ks_close(e->srv);
        e->srv = NULL;
    }
    snprintf(e->provider, sizeof(e->provider), "%s", prov);
    if (!*prov) {
        e->state[0] = '\0';
        return;
    }
    if (e->srv)
        return;
    char path[4400];
    int len = snprintf(path, sizeof(path), "%s/%s-reg.sock", k->dir, prov);
    struct kentry *holder = NULL;
    for (size_t i = 0; i < k->n && !holder; i++)
        if (k->e[i].srv && !strcmp(k->e[i].srv->provider, prov))
            holder = &k->e[i];
    int rc = 0;
    if (strchr(prov, '/') || prov[0] == '.')
        snprintf(e->state, sizeof(e->state), "error: provider name not usable as a file name");
    else if (len > REG_SOCKET_MAX)
        snprintf(e->state, sizeof(e->state), "error: socket path over 107 bytes");
    else if (holder)
        snprintf(e->state, sizeof(e->state), "conflict: %s is registered by csi-node/%s", prov,
                 holder->plugin);
    else if ((rc = ks_open(k, &e->srv, e->plugin, prov, path)) < 0)
        snprintf(e->state, sizeof(e->state), "error: cannot serve the socket: %s", strerror(-rc));
    else
        snprintf(e->state, sizeof(e->state), "waiting");
}

static void *worker(void *arg)
{
    struct kubelet *k = arg;
    pthread_mutex_lock(&k->mu);
    while (!k->stop) {
        if (!k->any_dirty) {
            pthread_cond_wait(&k->cv, &k->mu);
            continue;
        }
        k->any_dirty = false;
        for (size_t i = 0; i < k->n && !k->stop; i++) {
            if (!k->e[i].dirty)
                continue;
            k->e[i].dirty = false;
            char plugin[REG_NAME_MAX + 1], prov[KUB_PROVIDER_MAX + 1];
            snprintf(plugin, sizeof(plugin), "%s", k->e[i].plugin);
            pthread_mutex_unlock(&k->mu);
            wanted(k, plugin, prov, sizeof(prov));
            pthread_mutex_lock(&k->mu);
            struct kentry *e = find(k, plugin);
            if (!e)
                continue;
            char before[sizeof(e->state)];
            snprintf(before, sizeof(before), "%s", e->state);
            apply(k, e, prov);
            if (!strcmp(before, e->state))
                continue;
            char now[sizeof(e->state)];
            snprintf(now, sizeof(now), "%s", e->state);
            pthread_mutex_unlock(&k->mu);
            reg_log(LOG_INFO, "kubelet: csi-node/%s: %s", plugin, *now ? now : "unregistered");
            emit(k, plugin, now);
            pthread_mutex_lock(&k->mu);
        }
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

static int mark_listed(const struct reg_node *n, void *arg)
{
    mark(arg, n->plugin);
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
    if (e) {
        snprintf(err, errlen, "kubelet_dir=%s: %s", o->dir, strerror(e));
        return -e;
    }
    struct kubelet *k = calloc(1, sizeof(*k));
    if (!k)
        return snprintf(err, errlen, "out of memory"), -ENOMEM;
    snprintf(k->dir, sizeof(k->dir), "%s", o->dir);
    snprintf(k->mnt, sizeof(k->mnt), "%s", o->mountpoint);
    k->reg = o->reg;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    grpc_init();
    k->cq = grpc_completion_queue_create_for_next(NULL);
    int rc = pthread_create(&k->cq_thread, NULL, ks_cq_main, k);
    k->have_cq = rc == 0;
    if (rc == 0)
        k->have_worker = (rc = pthread_create(&k->worker, NULL, worker, k)) == 0;
    if (rc == 0)
        rc = -reg_subscribe(k->reg, on_change, k);
    pthread_mutex_lock(&k->mu);
    if (rc == 0)
        rc = -reg_list(k->reg, REG_NODE, 0, 0, mark_listed, k);
    pthread_mutex_unlock(&k->mu);
    if (rc) {
        snprintf(err, errlen, "kubelet: cannot start: %s", strerror(rc));
        kubelet_stop(k);
        return -rc;
    }
    *out = k;
    return 0;
}

void kubelet_stop(struct kubelet *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    if (k->have_worker)
        pthread_join(k->worker, NULL);
    for (size_t i = 0; i < k->n; i++)   /* the worker is gone: no lock needed */
        if (k->e[i].srv)
            ks_close(k->e[i].srv);
    grpc_completion_queue_shutdown(k->cq);   /* after every server's shutdown tag */
    if (k->have_cq)
        pthread_join(k->cq_thread, NULL);
    grpc_completion_queue_destroy(k->cq);
    grpc_shutdown();
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k->e);
    free(k);
}

ssize_t kubelet_show(struct kubelet *k, enum reg_type type, const char *plugin, char *buf,
                     size_t cap)
{
    if (type != REG_NODE)
        return -ENOENT;
    pthread_mutex_lock(&k->mu);
    struct kentry *e = find(k, plugin);
    ssize_t n = snprintf(buf, cap, "%s\n", e && *e->state ? e->state : "unregistered");
    pthread_mutex_unlock(&k->mu);
    return n;
}

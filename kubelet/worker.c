/* The worker: the one thread that makes and removes registration sockets
 * and servers, and accepts the kubelet's connections (see kubelet.h). It
 * decides under k->mu and does the work (registry reads, sockets, gRPC,
 * events) with no lock held: it alone changes an entry's server, so the
 * table cannot change under its decision. */
#include "kubelet/internal.h"
#include "base/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The provider of plugin's current, "" when it has none. No lock held. */
static void wanted(struct kubelet *k, const char *plugin, char *prov, size_t cap)
{
    struct reg_node p;
    if (reg_plugin_lookup(k->reg, REG_NODE, plugin, &p) < 0 || !p.current ||
        reg_attr_show(k->reg, p.current, REG_A_PROVIDER, prov, cap) < 0)
        prov[0] = '\0';
    prov[strcspn(prov, "\n")] = '\0';
}

/* What the worker does for one plugin, decided under k->mu. */
struct step {
    struct ksrv *close;              /* its old server, to close */
    bool open;                       /* a socket to make for its provider */
    char path[KUB_PATH_MAX + 2];
};

/* Decide for e, its current's provider now prov (k->mu held): the verdict
 * it gets at once in e->state, or a socket to open. */
static void decide(struct kubelet *k, struct kentry *e, const char *prov, struct step *st)
{
    if (e->srv && strcmp(e->srv->provider, prov)) {
        for (size_t i = 0; i < k->n; i++)   /* a loser of a conflict may take it now */
            if (&k->e[i] != e && !strcmp(k->e[i].provider, e->srv->provider))
                kub_mark(k, k->e[i].plugin);
        st->close = e->srv;
        e->srv = NULL;
    }
    snprintf(e->provider, sizeof(e->provider), "%s", prov);
    if (!*prov || e->srv) {
        if (!*prov)
            e->state[0] = '\0';
        return;
    }
    struct kentry *holder = NULL;
    for (size_t i = 0; i < k->n && !holder; i++)
        if (k->e[i].srv && !strcmp(k->e[i].srv->provider, prov))
            holder = &k->e[i];
    int len = snprintf(st->path, sizeof(st->path), "%s/%s-reg.sock", k->dir, prov);
    if (strchr(prov, '/') || prov[0] == '.')   /* it would leave DIR, or hide */
        snprintf(e->state, sizeof(e->state), "error: provider name not usable as a file name");
    else if (len > KUB_PATH_MAX)
        snprintf(e->state, sizeof(e->state), "error: socket path over 107 bytes");
    else if (holder)
        snprintf(e->state, sizeof(e->state), "conflict: %s is registered by csi-node/%s", prov,
                 holder->plugin);
    else
        st->open = true;
}

/* Make e's socket and server (no lock held): the one handed from the fd
 * store when it is still there, else a fresh one, put in the store. Its
 * verdict into v. */
static struct ksrv *open_one(struct kubelet *k, const char *plugin, const char *prov,
                             const char *path, char *v, size_t cap, bool *adopted)
{
    char why[KUB_STATE_MAX - 8], name[sizeof(k->inh->name)];
    int lfd;
    ino_t ino;
    struct ksrv *s = NULL;
    bool fresh = ks_handed(k, prov, path, &lfd, &ino) < 0;
    int rc = fresh ? ks_listen(path, &lfd, &ino, why, sizeof(why)) : 0;
    ks_fdname(prov, name, sizeof(name));
    if (rc == 0 && (rc = ks_open(k, &s, plugin, prov, path, lfd, ino)) < 0) {
        ks_unlisten(path, lfd, ino);
        if (!fresh)
            tk_store_remove(name);
        snprintf(why, sizeof(why), "cannot serve the socket: %s", strerror(-rc));
    }
    int src = rc == 0 && fresh ? tk_store(lfd, name) : 0;
    if (src < 0)
        csifs_log(LOG_WARNING, "kubelet: %s: not kept in the fd store: %s (a restart "
                  "registers it again)", path, strerror(-src));
    snprintf(v, cap, rc == 0 ? "waiting" : "error: %s", why);
    *adopted = rc == 0 && !fresh;
    return rc == 0 ? s : NULL;
}

/* Bring one dirty plugin to what the registry says. */
static void update(struct kubelet *k, const char *plugin)
{
    char prov[KUB_PROVIDER_MAX + 1], v[KUB_STATE_MAX];
    wanted(k, plugin, prov, sizeof(prov));
    struct step st = { 0 };
    pthread_mutex_lock(&k->mu);
    struct kentry *e = kub_find(k, plugin);
    char before[KUB_STATE_MAX];
    snprintf(before, sizeof(before), "%s", e ? e->state : "");
    if (e)
        decide(k, e, prov, &st);
    snprintf(v, sizeof(v), "%s", e ? e->state : "");
    pthread_mutex_unlock(&k->mu);
    if (st.close)
        ks_close(st.close);
    if (st.open) {
        bool adopted;
        struct ksrv *s = open_one(k, plugin, prov, st.path, v, sizeof(v), &adopted);
        if (adopted && kv_take(k, prov, v, sizeof(v)))
            snprintf(before, sizeof(before), "%s", v);   /* as the kubelet last saw it */
        pthread_mutex_lock(&k->mu);
        e = kub_find(k, plugin);     /* entries are never removed */
        e->srv = s;
        snprintf(e->state, sizeof(e->state), "%s", v);
        pthread_mutex_unlock(&k->mu);
    }
    if (st.close || st.open)
        kv_save(k);
    if (strcmp(before, v))
        kub_report(k, plugin, v);
}

/* The dirty plugins' names (k->mu held), marked clean: malloc'd, *n. */
static char (*take_dirty(struct kubelet *k, size_t *n))[REG_NAME_MAX + 1]
{
    char (*names)[REG_NAME_MAX + 1] = NULL;
    *n = 0;
    if (!k->any_dirty)
        return NULL;
    k->any_dirty = false;
    for (size_t i = 0; i < k->n; i++) {
        if (!k->e[i].dirty)
            continue;
        if (!names && !(names = malloc(k->n * sizeof(*names)))) {
            k->any_dirty = true;     /* again at the next wake */
            return NULL;
        }
        k->e[i].dirty = false;
        memcpy(names[(*n)++], k->e[i].plugin, sizeof(*names));
    }
    return names;
}

void *kub_worker(void *arg)
{
    struct kubelet *k = arg;
    struct pollfd *p = NULL;
    struct ksrv **srv = NULL;
    size_t room = 0;
    for (;;) {
        pthread_mutex_lock(&k->mu);
        bool stop = k->stop, listed = k->listed;
        size_t nd = 0;
        char (*dirty)[REG_NAME_MAX + 1] = stop ? NULL : take_dirty(k, &nd);
        pthread_mutex_unlock(&k->mu);
        if (stop)
            break;
        for (size_t i = 0; i < nd; i++)
            update(k, dirty[i]);
        free(dirty);
        if (listed && k->ninh)       /* this pass took every plugin there was */
            ks_handed_rest(k, false);
        /* the servers now: only this thread closes them */
        pthread_mutex_lock(&k->mu);
        if (room < k->n + 1) {
            struct pollfd *np = realloc(p, (k->n + 1) * sizeof(*p));
            struct ksrv **ns = np ? realloc(srv, (k->n + 1) * sizeof(*srv)) : NULL;
            p = np ? np : p;
            srv = ns ? ns : srv;
            room = ns ? k->n + 1 : room;
        }
        size_t n = 1;
        for (size_t i = 0; i < k->n && n < room; i++)
            if (k->e[i].srv) {
                srv[n] = k->e[i].srv;
                p[n++] = (struct pollfd){ .fd = k->e[i].srv->lfd, .events = POLLIN };
            }
        pthread_mutex_unlock(&k->mu);
        if (!p) {
            csifs_log(LOG_ERR, "kubelet: out of memory: the worker stops");
            break;
        }
        p[0] = (struct pollfd){ .fd = k->efd, .events = POLLIN };
        if (poll(p, n, -1) < 0 && errno != EINTR)
            csifs_log(LOG_ERR, "kubelet: poll: %s", strerror(errno));
        uint64_t v;
        if (p[0].revents && read(k->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            csifs_log(LOG_ERR, "kubelet: eventfd: %s", strerror(errno));
        for (size_t i = 1; i < n; i++)
            if (p[i].revents)
                ks_accept(srv[i]);
    }
    free(p);
    free(srv);
    pthread_mutex_lock(&k->mu);      /* stopping: every socket goes, or is kept */
    bool keep = k->keep;
    struct ksrv **all = NULL;
    size_t na = 0;
    if (k->n)
        all = malloc(k->n * sizeof(*all));
    if (keep && !(k->kept = malloc((k->n + k->ninh + 1) * sizeof(*k->kept))))
        keep = false;                /* out of memory: the sockets go */
    for (size_t i = 0; i < k->n; i++)
        if (k->e[i].srv) {
            if (all)
                all[na++] = k->e[i].srv;
            else
                ks_close(k->e[i].srv);   /* out of memory: under the lock after all */
            k->e[i].srv = NULL;
        }
    pthread_mutex_unlock(&k->mu);
    for (size_t i = 0; i < na; i++) {
        if (keep) {                  /* the next image's: not unlinked, not closed */
            struct tk_named *kn = &k->kept[k->nkept++];
            kn->fd = all[i]->lfd;
            ks_fdname(all[i]->provider, kn->name, sizeof(kn->name));
            all[i]->lfd = -1;
        }
        ks_close(all[i]);
    }
    free(all);
    ks_handed_rest(k, keep);
    return NULL;
}

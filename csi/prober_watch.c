/* csi prober: inotify watches on the directories of the sockets, so that a
 * plugin starting (or restarting) on its socket is probed at once rather
 * than at the next step of the backoff, and one whose socket file is
 * removed or renamed away at once rather than at the next heartbeat. Best
 * effort: where a watch cannot be placed (no such dir yet, a limit) the
 * schedule alone applies, and the watch is tried again after every failed
 * round. Reports to its caller (prober.c); calls nothing above the table. */
#include "csi/prober_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <syslog.h>
#include <unistd.h>

int pr_watch_init(struct csi_prober *p)
{
    p->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (p->ino_fd < 0)
        pr_log(p, LOG_WARNING, "inotify: %s: plugins starting late wait for the backoff",
               strerror(errno));
    return 0;
}

void pr_watch_fini(struct csi_prober *p)
{
    if (p->ino_fd >= 0)
        close(p->ino_fd);
    p->ino_fd = -1;
    free(p->watches);
    p->watches = NULL;
    p->nwatch = p->watch_cap = 0;
}

static struct pr_watch *watch_find(struct csi_prober *p, int wd)
{
    for (size_t k = 0; k < p->nwatch; k++)
        if (p->watches[k].wd == wd)
            return &p->watches[k];
    return NULL;
}

static void watch_forget(struct csi_prober *p, struct pr_watch *w)
{
    *w = p->watches[--p->nwatch];
}

void pr_watch_arm(struct csi_prober *p, struct pinst *pi)
{
    if (p->ino_fd < 0 || pi->wd >= 0)
        return;
    if (p->nwatch == p->watch_cap) {
        size_t cap = p->watch_cap ? 2 * p->watch_cap : 16;
        struct pr_watch *w = realloc(p->watches, cap * sizeof(*w));
        if (!w)
            return;
        p->watches = w;
        p->watch_cap = cap;
    }
    char dir[REG_SOCKET_MAX + 1];
    const char *slash = strrchr(pi->path, '/');
    size_t len = slash == pi->path ? 1 : (size_t)(slash - pi->path);
    memcpy(dir, pi->path, len);
    dir[len] = '\0';
    int wd = inotify_add_watch(p->ino_fd, dir, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR);
    if (wd < 0)
        return;
    struct pr_watch *w = watch_find(p, wd);   /* one per dir: shared */
    if (!w) {
        w = &p->watches[p->nwatch++];
        *w = (struct pr_watch){ .wd = wd };
    }
    w->refs++;
    pi->wd = wd;
}

void pr_watch_disarm(struct csi_prober *p, struct pinst *pi)
{
    if (pi->wd < 0)
        return;
    struct pr_watch *w = watch_find(p, pi->wd);
    pi->wd = -1;
    if (w && --w->refs == 0) {
        /* fails only if the kernel dropped it already (IN_IGNORED follows) */
        (void)inotify_rm_watch(p->ino_fd, w->wd);
        watch_forget(p, w);
    }
}

/* The watch is gone (its dir was removed): its instances have none. */
static void watch_gone(struct csi_prober *p, int wd)
{
    struct pr_watch *w = watch_find(p, wd);
    if (w)
        watch_forget(p, w);
    struct pinst *pi;
    LIST_FOREACH(pi, &p->all, link)
        if (pi->wd == wd)
            pi->wd = -1;
}

typedef void report_fn(struct csi_prober *p, struct pinst *pi, bool created);

/* name created (or removed) in the dir of wd (any, when name is NULL). */
static void changed(struct csi_prober *p, int wd, const char *name, bool created,
                    report_fn *fn)
{
    struct pinst *pi, *next;
    /* fn may drop the instance it is given */
    for (pi = LIST_FIRST(&p->all); pi; pi = next) {
        next = LIST_NEXT(pi, link);
        const char *base = strrchr(pi->path, '/') + 1;
        if (pi->wd >= 0 && (wd < 0 || pi->wd == wd) && (!name || !strcmp(base, name)))
            fn(p, pi, created);
    }
}

void pr_watch_read(struct csi_prober *p, report_fn *fn)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(p->ino_fd, buf, sizeof(buf))) > 0) {
        const struct inotify_event *ev;
        for (char *at = buf; at < buf + n; at += sizeof(*ev) + ev->len) {
            ev = (const struct inotify_event *)at;
            if (ev->mask & IN_Q_OVERFLOW)
                changed(p, -1, NULL, true, fn);
            else if (ev->mask & IN_IGNORED)
                watch_gone(p, ev->wd);
            else if (ev->len)
                changed(p, ev->wd, ev->name, (ev->mask & (IN_CREATE | IN_MOVED_TO)) != 0, fn);
        }
    }
}

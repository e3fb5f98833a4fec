/* The kubelet's verdicts kept for a successor (DESIGN 13, 14): a memfd in
 * the fd store, KUB_FD_VERDICTS, with one "<provider>\t<verdict>\n" line
 * per socket served, rewritten at each change. A socket adopted from the
 * store takes its verdict from it: the kubelet saw no change and will not
 * give it again. */
#include "kubelet/internal.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void kv_open(struct kubelet *k)
{
    k->vfd = -1;
    for (size_t i = 0; i < k->ninh && k->vfd < 0; i++)
        if (!strcmp(k->inh[i].name, KUB_FD_VERDICTS)) {
            k->vfd = k->inh[i].fd;
            k->inh[i] = k->inh[--k->ninh];
        }
    struct stat st;
    if (k->vfd >= 0 && fstat(k->vfd, &st) == 0 && st.st_size > 0 && st.st_size < (1 << 24) &&
        (k->saved = calloc(1, (size_t)st.st_size + 2))) {
        k->saved[0] = '\n';          /* every line starts after a newline */
        if (pread(k->vfd, k->saved + 1, (size_t)st.st_size, 0) != st.st_size)
            k->saved[1] = '\0';
    }
    if (k->vfd >= 0)
        return;
    k->vfd = memfd_create("csifs-kubelet", MFD_CLOEXEC);
    int rc = k->vfd < 0 ? -errno : tk_store(k->vfd, KUB_FD_VERDICTS);
    if (rc < 0)
        csifs_log(LOG_WARNING, "kubelet: the verdicts are not kept for a restart: %s",
                  strerror(-rc));
}

bool kv_take(struct kubelet *k, const char *prov, char *v, size_t cap)
{
    char key[KUB_PROVIDER_MAX + 3];
    snprintf(key, sizeof(key), "\n%s\t", prov);
    const char *p = k->saved ? strstr(k->saved, key) : NULL;
    if (!p)
        return false;
    p += strlen(key);
    snprintf(v, cap, "%.*s", (int)strcspn(p, "\n"), p);
    return *v != '\0';
}

void kv_save(struct kubelet *k)
{
    if (k->vfd < 0)
        return;
    pthread_mutex_lock(&k->save_mu);     /* then k->mu: one writer at a time */
    pthread_mutex_lock(&k->mu);
    size_t cap = k->n * (KUB_PROVIDER_MAX + KUB_STATE_MAX + 2) + 1, len = 0;
    char *b = malloc(cap);
    for (size_t i = 0; b && i < k->n; i++)
        if (k->e[i].srv && *k->e[i].state)
            len += (size_t)snprintf(b + len, cap - len, "%s\t%s\n", k->e[i].srv->provider,
                                    k->e[i].state);
    pthread_mutex_unlock(&k->mu);
    if (b && (ftruncate(k->vfd, (off_t)len) < 0 || pwrite(k->vfd, b, len, 0) != (ssize_t)len))
        csifs_log(LOG_WARNING, "kubelet: cannot keep the verdicts: %s", strerror(errno));
    pthread_mutex_unlock(&k->save_mu);
    free(b);
}

void kv_close(struct kubelet *k, bool keep)
{
    free(k->saved);
    k->saved = NULL;
    if (k->vfd < 0)
        return;
    struct tk_named *kept = keep ? realloc(k->kept, (k->nkept + 1) * sizeof(*kept)) : NULL;
    if (kept) {                      /* for the next image, with the sockets */
        k->kept = kept;
        k->kept[k->nkept].fd = k->vfd;
        snprintf(k->kept[k->nkept++].name, sizeof(kept->name), "%s", KUB_FD_VERDICTS);
    } else {
        close(k->vfd);
        tk_store_remove(KUB_FD_VERDICTS);
    }
    k->vfd = -1;
}

/* The registration sockets themselves: csifs binds and listens (not gRPC
 * core, which would unlink a live server's path and cannot hand out its
 * listening fd), under a dot-name that the kubelet ignores, then renames it
 * into place, and handed to the fd store (DESIGN 13); a successor adopts
 * it when it is still the socket at its path. The worker thread accepts and hands each connection to the
 * socket's gRPC server (server.c). */
#include "kubelet/internal.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

/* Does a server answer on path? (A stale socket of a killed process
 * refuses; a backlog that is full still counts as someone.) */
static bool served(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool yes = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EAGAIN;
    close(fd);
    return yes;
}

/* path's dot-name in the same dir: "." before its last component, one byte
 * shorter when path has the full 107 bytes (a dot-name may not be longer). */
static void dot_name(const char *path, char *dot, size_t cap)
{
    const char *base = strrchr(path, '/') + 1;
    size_t n = strlen(path) >= KUB_PATH_MAX ? strlen(base) - 1 : strlen(base);
    snprintf(dot, cap, "%.*s.%.*s", (int)(base - path), path, (int)n, base);
}

int ks_listen(const char *path, int *fd_out, ino_t *ino_out, char *why, size_t cap)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) > KUB_PATH_MAX || !strchr(path, '/'))
        return snprintf(why, cap, "socket path over 107 bytes"), -ENAMETOOLONG;
    if (served(path))
        return snprintf(why, cap, "%s is served by another process (a "
                        "node-driver-registrar?)", path), -EADDRINUSE;
    dot_name(path, a.sun_path, sizeof(a.sun_path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && unlink(a.sun_path) < 0 && errno != ENOENT)
        rc = -errno;                 /* a leftover of a killed csifs */
    if (rc == 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        rc = -errno;
    if (rc == 0 && listen(fd, 64) < 0)
        rc = -errno;
    struct stat st;
    if (rc == 0 && stat(a.sun_path, &st) < 0)
        rc = -errno;
    if (rc == 0 && rename(a.sun_path, path) < 0)
        rc = -errno;
    if (rc < 0) {
        snprintf(why, cap, "cannot serve the socket: %s", strerror(-rc));
        if (fd >= 0) {
            unlink(a.sun_path);
            close(fd);
        }
        return rc;
    }
    *fd_out = fd;
    *ino_out = st.st_ino;
    return 0;
}

void ks_unlisten(const char *path, int fd, ino_t ino)
{
    struct stat st;                  /* only if it is still ours */
    if (stat(path, &st) == 0 && st.st_ino == ino && S_ISSOCK(st.st_mode))
        unlink(path);
    close(fd);
}

void ks_fdname(const char *prov, char *name, size_t cap)
{
    snprintf(name, cap, TK_FD_KUBELET "%s", prov);
}

/* The inode and device (the kernel's encoding) of the file a unix socket
 * was bound to, as sock_diag tells it (UDIAG_SHOW_VFS): the bound name may
 * have been renamed since. 0 or -errno. */
static int bound_file(int fd, uint32_t *ino, uint32_t *dev)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -errno;
    struct {
        struct nlmsghdr h;
        struct unix_diag_req r;
    } rq = { .h = { .nlmsg_len = sizeof(rq), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                    .nlmsg_flags = NLM_F_REQUEST },
             .r = { .sdiag_family = AF_UNIX, .udiag_ino = (uint32_t)st.st_ino,
                    .udiag_show = UDIAG_SHOW_VFS, .udiag_cookie = { ~0u, ~0u } } };
    union {
        struct nlmsghdr h;
        char b[1024];
    } rp;
    ssize_t n = send(nl, &rq, sizeof(rq), 0) < 0 ? -1 : recv(nl, &rp, sizeof(rp), 0);
    int rc = n < 0 ? -errno : -ENOENT;
    close(nl);
    if (n < 0 || !NLMSG_OK(&rp.h, (size_t)n))
        return n < 0 ? rc : -EPROTO;
    if (rp.h.nlmsg_type == NLMSG_ERROR)
        return ((struct nlmsgerr *)NLMSG_DATA(&rp.h))->error;
    struct unix_diag_msg *m = NLMSG_DATA(&rp.h);
    int len = (int)rp.h.nlmsg_len - NLMSG_LENGTH(sizeof(*m));
    for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == UNIX_DIAG_VFS) {
            struct unix_diag_vfs *v = RTA_DATA(a);
            *ino = v->udiag_vfs_ino;
            *dev = v->udiag_vfs_dev;
            rc = 0;
        }
    return rc;
}

/* Is fd a unix stream socket listening, bound under path's dot-name, whose
 * file is the one at path now? 0 with its inode, or -errno. */
static int adoptable(const char *path, int fd, ino_t *ino)
{
    int type = 0, acc = 0;
    socklen_t l1 = sizeof(type), l2 = sizeof(acc);
    struct sockaddr_un a;
    socklen_t al = sizeof(a);
    char dot[KUB_PATH_MAX + 2];
    memset(&a, 0, sizeof(a));
    dot_name(path, dot, sizeof(dot));
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l2) < 0)
        return -errno;
    if (type != SOCK_STREAM || !acc)
        return -EINVAL;
    if (getsockname(fd, (struct sockaddr *)&a, &al) < 0)
        return -errno;
    if (a.sun_family != AF_UNIX || strcmp(a.sun_path, dot))
        return -EADDRNOTAVAIL;
    uint32_t vino = 0, vdev = 0;
    struct stat st;
    int rc = bound_file(fd, &vino, &vdev);
    if (rc == 0 && stat(path, &st) < 0)
        rc = -errno;
    if (rc == 0 && (!S_ISSOCK(st.st_mode) || st.st_ino != vino ||
                    major(st.st_dev) != vdev >> 20 || minor(st.st_dev) != (vdev & 0xfffff)))
        rc = -ESTALE;                /* removed, or replaced by another socket */
    if (rc == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
        rc = -errno;
    if (rc == 0)
        *ino = st.st_ino;
    return rc;
}

int ks_handed(struct kubelet *k, const char *prov, const char *path, int *fd, ino_t *ino)
{
    char name[sizeof(k->inh->name)];
    ks_fdname(prov, name, sizeof(name));
    for (size_t i = 0; i < k->ninh; i++) {
        if (strcmp(k->inh[i].name, name))
            continue;
        int h = k->inh[i].fd;
        k->inh[i] = k->inh[--k->ninh];
        int rc = adoptable(path, h, ino);
        if (rc == 0) {
            *fd = h;
            csifs_log(LOG_INFO, "kubelet: %s: taken over from the fd store", path);
            return 0;
        }
        csifs_log(LOG_WARNING, "kubelet: %s: the stored socket is not the one there (%s): "
                  "made again", path, strerror(-rc));
        close(h);
        tk_store_remove(name);
        return rc == -ENOENT ? -ESTALE : rc;
    }
    return -ENOENT;
}

void ks_handed_rest(struct kubelet *k, bool keep)
{
    for (size_t i = 0; i < k->ninh; i++) {
        struct tk_named *h = &k->inh[i];
        if (keep) {
            k->kept[k->nkept++] = *h;
            continue;
        }
        char path[sizeof(k->dir) + sizeof(h->name) + 16];
        ino_t ino;
        snprintf(path, sizeof(path), "%s/%s-reg.sock", k->dir, h->name + strlen(TK_FD_KUBELET));
        csifs_log(LOG_INFO, "kubelet: %s: no plugin has that provider now: removed", path);
        if (adoptable(path, h->fd, &ino) == 0)
            ks_unlisten(path, h->fd, ino);   /* the kubelet deregisters */
        else
            close(h->fd);
        tk_store_remove(h->name);
    }
    k->ninh = 0;
}

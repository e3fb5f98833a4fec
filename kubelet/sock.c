/* The registration sockets themselves: csifs binds and listens (not gRPC
 * core, which would unlink a live server's path and cannot hand out its
 * listening fd), under a dot-name that the kubelet ignores, then renames it
 * into place. The worker thread accepts and hands each connection to the
 * socket's gRPC server (server.c). */
#include "kubelet/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

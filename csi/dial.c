/* csi: the direct connect() to a plugin socket (see client.h): the
 * connection a channel runs on, and the dial diagnosis. */
#include "csi/client.h"
#include "csi/internal.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int csi_dial(const char *path, pid_t *pid)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = path ? strlen(path) : 0;
    if (pid)
        *pid = 0;
    if (!len)
        return -EINVAL;
    if (len >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (pid) {
        /* a unix stream peer's credentials are the listener's, as of listen() */
        struct ucred cred;
        socklen_t clen = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.pid > 0)
            *pid = cred.pid;
    }
    return fd;
}

int csi_dial_check(const char *path, pid_t *pid)
{
    int fd = csi_dial(path, pid);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    /* EAGAIN: a listener with a full backlog, alive nonetheless */
    return fd == -EAGAIN || fd == -EINPROGRESS ? 0 : -fd;
}

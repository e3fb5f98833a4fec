/* csi: the short, stable reasons of failed calls (DESIGN section 3). */
#include "csi/client.h"
#include "csi/internal.h"
#include "registry/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MESSAGE_MAX 256

static const char *const status_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
};
#define NSTATUS ((int)(sizeof(status_names) / sizeof(status_names[0])))

const char *csi_status_name(int status)
{
    return status >= 0 && status < NSTATUS ? status_names[status] : NULL;
}

int csi_status_parse(const char *s)
{
    if (!s || !*s)
        return -EINVAL;
    for (int i = 0; i < NSTATUS; i++)
        if (strcmp(s, status_names[i]) == 0)
            return i;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v >= NSTATUS)
        return -EINVAL;
    return (int)v;
}

char *csi_dup_line(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;            /* s[n] continues a character: cut before it */
    }
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        d[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    d[n] = '\0';
    return d;
}

/* 0 if something accepts connections on path, else the errno of connect(). */
static int connect_errno(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sa.sun_path))
        return ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
    close(fd);
    /* EAGAIN: a listener with a full backlog, alive nonetheless. */
    return rc == EAGAIN || rc == EINPROGRESS ? 0 : rc;
}

pid_t csi_peer_pid(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct ucred cr = { 0 };
    socklen_t len = sizeof(cr);
    if (strlen(path) >= sizeof(sa.sun_path))
        return 0;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        cr.pid = 0;
    close(fd);
    return cr.pid > 0 ? cr.pid : 0;
}

char *csi_reason(int status, const char *message, const char *socket_path, int timeout_ms)
{
    char *r = NULL;
    int n;
    int e = status == GRPC_STATUS_UNAVAILABLE && socket_path ? connect_errno(socket_path) : 0;
    if (e) {
        char buf[128];
        n = asprintf(&r, "connect: %s", strerror_r(e, buf, sizeof(buf)));
    } else if (status == GRPC_STATUS_DEADLINE_EXCEEDED) {
        char d[32];
        n = asprintf(&r, "probe timed out after %s", reg_fmt_duration(timeout_ms, d, sizeof(d)));
    } else {
        const char *name = csi_status_name(status);
        char num[32];
        if (!name) {
            snprintf(num, sizeof(num), "STATUS_%d", status);
            name = num;
        }
        char *m = csi_dup_line(message ? message : "", MESSAGE_MAX);
        if (!m)
            return NULL;
        n = *m ? asprintf(&r, "%s: %s", name, m) : asprintf(&r, "%s", name);
        free(m);
    }
    return n < 0 ? NULL : r;
}

/* The fd store and the connection notifications. See takeover.h. */
#include "takeover/takeover.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* Debian 12's <linux/fuse.h> is protocol 7.38: the kernel's uapi names. */
#define TK_NOTIFY_POLL 1
#define TK_NOTIFY_RESEND 7
#define TK_NOTIFY_INC_EPOCH 8

struct tk_out_header {               /* struct fuse_out_header */
    uint32_t len;
    int32_t error;                   /* a notification: its code */
    uint64_t unique;                 /* 0: a notification */
};

/* fd, named nm, into f->kub: true if kept. */
static bool keep_kub(struct tk_fds *f, int fd, const char *nm, int n)
{
    if (strncmp(nm, TK_FD_KUBELET, strlen(TK_FD_KUBELET)) || strlen(nm) >= sizeof(f->kub->name))
        return false;
    if (!f->kub && !(f->kub = calloc((size_t)n, sizeof(*f->kub))))
        return false;
    f->kub[f->nkub].fd = fd;
    snprintf(f->kub[f->nkub++].name, sizeof(f->kub->name), "%s", nm);
    return true;
}

void tk_fds_take(struct tk_fds *f)
{
    f->fuse = f->state = -1;
    f->kub = NULL;
    f->nkub = 0;
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);   /* 1: unset LISTEN_* */
    for (int k = 0; k < n; k++) {
        int fd = SD_LISTEN_FDS_START + k;
        const char *nm = names && names[k] ? names[k] : "";
        int *slot = !strcmp(nm, TK_FD_FUSE) ? &f->fuse : !strcmp(nm, TK_FD_STATE) ? &f->state
                                                                                  : NULL;
        bool kept = slot && *slot < 0 ? (*slot = fd, true) : !slot && keep_kub(f, fd, nm, n);
        if (kept)
            fcntl(fd, F_SETFD, FD_CLOEXEC);
        else
            close(fd);
    }
    for (int k = 0; names && names[k]; k++)
        free(names[k]);
    free(names);
}

/* fuse_connection: NN of /proc/self/fdinfo/<fd>; 0 when not FUSE. */
static unsigned fd_conn(int fd)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    unsigned conn = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "fuse_connection: %u", &conn) == 1)
            break;
    if (f)
        fclose(f);
    return conn;
}

int tk_fd_check(int fd, unsigned conn, char *why, size_t cap)
{
    unsigned have = fd_conn(fd);
    char path[96];
    struct stat st;
    snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u", have);
    if (!have) {
        snprintf(why, cap, "the handed fd %d is no FUSE connection", fd);
        return -EBADF;
    }
    if (!conn) {
        snprintf(why, cap, "nothing is mounted there (the handed connection %u is not)", have);
        return -ENOENT;
    }
    if (have != conn) {
        snprintf(why, cap, "the handed connection %u is not the one mounted there (%u)", have,
                 conn);
        return -EXDEV;
    }
    if (stat(path, &st) < 0) {
        snprintf(why, cap, "the handed connection %u is gone (%s)", have, path);
        return -ENOTCONN;
    }
    /* an aborted connection polls as an error (fs/fuse/dev.c fuse_dev_poll) */
    struct pollfd p = { .fd = fd, .events = POLLIN };
    if (poll(&p, 1, 0) < 0 || (p.revents & (POLLERR | POLLNVAL))) {
        snprintf(why, cap, "the handed connection %u was aborted", have);
        return -ENOTCONN;
    }
    return 0;
}

int tk_store_present(void)
{
    const char *s = getenv("NOTIFY_SOCKET");
    return s && *s;
}

int tk_store(int fd, const char *name)
{
    if (!tk_store_present())
        return 0;
    char msg[128];
    snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
    int rc = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
    return rc > 0 ? 0 : rc < 0 ? rc : -ENOTCONN;
}

int tk_store_remove(const char *name)
{
    if (!tk_store_present())
        return 0;
    char msg[128];
    snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
    int rc = sd_notify(0, msg);
    return rc > 0 ? 0 : rc < 0 ? rc : -ENOTCONN;
}

void tk_named_drop(struct tk_named *v, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        close(v[k].fd);
        tk_store_remove(v[k].name);
    }
    free(v);
}

static int notify(int fd, int code, const void *arg, size_t len)
{
    struct tk_out_header h = { .len = (uint32_t)(sizeof(h) + len), .error = code };
    struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)arg, len } };
    ssize_t n = writev(fd, iov, len ? 2 : 1);
    return n == (ssize_t)h.len ? 0 : n < 0 ? -errno : -EIO;
}

int tk_notify_epoch(int fd)
{
    return notify(fd, TK_NOTIFY_INC_EPOCH, NULL, 0);
}

int tk_notify_resend(int fd)
{
    return notify(fd, TK_NOTIFY_RESEND, NULL, 0);
}

int tk_notify_poll(int fd, uint64_t kh)
{
    return notify(fd, TK_NOTIFY_POLL, &kh, sizeof(kh));
}

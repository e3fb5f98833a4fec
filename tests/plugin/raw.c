/* csi-test-plugin --blackhole / --garbage: plain listening unix sockets, no
 * gRPC. A blackhole accepts and never writes; garbage writes bytes that are
 * not HTTP/2 to each new connection. Both read and discard what clients send,
 * and close a connection when its client does. */
#include "tests/plugin/plugin.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char garbage[] = "garbage: this is not a CSI plugin, nor HTTP/2 \xff\xfe\xfd\r\n";

int plug_listen_unix(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, path, strlen(path) + 1);   /* length checked by main */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if ((unlink(path) != 0 && errno != ENOENT) ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, SOMAXCONN) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

struct fds {
    struct pollfd *p;
    size_t n, cap;
};

static int fds_add(struct fds *f, int fd)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        struct pollfd *p = realloc(f->p, cap * sizeof(*p));
        if (!p)
            return -1;
        f->p = p;
        f->cap = cap;
    }
    f->p[f->n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
    return 0;
}

static void accept_all(const struct plug_cfg *cfg, struct fds *f, int lfd)
{
    int c;
    while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        /* EPIPE: a client that only checked that something listens */
        if (cfg->mode == PLUG_GARBAGE && write(c, garbage, sizeof(garbage) - 1) < 0 &&
            errno != EPIPE && errno != ECONNRESET)
            perror("csi-test-plugin: write");
        if (fds_add(f, c) != 0) {
            close(c);
            return;
        }
    }
}

/* Read and drop what a client sent; false when it has gone. */
static bool drain(int fd)
{
    char buf[4096];
    ssize_t r;
    while ((r = read(fd, buf, sizeof(buf))) > 0)
        ;
    return r < 0 && (errno == EAGAIN || errno == EINTR);
}

int plug_serve_raw(const struct plug_cfg *cfg)
{
    struct fds f = { 0 };
    int rc = 0;
    for (size_t i = 0; i < cfg->nsockets && !rc; i++) {
        int fd = plug_listen_unix(cfg->sockets[i]);
        if (fd < 0 || fds_add(&f, fd) != 0) {
            fprintf(stderr, "csi-test-plugin: %s: %s\n", cfg->sockets[i], strerror(errno));
            if (fd >= 0)
                close(fd);
            rc = -1;
        }
    }
    if (!rc)
        plug_announce(cfg);
    size_t nlisten = cfg->nsockets;
    while (!rc && !plug_stop) {
        if (poll(f.p, f.n, 200) < 0) {
            if (errno == EINTR)
                continue;
            perror("csi-test-plugin: poll");
            rc = -1;
            break;
        }
        for (size_t i = 0; i < f.n; i++) {
            if (!f.p[i].revents)
                continue;
            if (i < nlisten) {
                accept_all(cfg, &f, f.p[i].fd);
            } else if (!drain(f.p[i].fd)) {
                close(f.p[i].fd);
                f.p[i--] = f.p[--f.n];
            }
        }
    }
    for (size_t i = 0; i < f.n; i++)
        close(f.p[i].fd);
    for (size_t i = 0; i < nlisten && i < f.n; i++)   /* the listeners made */
        if (unlink(cfg->sockets[i]) != 0)
            fprintf(stderr, "csi-test-plugin: unlink %s: %s\n", cfg->sockets[i], strerror(errno));
    free(f.p);
    return rc;
}

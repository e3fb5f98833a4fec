/* csi-test-plugin --signals: the plugin accepts connections itself and
 * hands each to the gRPC server (grpc_server_add_channel_from_fd), so that
 * it can break them on demand while it stays alive:
 *   SIGUSR1  stop serving: close the listeners (the socket files stay, so a
 *            dial is refused) and every accepted connection;
 *   SIGUSR2  close every accepted connection, keep listening (a client's
 *            reconnect succeeds).
 * One thread accepts; a kept dup() of each connection is what it shuts
 * down (shutdown() acts on the socket, whoever else holds it). */
#include "tests/plugin/plugin.h"

#include <errno.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static volatile sig_atomic_t want_stop_serving, want_drop;

static void on_usr(int sig)
{
    if (sig == SIGUSR1)
        want_stop_serving = 1;
    else
        want_drop = 1;
}

struct acceptor {
    const struct plug_cfg *cfg;
    grpc_server *srv;
    int *lfd;                   /* one per socket, -1 once closed */
    int *conns;                 /* dups of the accepted connections */
    size_t nconns, cap;
    pthread_t th;
};

static void drop_all(struct acceptor *a)
{
    for (size_t i = 0; i < a->nconns; i++) {
        (void)shutdown(a->conns[i], SHUT_RDWR);   /* the peer sees the end at once */
        close(a->conns[i]);
    }
    a->nconns = 0;
}

static void take(struct acceptor *a, int lfd)
{
    int c;
    while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        if (a->nconns == a->cap) {
            size_t cap = a->cap ? 2 * a->cap : 16;
            int *v = realloc(a->conns, cap * sizeof(*v));
            if (!v) {
                close(c);
                continue;
            }
            a->conns = v;
            a->cap = cap;
        }
        int d = dup(c);
        if (d >= 0)
            a->conns[a->nconns++] = d;
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        grpc_server_add_channel_from_fd(a->srv, c, creds);   /* owns c now */
        grpc_server_credentials_release(creds);
    }
}

static void *accept_loop(void *arg)
{
    struct acceptor *a = arg;
    size_t n = a->cfg->nsockets;
    struct pollfd *p = calloc(n, sizeof(*p));
    if (!p)
        return NULL;
    while (!plug_stop) {
        if (want_stop_serving) {
            want_stop_serving = 0;
            for (size_t i = 0; i < n; i++) {
                if (a->lfd[i] >= 0)
                    close(a->lfd[i]);   /* the file stays */
                a->lfd[i] = -1;
            }
            drop_all(a);
        }
        if (want_drop) {
            want_drop = 0;
            drop_all(a);
        }
        for (size_t i = 0; i < n; i++)
            p[i] = (struct pollfd){ .fd = a->lfd[i], .events = POLLIN };
        if (poll(p, n, 20) <= 0)
            continue;
        for (size_t i = 0; i < n; i++)
            if (p[i].revents & POLLIN)
                take(a, a->lfd[i]);
    }
    free(p);
    return NULL;
}

static struct acceptor acc;

int plug_fd_listen(const struct plug_cfg *cfg, grpc_server *srv)
{
    struct sigaction sa = { .sa_handler = on_usr };
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0 || sigaction(SIGUSR2, &sa, NULL) != 0)
        return -1;
    acc = (struct acceptor){ .cfg = cfg, .srv = srv };
    acc.lfd = calloc(cfg->nsockets, sizeof(int));
    if (!acc.lfd)
        return -1;
    for (size_t i = 0; i < cfg->nsockets; i++) {
        if ((acc.lfd[i] = plug_listen_unix(cfg->sockets[i])) < 0) {
            fprintf(stderr, "csi-test-plugin: %s: %s\n", cfg->sockets[i], strerror(errno));
            return -1;
        }
    }
    return -pthread_create(&acc.th, NULL, accept_loop, &acc);
}

void plug_fd_stop(const struct plug_cfg *cfg)
{
    if (!acc.lfd)
        return;
    pthread_join(acc.th, NULL);
    drop_all(&acc);
    for (size_t i = 0; i < cfg->nsockets; i++) {
        if (acc.lfd[i] >= 0)
            close(acc.lfd[i]);
        (void)unlink(cfg->sockets[i]);   /* a clean shutdown removes it */
    }
    free(acc.lfd);
    free(acc.conns);
    acc.lfd = NULL;
}

/* The test fd store. See holder.h. */
#include "tests/lib/holder.h"
#include "tests/lib/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* With h->mu held. */
static void drop(struct holder *h, const char *name)
{
    for (int k = 0; k < HD_MAXFDS; k++)
        if (h->fds[k] >= 0 && !strcmp(h->names[k], name)) {
            close(h->fds[k]);
            h->fds[k] = -1;
        }
}

static void keep(struct holder *h, const char *name, int fd)
{
    drop(h, name);                   /* systemd keeps one per file; a name once here */
    for (int k = 0; k < HD_MAXFDS; k++)
        if (h->fds[k] < 0) {
            h->fds[k] = fd;
            snprintf(h->names[k], sizeof(h->names[k]), "%s", name);
            return;
        }
    close(fd);
}

static void message(struct holder *h, char *msg, int *fds, int nfds)
{
    char name[64] = "stored";
    bool store = false, remove = false;
    for (char *line = strtok(msg, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strcmp(line, "READY=1"))
            h->ready++;
        else if (!strcmp(line, "RELOADING=1"))
            h->reloading++;
        else if (!strcmp(line, "STOPPING=1"))
            h->stopping++;
        else if (!strcmp(line, "FDSTORE=1"))
            store = true;
        else if (!strcmp(line, "FDSTOREREMOVE=1"))
            remove = true;
        else if (!strncmp(line, "FDNAME=", 7))
            snprintf(name, sizeof(name), "%s", line + 7);
    }
    if (remove)
        drop(h, name);
    for (int k = 0; k < nfds; k++) {
        if (store)
            keep(h, name, fds[k]);
        else
            close(fds[k]);
    }
    pthread_cond_broadcast(&h->cv);
}

static void *reader(void *arg)
{
    struct holder *h = arg;
    for (;;) {
        struct pollfd p = { .fd = h->sfd, .events = POLLIN };
        pthread_mutex_lock(&h->mu);
        bool run = h->running;
        pthread_mutex_unlock(&h->mu);
        if (!run)
            break;
        if (poll(&p, 1, 50) <= 0)
            continue;
        char buf[4096];
        union {
            struct cmsghdr c;
            char space[CMSG_SPACE(sizeof(int) * HD_MAXFDS) + 256];
        } ctl;
        struct iovec iov = { buf, sizeof(buf) - 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                            .msg_controllen = sizeof(ctl) };
        /* Received and handled under mu: see drain. */
        pthread_mutex_lock(&h->mu);
        ssize_t n = recvmsg(h->sfd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            pthread_mutex_unlock(&h->mu);
            continue;
        }
        buf[n] = '\0';
        int fds[HD_MAXFDS], nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) &&
                                   nfds < HD_MAXFDS; k++)
                    memcpy(&fds[nfds++], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
        message(h, buf, fds, nfds);
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

int hd_start(struct holder *h)
{
    memset(h, 0, sizeof(*h));
    for (int k = 0; k < HD_MAXFDS; k++)
        h->fds[k] = -1;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->dir = tu_tmpdir("holder");
    if (!h->dir || asprintf(&h->sock, "%s/notify", h->dir) < 0)
        return -ENOMEM;
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", h->sock);
    h->sfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (h->sfd < 0 || bind(h->sfd, (struct sockaddr *)&a, sizeof(a)) < 0)
        return -errno;
    h->running = true;
    if (pthread_create(&h->th, NULL, reader, h) != 0) {
        h->running = false;
        return -EAGAIN;
    }
    return 0;
}

pid_t hd_spawn(struct holder *h, char *const argv[])
{
    int fds[HD_MAXFDS], n = 0;
    char names[HD_MAXFDS * 65] = "";
    pthread_mutex_lock(&h->mu);
    for (int k = 0; k < HD_MAXFDS; k++)
        if (h->fds[k] >= 0) {
            fds[n++] = h->fds[k];
            if (*names)
                strcat(names, ":");
            strcat(names, h->names[k]);
        }
    pthread_mutex_unlock(&h->mu);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* the stored fds at 3, 4...: dups above them first (no clash) */
        int tmp[HD_MAXFDS];
        for (int k = 0; k < n; k++)
            tmp[k] = fcntl(fds[k], F_DUPFD, 3 + n);
        for (int k = 0; k < n; k++)
            if (tmp[k] < 0 || dup2(tmp[k], 3 + k) < 0)
                _exit(126);
        for (int k = 0; k < n; k++)
            close(tmp[k]);
        for (int fd = 3 + n; fd < 1024; fd++)
            close(fd);
        int lfd = h->log ? open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
        if (lfd >= 0 && lfd != 2) {
            dup2(lfd, 2);
            close(lfd);
        }
        char num[32];
        snprintf(num, sizeof(num), "%ld", (long)getpid());
        setenv("NOTIFY_SOCKET", h->sock, 1);
        if (n) {
            setenv("LISTEN_PID", num, 1);
            snprintf(num, sizeof(num), "%d", n);
            setenv("LISTEN_FDS", num, 1);
            setenv("LISTEN_FDNAMES", names, 1);
        } else {
            unsetenv("LISTEN_PID");
            unsetenv("LISTEN_FDS");
            unsetenv("LISTEN_FDNAMES");
        }
        execv(argv[0], argv);
        _exit(127);
    }
    tu_note_pid(pid);
    pthread_mutex_lock(&h->mu);
    h->main_pid = pid;
    pthread_mutex_unlock(&h->mu);
    return pid;
}

bool hd_wait_ready(struct holder *h, unsigned n, int ms)
{
    int64_t end = tu_now_ms() + tu_ms(ms);
    pthread_mutex_lock(&h->mu);
    while (h->ready < n && tu_now_ms() < end) {
        pthread_mutex_unlock(&h->mu);
        tu_sleep_ms(5);
        pthread_mutex_lock(&h->mu);
    }
    bool ok = h->ready >= n;
    pthread_mutex_unlock(&h->mu);
    return ok;
}

/* With h->mu held: wait until the reader has handled every datagram on
 * the socket (a liveness bound of tu_ms(10 s)). A process that was reaped,
 * or whose later message was seen, has every message it sent queued or
 * handled; a datagram is taken off the queue and handled under mu, so an
 * empty queue seen under mu means all handled. */
static void drain(struct holder *h)
{
    int64_t end = tu_now_ms() + tu_ms(10000);
    int q = 0;
    while (h->running && ioctl(h->sfd, SIOCINQ, &q) == 0 && q > 0 && tu_now_ms() < end) {
        pthread_mutex_unlock(&h->mu);
        tu_sleep_ms(5);
        pthread_mutex_lock(&h->mu);
    }
}

int hd_fd(struct holder *h, const char *name)
{
    int fd = -1;
    pthread_mutex_lock(&h->mu);
    drain(h);
    for (int k = 0; k < HD_MAXFDS; k++)
        if (h->fds[k] >= 0 && !strcmp(h->names[k], name))
            fd = h->fds[k];
    pthread_mutex_unlock(&h->mu);
    return fd;
}

int hd_nfds(struct holder *h)
{
    int n = 0;
    pthread_mutex_lock(&h->mu);
    drain(h);
    for (int k = 0; k < HD_MAXFDS; k++)
        n += h->fds[k] >= 0;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void hd_put(struct holder *h, const char *name, int fd)
{
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    pthread_mutex_lock(&h->mu);
    if (d >= 0)
        keep(h, name, d);
    pthread_mutex_unlock(&h->mu);
}

bool hd_reap(pid_t pid, int ms)
{
    int64_t end = tu_now_ms() + tu_ms(ms);
    int st;
    while (tu_now_ms() < end) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            return true;
        tu_sleep_ms(1);
    }
    return false;
}

void hd_stop(struct holder *h)
{
    if (h->running) {
        pthread_mutex_lock(&h->mu);
        h->running = false;
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->th, NULL);
    }
    for (int k = 0; k < HD_MAXFDS; k++)
        if (h->fds[k] >= 0)
            close(h->fds[k]);
    if (h->sfd > 0)
        close(h->sfd);
    if (h->dir)
        tu_rmrf(h->dir);
    free(h->dir);
    free(h->sock);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    memset(h, 0, sizeof(*h));
}

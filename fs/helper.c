/* The notification helper (DESIGN 13; fs.h fs_helper_start).
 *
 * An entry invalidation (FUSE_NOTIFY_INVAL_ENTRY; FUSE_NOTIFY_DELETE alike)
 * takes the directory's lock in the kernel (fuse_reverse_inval_entry). A
 * caller whose request csifs read holds that lock until it is answered: a
 * thread of csifs writing the notification then sleeps in D state, and a
 * SIGKILLed csifs stays an unreapable zombie until that request is answered
 * or the connection aborted -- so no service manager would ever restart it.
 * The helper is a process of its own that holds nothing but the /dev/fuse
 * fd and the read end of a pipe: the notifier thread (inval.c) writes each
 * notification's bytes (struct fuse_out_header, fuse_notify_inval_entry_out,
 * the name and its NUL; or fuse_notify_inval_inode_out) to the pipe, the helper writes them to the
 * connection. A stuck write holds up only the helper; csifs's death is
 * prompt. The helper dies with csifs (PR_SET_PDEATHSIG: SIGKILL, delivered
 * once its write returns: when a successor answers the resent request), or
 * at the pipe's end of file (its write end is close-on-exec: an upgrade in
 * place starts its own helper, and reaps the old one, named in
 * CSIFS_NOTIFY_HELPER). */
#include "fs/node.h"

#include "base/defaults.h"
#include "base/log.h"
#include "base/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HELPER_ENV "CSIFS_NOTIFY_HELPER"   /* the helper of this pid's image */
#define HELPER_MSG_MAX 512                 /* header, arg, a name of 255 and NUL */
#define HELPER_STOP_MS 1000                /* then its connection is aborted */

/* read exactly len bytes: 1, 0 at end of file, -1 on error */
static int read_all(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n == 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
        got += n > 0 ? (size_t)n : 0;
    }
    return 1;
}

/* The helper process: only async-signal-safe calls (forked from threads). */
static _Noreturn void helper_main(int in, int dev, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(0);
    prctl(PR_SET_NAME, "csifs-notify");
    struct sigaction ign = { .sa_handler = SIG_IGN };
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE };
    for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
        sigaction(sigs[k], &ign, NULL);      /* they are csifs's, not ours */
    int nul = open("/dev/null", O_RDWR);
    for (int k = 0; k < 3 && nul >= 0; k++)
        dup2(nul, k);
    int lo = in < dev ? in : dev, hi = in < dev ? dev : in;
    if (lo > 3)
        close_range(3, (unsigned)lo - 1, 0);
    if (hi > lo + 1)
        close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
    close_range((unsigned)hi + 1, ~0u, 0);   /* nul too, unless it is 0-2 */
    unsigned char msg[HELPER_MSG_MAX];
    struct fuse_out_header *h = (void *)msg;
    for (;;) {
        if (read_all(in, msg, sizeof(*h)) <= 0 || h->len < sizeof(*h) || h->len > sizeof(msg) ||
            read_all(in, msg + sizeof(*h), h->len - sizeof(*h)) <= 0)
            _exit(0);
        /* -ENOENT: nothing cached; anything else: nothing to do either */
        (void)!write(dev, msg, h->len);
    }
}

static void *reap_old(void *arg)
{
    pid_t pid = (pid_t)(intptr_t)arg;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* An upgrade in place left its helper to this image: reap it once it ends
 * (its pipe closed at the exec; it may still finish a stuck write). */
static void adopt_old(void)
{
    const char *v = getenv(HELPER_ENV);
    long old = v ? strtol(v, NULL, 10) : 0;
    pthread_t th;
    if (old > 0 && csifs_thread_start(&th, "csifs-reap", reap_old, (void *)(intptr_t)old) == 0)
        pthread_detach(th);
}

/* fuse_connection: NN of the fd (0 unknown): aborted if the helper is stuck
 * at a stop. */
static unsigned conn_of(int fd)
{
    char path[64], line[128];
    unsigned conn = 0;
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof(line), f) && sscanf(line, "fuse_connection: %u", &conn) != 1)
        ;
    if (f)
        fclose(f);
    return conn;
}

int fs_helper_start(struct fs *fs)
{
    adopt_old();
    int p[2], dev = fuse_session_fd(fs->se);
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        helper_main(p[0], dev, parent);
    int e = errno;
    close(p[0]);
    if (pid > 0)                     /* the notifier never blocks on it (inval.c) */
        fcntl(p[1], F_SETFL, O_NONBLOCK);
    if (pid < 0) {
        close(p[1]);
        csifs_log(LOG_WARNING, "no notification helper: fork: %s (a kill may wait for the "
                  "kernel)", strerror(e));
        return -e;
    }
    char v[32];
    snprintf(v, sizeof(v), "%ld", (long)pid);
    setenv(HELPER_ENV, v, 1);        /* for the next image, after an upgrade */
    fs->helper_conn = conn_of(dev);
    fs->helper_pid = pid;
    fs->helper_fd = p[1];
    return 0;
}

/* One notification (code, its argument, a name with its NUL or none) to
 * the helper's pipe, under PIPE_BUF: all or nothing, never blocking. */
static int helper_send(struct fs *fs, int code, const void *arg, size_t arglen,
                       const char *name, size_t namelen)
{
    struct fuse_out_header h = { .len = (uint32_t)(sizeof(h) + arglen + (name ? namelen + 1 : 0)),
                                 .error = code };
    if (fs->helper_fd < 0 || h.len > HELPER_MSG_MAX)
        return -ENOTCONN;
    struct iovec iov[3] = { { &h, sizeof(h) }, { (void *)arg, arglen },
                            { (void *)name, name ? namelen + 1 : 0 } };
    ssize_t n;
    while ((n = writev(fs->helper_fd, iov, 3)) < 0 && errno == EINTR)
        ;
    return n == (ssize_t)h.len ? 0 : n < 0 ? -errno : -EIO;   /* -EAGAIN: full */
}

int fs_helper_inval_entry(struct fs *fs, fuse_ino_t parent, const char *name)
{
    size_t len = strlen(name);
    struct fuse_notify_inval_entry_out arg = { .parent = parent, .namelen = (uint32_t)len };
    return helper_send(fs, FUSE_NOTIFY_INVAL_ENTRY, &arg, sizeof(arg), name, len);
}

int fs_helper_inval_inode(struct fs *fs, fuse_ino_t ino)
{
    struct fuse_notify_inval_inode_out arg = { .ino = ino, .off = 0, .len = 0 };
    return helper_send(fs, FUSE_NOTIFY_INVAL_INODE, &arg, sizeof(arg), NULL, 0);
}

void fs_helper_stop(struct fs *fs)
{
    if (fs->helper_fd < 0)
        return;
    close(fs->helper_fd);            /* its end of file */
    fs->helper_fd = -1;
    int64_t end = csifs_mono_ms() + HELPER_STOP_MS;
    pid_t r;
    while ((r = waitpid(fs->helper_pid, NULL, WNOHANG)) == 0 && csifs_mono_ms() < end) {
        struct timespec ts = { 0, 2 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (r != 0 || !fs->helper_conn)
        return;
    /* stuck on a lock held by a request no one will answer now: its fd
     * keeps the connection; end it (the helper then dies of PDEATHSIG) */
    csifs_log(LOG_WARNING, "the notification helper (pid %ld) is stuck: aborting FUSE "
              "connection %u", (long)fs->helper_pid, fs->helper_conn);
    char path[96];
    snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u/abort", fs->helper_conn);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "1", 1) != 1)
        csifs_log(LOG_WARNING, "%s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

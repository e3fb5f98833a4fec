/* store_check in a child process (store.h): LMDB trusts its pages, and damage
 * the page walk does not know can still crash it, or trip one of its
 * assertions (abort) on the write path; in a child, such a crash is a
 * refusal instead of the end of csifs. store_check_forked runs store_check,
 * then the trial of the first write (store_try_write), each in a child. The
 * child sends rc and the message back on a pipe (one write each, under
 * PIPE_BUF) and leaves with _exit() (no atexit, no stdio). */
#include "registry/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void child(int fd, store_check_fn *check, const char *dir, char *err, size_t errlen)
{
    /* A crash must end the child by its signal, for the parent to see: a
     * sanitizer's handlers (ASan) would turn it into an exit code. */
    static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
    for (size_t k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++)
        signal(fatal[k], SIG_DFL);
    struct rlimit none = { 0, 0 };   /* a refusal, not a core file of csifs */
    setrlimit(RLIMIT_CORE, &none);
    int rc = check(dir, err, errlen);
    bool ok = write(fd, &rc, sizeof(rc)) == (ssize_t)sizeof(rc) &&
              write(fd, err, strlen(err)) == (ssize_t)strlen(err);
    _exit(ok ? 0 : 1);
}

/* The child's rc and message from fd: 0, or -EIO when they are incomplete. */
static int read_reply(int fd, int *rc, char *err, size_t errlen)
{
    size_t got = 0;
    ssize_t n = 0;
    while (got < sizeof(*rc) && (n = read(fd, (char *)rc + got, sizeof(*rc) - got)) > 0)
        got += (size_t)n;
    if (got < sizeof(*rc))
        return -EIO;
    for (got = 0; got + 1 < errlen && (n = read(fd, err + got, errlen - 1 - got)) > 0;)
        got += (size_t)n;
    err[got] = '\0';
    return n < 0 ? -EIO : 0;
}

int store_run_forked(store_check_fn *check, const char *doing, const char *dir, char *err,
                     size_t errlen)
{
    char none[1];
    if (!err || !errlen) {
        err = none;
        errlen = sizeof(none);
    }
    err[0] = '\0';
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return store_fail(err, errlen, -errno, "%s: pipe: %s", dir, strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        child(p[1], check, dir, err, errlen);
    }
    int e = errno, rc = 0, status = 0;
    close(p[1]);
    bool replied = pid > 0 && read_reply(p[0], &rc, err, errlen) == 0;
    close(p[0]);
    if (pid < 0)
        return store_fail(err, errlen, -e, "%s: fork: %s", dir, strerror(e));
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return store_fail(err, errlen, -errno, "%s: waitpid: %s", dir, strerror(errno));
    if (WIFSIGNALED(status))
        return store_fail(err, errlen, -EUCLEAN,
                          "%s/%s: LMDB died of signal %d (%s) %s: the LMDB "
                          "environment is corrupted", dir, STORE_DATA, WTERMSIG(status),
                          strsignal(WTERMSIG(status)), doing);
    if (!replied)                    /* its exit code is valgrind's under valgrind */
        return store_fail(err, errlen, -EIO, "%s: the store check process failed", dir);
    return rc;
}

int store_check_forked(const char *dir, char *err, size_t errlen)
{
    int rc = store_run_forked(store_check, "reading it", dir, err, errlen);
    if (rc == 0)
        rc = store_run_forked(store_try_write, "in a trial of the write that opening it "
                              "makes", dir, err, errlen);
    return rc;
}

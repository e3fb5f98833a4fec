/* store_check in a child process (store.h): LMDB trusts its pages, and damage
 * the page walk does not know can still crash it, or trip one of its
 * assertions (abort) on the write path; in a child, such a crash is a
 * refusal instead of the end of csifs. store_check_forked runs store_check,
 * then the trial of the first write (store_try_write), in one child (one
 * fork on the way to serving, not two: the takeover rows). The child sends
 * the index of each step as it starts it (one byte; a crash is named after
 * the last one), then STEP_END, rc and the message (one write each, under
 * PIPE_BUF) and leaves with _exit() (no atexit, no stdio). */
#include "registry/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

struct step {
    store_check_fn *fn;
    const char *doing;               /* "reading it": for a child killed in it */
};

#define STEP_END 0xff                /* no more steps: rc and the message follow */

static void child(int fd, const struct step *steps, size_t n, const char *dir, char *err,
                  size_t errlen)
{
    /* A crash must end the child by its signal, for the parent to see: a
     * sanitizer's handlers (ASan) would turn it into an exit code. */
    static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
    for (size_t k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++)
        signal(fatal[k], SIG_DFL);
    struct rlimit none = { 0, 0 };   /* a refusal, not a core file of csifs */
    setrlimit(RLIMIT_CORE, &none);
    int rc = 0;
    bool ok = true;
    for (size_t k = 0; k < n && rc == 0 && ok; k++) {
        unsigned char at = (unsigned char)k;
        ok = write(fd, &at, 1) == 1;
        rc = ok ? steps[k].fn(dir, err, errlen) : 0;
    }
    unsigned char end = STEP_END;
    ok = ok && write(fd, &end, 1) == 1 && write(fd, &rc, sizeof(rc)) == (ssize_t)sizeof(rc) &&
         write(fd, err, strlen(err)) == (ssize_t)strlen(err);
    _exit(ok ? 0 : 1);
}

/* The child's steps, rc and message from fd: 0, or -EIO when they are
 * incomplete; *at is the last step it started. */
static int read_reply(int fd, size_t *at, int *rc, char *err, size_t errlen)
{
    size_t got = 0;
    ssize_t n = 0;
    unsigned char b = 0;
    while ((n = read(fd, &b, 1)) == 1 && b != STEP_END)
        *at = b;
    if (n != 1)
        return -EIO;
    while (got < sizeof(*rc) && (n = read(fd, (char *)rc + got, sizeof(*rc) - got)) > 0)
        got += (size_t)n;
    if (got < sizeof(*rc))
        return -EIO;
    for (got = 0; got + 1 < errlen && (n = read(fd, err + got, errlen - 1 - got)) > 0;)
        got += (size_t)n;
    err[got] = '\0';
    return n < 0 ? -EIO : 0;
}

static int run_steps(const struct step *steps, size_t nsteps, const char *dir, char *err,
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
        child(p[1], steps, nsteps, dir, err, errlen);
    }
    int e = errno, rc = 0, status = 0;
    size_t at = 0;
    close(p[1]);
    bool replied = pid > 0 && read_reply(p[0], &at, &rc, err, errlen) == 0;
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
                          strsignal(WTERMSIG(status)), steps[at < nsteps ? at : 0].doing);
    if (!replied)                    /* its exit code is valgrind's under valgrind */
        return store_fail(err, errlen, -EIO, "%s: the store check process failed", dir);
    return rc;
}

int store_run_forked(store_check_fn *check, const char *doing, const char *dir, char *err,
                     size_t errlen)
{
    const struct step one[] = { { check, doing } };
    return run_steps(one, 1, dir, err, errlen);
}

int store_check_forked(const char *dir, char *err, size_t errlen)
{
    static const struct step steps[] = {
        { store_check, "reading it" },
        { store_try_write, "in a trial of the write that opening it makes" },
    };
    return run_steps(steps, sizeof(steps) / sizeof(steps[0]), dir, err, errlen);
}

/* Upgrade in place (DESIGN 13): the running image execs the binary at the
 * path it was started from, with the FUSE fd and the state memfd passed as
 * the service manager passes them, same pid. See takeover.h. */
#include "takeover/takeover.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#define TK_REEXEC_ENV "CSIFS_REEXEC"

static char exe[4096];
static char **args;

void tk_upgrade_prepare(char **argv)
{
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    args = argv;
}

bool tk_upgraded(void)
{
    const char *v = getenv(TK_REEXEC_ENV);
    bool up = v && !strcmp(v, "1");
    unsetenv(TK_REEXEC_ENV);
    return up;
}

int tk_upgrade_exec(int fuse_fd, int state_fd, const struct tk_named *more, size_t nmore)
{
    if (!*exe || !args)
        return -ENOENT;
    /* the fds from 3 on (copies first, above them all: any may be there now) */
    size_t n = 2 + nmore, len = strlen(TK_FD_FUSE ":" TK_FD_STATE) + 1;
    int *cp = calloc(n, sizeof(*cp));
    for (size_t k = 0; k < nmore; k++)
        len += strlen(more[k].name) + 1;
    char *names = cp ? malloc(len) : NULL;
    if (!names) {
        free(cp);
        return -ENOMEM;
    }
    strcpy(names, TK_FD_FUSE ":" TK_FD_STATE);
    int rc = 0, base = SD_LISTEN_FDS_START + (int)n;
    for (size_t k = 0; k < n && rc == 0; k++) {
        int fd = k == 0 ? fuse_fd : k == 1 ? state_fd : more[k - 2].fd;
        if ((cp[k] = fcntl(fd, F_DUPFD_CLOEXEC, base)) < 0)
            rc = -errno;
        if (k >= 2)
            strcat(strcat(names, ":"), more[k - 2].name);
    }
    for (size_t k = 0; k < n && rc == 0; k++)
        if (dup2(cp[k], SD_LISTEN_FDS_START + (int)k) < 0)
            rc = -errno;
    for (size_t k = 0; k < n; k++)
        if (cp[k] > 0)
            close(cp[k]);
    free(cp);
    char pid[32], num[32];
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    snprintf(num, sizeof(num), "%zu", n);
    if (rc == 0 && (setenv("LISTEN_FDS", num, 1) < 0 || setenv("LISTEN_FDNAMES", names, 1) < 0 ||
                    setenv("LISTEN_PID", pid, 1) < 0 || setenv(TK_REEXEC_ENV, "1", 1) < 0))
        rc = -errno;
    free(names);
    if (rc == 0)
        execv(exe, args);
    return rc < 0 ? rc : -errno;
}

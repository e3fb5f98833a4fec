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

int tk_upgrade_exec(int fuse_fd, int state_fd)
{
    if (!*exe || !args)
        return -ENOENT;
    /* the fds at 3 and 4 (copies first: either may be 3 or 4 now) */
    int a = fcntl(fuse_fd, F_DUPFD_CLOEXEC, 10), b = fcntl(state_fd, F_DUPFD_CLOEXEC, 10);
    if (a < 0 || b < 0 || dup2(a, SD_LISTEN_FDS_START) < 0 ||
        dup2(b, SD_LISTEN_FDS_START + 1) < 0)
        return -errno;
    close(a);
    close(b);
    char pid[32];
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    if (setenv("LISTEN_FDS", "2", 1) < 0 || setenv("LISTEN_FDNAMES", TK_FD_FUSE ":" TK_FD_STATE, 1) < 0 ||
        setenv("LISTEN_PID", pid, 1) < 0 || setenv(TK_REEXEC_ENV, "1", 1) < 0)
        return -errno;
    execv(exe, args);
    return -errno;
}

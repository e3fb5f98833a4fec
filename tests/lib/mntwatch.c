#include "tests/lib/mntwatch.h"
#include "tests/lib/testutil.h"
#include "cmd/mountpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_STUCK 64
static pid_t stuck[MAX_STUCK];

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unoctal(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

int mw_conn(const char *mnt)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char line[8192];
    int conn = -ENOENT;
    while (fgets(line, sizeof(line), f)) {
        unsigned maj, min;
        char point[4096], *sep = strstr(line, " - ");
        if (!sep || sscanf(line, "%*d %*d %u:%u %*s %4095s", &maj, &min, point) != 3)
            continue;
        unoctal(point);
        if (strcmp(point, mnt) == 0 && strncmp(sep + 3, "fuse", 4) == 0)
            conn = (int)min;    /* later lines are mounted on top */
    }
    fclose(f);
    return conn;
}

int mw_abort(int conn)
{
    return conn < 0 ? -ENOENT : csifs_conn_abort((unsigned)conn);
}

void mw_unmount_all(const char *mnt)
{
    for (int k = 0, conn; k < 8 && (conn = mw_conn(mnt)) >= 0; k++) {
        (void)mw_abort(conn);
        if (umount2(mnt, MNT_DETACH) < 0)
            break;
    }
    (void)umount2(mnt, MNT_DETACH);   /* EINVAL: nothing mounted there */
}

int mw_wait(pid_t pid, int64_t ms)
{
    int64_t end = tu_now_ms() + ms;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -errno;
        if (tu_now_ms() > end)
            return -ETIMEDOUT;
        tu_sleep_ms(2);
    }
}

int mw_child(int (*fn)(void *arg), void *arg, int64_t ms)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0)
        _exit(fn(arg) & 0xff);
    int st = mw_wait(pid, ms);
    if (st == -ETIMEDOUT) {
        kill(pid, SIGKILL);
        if (mw_wait(pid, 200) == -ETIMEDOUT)
            for (int i = 0; i < MAX_STUCK; i++)
                if (!stuck[i]) {
                    stuck[i] = pid;
                    break;
                }
        return -ETIMEDOUT;
    }
    if (st < 0)
        return st;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int mw_reap_stuck(int64_t ms)
{
    int left = 0;
    for (int i = 0; i < MAX_STUCK; i++) {
        if (!stuck[i])
            continue;
        if (mw_wait(stuck[i], ms) == -ETIMEDOUT)
            left++;
        else
            stuck[i] = 0;
    }
    return left;
}

pid_t mw_spawn_csifs(const char *mnt, const char *state, const char *logpath)
{
    char opts[4200], bin[512];
    snprintf(opts, sizeof(opts), "state=%s", state);
    snprintf(bin, sizeof(bin), "%s/csifs", tu_build_dir());
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0 || dup2(fd, 1) < 0)
            _exit(126);
        execl(bin, "csifs", "-f", "-o", opts, mnt, (char *)NULL);
        _exit(127);
    }
    tu_note_pid(pid);
    return pid;
}

int mw_probe_fuse(void *mnt)
{
    struct statfs sfs;
    return statfs(mnt, &sfs) == 0 && sfs.f_type == 0x65735546 ? 0 : 1; /* FUSE_SUPER_MAGIC */
}

/* The takeover suites' fixture. See takeover_fix.h. */
#include "tests/lib/takeover_fix.h"

#include "tests/lib/mntwatch.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TX_OPTS "heartbeat=100ms"
#define TX_PIDS 8

struct holder tx_hd, tx_hd2;
char *tx_dir, tx_mnt[4096], tx_state[4096], tx_log[4096];
char tx_opts[256] = TX_OPTS;
static char bin[4096];
static pid_t pids[TX_PIDS];

void tx_keep_pid(pid_t pid)
{
    for (int k = 0; pid > 0 && k < TX_PIDS; k++)
        if (!pids[k]) {
            pids[k] = pid;
            return;
        }
}

void tx_forget_pid(pid_t pid)
{
    for (int k = 0; k < TX_PIDS; k++)
        if (pids[k] == pid)
            pids[k] = 0;
}

pid_t tx_start(struct holder *h, const char *m, const char *s)
{
    char opts[4400];
    snprintf(opts, sizeof(opts), "state=%s,%s", s, tx_opts);
    char *argv[] = { bin, "-f", "-o", opts, (char *)m, NULL };
    h->log = tx_log;
    pid_t pid = hd_spawn(h, argv);
    tx_keep_pid(pid);
    return pid;
}

void tx_kill_reap(pid_t pid, int sig)
{
    kill(pid, sig);
    hd_reap(pid, 10000);
    tx_forget_pid(pid);
}

bool tx_is_mount_root(const char *m)
{
    struct stat st;
    return stat(m, &st) == 0 && st.st_ino == 1;
}

int tx_setup(void)
{
    tx_dir = tu_tmpdir("takeover");
    snprintf(tx_mnt, sizeof(tx_mnt), "%s/mnt", tx_dir);
    snprintf(tx_state, sizeof(tx_state), "%s/state", tx_dir);
    snprintf(tx_log, sizeof(tx_log), "%s/csifs.log", tx_dir);
    snprintf(bin, sizeof(bin), "%s/csifs", tu_build_dir());
    mkdir(tx_mnt, 0755);
    tu_note("mnt", tx_mnt);
    int rc = hd_start(&tx_hd);
    return rc < 0 ? rc : hd_start(&tx_hd2);
}

void tx_teardown(void)
{
    char cmd[8400];
    snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", tx_log);
    (void)!system(cmd);
    char m2[4200];
    snprintf(m2, sizeof(m2), "%s2", tx_mnt);
    /* before the kills: a wedged mount frees whoever waits on it; after:
     * what a successor mounted meanwhile */
    mw_unmount_all(tx_mnt);
    mw_unmount_all(m2);
    for (int k = 0; k < TX_PIDS; k++)
        if (pids[k] > 0)
            tx_kill_reap(pids[k], SIGKILL);
    tp_kill_all();
    hd_stop(&tx_hd);
    hd_stop(&tx_hd2);
    mw_unmount_all(tx_mnt);
    mw_unmount_all(m2);
    if (tx_dir)
        tu_rmrf(tx_dir);
    free(tx_dir);
    tx_dir = NULL;
    snprintf(tx_opts, sizeof(tx_opts), TX_OPTS);
}

int tx_sh(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tu_vsh(tx_mnt, fmt, ap);
    va_end(ap);
    return rc;
}

bool tx_log_has(const char *pattern)
{
    char cmd[8400];
    snprintf(cmd, sizeof(cmd), "grep -q -- '%s' '%s'", pattern, tx_log);
    return system(cmd) == 0;
}

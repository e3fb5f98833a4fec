/* Spawn and stop csi-test-plugin processes (fork + exec) for tests.
 *
 * Every started plugin is remembered until it is reaped, so a test's fini
 * can call tp_kill_all() and leave nothing behind even when the test failed;
 * plugins also get SIGKILL when the thread that started them dies. Bounds
 * are liveness deadlines, scaled by tu_ms().
 */
#ifndef CSIFS_PLUGIN_PROC_H
#define CSIFS_PLUGIN_PROC_H

#include <sys/types.h>

struct tp_proc {
    pid_t pid;        /* 0 once reaped */
    int out;          /* read end of the plugin's stdout, -1 when closed */
    int status;       /* wait status, once reaped */
};

/* Start <build>/csi-test-plugin with the arguments (NULL-terminated) and wait
 * (tu_ms(10000)) for its first "READY <socket>" line: every socket of the
 * plugin listens by then. 0; -ECHILD if it exited first (p->status says
 * how, p->pid = 0); -ETIMEDOUT (it is killed); or another -errno. */
int tp_start(struct tp_proc *p, const char *arg, ...) __attribute__((sentinel));
int tp_startv(struct tp_proc *p, const char *const *argv);
/* SIGTERM, reap (SIGKILL after tu_ms(5000)). The wait status, or -errno. */
int tp_stop(struct tp_proc *p);
/* SIGKILL and reap. The wait status, or -errno. */
int tp_kill(struct tp_proc *p);
/* Reap a plugin that exits by itself within tu_ms(timeout_ms): the wait
 * status; -ETIMEDOUT (still running). */
int tp_wait(struct tp_proc *p, int timeout_ms);
/* SIGKILL and reap every plugin started and not yet reaped. */
void tp_kill_all(void);

#endif

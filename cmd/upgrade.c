/* SIGUSR2: the steps of an upgrade in place that run while the FUSE loop
 * still serves (upgrade.h). */
#include "cmd/upgrade.h"
#include "base/defaults.h"
#include "base/log.h"
#include "cluster/view.h"
#include "csi/prober.h"
#include "fs/fs.h"
#include "registry/registry.h"
#include "base/thread.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

static struct {
    struct csifs_upgrade u;
    pthread_t th;                    /* the upgrade's */
    sem_t go;                        /* posted by the handler, or to end */
    bool started;
    volatile sig_atomic_t asked;
    bool quit, done;                 /* atomic */
} up;

static void on_usr2(int sig)
{
    (void)sig;
    if (!up.asked) {                 /* a later one does nothing */
        up.asked = 1;
        sem_post(&up.go);
    }
}

/* Steps 1 and 2 (upgrade.h), then end the loop. */
static void steps(void)
{
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%lld", (long long)csifs_mono_us());
    csifs_log(LOG_NOTICE, "upgrade: SIGUSR2: committing requests are held for the new "
              "image; the prober stops");
    unsigned held = fs_hold_commits(up.u.fs);
    cl_view_stop(up.u.view);
    csi_prober_stop(up.u.pr);
    reg_quiesce(up.u.reg);
    held = fs_hold_commits(up.u.fs);   /* none is taken any more: the count */
    csifs_log(LOG_INFO, "upgrade: the registry is idle; committing requests held for the "
              "new image: %u", held);
    __atomic_store_n(&up.done, true, __ATOMIC_RELEASE);
}

static void *upgrader(void *arg)
{
    (void)arg;
    while (sem_wait(&up.go) < 0 && errno == EINTR)
        ;
    if (!__atomic_load_n(&up.quit, __ATOMIC_ACQUIRE)) {
        steps();
        fs_loop_break(up.u.fs);      /* wakes the loop wherever it is */
    }
    return NULL;
}

int csifs_upgrade_catch(const struct csifs_upgrade *u)
{
    up.u = *u;
    if (sem_init(&up.go, 0, 0) < 0)
        return -errno;
    int rc = csifs_thread_start(&up.th, "csifs-upgrade", upgrader, NULL);
    if (rc < 0) {
        sem_destroy(&up.go);
        csifs_log(LOG_WARNING, "upgrade: no thread for SIGUSR2: %s (SIGUSR2 is not caught)",
                  strerror(-rc));
        return rc;
    }
    up.started = true;
    struct sigaction sa = { .sa_handler = on_usr2 };   /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    return 0;
}

bool csifs_upgrade_end(void)
{
    if (!up.started)
        return false;
    __atomic_store_n(&up.quit, true, __ATOMIC_RELEASE);
    up.asked = 1;                    /* a later SIGUSR2 posts nothing */
    sem_post(&up.go);                /* a thread still waiting ends */
    pthread_join(up.th, NULL);
    up.started = false;              /* go stays: the handler may still run */
    return __atomic_load_n(&up.done, __ATOMIC_ACQUIRE);
}

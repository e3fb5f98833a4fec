/* thread: see thread.h. */
#include "base/thread.h"

int csifs_thread_start(pthread_t *th, const char *name, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(th, NULL, fn, arg);
    if (rc != 0)
        return -rc;
    /* ERANGE (a name too long): the thread runs the same, under the
     * process's name (fs_daemon's threads_are_named catches it). */
    (void)pthread_setname_np(*th, name);
    return 0;
}

/* thread: csifs's threads, started with a name. */
#ifndef CSIFS_THREAD_H
#define CSIFS_THREAD_H

#include <pthread.h>

/* pthread_create(th, fn, arg), then the thread's name: `csifs-` and what
 * it does, at most 15 bytes in all (the kernel's comm: `top -H`,
 * /proc/PID/task/TID/comm). 0 or a negative errno; a name the kernel
 * refuses is no error. */
int csifs_thread_start(pthread_t *th, const char *name, void *(*fn)(void *), void *arg);

#endif

/* A stand-in for systemd's fd store (DESIGN 13), for tests: it listens on
 * a NOTIFY_SOCKET (unix datagrams, as sd_notify(3) sends them), keeps the
 * fds that arrive with FDSTORE=1 under their FDNAME, honours
 * FDSTOREREMOVE=1, counts READY=1 and RELOADING=1, and starts csifs with
 * the stored fds passed as systemd passes them (LISTEN_FDS, LISTEN_FDNAMES,
 * LISTEN_PID set in the child before exec, the fds from 3 on). As systemd
 * does, the next process is started only once the old one was reaped
 * (hd_reap). A thread reads the socket. */
#ifndef CSIFS_HOLDER_H
#define CSIFS_HOLDER_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#define HD_MAXFDS 8

struct holder {
    char *dir, *sock;                /* temp dir, its socket */
    int sfd;
    pthread_t th;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fds[HD_MAXFDS];              /* stored fds (-1 free) */
    char names[HD_MAXFDS][64];
    unsigned ready, reloading, stopping;
    pid_t main_pid;                  /* the process started last, 0 none */
    const char *log;                 /* set: the children's stderr (appended) */
};

int hd_start(struct holder *h);
/* Fork and exec argv (argv[0] a path) with NOTIFY_SOCKET and the stored
 * fds; its pid (noted for clean-up) or a negative errno. */
pid_t hd_spawn(struct holder *h, char *const argv[]);
/* Wait (tu_ms(ms)) until READY=1 has arrived n times in all: true if so. */
bool hd_wait_ready(struct holder *h, unsigned n, int ms);
/* The stored fd named name (-1 none); how many fds are stored. Both first
 * handle every message already on the socket (a reaped process's last
 * FDSTOREREMOVE=1 counts). */
int hd_fd(struct holder *h, const char *name);
int hd_nfds(struct holder *h);
/* Store fd under name as if a process had sent it (dup'ed). */
void hd_put(struct holder *h, const char *name, int fd);
/* Wait for pid to exit (reaped), at most tu_ms(ms): true if it did. */
bool hd_reap(pid_t pid, int ms);
/* Stop the thread, close every stored fd, remove the dir. */
void hd_stop(struct holder *h);

#endif

/* A real etcd cluster for tests: n members (etcd 3.4) on free loopback
 * ports, data in a temp dir under /dev/shm (tmpfs: no fsync cost), each
 * member started and killed by its pid (noted with tu_note_pid), and
 * etcdctl against it. Optionally TLS: a CA, server and client certificates
 * made with openssl in the temp dir; members then require client
 * certificates. */
#ifndef CSIFS_ETCDRUN_H
#define CSIFS_ETCDRUN_H

#include <stdbool.h>
#include <sys/types.h>

#define TE_MAX 3

struct te {
    char *dir;
    int n;
    bool tls;
    pid_t pid[TE_MAX];
    int cport[TE_MAX], pport[TE_MAX];
    char url[TE_MAX][64];       /* client URLs */
    char endpoints[256];        /* "url,url,url" for etcdctl */
    char ca[300], cert[300], key[300];      /* tls: PEM files for clients */
};

/* Start n members and wait until every one answers etcdctl endpoint
 * health. 0 or -errno (the members' logs are <dir>/m<i>.log). */
int te_start(struct te *e, int n, bool tls);
/* Kill (SIGKILL) every member by pid, reap, remove the dir. Safe on a
 * half-started e. */
void te_stop(struct te *e);
/* Send sig to member i (SIGKILL: reaped and pid cleared). */
void te_signal(struct te *e, int i, int sig);
/* Start member i again on its data dir (after SIGKILL). */
int te_restart(struct te *e, int i);
/* The index of the leader (etcdctl endpoint status), or -1. */
int te_leader(struct te *e);
/* Run etcdctl (with the cluster's endpoints and TLS files) + args through
 * sh; its output (stdout and stderr) malloc'd into *out if out; the exit
 * status, or -errno. */
int te_ctl(struct te *e, char **out, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "--endpoints=... [--cacert= --cert= --key=]" for a command line. */
const char *te_ctl_flags(struct te *e);
/* A free TCP port on 127.0.0.1 (bound, read, closed). */
int te_free_port(void);

#endif

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

#include "tests/lib/fsrun.h"

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
 * health; a member that dies first (its port taken by another process
 * after it was picked) or a start past the deadline is tried again on
 * fresh ports, up to three times. 0 or -errno (the members' logs, of every
 * try, are <dir>/m<i>.log). */
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
/* A csifs "host" publishing to e: build/csifs -f in its own temp dir with
 * cluster=<each member>,cluster_node=<node>,cluster_ttl=2s[,extra]; its
 * stderr appended to <e->dir>/<node>.log. Restart: te_host_spawn again
 * after tf_kill/tf_halt (the same dir and state). Stop with tf_stop(&h->t). */
struct te_host {
    struct tf t;
    char node[32], log[300];
};
int te_host_spawn(struct te_host *h, struct te *e, const char *node, const char *extra);
/* The host's log so far (malloc'd; "" when none). */
char *te_host_log(struct te_host *h);
/* The value of key (etcdctl get --print-value-only), malloc'd, NULL when
 * absent or on error. */
char *te_get(struct te *e, const char *key);
/* How many keys under prefix (etcdctl get --prefix --keys-only), or -1. */
int te_count(struct te *e, const char *prefix);
/* A metric's value from member i's /metrics (curl), or -1. */
double te_metric(struct te *e, int i, const char *name);

#endif

#include "tests/lib/etcdrun.h"
#include "tests/lib/mntwatch.h"
#include "tests/lib/testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The test CA, server and client certificates (EC P-256, one day), and a
 * second CA that signed nothing (the wrong CA). */
static const char certs_sh[] =
    "cd \"$1\" && set -e\n"
    "k='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
    "openssl req -x509 $k -keyout ca.key -out ca.pem -days 1 -subj /CN=csifs-test-ca\n"
    "openssl req -x509 $k -keyout wrongca.key -out wrongca.pem -days 1 -subj /CN=csifs-wrong-ca\n"
    "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' >san.ext\n"
    "for w in server client; do\n"
    "  openssl req $k -keyout $w.key -out $w.csr -subj /CN=$w\n"
    "  openssl x509 -req -in $w.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $w.pem"
    " -days 1 -extfile san.ext\n"
    "done\n";

static int make_certs(struct te *e)
{
    char path[300], cmd[700];
    snprintf(path, sizeof(path), "%s/certs.sh", e->dir);
    FILE *f = fopen(path, "we");
    if (!f)
        return -errno;
    fputs(certs_sh, f);
    if (fclose(f))
        return -EIO;
    snprintf(cmd, sizeof(cmd), "sh '%s' '%s' >'%s/openssl.log' 2>&1", path, e->dir, e->dir);
    if (system(cmd) != 0)
        return -EIO;
    snprintf(e->ca, sizeof(e->ca), "%s/ca.pem", e->dir);
    snprintf(e->cert, sizeof(e->cert), "%s/client.pem", e->dir);
    snprintf(e->key, sizeof(e->key), "%s/client.key", e->dir);
    return 0;
}

static int spawn(struct te *e, int i)
{
    char name[16], data[300], log[300], lcu[64], lpu[64], cluster[400] = "", tok[64];
    snprintf(name, sizeof(name), "m%d", i);
    snprintf(data, sizeof(data), "%s/m%d.data", e->dir, i);
    snprintf(log, sizeof(log), "%s/m%d.log", e->dir, i);
    snprintf(lcu, sizeof(lcu), "%s", e->url[i]);
    snprintf(lpu, sizeof(lpu), "http://127.0.0.1:%d", e->pport[i]);
    for (int k = 0; k < e->n; k++) {
        size_t l = strlen(cluster);
        snprintf(cluster + l, sizeof(cluster) - l, "%sm%d=http://127.0.0.1:%d", k ? "," : "", k,
                 e->pport[k]);
    }
    snprintf(tok, sizeof(tok), "csifs-test-%d-%d", (int)getpid(), e->cport[0]);
    char srvcert[400], srvkey[400], ca[400];
    snprintf(srvcert, sizeof(srvcert), "--cert-file=%s/server.pem", e->dir);
    snprintf(srvkey, sizeof(srvkey), "--key-file=%s/server.key", e->dir);
    snprintf(ca, sizeof(ca), "--trusted-ca-file=%s", e->ca);
    const char *argv[32] = {
        "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", lcu,
        "--advertise-client-urls", lcu, "--listen-peer-urls", lpu,
        "--initial-advertise-peer-urls", lpu, "--initial-cluster", cluster,
        "--initial-cluster-state", "new", "--initial-cluster-token", tok,
    };
    int a = 0;
    while (argv[a])
        a++;
    if (e->tls) {
        argv[a++] = srvcert;
        argv[a++] = srvkey;
        argv[a++] = ca;
        argv[a++] = "--client-cert-auth";
    }
    argv[a] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setpgid(0, 0);  /* a SIGINT to the test does not reach etcd first */
        execvp("etcd", (char **)argv);
        _exit(127);
    }
    e->pid[i] = pid;
    tu_note_pid(pid);
    return 0;
}

/* 2n distinct ports for e's members, each free when picked: the sockets
 * stay bound until all are picked, so no two are the same. Another
 * process may still take one before etcd binds it: start_once's retry. */
static int pick_ports(struct te *e)
{
    int fds[2 * TE_MAX], rc = 0;
    for (int k = 0; k < 2 * e->n; k++)
        fds[k] = -1;
    for (int k = 0; k < 2 * e->n && rc == 0; k++) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        fds[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[k] < 0 || bind(fds[k], (struct sockaddr *)&a, sizeof(a)) < 0 ||
            getsockname(fds[k], (struct sockaddr *)&a, &len) < 0)
            rc = -EADDRNOTAVAIL;
        else if (k % 2)
            e->pport[k / 2] = ntohs(a.sin_port);
        else
            e->cport[k / 2] = ntohs(a.sin_port);
    }
    for (int k = 0; k < 2 * e->n; k++)
        if (fds[k] >= 0)
            close(fds[k]);
    return rc;
}

/* A member that exited (a port taken meanwhile, say): reaped, 1. */
static int member_died(struct te *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->pid[i] && waitpid(e->pid[i], NULL, WNOHANG) == e->pid[i]) {
            e->pid[i] = 0;
            return 1;
        }
    return 0;
}

/* Members on fresh ports and data dirs, until every one is healthy: 0; a
 * member that died or a deadline: every member killed, -errno. */
static int start_once(struct te *e)
{
    int rc = pick_ports(e);
    size_t l = 0;
    for (int i = 0; i < e->n && rc == 0; i++) {
        char data[300];
        snprintf(data, sizeof(data), "%s/m%d.data", e->dir, i);
        tu_rmrf(data);
        snprintf(e->url[i], sizeof(e->url[i]), "%s://127.0.0.1:%d", e->tls ? "https" : "http",
                 e->cport[i]);
        l += snprintf(e->endpoints + l, sizeof(e->endpoints) - l, "%s%s", i ? "," : "",
                      e->url[i]);
    }
    for (int i = 0; i < e->n && rc == 0; i++)
        rc = spawn(e, i);
    int64_t end = tu_now_ms() + tu_ms(20000);
    while (rc == 0) {
        if (te_ctl(e, NULL, "endpoint health --command-timeout=1s") == 0)
            return 0;
        if (member_died(e))
            rc = -EADDRINUSE;
        else if (tu_now_ms() >= end)
            rc = -ETIMEDOUT;
        else
            tu_sleep_ms(100);
    }
    for (int i = 0; i < e->n; i++)
        te_signal(e, i, SIGKILL);
    return rc;
}

int te_start(struct te *e, int n, bool tls)
{
    memset(e, 0, sizeof(*e));
    if (n < 1 || n > TE_MAX)
        return -EINVAL;
    e->n = n;
    e->tls = tls;
    const char *old = getenv("TMPDIR");
    char *keep = old ? strdup(old) : NULL;
    if (access("/dev/shm", W_OK) == 0)
        setenv("TMPDIR", "/dev/shm", 1);
    e->dir = tu_tmpdir("etcd");
    if (keep) {
        setenv("TMPDIR", keep, 1);
        free(keep);
    } else {
        unsetenv("TMPDIR");
    }
    if (!e->dir)
        return -EIO;
    if (tls && make_certs(e))
        return -EIO;
    int rc = -ETIMEDOUT;
    for (int attempt = 0; attempt < 3 && rc < 0; attempt++)
        rc = start_once(e);
    return rc;
}

void te_signal(struct te *e, int i, int sig)
{
    if (!e->pid[i])
        return;
    kill(e->pid[i], sig);
    if (sig == SIGKILL) {
        mw_wait(e->pid[i], 10000);
        e->pid[i] = 0;
    }
}

int te_restart(struct te *e, int i)
{
    te_signal(e, i, SIGKILL);
    return spawn(e, i);
}

void te_stop(struct te *e)
{
    for (int i = 0; i < e->n; i++) {
        if (e->pid[i])
            kill(e->pid[i], SIGCONT);
        te_signal(e, i, SIGKILL);
    }
    if (e->dir) {
        tu_rmrf(e->dir);
        free(e->dir);
        e->dir = NULL;
    }
}

static const char *te_cert_flags(struct te *e)
{
    static _Thread_local char buf[1000];
    snprintf(buf, sizeof(buf), "--cacert %s --cert %s --key %s", e->ca, e->cert, e->key);
    return buf;
}

const char *te_ctl_flags(struct te *e)
{
    static _Thread_local char buf[1200];
    int l = snprintf(buf, sizeof(buf), "--endpoints=%s", e->endpoints);
    if (e->tls)
        snprintf(buf + l, sizeof(buf) - l, " --cacert=%s --cert=%s --key=%s", e->ca, e->cert,
                 e->key);
    return buf;
}

int te_ctl(struct te *e, char **out, const char *fmt, ...)
{
    char args[4096], cmd[6000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl %s %s 2>&1", te_ctl_flags(e), args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -errno;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb)
                break;
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
        buf[len] = '\0';
    }
    int st = pclose(p);
    if (out)
        *out = buf ? buf : strdup("");
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -EINTR;
}

int te_leader(struct te *e)
{
    char *out = NULL;
    if (te_ctl(e, &out, "endpoint status -w simple --command-timeout=1s") < 0 || !out) {
        free(out);
        return -1;
    }
    /* lines: "url, id, version, db size, is leader, ..." */
    int leader = -1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char *first = strchr(line, ',');
        if (!first)
            continue;
        char *f = line;
        for (int col = 0; col < 4 && f; col++)
            f = strchr(f + 1, ',');
        if (!f || strncmp(f, ", true,", 7))
            continue;
        for (int i = 0; i < e->n; i++)
            if (!strncmp(line, e->url[i], strlen(e->url[i])) && line[strlen(e->url[i])] == ',')
                leader = i;
    }
    free(out);
    return leader;
}

int te_host_spawn(struct te_host *h, struct te *e, const char *node, const char *extra)
{
    char opts[1024];
    int l = 0;
    for (int i = 0; i < e->n; i++)
        l += snprintf(opts + l, sizeof(opts) - l, "cluster=%s,", e->url[i]);
    l += snprintf(opts + l, sizeof(opts) - l, "cluster_node=%s,cluster_ttl=2s", node);
    if (e->tls)
        l += snprintf(opts + l, sizeof(opts) - l, ",cluster_cacert=%s,cluster_cert=%s,"
                      "cluster_key=%s", e->ca, e->cert, e->key);
    if (extra && *extra)
        snprintf(opts + l, sizeof(opts) - l, ",%s", extra);
    snprintf(h->node, sizeof(h->node), "%s", node);
    snprintf(h->log, sizeof(h->log), "%s/%s.log", e->dir, node);
    /* the child inherits stderr: point it at the log for the fork */
    int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int saved = dup(2);
    if (fd < 0 || saved < 0)
        return -errno;
    fflush(stderr);
    dup2(fd, 2);
    close(fd);
    struct tf_opts o = { .tag = node, .extra_opts = opts };
    int rc = tf_spawn(&h->t, &o);
    dup2(saved, 2);
    close(saved);
    return rc;
}

char *te_host_log(struct te_host *h)
{
    FILE *f = fopen(h->log, "re");
    char *buf = calloc(1, 1 << 20);
    if (f && buf)
        buf[fread(buf, 1, (1 << 20) - 1, f)] = '\0';
    if (f)
        fclose(f);
    return buf;
}

char *te_get(struct te *e, const char *key)
{
    char *out = NULL;
    if (te_ctl(e, &out, "get --print-value-only --command-timeout=2s '%s'", key) != 0 ||
        !out || !*out) {
        free(out);
        return NULL;
    }
    return out;
}

int te_count(struct te *e, const char *prefix)
{
    char *out = NULL;
    int rc = te_ctl(e, &out, "get --prefix --keys-only --command-timeout=2s '%s'", prefix);
    int n = rc == 0 && out ? 0 : -1;
    for (char *s = out; rc == 0 && s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL)
        n += *s != '\n';
    free(out);
    return n;
}

double te_metric(struct te *e, int i, const char *name)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "curl -sk %s %s/metrics", e->tls ? te_cert_flags(e) : "",
             e->url[i]);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[1024];
    double v = -1;
    size_t nl = strlen(name);
    while (fgets(line, sizeof(line), p))
        if (!strncmp(line, name, nl) && line[nl] == ' ')
            v = strtod(line + nl + 1, NULL);
    pclose(p);
    return v;
}

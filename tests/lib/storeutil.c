#include "tests/lib/storeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int su_open(struct su *s)
{
    s->err[0] = '\0';
    int rc = store_open(&s->st, s->dir, s->flags, s->err, sizeof(s->err));
    if (rc < 0) {
        s->st = NULL;
        return rc;
    }
    struct reg_opts o = { .backend = store_backend(s->st) };
    rc = reg_open(&s->reg, &o);
    if (rc < 0) {
        s->reg = NULL;
        su_close(s);
    }
    return rc;
}

void su_close(struct su *s)
{
    if (s->reg)
        reg_close(s->reg);
    if (s->st)
        store_close(s->st);
    s->reg = NULL;
    s->st = NULL;
}

int64_t su_inst(struct reg *reg, enum reg_type type, const char *plugin, const char *alloc)
{
    struct reg_node p, i;
    int rc = reg_plugin_lookup(reg, type, plugin, &p);
    if (rc == 0)
        rc = reg_instance_lookup(reg, p.seq, alloc, &i);
    return rc < 0 ? rc : (int64_t)i.seq;
}

int64_t su_register(struct reg *reg, enum reg_type type, const char *plugin,
                    const char *alloc)
{
    int rc = reg_plugin_create(reg, type, plugin);
    if (rc < 0 && rc != -EEXIST)
        return rc;
    rc = reg_instance_register(reg, type, plugin, alloc);
    return rc < 0 ? rc : su_inst(reg, type, plugin, alloc);
}

int su_make_ready(struct reg *reg, uint64_t inst, const char *socket)
{
    struct reg_node n;
    char nodeid[80];
    int rc = reg_socket_set(reg, inst, socket);
    if (rc == 0)
        rc = reg_get(reg, inst, &n);
    if (rc < 0)
        return rc;
    snprintf(nodeid, sizeof(nodeid), "node-%s", n.alloc);
    struct reg_fingerprint fp = { "test.csi", "1.0", nodeid, 7, "zone=a\n",
                                  "plugin:CONTROLLER_SERVICE\n" };
    struct reg_probe p = { .gen = n.gen, .outcome = REG_PROBE_OK, .latency_us = 10, .fp = &fp };
    return reg_probe_result(reg, inst, &p);
}

/* ---- dump ---- */

struct nodes {
    struct reg_node n[512];
    int count;
};

static int collect(const struct reg_node *n, void *arg)
{
    struct nodes *ns = arg;
    if (ns->count == (int)(sizeof(ns->n) / sizeof(ns->n[0])))
        return 1;
    ns->n[ns->count++] = *n;
    return 0;
}

struct text {
    char *buf;
    size_t len;
    FILE *f;
};

static void attr(struct text *t, struct reg *reg, uint64_t inst, enum reg_attr a)
{
    char v[REG_VALUE_MAX + 2];
    ssize_t n = reg_attr_show(reg, inst, a, v, sizeof(v));
    if (n > 0 && v[n - 1] == '\n')
        v[n - 1] = '\0';
    fprintf(t->f, " %s=%s", reg_attrs[a].name, n >= 0 ? v : "?");
}

static void dump_plugin(struct text *t, struct reg *reg, const struct reg_node *p, bool full)
{
    static struct nodes in;          /* large: not on the stack */
    char cur[REG_NAME_MAX + 1] = "-", sock[REG_SOCKET_MAX + 1];
    reg_current_get(reg, p->seq, cur, sizeof(cur));
    fprintf(t->f, "%s/%s current=%s", reg_type_names[p->type], p->plugin, cur);
    if (full)
        fprintf(t->f, " seq=%llu registered=%lld", (unsigned long long)p->seq,
                (long long)p->registered_ns);
    fprintf(t->f, "\n");
    in.count = 0;
    reg_list(reg, p->type, p->seq, 0, collect, &in);
    for (int k = 0; k < in.count; k++) {
        const struct reg_node *i = &in.n[k];
        if (reg_socket_get(reg, i->seq, sock, sizeof(sock)) < 0)
            strcpy(sock, "-");
        fprintf(t->f, "  %s ready=%d socket=%s", i->alloc, i->ready, sock);
        attr(t, reg, i->seq, REG_A_MOUNT_POINT);
        if (full) {
            fprintf(t->f, " seq=%llu registered=%lld", (unsigned long long)i->seq,
                    (long long)i->registered_ns);
            attr(t, reg, i->seq, REG_A_CONTAINER_MOUNT_POINT);
            attr(t, reg, i->seq, REG_A_PROVIDER);
            attr(t, reg, i->seq, REG_A_VERSION);
            if (i->type == REG_NODE) {
                attr(t, reg, i->seq, REG_A_NODEID);
                attr(t, reg, i->seq, REG_A_MAX_VOLUMES);
            }
        }
        fprintf(t->f, "\n");
    }
}

char *su_dump(struct reg *reg, bool full)
{
    static struct nodes plugins;
    struct text t = { NULL, 0, NULL };
    t.f = open_memstream(&t.buf, &t.len);
    if (!t.f)
        return NULL;
    for (int type = 0; type < REG_NTYPES; type++) {
        plugins.count = 0;
        reg_list(reg, type, 0, 0, collect, &plugins);
        for (int k = 0; k < plugins.count; k++)
            dump_plugin(&t, reg, &plugins.n[k], full);
    }
    fclose(t.f);
    return t.buf;
}

/* ---- files ---- */

int su_file_crc(const char *path, uint32_t *crc)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[65536];
    ssize_t n;
    *crc = 0;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        *crc = store_crc32(*crc, buf, (size_t)n);
    int rc = n < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int su_raw_put(const char *dir, const char *key, const void *val, size_t len)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = { strlen(key), (void *)key }, v = { len, (void *)val };
    int rc = mdb_env_create(&env);
    if (rc != 0)
        return rc;
    if ((rc = mdb_env_set_mapsize(env, 1u << 30)) == 0 &&
        (rc = mdb_env_open(env, dir, 0, 0600)) == 0 &&
        (rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0) {
        if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) == 0)
            rc = val ? mdb_put(txn, dbi, &k, &v, 0) : mdb_del(txn, dbi, &k, NULL);
        if (rc == 0)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    mdb_env_close(env);
    return rc;
}

int su_source_path(const char *rel, char *out, size_t cap)
{
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(out, cap, "%s", rel);
    for (int up = 0; access(out, R_OK) != 0 && n > 0 && up < 6; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            break;
        *slash = '\0';
        snprintf(out, cap, "%s/%s", exe, rel);
    }
    if (access(out, R_OK) == 0)
        return 0;
    snprintf(out, cap, "%s", rel);
    return -ENOENT;
}

int su_copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), rc = 0;
    if (out < 0)
        rc = -errno;
    ssize_t n = 0;
    while (rc == 0 && (n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            rc = -EIO;
    if (rc == 0 && n < 0)
        rc = -errno;
    if (out >= 0 && close(out) < 0 && rc == 0)
        rc = -errno;
    close(in);
    return rc;
}

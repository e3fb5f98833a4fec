/* The crash-test checker: replays each writer's log into the state it
 * implies (twice when an operation was in flight: without it and with it),
 * reads the restored tree and compares. Also checks DESIGN section 2 on the
 * restored tree: instances newest first, consistent with real time across
 * writers, and `current` a ready instance (DESIGN 2: the newest healthy
 * one, else it stays where it was), absent only without one. */
#include "tests/crash/crash.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LIST 64
#define NAME 64

struct inst {
    bool exists, ready;
    int64_t ord, start, end;       /* ord: log index of its mkdir */
    char sock[CR_VAL], attr[2][CR_VAL];
};
struct model {
    bool plugin[2];
    struct inst inst[CR_SLOTS];
};
struct listing {
    int n;
    char name[MAX_LIST][NAME];
    bool ready[MAX_LIST];
    char current[NAME];            /* "" when absent */
};

static int fails;
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (fails++ < 20) {
        fputs("    check: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
}

static bool has_instances(const struct model *m, int type)
{
    for (int s = 0; s < CR_SLOTS; s++)
        if (cr_slot_own(s) && cr_slot_type(s) == type && m->inst[s].exists)
            return true;
    return false;
}

/* The rc the operation must have returned in state m (READY: 0 or 1). */
static int expect(const struct model *m, const struct cr_rec *r)
{
    const struct inst *i = r->op >= CR_IMK ? &m->inst[r->slot] : NULL;
    switch (r->op) {
    case CR_PMK: return m->plugin[r->slot] ? -EEXIST : 0;
    case CR_PRM: return !m->plugin[r->slot] ? -ENOENT : has_instances(m, r->slot) ? -ENOTEMPTY : 0;
    case CR_SMK: return -EEXIST;
    case CR_IMK:
        if (cr_slot_own(r->slot) && !m->plugin[cr_slot_type(r->slot)])
            return -ENOENT;
        return i->exists ? -EEXIST : 0;
    case CR_UNSOCK: return !i->exists || !i->sock[0] ? -ENOENT : 0;
    default: return i->exists ? 0 : -ENOENT;
    }
}

static void apply(struct model *m, const struct cr_rec *r, int64_t idx)
{
    struct inst *i = r->op >= CR_IMK ? &m->inst[r->slot] : NULL;
    switch (r->op) {
    case CR_PMK: m->plugin[r->slot] = true; break;
    case CR_PRM: m->plugin[r->slot] = false; break;
    case CR_SMK: break;
    case CR_IMK:
        *i = (struct inst){ .exists = true, .ord = idx, .start = r->start_ns, .end = r->end_ns };
        break;
    case CR_IRM: i->exists = false; break;
    case CR_SOCK: snprintf(i->sock, sizeof(i->sock), "%s", r->val); break;
    case CR_UNSOCK: i->sock[0] = '\0'; break;
    case CR_ATTR: snprintf(i->attr[r->arg], CR_VAL, "%s", r->val); break;
    case CR_TRUNC: i->attr[r->arg][0] = '\0'; break;
    case CR_READY: i->ready = i->ready || r->rc == 1; break;
    default: break;
    }
}

static void slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    n = n < 0 ? 0 : n;
    buf[n] = '\0';
    if (n > 0 && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
}

static const char *op_path(int w, const struct cr_rec *r)
{
    return r->op <= CR_SMK ? cr_plugin_path(w, r->slot, r->op != CR_SMK) : cr_slot_path(w, r->slot);
}

/* Takeover mode: what no caller may see, whatever the model says: the
 * connection going away, EIO, a failed `ln`, a syscall over the bound. */
static void takeover_rc(const struct cr_env *e, int w, int64_t idx, const struct cr_rec *r)
{
    const char *op = cr_op_names[r->op];
    if (r->rc == -ENOTCONN || r->rc == -ECONNABORTED || r->rc == -EIO)
        fail("w%d: op %lld %s %s: %s (no caller may see it across a takeover)", w,
             (long long)idx, op, op_path(w, r), strerror(-r->rc));
    if (r->rc <= CR_LN_FAILED(0)) {
        char path[1024], err[4096], *last;
        snprintf(path, sizeof(path), "%s/w%d.ln", e->logdir, w);
        slurp(path, err, sizeof(err));          /* what it said, its last line */
        last = strrchr(err, '\n');
        fail("w%d: op %lld: `ln -sfn %s %s/socket` exited %d: %s", w, (long long)idx, r->val,
             op_path(w, r), CR_LN_FAILED(0) - r->rc, last ? last + 1 : err);
    }
    if (r->end_ns - r->start_ns > e->bound_ns)
        fail("w%d: op %lld %s %s took %lld ms, over the liveness bound (%lld ms)", w,
             (long long)idx, op, op_path(w, r), (long long)((r->end_ns - r->start_ns) / 1000000),
             (long long)(e->bound_ns / 1000000));
}

/* Replay writer w's log into m[0] (acknowledged only) and m[1] (plus the
 * operation in flight, when it could have succeeded). */
static int replay(const struct cr_env *e, int w, struct model m[2])
{
    char path[1024], line[512];
    snprintf(path, sizeof(path), "%s/w%d.log", e->logdir, w);
    FILE *f = fopen(path, "re");
    if (!f) {
        fail("w%d: no log", w);
        return -1;
    }
    memset(m, 0, 2 * sizeof(*m));
    struct cr_rec r = { .op = CR_NOPS };
    bool open_rec = false;
    int64_t idx = 0;
    while (fgets(line, sizeof(line), f)) {
        long long t;
        int op, rc;
        if (line[0] == 'B' && !open_rec &&
            sscanf(line, "B %d %d %d %lld %63s", &op, &r.slot, &r.arg, &t, r.val) == 5) {
            r.op = (enum cr_op)op;
            r.start_ns = t;
            if (strcmp(r.val, "-") == 0)
                r.val[0] = '\0';
            open_rec = true;
            continue;
        }
        if (line[0] != 'E' || !open_rec || sscanf(line, "E %d %lld", &rc, &t) != 2) {
            fail("w%d: bad log line %s", w, line);
            break;
        }
        open_rec = false;
        r.rc = rc;
        r.end_ns = t;
        if (e->takeover)
            takeover_rc(e, w, idx, &r);
        else if (rc == -ENOTCONN || rc == -ECONNABORTED) {
            open_rec = true;        /* in flight, and the last one */
            break;
        }
        int want = expect(&m[0], &r);
        bool ok = rc == want;
        if (r.op == CR_READY && want == 0)   /* ready never goes back to 0 */
            ok = rc == 1 || (rc == 0 && !m[0].inst[r.slot].ready);
        if (!ok && want == 0 && rc == -EEXIST && (r.op == CR_IMK || r.op == CR_PMK))
            fail("w%d: op %lld %s %s: EEXIST, but the log says it was not there (a resent "
                 "mkdir done twice?)", w, (long long)idx, cr_op_names[r.op], op_path(w, &r));
        else if (!ok)
            fail("w%d: op %lld %s %s returned %d, the log implies %d", w, (long long)idx,
                 cr_op_names[r.op], op_path(w, &r), rc, want);
        if (rc == 0 || rc == 1)
            apply(&m[0], &r, idx);
        idx++;
    }
    fclose(f);
    m[1] = m[0];
    if (open_rec && e->takeover)
        fail("w%d: op %lld %s %s never returned", w, (long long)idx, cr_op_names[r.op],
             op_path(w, &r));
    else if (open_rec && r.op != CR_READY) {
        r.end_ns = INT64_MAX;
        r.rc = 0;
        if (expect(&m[1], &r) == 0)
            apply(&m[1], &r, idx);
    }
    return 0;
}

/* readdir of mnt/rel in order (without . .. current), ready of each, current. */
static int list(const struct cr_env *e, const char *rel, struct listing *l)
{
    char path[1024], sub[1200];
    memset(l, 0, sizeof(*l));
    snprintf(path, sizeof(path), "%s/%s", e->mnt, rel);
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    struct dirent *de;
    while ((de = readdir(d)) && l->n < MAX_LIST) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "current"))
            snprintf(l->name[l->n++], NAME, "%.63s", de->d_name);
    }
    closedir(d);
    for (int i = 0; i < l->n; i++) {
        char v[8];
        snprintf(sub, sizeof(sub), "%s/%s/ready", path, l->name[i]);
        slurp(sub, v, sizeof(v));
        l->ready[i] = strcmp(v, "1") == 0;
    }
    snprintf(sub, sizeof(sub), "%s/current", path);
    ssize_t n = readlink(sub, l->current, NAME - 1);
    l->current[n > 0 ? n : 0] = '\0';
    return 0;
}

static bool extra(const struct cr_env *e, const char *name)
{
    for (const char *const *x = e->extra; x && *x; x++)
        if (!strcmp(*x, name))
            return true;
    return false;
}

static int find(const struct listing *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0)
            return i;
    return -1;
}

/* DESIGN 2: with a ready instance, current names a ready one (the newest
 * healthy, else where it stayed: health moves after the restart, so the
 * check asks no more); with none, no current. */
static void check_current(const char *rel, const struct listing *l)
{
    int want = -1, at = l->current[0] ? find(l, l->current) : -1;
    for (int i = 0; i < l->n && want < 0; i++)
        if (l->ready[i])
            want = i;
    const char *w = want < 0 ? "" : l->name[want];
    if (want < 0 ? l->current[0] != '\0' : (at < 0 || !l->ready[at]))
        fail("%s: current is '%s', not a ready instance (the newest ready is '%s')", rel,
             l->current, w);
}

/* Compare writer w's part of the tree with m; quiet: count only. */
static int compare(const struct cr_env *e, int w, const struct model *m,
                   const struct listing own[2], const bool pexists[2],
                   const struct listing shared[2], bool quiet)
{
    int bad = 0;
#define DIFF(...) do { bad++; if (!quiet) fail(__VA_ARGS__); } while (0)
    for (int t = 0; t < 2; t++)
        if (pexists[t] != m->plugin[t])
            DIFF("%s: exists %d, expected %d", cr_plugin_path(w, t, true), pexists[t], m->plugin[t]);
    int64_t last[2][2];
    for (int t = 0; t < 2; t++)
        last[t][0] = last[t][1] = INT64_MAX;
    for (int t = 0; t < 2; t++)
        for (int o = 0; o < 2; o++) {
            const struct listing *l = o == 0 ? &own[t] : &shared[t];
            for (int i = 0; i < l->n; i++) {
                int k;
                char tail;
                if (sscanf(l->name[i], "w%*d-%d%c", &k, &tail) != 1 || k < 0 || k >= CR_K) {
                    if (o == 0)
                        DIFF("%s: unexpected entry %s", cr_plugin_path(w, t, true), l->name[i]);
                    continue;
                }
                char mine[NAME];
                snprintf(mine, sizeof(mine), "w%d-%d", w, k);
                if (strcmp(mine, l->name[i])) {
                    if (o == 0)
                        DIFF("%s: unexpected entry %s", cr_plugin_path(w, t, true), l->name[i]);
                    continue;
                }
                int s = t * 2 * CR_K + o * CR_K + k;
                if (m->inst[s].exists && m->inst[s].ord > last[t][o])
                    DIFF("%s: listed after an older instance", cr_slot_path(w, s));
                if (m->inst[s].exists)
                    last[t][o] = m->inst[s].ord;
            }
        }
    for (int s = 0; s < CR_SLOTS; s++) {
        int t = cr_slot_type(s);
        const struct listing *l = cr_slot_own(s) ? &own[t] : &shared[t];
        const char *rel = cr_slot_path(w, s);
        const struct inst *mi = &m->inst[s];
        int at = find(l, strrchr(rel, '/') + 1);
        if ((at >= 0) != mi->exists) {
            DIFF("%s: exists %d, expected %d", rel, at >= 0, mi->exists);
            continue;
        }
        if (at < 0)
            continue;
        char path[1024], sub[1200], v[CR_VAL + 8];
        snprintf(path, sizeof(path), "%s/%s", e->mnt, rel);
        snprintf(sub, sizeof(sub), "%s/socket", path);
        ssize_t n = readlink(sub, v, sizeof(v) - 1);
        v[n > 0 ? n : 0] = '\0';
        if (strcmp(v, mi->sock))
            DIFF("%s/socket: '%s', expected '%s'", rel, v, mi->sock);
        for (int a = 0; a < 2; a++) {
            snprintf(sub, sizeof(sub), "%s/%s", path, cr_attr_names[a]);
            slurp(sub, v, sizeof(v));
            if (strcmp(v, mi->attr[a]))
                DIFF("%s/%s: '%s', expected '%s'", rel, cr_attr_names[a], v, mi->attr[a]);
        }
        if (mi->ready && !l->ready[at])
            DIFF("%s: ready 0 after it was read as 1", rel);
    }
#undef DIFF
    return bad;
}

/* Across writers in a shared plugin: an instance listed newer than another
 * must not have been acknowledged before the other's mkdir began. */
static void check_shared_order(const struct cr_env *e, int t, const struct listing *l,
                               const struct model *chosen)
{
    int64_t start[MAX_LIST], end[MAX_LIST];
    for (int i = 0; i < l->n; i++) {
        int w, k;
        start[i] = INT64_MIN;
        end[i] = INT64_MAX;
        if (sscanf(l->name[i], "w%d-%d", &w, &k) != 2 || w < 0 || w >= e->writers || k < 0 ||
            k >= CR_K) {
            fail("%s/shared: unexpected entry %s", t ? "csi-node" : "csi-controller", l->name[i]);
            continue;
        }
        const struct inst *mi = &chosen[w].inst[t * 2 * CR_K + CR_K + k];
        start[i] = mi->start;
        end[i] = mi->end;
    }
    for (int i = 0; i < l->n; i++)
        for (int j = i + 1; j < l->n; j++)
            if (end[i] < start[j])
                fail("%s: %s listed newer than %s, whose mkdir began after it returned",
                     cr_plugin_path(0, t, false), l->name[i], l->name[j]);
}

int cr_check(const struct cr_env *e)
{
    struct listing shared[2], own[CR_MAX_WRITERS][2];
    bool pexists[CR_MAX_WRITERS][2];
    static struct model models[CR_MAX_WRITERS][2], chosen[CR_MAX_WRITERS];
    for (int t = 0; t < 2; t++) {
        const char *rel = cr_plugin_path(0, t, false);
        if (list(e, rel, &shared[t]) < 0)
            fail("%s: %s", rel, strerror(errno));
        check_current(rel, &shared[t]);
        struct listing top;
        if (list(e, t ? "csi-node" : "csi-controller", &top) < 0)
            fail("type dir %d: %s", t, strerror(errno));
        for (int i = 0; i < top.n; i++) {
            int w;
            char tail;
            if (strcmp(top.name[i], "shared") && !(t == 1 && extra(e, top.name[i])) &&
                (sscanf(top.name[i], "p%d%c", &w, &tail) != 1 || w < 0 || w >= e->writers))
                fail("type dir %d: unexpected entry %s", t, top.name[i]);
        }
    }
    for (int w = 0; w < e->writers; w++) {
        for (int t = 0; t < 2; t++) {
            const char *rel = cr_plugin_path(w, t, true);
            pexists[w][t] = list(e, rel, &own[w][t]) == 0;
            if (pexists[w][t])
                check_current(rel, &own[w][t]);
        }
        if (replay(e, w, models[w]) < 0)
            continue;
        int k = 0;
        if (e->takeover)                /* nothing in flight: one state only */
            compare(e, w, &models[w][0], own[w], pexists[w], shared, false);
        else if (compare(e, w, &models[w][0], own[w], pexists[w], shared, true) != 0) {
            k = 1;
            if (compare(e, w, &models[w][1], own[w], pexists[w], shared, true) != 0) {
                fputs("    check: differences from the acknowledged operations:\n", stderr);
                compare(e, w, &models[w][0], own[w], pexists[w], shared, false);
                fputs("    check: ...and with the operation in flight done:\n", stderr);
                compare(e, w, &models[w][1], own[w], pexists[w], shared, false);
            }
        }
        chosen[w] = models[w][k];
    }
    for (int t = 0; t < 2; t++)
        check_shared_order(e, t, &shared[t], chosen);
    if (getenv("CRASH_VERBOSE")) {      /* how much the check saw */
        int ready = 0, cur = 0, inst = 0;
        for (int w = 0; w < e->writers; w++)
            for (int t = 0; t < 3; t++) {
                const struct listing *l = t < 2 ? &own[w][t] : &shared[w % 2];
                if (t == 2 && w >= 2)
                    continue;
                inst += l->n;
                cur += l->current[0] != '\0';
                for (int i = 0; i < l->n; i++)
                    ready += l->ready[i];
            }
        fprintf(stderr, "    check: %d instances, %d ready, %d currents\n", inst, ready, cur);
    }
    return fails ? 1 : 0;
}

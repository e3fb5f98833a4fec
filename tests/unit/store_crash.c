/* The LMDB state store under SIGKILL (DESIGN section 7, issue 3): every
 * acknowledged change survives, event seqs never repeat. Each test has its
 * own temp dir. */
#include "tests/unit/store_fixture.h"

#include <pthread.h>

/* ---- 3. durability under SIGKILL ---- */

#define K_PLUGINS 3
#define K_INST 6
#define K_OPS 40
#define K_ROUNDS 24

struct minst {
    char alloc[16], sock[48], mp[16];
    bool ready, healthy, restoring;  /* health: memory only (DESIGN 2, 3) */
};
struct mplug {
    char name[8];
    char cur[16];                    /* alloc of its current, "" none */
    struct minst in[K_INST];         /* oldest first */
    int n;
};
struct model {
    struct mplug p[K_PLUGINS];       /* plugin k has type k % 2 */
    int np;
    unsigned next_alloc;
    char tag[4];                     /* plugin names: <tag><k>, "p" when empty */
};

static const char *tag_of(const struct model *m)
{
    return *m->tag ? m->tag : "p";
}
enum opk { OP_PLUGIN, OP_REGISTER, OP_SOCKET, OP_READY, OP_ATTR, OP_DEREGISTER };
struct op {
    enum opk k;
    int p, i;
    char arg[48];
};

/* DESIGN 2, as registry/mutate_apply.c's mut_pick_current. */
static void model_pick_current(struct mplug *p)
{
    int cur = -1, restoring = 0, first_ready = -1, to = -1;
    for (int j = 0; j < p->n; j++) {
        cur = !strcmp(p->in[j].alloc, p->cur) ? j : cur;
        restoring += p->in[j].restoring;
    }
    if (cur >= 0 && restoring)
        return;
    for (int j = p->n - 1; j >= 0 && to < 0; j--) {
        if (p->in[j].ready && p->in[j].healthy)
            to = j;
        else if (p->in[j].ready && first_ready < 0)
            first_ready = j;
    }
    to = to >= 0 ? to : cur >= 0 ? cur : first_ready;
    snprintf(p->cur, sizeof(p->cur), "%s", to >= 0 ? p->in[to].alloc : "");
}

/* What a restart does to m: every instance unknown; those with a socket
 * hold current until probed. */
static void model_restart(struct model *m)
{
    for (int k = 0; k < m->np; k++)
        for (int j = 0; j < m->p[k].n; j++) {
            m->p[k].in[j].healthy = false;
            m->p[k].in[j].restoring = *m->p[k].in[j].sock != '\0';
        }
}

static void model_apply(struct model *m, const struct op *o)
{
    struct mplug *p = &m->p[o->p];
    struct minst *i = &p->in[o->i];
    if (o->k == OP_SOCKET && strcmp(i->sock, o->arg))
        i->healthy = i->restoring = false;
    if (o->k == OP_READY)
        i->healthy = i->ready = true, i->restoring = false;
    switch (o->k) {
    case OP_PLUGIN:
        snprintf(m->p[m->np++].name, sizeof(p->name), "%s%d", tag_of(m), o->p);
        break;
    case OP_REGISTER:
        memset(&p->in[p->n], 0, sizeof(*i));
        snprintf(p->in[p->n++].alloc, sizeof(i->alloc), "%.15s", o->arg);
        break;
    case OP_SOCKET:
        snprintf(i->sock, sizeof(i->sock), "%s", o->arg);
        break;
    case OP_READY:
        break;
    case OP_ATTR:
        snprintf(i->mp, sizeof(i->mp), "%.15s", o->arg);
        break;
    case OP_DEREGISTER:
        memmove(i, i + 1, (size_t)(p->n - o->i - 1) * sizeof(*i));
        p->n--;
        break;
    }
    if (o->k != OP_PLUGIN)
        model_pick_current(p);
}

/* A valid next operation for m, chosen with r. */
static struct op model_gen(struct model *m, unsigned *r)
{
    struct op o = { .p = m->np };
    if (m->np == 0 || (m->np < K_PLUGINS && rand_r(r) % 8 == 0))
        return o;                    /* OP_PLUGIN */
    o.p = rand_r(r) % m->np;
    struct mplug *p = &m->p[o.p];
    int pick = rand_r(r) % 10;
    if (p->n == 0 || (pick < 3 && p->n < K_INST)) {
        o.k = OP_REGISTER;
        snprintf(o.arg, sizeof(o.arg), "a%u", m->next_alloc++);
        return o;
    }
    o.i = rand_r(r) % p->n;
    struct minst *i = &p->in[o.i];
    if (pick < 5 || (pick < 7 && !*i->sock)) {
        o.k = OP_SOCKET;
        if (rand_r(r) % 5)
            snprintf(o.arg, sizeof(o.arg), "/run/csi-test/%s-%d.sock", i->alloc, rand_r(r) % 100);
    } else if (pick < 7) {
        o.k = OP_READY;
        snprintf(o.arg, sizeof(o.arg), "%s", i->sock);
    } else if (pick < 8) {
        o.k = OP_ATTR;
        snprintf(o.arg, sizeof(o.arg), "/mnt/%d", rand_r(r) % 1000);
    } else {
        o.k = OP_DEREGISTER;
    }
    return o;
}

/* The model in su_dump(reg, false)'s format. */
static char *model_dump(const struct model *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    for (int type = 0; type < REG_NTYPES; type++) {
        for (int k = m->np - 1; k >= 0; k--) {
            const struct mplug *p = &m->p[k];
            if (k % 2 != type)
                continue;
            fprintf(f, "%s/%s current=%s\n", reg_type_names[type], p->name,
                    *p->cur ? p->cur : "-");
            for (int j = p->n - 1; j >= 0; j--)
                fprintf(f, "  %s ready=%d socket=%s mount_point=%s\n", p->in[j].alloc,
                        p->in[j].ready, *p->in[j].sock ? p->in[j].sock : "-", p->in[j].mp);
        }
    }
    fclose(f);
    return buf;
}

static int do_op(struct reg *reg, const struct model *m, const struct op *o)
{
    const struct mplug *p = &m->p[o->p];
    enum reg_type type = (enum reg_type)(o->p % 2);
    if (o->k == OP_PLUGIN) {
        char name[8];
        snprintf(name, sizeof(name), "%s%d", tag_of(m), o->p);
        return reg_plugin_create(reg, type, name);
    }
    if (o->k == OP_REGISTER)
        return reg_instance_register(reg, type, p->name, o->arg);
    int64_t inst = su_inst(reg, type, p->name, p->in[o->i].alloc);
    if (inst < 0)
        return (int)inst;
    switch (o->k) {
    case OP_SOCKET: return reg_socket_set(reg, (uint64_t)inst, o->arg);
    case OP_READY: return su_make_ready(reg, (uint64_t)inst, o->arg);
    case OP_ATTR: return reg_attr_store(reg, (uint64_t)inst, REG_A_MOUNT_POINT, o->arg,
                                        strlen(o->arg));
    default: return reg_instance_deregister(reg, type, p->name, p->in[o->i].alloc);
    }
}

/* The child: open the store (nothing LMDB exists before the fork), run the
 * ops, and report each acknowledged one's index through fd; -1 on failure,
 * CHILD_DONE once all are done and the store is closed. */
static void kill_child(const struct model *states, const struct op *ops, int n, int fd)
{
    struct su c = { .dir = state };
    int32_t k = -1;
    if (su_open(&c) < 0) {
        (void)!write(fd, &k, sizeof(k));
        _exit(1);
    }
    for (k = 0; k < n; k++) {
        if (do_op(c.reg, &states[k], &ops[k]) < 0) {
            k = -1;
            (void)!write(fd, &k, sizeof(k));
            _exit(1);
        }
        if (write(fd, &k, sizeof(k)) != sizeof(k))
            _exit(1);
    }
    su_close(&c);
    k = CHILD_DONE;
    (void)!write(fd, &k, sizeof(k));
    _exit(0);
}

static struct model states[K_OPS + 1];

struct kill_stats {
    int acked, killed, in_flight_kept;
};

/* One round from model m: leaves in m the state the store must now hold. */
static void kill_round(struct model *m, unsigned *r, int round, struct kill_stats *ks)
{
    struct op ops[K_OPS];
    states[0] = *m;
    model_restart(&states[0]);
    for (int k = 0; k < K_OPS; k++) {
        states[k + 1] = states[k];
        ops[k] = model_gen(&states[k + 1], r);
        model_apply(&states[k + 1], &ops[k]);
    }
    int kill_after = rand_r(r) % (K_OPS + 1), delay_us = rand_r(r) % 3000;
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        kill_child(states, ops, K_OPS, fds[1]);
    }
    close(fds[1]);
    int acked = 0, bad = 0, done = 0;
    int32_t v;
    while (acked < kill_after && read(fds[0], &v, sizeof(v)) == sizeof(v))
        bad |= v != acked++;
    usleep((useconds_t)delay_us);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    while (read(fds[0], &v, sizeof(v)) == sizeof(v)) {
        if (v == CHILD_DONE)
            done = 1;
        else
            bad |= v != acked++;
    }
    close(fds[0]);
    cr_assert_not(bad, "round %d: the child failed an operation", round);
    cr_assert((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) || (done && acked == K_OPS),
              "round %d: child status 0x%x after %d acks", round, status, acked);

    open_ok();
    char *got = su_dump(s.reg, false), *want = model_dump(&states[acked]);
    bool same = !strcmp(got, want);
    ks->acked += acked;
    ks->killed += WIFSIGNALED(status);
    if (!same && acked < K_OPS) {    /* the op in flight may have committed */
        free(want);
        want = model_dump(&states[++acked]);
        same = !strcmp(got, want);
        ks->in_flight_kept += same;
    }
    cr_assert(same, "round %d, %d acked: store holds\n%s\nexpected\n%s", round, acked, got,
              want);
    free(got);
    free(want);
    su_close(&s);
    *m = states[acked];
}

Test(store, sigkill_loses_no_acknowledged_change, .timeout = 300)
{
    unsigned r = (unsigned)time(NULL) ^ (unsigned)getpid();
    struct model m = { .np = 0 };
    struct kill_stats ks = { 0 };
    cr_log_info("sigkill seed %u", r);
    for (int round = 0; round < K_ROUNDS; round++)
        kill_round(&m, &r, round, &ks);
    cr_log_info("%d rounds, %d killed, %d ops acknowledged, %d unacknowledged ops found "
                "committed", K_ROUNDS, ks.killed, ks.acked, ks.in_flight_kept);
    cr_assert_gt(ks.acked, K_ROUNDS, "the child got some work done");
    cr_assert_gt(ks.killed, K_ROUNDS / 2, "most rounds end in a SIGKILL");
}

/* ---- 3b. durability under SIGKILL with 8 concurrent writers ----
 *
 * Writer w owns the plugins w<w>p<k> and runs its own op list from its own
 * model; the writers' commits are shared (group commit). After the kill
 * each writer's plugins hold its acknowledged ops, plus maybe the one it had
 * in flight. */

#define G_WRITERS 8
#define G_ROUNDS 50

struct gwriter {
    struct su *c;
    int w, fd;
    struct model states[K_OPS + 1];
    struct op ops[K_OPS];
};

static struct gwriter gw[G_WRITERS];

static void *gwriter_run(void *arg)
{
    struct gwriter *g = arg;
    for (int32_t k = 0; k < K_OPS; k++) {
        int32_t rec[2] = { g->w, do_op(g->c->reg, &g->states[k], &g->ops[k]) < 0 ? -1 : k };
        if (write(g->fd, rec, sizeof(rec)) != sizeof(rec) || rec[1] < 0)
            _exit(1);
    }
    return NULL;
}

static void group_child(int fd)
{
    struct su c = { .dir = state };
    if (su_open(&c) < 0)
        _exit(1);
    pthread_t th[G_WRITERS];
    for (int w = 0; w < G_WRITERS; w++) {
        gw[w].c = &c;
        gw[w].fd = fd;
        if (pthread_create(&th[w], NULL, gwriter_run, &gw[w]) != 0)
            _exit(1);
    }
    for (int w = 0; w < G_WRITERS; w++)
        pthread_join(th[w], NULL);
    su_close(&c);
    _exit(0);
}

/* The sections of a dump (a header line and its indented lines) whose
 * plugin name starts with tag. */
static char *sections_of(const char *dump, const char *tag)
{
    char *buf = NULL, pat[16];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    snprintf(pat, sizeof(pat), "/%s", tag);
    bool keep = false;
    for (const char *l = dump; *l;) {
        size_t n = strcspn(l, "\n");
        if (*l != ' ')
            keep = memmem(l, n, pat, strlen(pat)) != NULL;
        if (keep)
            fprintf(f, "%.*s\n", (int)n, l);
        l += n + (l[n] == '\n');
    }
    fclose(f);
    return buf;
}

Test(store, sigkill_under_8_writers_loses_no_acknowledged_change, .timeout = 600)
{
    unsigned r = (unsigned)time(NULL) ^ (unsigned)getpid();
    cr_log_info("group sigkill seed %u", r);
    struct model m[G_WRITERS];
    for (int w = 0; w < G_WRITERS; w++) {
        m[w] = (struct model){ .np = 0 };
        memcpy(m[w].tag, (char[]){ 'w', (char)('0' + w), 'p', '\0' }, 4);   /* w0p..w7p */
    }
    int acked_total = 0, killed = 0, kept = 0;
    for (int round = 0; round < G_ROUNDS; round++) {
        for (int w = 0; w < G_WRITERS; w++) {
            gw[w].w = w;
            gw[w].states[0] = m[w];
            model_restart(&gw[w].states[0]);
            for (int k = 0; k < K_OPS; k++) {
                gw[w].states[k + 1] = gw[w].states[k];
                gw[w].ops[k] = model_gen(&gw[w].states[k + 1], &r);
                model_apply(&gw[w].states[k + 1], &gw[w].ops[k]);
            }
        }
        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            group_child(fds[1]);
        }
        close(fds[1]);
        int acked[G_WRITERS] = { 0 }, kill_after = rand_r(&r) % (G_WRITERS * K_OPS / 2);
        int32_t rec[2];
        bool bad = false;
        for (int n = 0; n < kill_after && read(fds[0], rec, sizeof(rec)) == sizeof(rec); n++)
            bad |= rec[1] != acked[rec[0]]++;
        usleep((useconds_t)(rand_r(&r) % 3000));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        while (read(fds[0], rec, sizeof(rec)) == sizeof(rec))
            bad |= rec[1] != acked[rec[0]]++;
        close(fds[0]);
        cr_assert_not(bad, "round %d: a writer failed an operation", round);
        killed += WIFSIGNALED(status);

        open_ok();
        char *dump = su_dump(s.reg, false);
        for (int w = 0; w < G_WRITERS; w++) {
            char *got = sections_of(dump, m[w].tag);
            char *want = model_dump(&gw[w].states[acked[w]]);
            bool same = !strcmp(got, want);
            if (!same && acked[w] < K_OPS) {
                free(want);
                want = model_dump(&gw[w].states[++acked[w]]);
                same = !strcmp(got, want);
                kept += same;
            }
            cr_assert(same, "round %d, writer %d, %d acked: store holds\n%s\nexpected\n%s",
                      round, w, acked[w], got, want);
            acked_total += acked[w];
            m[w] = gw[w].states[acked[w]];
            free(got);
            free(want);
        }
        free(dump);
        su_close(&s);
    }
    cr_log_info("%d rounds, %d killed, %d ops acknowledged, %d in flight found committed",
                G_ROUNDS, killed, acked_total, kept);
    cr_assert_gt(killed, G_ROUNDS / 2, "most rounds end in a SIGKILL");
    cr_assert_gt(acked_total, G_ROUNDS * G_WRITERS, "the writers got work done");
}

/* ---- 4. event seqs across SIGKILL ---- */

/* The child: register and deregister, reporting after each acknowledged
 * change the last event seq handed out. Alloc names are new each round. */
static void event_child(int fd, int round)
{
    struct su c = { .dir = state };
    if (su_open(&c) < 0)
        _exit(1);
    reg_plugin_create(c.reg, REG_NODE, "ev");
    for (int k = 0;; k++) {
        char alloc[32];
        snprintf(alloc, sizeof(alloc), "r%de%d", round, k / 2);
        int rc = k % 2 ? reg_instance_deregister(c.reg, REG_NODE, "ev", alloc)
                       : reg_instance_register(c.reg, REG_NODE, "ev", alloc);
        uint64_t last = ev_next_seq(reg_events(c.reg)) - 1;
        if (rc < 0 || write(fd, &last, sizeof(last)) != sizeof(last))
            _exit(1);
    }
}

static uint64_t first_event_seq(void)
{
    struct ev_cursor c;
    char line[256];
    ev_cursor_init(reg_events(s.reg), &c);
    size_t n = ev_read(reg_events(s.reg), &c, line, sizeof(line) - 1);
    line[n] = '\0';
    cr_assert_gt(n, 0, "an event was emitted");
    return strtoull(line, NULL, 10);
}

Test(store, event_seq_never_repeats_across_sigkill, .timeout = 120)
{
    unsigned r = (unsigned)time(NULL) ^ (unsigned)getpid();
    uint64_t seen = 0;
    for (int round = 0; round < 6; round++) {
        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            event_child(fds[1], round);
        }
        close(fds[1]);
        int want = 1 + rand_r(&r) % 30, got = 0;
        bool back = false;
        uint64_t last;
        while (got < want && read(fds[0], &last, sizeof(last)) == sizeof(last)) {
            back |= last <= seen;
            seen = last;
            got++;
        }
        usleep((useconds_t)(rand_r(&r) % 2000));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        while (read(fds[0], &last, sizeof(last)) == sizeof(last)) {
            back |= last <= seen;
            seen = last;
        }
        close(fds[0]);
        cr_assert_not(back, "round %d: an event seq went back", round);
        cr_assert_eq(got, want, "round %d: the child stopped early", round);

        open_ok();
        cr_assert_gt(ev_next_seq(reg_events(s.reg)), seen, "round %d", round);
        cr_assert_eq(reg_plugin_create(s.reg, REG_CONTROLLER, "probe"), 0);
        uint64_t first = first_event_seq();
        cr_assert_gt(first, seen, "round %d: event seq %llu after %llu", round,
                     (unsigned long long)first, (unsigned long long)seen);
        cr_assert_eq(reg_plugin_remove(s.reg, REG_CONTROLLER, "probe"), 0);
        seen = ev_next_seq(reg_events(s.reg)) - 1;
        su_close(&s);
    }
}

/* Test-only options: see testopt.h. Without CSIFS_TEST_OPTS only the
 * refusal of every debug_* option is compiled. */
#include "fs/testopt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef CSIFS_TEST_OPTS
#include "fs/inval.h"
#include "base/log.h"

#include <linux/fuse.h>

static struct {
    bool hold_mkdir, hold_inval;
    int held;                        /* requests held so far (atomic) */
    char stall_reply[256];           /* debug_stall_reply's FILE, "" without */
    unsigned stall_op[2];            /* debug_stall_op's opcodes, 0 without */
} topt;
static struct fuse_lowlevel_ops orig;

static void hold_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    if (__atomic_fetch_add(&topt.held, 1, __ATOMIC_RELAXED) > 0) {
        orig.mkdir(req, parent, name, mode);
        return;
    }
    csifs_log(LOG_WARNING, "debug_hold: holding mkdir %s (never answered)", name);
    if (topt.hold_inval)
        fs_inval_entry(fuse_req_userdata(req), parent, name);
    /* req is never answered nor freed: the test kills the process */
}

void fs_testopt_before_reply(unsigned op, int rc, bool committed)
{
    if (!topt.stall_reply[0])
        return;
    if (topt.stall_op[0] ? rc != 0 || (op != topt.stall_op[0] && op != topt.stall_op[1])
                         : !committed)
        return;
    csifs_log(LOG_WARNING, "debug_stall_reply: %s opcode %u, never answering (%s)",
              committed ? "committed" : "done without a commit", op, topt.stall_reply);
    int fd = open(topt.stall_reply, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    for (;;)
        pause();                     /* the test kills the process */
}

struct topt_row {
    const char *name;                /* "key" or "key=" (takes a value) */
    int (*set)(const char *val, char *err, size_t errlen);
};

static int set_hold(const char *val, char *err, size_t errlen)
{
    if (strcmp(val, "mkdir"))
        return snprintf(err, errlen, "debug_hold=%s: only mkdir can be held", val), -EINVAL;
    topt.hold_mkdir = true;
    return 1;
}

static int set_hold_inval(const char *val, char *err, size_t errlen)
{
    (void)val, (void)err, (void)errlen;
    topt.hold_inval = true;
    return 1;
}

static int set_shared_fd(const char *val, char *err, size_t errlen)
{
    (void)val, (void)err, (void)errlen;
    fs_inval_share_fd(true);
    return 1;
}

static int set_stall_reply(const char *val, char *err, size_t errlen)
{
    if (val[0] != '/' || strlen(val) >= sizeof(topt.stall_reply))
        return snprintf(err, errlen, "debug_stall_reply=%s: an absolute path", val), -EINVAL;
    strcpy(topt.stall_reply, val);
    return 1;
}

/* debug_stall_op=: the opcodes of each name (a table at file scope: cflow,
 * which scripts/check-cycles.sh runs, misreads a function after a local
 * static initialiser as a definition of the function it calls). */
static const struct stall_op {
    const char *name;
    unsigned op[2];
} stall_ops[] = {
    { "mkdir", { FUSE_MKDIR } }, { "rmdir", { FUSE_RMDIR } },
    { "symlink", { FUSE_SYMLINK } }, { "unlink", { FUSE_UNLINK } },
    { "rename", { FUSE_RENAME, FUSE_RENAME2 } },
};

static int set_stall_op(const char *val, char *err, size_t errlen)
{
    for (size_t k = 0; k < sizeof(stall_ops) / sizeof(stall_ops[0]); k++)
        if (!strcmp(val, stall_ops[k].name)) {
            memcpy(topt.stall_op, stall_ops[k].op, sizeof(topt.stall_op));
            return 1;
        }
    return snprintf(err, errlen, "debug_stall_op=%s: mkdir, rmdir, symlink, unlink or rename",
                    val), -EINVAL;
}

static const struct topt_row rows[] = {
    { "debug_hold=", set_hold },
    { "debug_hold_inval", set_hold_inval },
    { "debug_notifier_shared_fd", set_shared_fd },
    { "debug_stall_reply=", set_stall_reply },
    { "debug_stall_op=", set_stall_op },
};

int fs_testopt_parse(const char *opt, char *err, size_t errlen)
{
    for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
        size_t n = strlen(rows[k].name);
        bool valued = rows[k].name[n - 1] == '=';
        if (valued ? !strncmp(opt, rows[k].name, n) : !strcmp(opt, rows[k].name))
            return rows[k].set(opt + (valued ? n : strlen(opt)), err, errlen);
    }
    if (!strncmp(opt, "debug_", 6))
        return snprintf(err, errlen, "unknown test option %s", opt), -EINVAL;
    return 0;
}

void fs_testopt_wrap(struct fuse_lowlevel_ops *ops)
{
    orig = *ops;
    if (topt.hold_mkdir)
        ops->mkdir = hold_mkdir;
}

#else

int fs_testopt_parse(const char *opt, char *err, size_t errlen)
{
    if (strncmp(opt, "debug_", 6))
        return 0;
    snprintf(err, errlen, "unknown option %s (test options exist only in test builds)", opt);
    return -EINVAL;
}

void fs_testopt_wrap(struct fuse_lowlevel_ops *ops)
{
    (void)ops;
}

void fs_testopt_before_reply(unsigned op, int rc, bool committed)
{
    (void)op, (void)rc, (void)committed;
}

#endif

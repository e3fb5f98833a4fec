#include "tests/lib/fsrun.h"
#include "tests/lib/testutil.h"
#include "registry/store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

static struct store *the_store;   /* in-process mode */

static int make_dirs(struct tf *t, const char *tag)
{
    if (!t->dir && !(t->dir = tu_tmpdir(tag)))
        return -errno;
    chmod(t->dir, 0755);
    if ((!t->mnt && asprintf(&t->mnt, "%s/mnt", t->dir) < 0) ||
        (!t->state && asprintf(&t->state, "%s/state", t->dir) < 0))
        return -ENOMEM;
    if (mkdir(t->mnt, 0755) < 0 && errno != EEXIST)
        return -errno;
    tu_note("mnt", t->mnt);
    return 0;
}

static void *serve(void *arg)
{
    struct tf *t = arg;
    fs_loop(t->fs, false);
    return NULL;
}

int tf_start(struct tf *t, const struct tf_opts *o)
{
    int rc = make_dirs(t, o->tag ? o->tag : "fs");
    struct reg_opts ro = { .health_timeout_ms = o->health_timeout_ms };
    char err[512] = "";
    if (rc == 0 && !o->memory) {
        rc = store_open(&the_store, t->state, STORE_NOSYNC, err, sizeof(err));
        if (rc == 0)
            ro.backend = store_backend(the_store);
    }
    if (rc == 0)
        rc = reg_open(&t->reg, &ro);
    struct fs_opts fo = { .mountpoint = t->mnt, .has_registrar = o->has_registrar,
                          .registrar_gid = o->registrar_gid,
                          .pending_ttl_ms = o->pending_ttl_ms };
    if (rc == 0)
        rc = fs_mount(&t->fs, &fo);
    if (rc == 0)
        rc = fs_attach(t->fs, t->reg);
    if (rc == 0)
        rc = -pthread_create(&t->th, NULL, serve, t);
    t->thread = rc == 0;
    if (rc < 0)
        fprintf(stderr, "tf_start: %s %s\n", strerror(-rc), err);
    return rc;
}

static bool mounted(void *arg)
{
    /* statfs always reaches the daemon: a dead mount's cached stat does not
     * count as mounted. */
    struct tf *t = arg;
    struct statfs sfs;
    return statfs(t->mnt, &sfs) == 0 && sfs.f_type == 0x65735546; /* FUSE_SUPER_MAGIC */
}

int tf_spawn(struct tf *t, const struct tf_opts *o)
{
    int rc = make_dirs(t, o->tag ? o->tag : "proc");
    if (rc < 0)
        return rc;
    char opts[1024], bin[512];
    snprintf(opts, sizeof(opts), "state=%s%s%s", t->state, o->extra_opts ? "," : "",
             o->extra_opts ? o->extra_opts : "");
    snprintf(bin, sizeof(bin), "%s/csifs", tu_build_dir());
    t->pid = fork();
    if (t->pid < 0)
        return -errno;
    if (t->pid == 0) {
        execl(bin, "csifs", "-f", "-o", opts, t->mnt, (char *)NULL);
        _exit(127);
    }
    tu_note_pid(t->pid);
    if (!tu_wait_for(mounted, t, 10000)) {
        tf_kill(t, true);
        return -ETIMEDOUT;
    }
    return 0;
}

void tf_kill(struct tf *t, bool kill9)
{
    if (t->pid <= 0)
        return;
    kill(t->pid, kill9 ? SIGKILL : SIGTERM);
    int64_t end = tu_now_ms() + tu_ms(10000);
    int st;
    while (waitpid(t->pid, &st, WNOHANG) == 0) {
        if (tu_now_ms() > end) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &st, 0);
            break;
        }
        tu_sleep_ms(5);
    }
    t->pid = 0;
}

/* Abort a connection that does not answer (fusectl), then detach. */
static void force_unmount(const char *mnt)
{
    struct stat st;
    if (stat(mnt, &st) == 0 && st.st_ino != 1)
        return;                      /* not our mount */
    char path[128];
    if (stat(mnt, &st) == 0 || errno == ENOTCONN) {
        if (errno != ENOTCONN) {
            snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u/abort",
                     (unsigned)minor(st.st_dev));
            int fd = open(path, O_WRONLY);
            if (fd >= 0) {
                (void)!write(fd, "1", 1);
                close(fd);
            }
        }
    }
    umount2(mnt, MNT_DETACH);
}

void tf_halt(struct tf *t)
{
    if (t->thread) {
        fs_exit(t->fs);
        pthread_join(t->th, NULL);
        t->thread = false;
    }
    tf_kill(t, false);
    if (t->mnt)
        force_unmount(t->mnt);
    fs_destroy(t->fs);
    t->fs = NULL;
    reg_close(t->reg);
    t->reg = NULL;
    store_close(the_store);
    the_store = NULL;
}

void tf_stop(struct tf *t)
{
    tf_halt(t);
    tu_rmrf(t->dir);
    free(t->dir);
    free(t->mnt);
    free(t->state);
    memset(t, 0, sizeof(*t));
}

const char *tf_path(struct tf *t, const char *rel)
{
    return tu_path(t->mnt, rel);
}

int tf_sh(struct tf *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = tu_vsh(t->mnt, fmt, ap);
    va_end(ap);
    return rc;
}

const char *tf_cat(struct tf *t, const char *rel)
{
    static char buf[65536];
    int fd = open(tf_path(t, rel), O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    if (n > 0 && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
    return buf;
}

const char *tf_readlink(struct tf *t, const char *rel)
{
    static char buf[4096];
    ssize_t n = readlink(tf_path(t, rel), buf, sizeof(buf) - 1);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return buf;
}

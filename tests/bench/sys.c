/* Clocks, /proc readers, child processes, tmpfs and csifs daemons. */
#include "tests/bench/bench.h"
#include "tests/lib/testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_s(double s)
{
    struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

int dir_entries(const char *dir)
{
    struct dirent **v;
    int n = scandir(dir, &v, NULL, NULL);    /* . and .. included */
    for (int k = 0; k < n; k++)
        free(v[k]);
    if (n >= 0)
        free(v);
    return n < 0 ? -1 : n - 2;
}

void say(const char *fmt, ...)
{
    va_list ap;
    static double t0;
    if (t0 == 0)
        t0 = now_s();
    va_start(ap, fmt);
    fprintf(stderr, "bench: [%5.1fs] ", now_s() - t0);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A "<field>: N kB" line of /proc/PID/status: N, or -1. */
static long proc_status_kib(pid_t pid, const char *field)
{
    char path[64], line[256], fmt[64];
    long kib = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    snprintf(fmt, sizeof(fmt), "%s: %%ld kB", field);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, fmt, &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

long proc_rss_kib(pid_t pid)
{
    return proc_status_kib(pid, "VmRSS");
}

long proc_rss_anon_kib(pid_t pid)
{
    return proc_status_kib(pid, "RssAnon");
}

double proc_cpu_s(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* Fields after "(comm)": state is field 3; utime and stime are 14, 15. */
    char *p = strrchr(buf, ')');
    unsigned long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double proc_runq_wait_s(pid_t pid)
{
    char dir[64], path[400], buf[128];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    double wait = 0;
    unsigned long long run, w;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/schedstat", dir, e->d_name);
        FILE *f = fopen(path, "re");
        if (f && fgets(buf, sizeof(buf), f) && sscanf(buf, "%llu %llu", &run, &w) == 2)
            wait += (double)w / 1e9;
        if (f)
            fclose(f);
    }
    closedir(d);
    return wait;
}

int sys_cpu_steal(double *busy_s, double *steal_s)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -errno;
    unsigned long long v[8] = { 0 };
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8)
        return -EIO;
    double tick = (double)sysconf(_SC_CLK_TCK);
    /* user nice system idle iowait irq softirq steal */
    *busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / tick;
    *steal_s = (double)v[7] / tick;
    return 0;
}

pid_t run_bg(const char *const *argv, int in_fd, int out_fd)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(in_fd >= 0 ? in_fd : null, STDIN_FILENO);
        dup2(out_fd >= 0 ? out_fd : null, STDOUT_FILENO);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int run_fg(const char *const *argv)
{
    pid_t pid = run_bg(argv, -1, -1);
    int st;
    if (pid < 0)
        return pid;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return st;
}

const char *self_exe(void)
{
    static char path[4096];
    if (!path[0]) {
        ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
        path[n > 0 ? n : 0] = '\0';
    }
    return path;
}

int drop_dentries(void)
{
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd < 0)
        return -errno;
    int rc = write(fd, "2", 1) == 1 ? 0 : -errno;
    close(fd);
    return rc;
}

int tmpfs_mount(const char *dir)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    return mount("bench", dir, "tmpfs", 0, "mode=0755,size=1g") < 0 ? -errno : 0;
}

void tmpfs_umount(const char *dir)
{
    umount2(dir, MNT_DETACH);
    rmdir(dir);
}

pid_t floor_start(const char *mnt, const char *src, const char *state)
{
    char bin[4096];
    struct stat before, now;
    snprintf(bin, sizeof(bin), "%s/floorfs", getenv("BUILD") ? getenv("BUILD") : "build");
    if ((mkdir(mnt, 0755) < 0 && errno != EEXIST) || stat(mnt, &before) < 0)
        return -errno;
    const char *argv[] = { bin, mnt, src, state, NULL };
    pid_t pid = run_bg(argv, -1, -1);
    for (double end = now_s() + 30; pid > 0 && now_s() < end; sleep_s(0.001))
        if (stat(mnt, &now) == 0 && now.st_dev != before.st_dev)
            return pid;
    say("floorfs on %s did not mount", mnt);
    floor_stop(pid, mnt);
    return -ETIMEDOUT;
}

void floor_stop(pid_t pid, const char *mnt)
{
    if (pid > 0 && kill(pid, SIGTERM) == 0)
        waitpid(pid, NULL, 0);
    umount2(mnt, MNT_DETACH);        /* a floorfs that died unmounted nothing */
}

bool daemon_alive(struct tf *t)
{
    int st;
    if (t->pid <= 0 || waitpid(t->pid, &st, WNOHANG) == 0)
        return t->pid > 0;
    if (WIFSIGNALED(st))
        say("csifs (pid %d) died of signal %d", (int)t->pid, WTERMSIG(st));
    else
        say("csifs (pid %d) exited with status %d", (int)t->pid, WEXITSTATUS(st));
    t->pid = 0;
    return false;
}

void daemon_stop(struct tf *t)
{
    daemon_alive(t);
    tf_stop(t);
}

int daemon_start(struct tf *t, const char *tag, const char *opts)
{
    struct tf_opts o = { .tag = tag, .extra_opts = opts };
    int rc = tf_spawn(t, &o);
    if (rc < 0)
        say("cannot start csifs -o %s: %s", opts ? opts : "", strerror(-rc));
    return rc;
}

static const char *vpath(struct tf *t, const char *fmt, va_list ap)
{
    char rel[1024];
    vsnprintf(rel, sizeof(rel), fmt, ap);
    return tf_path(t, rel);
}

int mkdirf(struct tf *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = mkdir(vpath(t, fmt, ap), 0755) < 0 ? -errno : 0;
    va_end(ap);
    return rc;
}

int symlinkf(struct tf *t, const char *target, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = symlink(target, vpath(t, fmt, ap)) < 0 ? -errno : 0;
    va_end(ap);
    return rc;
}

ssize_t readf(struct tf *t, char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int fd = open(vpath(t, fmt, ap), O_RDONLY);
    va_end(ap);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    buf[n] = '\0';
    return n;
}

bool wait_files(struct tf *t, const char *fmt, int n, const char *want, double timeout_s)
{
    double end = now_s() + timeout_s;
    size_t wl = strlen(want);
    char buf[64], rel[256];
    for (int i = 0; i < n;) {
        snprintf(rel, sizeof(rel), fmt, i);
        ssize_t len = readf(t, buf, sizeof(buf), "%s", rel);
        if (len > 0 && (size_t)len == wl + 1 && strncmp(buf, want, wl) == 0) {
            i++;
            continue;
        }
        if (now_s() > end)
            return false;
        sleep_s(0.05);
    }
    return true;
}

double http_get_s(int port, const char *path)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    char req[256], buf[65536];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path), status = 0;
    double t0 = now_s();
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        write(s, req, (size_t)n) != n) {
        say("http %s: %s", path, strerror(errno));
        if (s >= 0)
            close(s);
        return NAN;
    }
    ssize_t got;
    for (bool first = true; (got = read(s, buf, sizeof(buf) - 1)) > 0; first = false)
        if (first) {                 /* the status line comes whole in the first read */
            buf[got] = '\0';
            if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
                status = 0;
        }
    double dt = now_s() - t0;
    close(s);
    if (status != 200) {
        say("http %s: status %d", path, status);
        return NAN;
    }
    return dt;
}

int run_start(const char *const *argv, struct run *r)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(out, O_CLOEXEC) < 0) {
        int e = errno;
        close(in[0]);
        close(in[1]);
        return -e;
    }
    r->argv = argv;
    r->pid = run_bg(argv, in[0], out[1]);   /* dup2 clears O_CLOEXEC */
    close(in[0]);
    close(out[1]);
    r->in = in[1];
    r->out = out[0];
    if (r->pid < 0) {
        close(r->in);
        close(r->out);
        return r->pid;
    }
    return 0;
}

int run_finish(struct run *r, double *v, int n)
{
    char buf[256];
    size_t len = 0;
    ssize_t got;
    close(r->in);
    while (len < sizeof(buf) - 1 &&
           ((got = read(r->out, buf + len, sizeof(buf) - 1 - len)) > 0 ||
            (got < 0 && errno == EINTR)))
        len += got > 0 ? (size_t)got : 0;
    buf[len] = '\0';
    close(r->out);
    int st = -1, k = 0;
    while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
        ;
    for (char *p = buf, *end; k < n; p = end, k++) {
        v[k] = strtod(p, &end);
        if (end == p)
            break;
    }
    if (st != 0 || k < n)
        say("%s %s: status %d, output '%s'", r->argv[0], r->argv[1] ? r->argv[1] : "", st, buf);
    return st == 0 ? k : -EIO;
}

int run_values(const char *const *argv, double *v, int n)
{
    struct run r;
    int rc = run_start(argv, &r);
    return rc < 0 ? rc : run_finish(&r, v, n);
}

double run_value(const char *const *argv)
{
    double v;
    return run_values(argv, &v, 1) == 1 ? v : NAN;
}

/* The events read so far (the fd is O_NONBLOCK). */
static char evbuf[1 << 20];
static size_t evlen;

/* The time stamp (ms) of the event line holding needle, read from fd
 * within timeout_ms; -1 when none came. Forgets what was read. */
int64_t event_time(int fd, const char *needle, int timeout_ms)
{
    int64_t end = wall_ms() + timeout_ms;
    const char *line = NULL;
    while (!(line = strstr(evbuf, needle)) && wall_ms() < end) {
        if (evlen + 1 >= sizeof(evbuf))
            evlen = 0;               /* only the newest lines matter */
        ssize_t n = read(fd, evbuf + evlen, sizeof(evbuf) - 1 - evlen);
        if (n > 0)
            evbuf[evlen += (size_t)n] = '\0';
        else
            sleep_s(0.001);
    }
    int64_t ms = -1;
    while (line && line > evbuf && line[-1] != '\n')
        line--;
    struct tm tm = { 0 };
    int milli;
    if (line && sscanf(line, "%*u %d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                       &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &milli) == 7) {
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        ms = (int64_t)timegm(&tm) * 1000 + milli;
    }
    evlen = 0;
    evbuf[0] = '\0';
    return ms;
}

/* What an operator gets from the tree: `make install` / `make uninstall`
 * into a DESTDIR (exactly the listed files, a working csifs, a unit that
 * systemd-analyze accepts), the man pages (mandoc lint, groff warnings, man
 * renders them), and `make demo` against the real programs. Run from the top
 * of the tree (like every test); the programs come from $BUILD (make's -o
 * keeps make from rebuilding them with other flags). */
#include <criterion/criterion.h>
#include <errno.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/testutil.h"

static char *work;           /* temp dir: DESTDIR, TMPDIR of the demo */
static char out[1 << 17];    /* output of the last run() */

static void setup(void)
{
    work = tu_tmpdir("install");
    cr_assert(work);
}

static void teardown(void)
{
    tu_rmrf(work);
    free(work);
    work = NULL;
}

/* Generous: the first `make install` builds the release csifs. */
TestSuite(install, .init = setup, .fini = teardown, .timeout = 900);

/* Run `sh -c CMD` with stderr joined to stdout into out[]; its exit status,
 * or 128 + signal. */
static int __attribute__((format(printf, 1, 2))) run(const char *fmt, ...)
{
    char cmd[4096], full[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    cr_assert(p, "popen %s: %s", cmd, strerror(errno));
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    while (fread(full, 1, sizeof(full), p) > 0)   /* drain what did not fit */
        ;
    int st = pclose(p);
    cr_assert_neq(st, -1);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A process whose command line names DIR (the demo's csifs and plugins do). */
static bool process_naming(const char *dir)
{
    DIR *d = opendir("/proc");
    cr_assert(d);
    bool found = false;
    for (struct dirent *e; (e = readdir(d));) {
        char path[300], cmd[8192];
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            cmd[i] = cmd[i] ? cmd[i] : ' ';
        cmd[n] = '\0';
        if (strstr(cmd, dir))
            found = true;
    }
    closedir(d);
    return found;
}

static bool mounted_under(const char *dir)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    cr_assert(f);
    char line[4096];
    bool found = false;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, dir))
            found = true;
    fclose(f);
    return found;
}

static const char *const installed[] = {
    "usr/bin/csifs",
    "usr/bin/csi-plugin-hook",
    "usr/share/man/man8/csifs.8",
    "usr/share/man/man8/csi-plugin-hook.8",
    "usr/lib/systemd/system/csifs.service",
};
#define NINSTALLED (sizeof(installed) / sizeof(installed[0]))

/* Every non-directory under DIR, relative, one per line, sorted. */
static void list_files(const char *dir)
{
    cr_assert_eq(run("cd '%s' && find . ! -type d | sed 's|^\\./||' | LC_ALL=C sort", dir), 0,
                 "find: %s", out);
}

static void make_install(const char *dest, const char *target)
{
    int rc = run("timeout 800 make -s --no-print-directory BUILD='%s' DESTDIR='%s' PREFIX=/usr %s",
                 tu_build_dir(), dest, target);
    cr_assert_eq(rc, 0, "make %s: exit %d: %s", target, rc, out);
}

Test(install, installs_exactly_the_listed_files_and_uninstall_removes_them)
{
    char dest[600], path[800];
    snprintf(dest, sizeof(dest), "%s/dest", work);
    make_install(dest, "install");

    _Static_assert(NINSTALLED == 5, "the printf below lists every installed file");
    cr_assert_eq(run("printf '%%s\\n' %s %s %s %s %s | LC_ALL=C sort", installed[0],
                     installed[1], installed[2], installed[3], installed[4]), 0);
    char *want = strdup(out);
    cr_assert(want);
    list_files(dest);
    cr_assert_str_eq(out, want, "installed files differ:\n%s\nwant:\n%s", out, want);
    free(want);

    for (size_t i = 0; i < NINSTALLED; i++) {
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s", dest, installed[i]);
        cr_assert_eq(stat(path, &sb), 0, "%s", path);
        mode_t want_mode = strstr(installed[i], "/bin/") ? 0755 : 0644;
        cr_assert_eq(sb.st_mode & 07777, want_mode, "%s: mode %o", path, sb.st_mode & 07777);
    }

    /* The installed programs run from where they were installed. */
    cr_assert_eq(run("'%s/usr/bin/csifs' --version", dest), 0, "csifs --version: %s", out);
    cr_assert(!strncmp(out, "csifs ", 6) && strchr(out, '.'), "csifs --version said: %s", out);
    cr_assert_eq(run("'%s/usr/bin/csi-plugin-hook' --help", dest), 0, "hook --help: %s", out);
    cr_assert(strstr(out, "prestart"), "%s", out);
    /* ... and has no test-only option: refused, nothing mounted (a csifs
     * that mounted after all is stopped by timeout's SIGTERM). */
    int rc = run("timeout 10 '%s/usr/bin/csifs' -f -o 'debug_commit_delay_ms=1,state=%s/st' '%s/mnt'",
                 dest, work, work);
    cr_assert(rc != 0 && strstr(out, "debug_commit_delay_ms"),
              "installed csifs took a test-only option: exit %d: %s", rc, out);
    cr_assert(!mounted_under(work), "installed csifs mounted with a test-only option");

    /* The unit names the installed path, as PREFIX says. */
    cr_assert_eq(run("grep '^ExecStart=' '%s/usr/lib/systemd/system/csifs.service'", dest), 0);
    cr_assert(!strncmp(out, "ExecStart=/usr/bin/csifs -f ", 28), "%s", out);

    /* a file of another program keeps its directory, and only it */
    cr_assert_eq(run("mkdir -p '%s/usr/share/man/man1' && touch '%s/usr/share/man/man1/x.1'",
                     dest, dest), 0, "%s", out);
    make_install(dest, "uninstall");
    cr_assert_eq(run("cd '%s' && find . -mindepth 1 | LC_ALL=C sort", dest), 0, "%s", out);
    cr_assert_str_eq(out, "./usr\n./usr/share\n./usr/share/man\n./usr/share/man/man1\n"
                     "./usr/share/man/man1/x.1\n", "left behind after uninstall:\n%s", out);
}

/* `make` builds the programs only; the Criterion binaries are `make test`'s.
 * A dry run into an empty BUILD lists every link it would do (without
 * pkg-config, which a dry run would call for every command). */
#define DRY "PKG_CFLAGS= PKG_LIBS= CRIT_LIBS= "
Test(install, make_builds_only_csifs_and_the_test_plugin)
{
    cr_assert_eq(run("make -n -B --no-print-directory " DRY "BUILD='%s/b' | "
                     "sed -n 's|.*LD  *%s/b/\\([^\"]*\\).*|\\1|p' | LC_ALL=C sort", work, work), 0,
                 "%s", out);
    cr_assert_str_eq(out, "csi-test-plugin\ncsifs\n", "make would link:\n%s", out);
    cr_assert_eq(run("make -n -B --no-print-directory " DRY "BUILD='%s/b' tests | grep -c 'LD .*/tests/'",
                     work), 0, "%s", out);
    cr_assert_gt(atoi(out), 5, "make tests links only %s test binaries", out);
}

/* systemd-analyze verify checks the unit's syntax, that ExecStart's binary
 * exists and is executable, and (with MANPATH at the DESTDIR) that every
 * Documentation= page is found. */
static int verify_unit(const char *dest, const char *unit)
{
    return run("MANPATH='%s/usr/share/man' SYSTEMD_LOG_COLOR=0 systemd-analyze verify '%s'",
               dest, unit);
}

Test(install, installed_unit_passes_systemd_analyze_verify)
{
    cr_assert_eq(run("command -v systemd-analyze"), 0,
                 "systemd-analyze missing: install the Debian package systemd (scripts/deps.sh)");
    char dest[600], unit[700];
    snprintf(dest, sizeof(dest), "%s/dest", work);
    snprintf(unit, sizeof(unit), "%s/csifs.service", work);
    make_install(dest, "install");
    cr_assert_eq(run("sed 's|^ExecStart=/usr/bin/|ExecStart=%s/usr/bin/|' "
                     "'%s/usr/lib/systemd/system/csifs.service' >'%s' && grep '^ExecStart=' '%s'",
                     dest, dest, unit, unit), 0, "%s", out);
    cr_assert(strstr(out, dest), "ExecStart not rewritten: %s", out);
    int rc = verify_unit(dest, unit);
    cr_assert_eq(rc, 0, "systemd-analyze verify: exit %d: %s", rc, out);
    cr_assert_str_eq(out, "", "systemd-analyze verify said: %s", out);

    /* The check is real: with the binary gone it fails, naming it. */
    make_install(dest, "uninstall");
    rc = verify_unit(dest, unit);
    cr_assert_neq(rc, 0, "verify passed with no binary: %s", out);
    cr_assert(strstr(out, "csifs"), "%s", out);
}

Test(install, man_pages_lint_clean_and_render)
{
    static const char *const pages[] = { "docs/csifs.8", "docs/csi-plugin-hook.8" };
    cr_assert_eq(run("command -v mandoc"), 0,
                 "mandoc missing: install the Debian package mandoc (scripts/deps.sh)");
    for (size_t i = 0; i < 2; i++) {
        int rc = run("mandoc -T lint -W all '%s'", pages[i]);
        cr_assert_eq(rc, 0, "mandoc -T lint %s: exit %d: %s", pages[i], rc, out);
        cr_assert_str_eq(out, "", "mandoc -T lint %s: %s", pages[i], out);
        rc = run("groff -ww -man -z '%s'", pages[i]);
        cr_assert_eq(rc, 0, "groff -ww %s: exit %d: %s", pages[i], rc, out);
        cr_assert_str_eq(out, "", "groff -ww %s: %s", pages[i], out);
        rc = run("MANWIDTH=80 man -l '%s' | cat", pages[i]);
        cr_assert_eq(rc, 0, "man -l %s: %s", pages[i], out);
        cr_assert(strstr(out, "NAME") && strstr(out, "SYNOPSIS") && strstr(out, "EXIT STATUS"),
                  "man -l %s rendered: %.400s", pages[i], out);
    }
    /* The contract's rows a user looks up are there (spaces squeezed:
     * justification spreads them differently as the text above moves) */
    cr_assert_eq(run("MANWIDTH=80 man -l docs/csifs.8 | tr -s ' '"), 0);
    static const char *const rows[] = {
        "ERRORS", "ENOTEMPTY", "ENAMETOOLONG", "control character", "not an absolute path",
        "SIGHUP", "log_level=", "fuse.csifs state=/var/lib/csifs 0 0", "EVENTS", "lost N",
        "csifs_instances", "memory_peak_bytes",
        "KUBERNETES", "kubelet_dir=", "node-driver-registrar",
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        cr_assert(strstr(out, rows[i]), "csifs(8) does not mention '%s'", rows[i]);
    cr_assert_eq(run("MANWIDTH=80 man -l docs/csi-plugin-hook.8 | tr -s ' '"), 0);
    static const char *const hook_rows[] = {
        "run", "unmount", "CSI_PLUGIN_TYPE", "NOMAD_ALLOC_ID", "--env-file", "raw_exec",
        "containers:", "ExecStart=/usr/local/bin/csi-plugin-hook run",
        "kind: DaemonSet", "livenessProbe:", "mountPropagation: Bidirectional",
    };
    for (size_t i = 0; i < sizeof(hook_rows) / sizeof(hook_rows[0]); i++)
        cr_assert(strstr(out, hook_rows[i]), "csi-plugin-hook(8) does not mention '%s'",
                  hook_rows[i]);
}

Test(install, make_demo_exits_0_showing_healthy_current_and_the_events)
{
    const char *b = tu_build_dir();
    int rc = run("TMPDIR='%s' timeout 200 make -s --no-print-directory -o '%s/csifs' "
                 "-o '%s/csi-test-plugin' BUILD='%s' demo", work, b, b, b);
    cr_assert_eq(rc, 0, "make demo: exit %d:\n%s", rc, out);
    static const char *const seen[] = {
        "healthy\nok\n",                                     /* cat health reason */
        "readlink csi-node/demo/current\na1\n",              /* a1 became current */
        "readlink csi-node/demo/current; cat csi-node/demo/current/version\na2\n2.0.0\n",
        " registered csi-node/demo/a1\n",                    /* the events */
        " current csi-node/demo alloc=a1\n",
        " current csi-node/demo alloc=a2\n",
        " health csi-node/demo/a1 state=unhealthy ready=1 reason=",
        " deregistered csi-node/demo/a1\n",
        "csifs exited with status 0\n",
        "demo: done\n",
    };
    for (size_t i = 0; i < sizeof(seen) / sizeof(seen[0]); i++)
        cr_assert(strstr(out, seen[i]), "make demo did not print '%s':\n%s", seen[i], out);
    /* It cleaned up after itself: no mount, no temp dir, no process. */
    cr_assert(!mounted_under(work), "a mount under %s is left", work);
    cr_assert(!process_naming(work), "a process of the demo is left");
    cr_assert_eq(run("ls -A '%s'", work), 0);
    cr_assert_str_eq(out, "", "left in TMPDIR: %s", out);
}

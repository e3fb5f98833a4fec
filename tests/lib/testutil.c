#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <ftw.h>

int64_t tu_ms(int64_t ms)
{
    const char *s = getenv("CSIFS_TEST_SLACK");
    double k = s ? atof(s) : 1.0;
    if (k < 1.0)
        k = 1.0;
    return (int64_t)(ms * k);
}

int64_t tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tu_sleep_ms(int64_t ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

bool tu_wait_for(bool (*cond)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t end = tu_now_ms() + tu_ms(timeout_ms);
    for (;;) {
        if (cond(arg))
            return true;
        if (tu_now_ms() > end)
            return false;
        tu_sleep_ms(5);
    }
}

char *tu_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *p = NULL;
    if (asprintf(&p, "%s/csifs-%s-XXXXXX", base ? base : "/tmp", tag) < 0)
        return NULL;
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

void tu_rmrf(const char *path)
{
    if (path)
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

const char *tu_build_dir(void)
{
    const char *b = getenv("BUILD");
    return b && *b ? b : "build";
}

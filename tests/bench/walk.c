/* bench_walk (walk.h). */
#include "tests/bench/walk.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int bench_walk(const char *dir, bench_walk_fn *fn, void *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        rc = lstat(path, &st) < 0 ? -errno : fn(path, e->d_name, &st, arg);
    }
    closedir(d);
    return rc;
}

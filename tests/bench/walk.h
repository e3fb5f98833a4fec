/* One directory's names with their lstat: the walk shared by the bench's
 * tree copy (tree.c) and the floor's load (floorfs.c). */
#ifndef CSIFS_BENCH_WALK_H
#define CSIFS_BENCH_WALK_H

#include <sys/stat.h>

/* path: dir/name. Returns 0 to go on, else the value bench_walk returns. */
typedef int bench_walk_fn(const char *path, const char *name, const struct stat *st,
                          void *arg);
/* fn for every name of dir but . and .., in readdir order. 0, fn's first
 * non-zero return, or -errno (opendir, lstat). */
int bench_walk(const char *dir, bench_walk_fn *fn, void *arg);

#endif

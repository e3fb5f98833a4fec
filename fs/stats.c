/* <mnt>/<type>/<plugin>/<alloc>/stats: the plugin process of an instance,
 * fresh at each open (DESIGN 11); empty while no live process is known. */
#include "fs/kinds.h"
#include "fs/proc_stats.h"

#include <errno.h>

int fs_stats_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                  struct fs_fh **out)
{
    struct fs_buf b = { 0 };
    struct fs_proc_stats s;
    struct reg_node now;             /* the pid as it is now, not at lookup */
    if (reg_get(fs->reg, n->r.seq, &now) < 0)
        return -ENOENT;
    if (fs_proc_stats("", now.pid, &s) == 0)
        fs_proc_stats_format(&s, &b);
    return fs_snap_open(&b, fi, out);
}

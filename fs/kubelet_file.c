/* The `kubelet` file of a csi-node plugin dir (DESIGN 14): a snapshot of
 * the verdict the kubelet module gives (kubelet/kubelet.h), which fs/ knows
 * only as the function set by fs_kubelet_source. */
#include "fs/kinds.h"
#include "fs/snapshot.h"

#include <errno.h>

static struct {
    fs_kubelet_show_fn *show;
    void *arg;
} src;

void fs_kubelet_source(fs_kubelet_show_fn *show, void *arg)
{
    src.arg = arg;
    __atomic_store_n(&src.show, show, __ATOMIC_RELEASE);
}

bool fs_kubelet_exists(const struct fs_node *n)
{
    return n->type == REG_NODE && __atomic_load_n(&src.show, __ATOMIC_ACQUIRE);
}

int fs_kubelet_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                    struct fs_fh **out)
{
    (void)fs;
    fs_kubelet_show_fn *show = __atomic_load_n(&src.show, __ATOMIC_ACQUIRE);
    char line[1024];
    ssize_t len = show ? show(src.arg, n->type, n->r.plugin, line, sizeof(line)) : -ENOENT;
    if (len < 0)
        return (int)len;
    struct fs_buf b = { 0 };
    fs_buf_printf(&b, "%s", line);
    return fs_snap_open(&b, fi, out);
}

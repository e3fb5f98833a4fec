/* The `kubelet` file of a csi-node plugin dir (DESIGN 14): a snapshot of
 * the verdict the kubelet module gives (kubelet/kubelet.h), which fs/ knows
 * only as the function set by fs_kubelet_source. */
#include "fs/kinds.h"
#include "fs/snapshot.h"

#include <errno.h>
#include <string.h>

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
    ssize_t len = show ? show(src.arg, n->type, n->r.plugin, line, sizeof(line), NULL, 0)
                       : -ENOENT;
    if (len < 0)
        return (int)len;
    struct fs_buf b = { 0 };
    fs_buf_printf(&b, "%s", line);
    return fs_snap_open(&b, fi, out);
}

/* s as a label value (backslash, quote and newline escaped) */
static void label(struct fs_buf *b, const char *s)
{
    for (; *s; s++) {
        const char *esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
        if (esc)
            fs_buf_printf(b, "%s", esc);
        else
            fs_buf_printf(b, "%c", *s);
    }
}

bool fs_kubelet_on(void)
{
    return __atomic_load_n(&src.show, __ATOMIC_ACQUIRE) != NULL;
}

void fs_kubelet_metric(struct fs_buf *b, const char *plugin)
{
    fs_kubelet_show_fn *show = __atomic_load_n(&src.show, __ATOMIC_ACQUIRE);
    char line[1024], prov[256] = "";
    if (!show || show(src.arg, REG_NODE, plugin, line, sizeof(line), prov, sizeof(prov)) < 0 ||
        !*prov)
        return;
    fs_buf_printf(b, "csifs_kubelet_registered{type=\"%s\",plugin=\"%s\",provider=\"",
                  reg_type_names[REG_NODE], plugin);
    label(b, prov);
    fs_buf_printf(b, "\"} %d\n", !strcmp(line, "registered\n"));
}

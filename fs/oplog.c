/* Log lines for refused calls and registry changes. See oplog.h. */
#include "fs/oplog.h"
#include "fs/node.h"
#include "base/log.h"

#include <string.h>

static struct fuse_lowlevel_ops orig;

#define PATH_CAP (4 * REG_NAME_MAX + 64)

/* "csi-node/p/a/mount_point" of an inode, "?" when gone */
static const char *node_path(fuse_req_t req, fuse_ino_t ino, char *buf)
{
    struct fs_node n;
    if (fs_resolve(fuse_req_userdata(req), ino, &n) < 0)
        return strcpy(buf, "?");
    const char *t = n.kind == K_ROOT ? "." : reg_type_names[n.type];
    const char *leaf = fs_node_name(&n) ? fs_node_name(&n) : "?";
    switch (n.kind) {
    case K_ROOT: case K_TYPE: snprintf(buf, PATH_CAP, "%s", t); break;
    case K_PLUGIN: snprintf(buf, PATH_CAP, "%s/%s", t, n.r.plugin); break;
    case K_INST: snprintf(buf, PATH_CAP, "%s/%s/%s", t, n.r.plugin, n.r.alloc); break;
    default: snprintf(buf, PATH_CAP, "%s/%s/%s/%s", t, n.r.plugin, n.r.alloc, leaf);
    }
    return buf;
}

/* The handler replies before it returns; its thread's reg_why() then says
 * why a validation refused it. The path is taken before: it may go. */
#define WRAPPED(call, fmt, ...)                                           \
    do {                                                                  \
        reg_why_clear();                                                  \
        call;                                                             \
        if (*reg_why())                                                   \
            reg_log(LOG_INFO, fmt ": %s", __VA_ARGS__, reg_why());        \
        reg_why_clear();                                                  \
    } while (0)

static void w_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    char dir[PATH_CAP];
    node_path(req, parent, dir);
    WRAPPED(orig.mkdir(req, parent, name, mode), "mkdir %s/%s", dir, name);
}

static void w_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    char dir[PATH_CAP];
    node_path(req, parent, dir);
    WRAPPED(orig.symlink(req, target, parent, name), "symlink %s/%s -> %s", dir, name, target);
}

static void w_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                     const char *newname, unsigned int flags)
{
    char dir[PATH_CAP];
    node_path(req, parent, dir);
    WRAPPED(orig.rename(req, parent, name, newparent, newname, flags), "rename %s/%s to %s", dir,
            name, newname);
}

static void w_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    char path[PATH_CAP];
    node_path(req, ino, path);
    WRAPPED(orig.write(req, ino, buf, size, off, fi), "write %s", path);
}

void fs_oplog_wrap(struct fuse_lowlevel_ops *ops)
{
    orig = *ops;
    ops->mkdir = w_mkdir;
    ops->symlink = w_symlink;
    ops->rename = w_rename;
    ops->write = w_write;
}

/* ---- registry changes ---- */

static void on_change(const struct reg_change *c, void *arg)
{
    struct reg *reg = arg;
    const char *type = reg_type_names[c->type];
    char v[512] = "", r[256] = "";
    switch (c->kind) {
    case REG_C_PLUGIN_ADD: reg_log(LOG_INFO, "registered %s/%s", type, c->plugin_name); break;
    case REG_C_PLUGIN_DEL: reg_log(LOG_INFO, "deregistered %s/%s", type, c->plugin_name); break;
    case REG_C_INST_ADD:
        reg_log(LOG_INFO, "registered %s/%s/%s", type, c->plugin_name, c->alloc_name);
        break;
    case REG_C_INST_DEL:
        reg_log(LOG_INFO, "deregistered %s/%s/%s", type, c->plugin_name, c->alloc_name);
        break;
    case REG_C_SOCKET:
        if (reg_socket_get(reg, c->inst, v, sizeof(v)) < 0)
            strcpy(v, "(cleared)");
        reg_log(LOG_INFO, "%s/%s/%s: socket %s", type, c->plugin_name, c->alloc_name, v);
        break;
    case REG_C_HEALTH:
        reg_attr_show(reg, c->inst, REG_A_HEALTH, v, sizeof(v));
        reg_attr_show(reg, c->inst, REG_A_REASON, r, sizeof(r));
        v[strcspn(v, "\n")] = r[strcspn(r, "\n")] = '\0';
        reg_log(LOG_INFO, "%s/%s/%s: health %s (%s)", type, c->plugin_name, c->alloc_name, v, r);
        break;
    case REG_C_CURRENT:
        if (reg_current_get(reg, c->plugin, v, sizeof(v)) < 0)
            strcpy(v, "(none)");
        reg_log(LOG_INFO, "%s/%s: current %s", type, c->plugin_name, v);
        break;
    default:
        break;
    }
}

int fs_oplog_subscribe(struct reg *reg)
{
    return reg_subscribe(reg, on_change, reg);
}

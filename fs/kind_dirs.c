/* The directory kinds: root, type, plugin, instance (rows in node.c). */
#include "fs/kinds.h"
#include "base/log.h"

#include <errno.h>
#include <string.h>

int fs_root_child(struct fs *fs, const struct fs_node *dir, const char *name,
                  struct fs_node *out)
{
    (void)dir;
    int t = reg_type_parse(name);
    if (t < 0 && fs->view)
        return fs_cl_root_lookup(fs, name, out);
    return t < 0 ? -ENOENT : fs_resolve(fs, fs_ino(0, SLOT_TYPE0 + (unsigned)t), out);
}

void fs_root_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    (void)n;
    st->st_nlink = 2 + REG_NTYPES + (fs->view != NULL);
}

/* Dirs that registrars may write into carry their group's write bit. */
static void group_w(struct fs *fs, struct stat *st)
{
    if (fs->has_registrar)
        st->st_mode |= S_IWGRP;
}

int fs_type_child(struct fs *fs, const struct fs_node *dir, const char *name,
                  struct fs_node *out)
{
    if (reg_plugin_lookup(fs->reg, dir->type, name, &out->r) < 0)
        return -ENOENT;
    return fs_resolve(fs, fs_ino(out->r.seq, SLOT_DIR), out);
}

int fs_type_mkdir(struct fs *fs, const struct fs_node *dir, const char *name)
{
    return reg_plugin_create(fs->reg, dir->type, name);
}

int fs_type_rmdir(struct fs *fs, const struct fs_node *dir, const char *name)
{
    return reg_plugin_remove(fs->reg, dir->type, name);
}

void fs_type_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    st->st_nlink = 2 + reg_type_count(fs->reg, n->type);
    group_w(fs, st);
}

int fs_plugin_child(struct fs *fs, const struct fs_node *dir, const char *name,
                    struct fs_node *out)
{
    if (reg_instance_lookup(fs->reg, dir->r.seq, name, &out->r) < 0)
        return -ENOENT;
    return fs_resolve(fs, fs_ino(out->r.seq, SLOT_DIR), out);
}

int fs_plugin_mkdir(struct fs *fs, const struct fs_node *dir, const char *name)
{
    if (!strcmp(name, "kubelet") && fs_kubelet_exists(dir)) {   /* it would hide */
        csifs_why_set("name kubelet is the plugin's kubelet file (-o kubelet_dir=)");
        return -EINVAL;
    }
    return reg_instance_register(fs->reg, dir->type, dir->r.plugin, name);
}

int fs_plugin_rmdir(struct fs *fs, const struct fs_node *dir, const char *name)
{
    return reg_instance_deregister(fs->reg, dir->type, dir->r.plugin, name);
}

void fs_plugin_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    st->st_nlink = 2 + n->r.count;
    group_w(fs, st);
}

int fs_inst_child(struct fs *fs, const struct fs_node *dir, const char *name,
                  struct fs_node *out)
{
    struct pending_link l;
    int a = reg_attr_lookup(dir->type, name);
    if (a >= 0)
        return fs_resolve(fs, fs_ino(dir->r.seq, SLOT_ATTR0 + (unsigned)a), out);
    if (pending_find(&fs->pend, dir->r.seq, name, &l) == 0)
        return fs_resolve(fs, fs_ino(l.id, SLOT_PENDING), out);
    return -ENOENT;
}

void fs_inst_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    st->st_nlink = 2;
    group_w(fs, st);
    st->st_mtim.tv_sec = n->r.registered_ns / 1000000000;   /* ls -t: registration order */
    st->st_mtim.tv_nsec = n->r.registered_ns % 1000000000;
    st->st_atim = st->st_mtim;
}

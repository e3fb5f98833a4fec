/* Internal to fs/: the operations of each node kind, as fs_kinds[] (node.c)
 * names them. One block per kind; each block's functions live in the file
 * named beside it. */
#ifndef CSIFS_KINDS_H
#define CSIFS_KINDS_H

#include "fs/node.h"

struct fs_buf;

/* directories (kind_dirs.c) */
int fs_root_child(struct fs *fs, const struct fs_node *dir, const char *name,
                  struct fs_node *out);
void fs_root_stat(struct fs *fs, const struct fs_node *n, struct stat *st);
int fs_type_child(struct fs *fs, const struct fs_node *dir, const char *name,
                  struct fs_node *out);
int fs_type_mkdir(struct fs *fs, const struct fs_node *dir, const char *name);
int fs_type_rmdir(struct fs *fs, const struct fs_node *dir, const char *name);
void fs_type_stat(struct fs *fs, const struct fs_node *n, struct stat *st);
int fs_plugin_child(struct fs *fs, const struct fs_node *dir, const char *name,
                    struct fs_node *out);
int fs_plugin_mkdir(struct fs *fs, const struct fs_node *dir, const char *name);
int fs_plugin_rmdir(struct fs *fs, const struct fs_node *dir, const char *name);
void fs_plugin_stat(struct fs *fs, const struct fs_node *n, struct stat *st);
int fs_inst_child(struct fs *fs, const struct fs_node *dir, const char *name,
                  struct fs_node *out);
void fs_inst_stat(struct fs *fs, const struct fs_node *n, struct stat *st);

/* symlinks (kind_links.c) */
bool fs_current_exists(const struct fs_node *n);
off_t fs_current_size(struct fs *fs, const struct fs_node *n);
ssize_t fs_current_readlink(struct fs *fs, const struct fs_node *n, char *buf, size_t cap);
bool fs_socket_exists(const struct fs_node *n);
off_t fs_socket_size(struct fs *fs, const struct fs_node *n);
ssize_t fs_socket_readlink(struct fs *fs, const struct fs_node *n, char *buf, size_t cap);
int fs_socket_unlink(struct fs *fs, const struct fs_node *n, const char *name);
off_t fs_pending_size(struct fs *fs, const struct fs_node *n);
ssize_t fs_pending_readlink(struct fs *fs, const struct fs_node *n, char *buf, size_t cap);
int fs_pending_unlink(struct fs *fs, const struct fs_node *n, const char *name);

/* attribute files (attr_file.c) */
void fs_attr_stat(struct fs *fs, const struct fs_node *n, struct stat *st);
off_t fs_attr_size(struct fs *fs, const struct fs_node *n);
int fs_attr_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                 struct fs_fh **out);
void fs_attr_read(struct fs *fs, fuse_req_t req, struct fs_fh *h, size_t size, off_t off,
                  struct fuse_file_info *fi);
void fs_attr_poll(struct fs *fs, fuse_req_t req, struct fs_fh *h, struct fuse_file_info *fi,
                  struct fuse_pollhandle *ph);
int fs_attr_write(struct fs *fs, const struct fs_node *n, const char *buf, size_t len,
                  off_t off);
void fs_attr_release(struct fs *fs, struct fs_fh *h);

/* events (events_file.c) */
int fs_events_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                   struct fs_fh **out);
void fs_events_read(struct fs *fs, fuse_req_t req, struct fs_fh *h, size_t size, off_t off,
                    struct fuse_file_info *fi);
void fs_events_poll(struct fs *fs, fuse_req_t req, struct fs_fh *h, struct fuse_file_info *fi,
                    struct fuse_pollhandle *ph);
void fs_events_release(struct fs *fs, struct fs_fh *h);
/* st_blksize FS_EVENTS_BLKSIZE: `cat` reads that much per request. */
void fs_events_stat(struct fs *fs, const struct fs_node *n, struct stat *st);

/* snapshot files, size 0 and direct I/O like /proc (snapshot.c) */
void fs_snap_read(struct fs *fs, fuse_req_t req, struct fs_fh *h, size_t size, off_t off,
                  struct fuse_file_info *fi);
void fs_snap_release(struct fs *fs, struct fs_fh *h);
/* metrics (metrics.c) */
int fs_metrics_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                    struct fs_fh **out);
/* kubelet (kubelet_file.c) */
bool fs_kubelet_exists(const struct fs_node *n);
/* Whether there is a source (-o kubelet_dir=); the csifs_kubelet_registered
 * sample of csi-node plugin, none while it has no provider. */
bool fs_kubelet_on(void);
void fs_kubelet_metric(struct fs_buf *b, const char *plugin);
int fs_kubelet_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                    struct fs_fh **out);
/* stats (stats.c) */
int fs_stats_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                  struct fs_fh **out);

/* the cluster view, -o cluster_view (kind_cluster.c) */
int fs_cl_resolve(struct fs *fs, uint64_t id, unsigned slot, struct fs_node *out);
int fs_cl_root_lookup(struct fs *fs, const char *name, struct fs_node *out);
void fs_cl_root_list(struct fs_dirbuf *d, const struct fs_node *dir);
int fs_cl_dir_child(struct fs *fs, const struct fs_node *dir, const char *name,
                    struct fs_node *out);
void fs_cl_list(struct fs_dirbuf *d, const struct fs_node *dir);
void fs_cl_dir_stat(struct fs *fs, const struct fs_node *n, struct stat *st);
off_t fs_cl_file_size(struct fs *fs, const struct fs_node *n);
int fs_cl_file_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                    struct fs_fh **out);
int fs_cl_status_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                      struct fs_fh **out);

#endif

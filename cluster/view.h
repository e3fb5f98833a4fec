/* cluster view (DESIGN 15, -o cluster_view): every host's plugin keys,
 * read from etcd, as a model that fs/ serves read-only under <mnt>/cluster/.
 *
 * Objects: a plugin of a type (cluster/<type>/<plugin>/) and a node's key
 * for it (cluster/<type>/<plugin>/<node>/, the fields of value.h). Each
 * gets an id when it first appears (1, 2, ...; never reused), which fs/
 * turns into inode numbers; a plugin lives while any node has it.
 *
 * The thread fills the model with a Range in pages (limit 1,000, each page
 * after the last key, all at the first page's revision), then Watches from
 * the next revision. A compacted revision (the watch canceled with a
 * compact_revision) starts over with a Range; keys that vanished meanwhile
 * go. A stream silent for 1 s is asked for progress; no answer within the
 * deadline (or a failed stream) moves to the next endpoint, from the
 * revision seen. Keys that do not parse (not <prefix>/hosts/<node>/<type>/
 * <plugin>, or a value that is not fields) are ignored with a log line; a
 * bad value on a key that had a good one removes it.
 *
 * After each change the changed callback runs on the view's thread with no
 * view lock held, once per object changed (fs/ invalidates the kernel's
 * caches from it).
 *
 * Lock: v->mu guards the model and the status; a leaf lock: no etcd call,
 * no callback, no registry call under it (cl_view_list's callback runs
 * under it and must not call the view). */
#ifndef CSIFS_CLUSTER_VIEW_H
#define CSIFS_CLUSTER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster/opts.h"
#include "cluster/value.h"

#define CL_VIEW_PAGE 1000

struct cl_view;
struct cl_pub;

enum cl_vo_kind { CL_VO_PLUGIN = 1, CL_VO_NODE };

struct cl_view_obj {
    enum cl_vo_kind kind;
    uint64_t id, plugin_id;              /* node: its plugin's id */
    int type;                            /* enum reg_type */
    char plugin[64], node[64];           /* node "" for a plugin */
    int64_t changed_ns;                  /* last change seen (realtime) */
    unsigned fields;                     /* node: bit 1 << f per field present */
    size_t nodes, healthy;               /* plugin: nodes, of which health healthy */
};

enum cl_vc_kind { CL_VC_PLUGIN_ADD, CL_VC_PLUGIN_DEL, CL_VC_NODE_ADD, CL_VC_NODE_DEL,
                  CL_VC_NODE_SET };
struct cl_view_change {
    enum cl_vc_kind kind;
    int type;
    uint64_t plugin_id, node_id;
    char plugin[64], node[64];
    unsigned gone;                       /* NODE_SET: fields no longer present */
};
typedef void (*cl_view_changed_fn)(void *arg, const struct cl_view_change *c);

/* Start the thread (grpc_init is taken here). o must outlive v; pub (may
 * be NULL) gives cl_view_status its publisher lines. */
int cl_view_start(struct cl_view **out, const struct cl_opts *o, struct cl_pub *pub,
                  cl_view_changed_fn changed, void *arg);
/* Stop the thread: no change is told any more; the model stays readable
 * until cl_view_free (an upgrade in place stops it while serving). NULL,
 * or stopped already: a no-op. */
void cl_view_stop(struct cl_view *v);
/* Stop the thread and free. NULL is a no-op. */
void cl_view_free(struct cl_view *v);

/* An object by id: 0 or -ENOENT. */
int cl_view_get(struct cl_view *v, uint64_t id, struct cl_view_obj *out);
/* A plugin (node NULL) or a node's key by name: 0 or -ENOENT. */
int cl_view_find(struct cl_view *v, int type, const char *plugin, const char *node,
                 struct cl_view_obj *out);
/* The plugins of type (plugin_id 0) or the nodes of a plugin, in id order,
 * those with an id above after; fn returning nonzero stops. */
void cl_view_list(struct cl_view *v, int type, uint64_t plugin_id, uint64_t after,
                  int (*fn)(const struct cl_view_obj *o, void *arg), void *arg);
/* A field file's content (the value and a newline; topology's ','-joined
 * pairs as lines), up to cap bytes into buf (may be NULL): its full length,
 * or -ENOENT. */
ssize_t cl_view_field(struct cl_view *v, uint64_t node_id, int field, char *buf, size_t cap);
/* A plugin's summary ("nodes N\nnodes_healthy N\n"), as cl_view_field. */
ssize_t cl_view_summary(struct cl_view *v, uint64_t plugin_id, char *buf, size_t cap);
/* cluster/status: `key value` lines (the publisher's, then view_state,
 * view_endpoint, view_revision, view_nodes, view_error); malloc'd into *out. */
int cl_view_status(struct cl_view *v, char **out, size_t *len);
/* Node keys in the view now. */
size_t cl_view_nodes(struct cl_view *v);

#endif

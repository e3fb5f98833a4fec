/* kubelet: registration of csi-node plugins with the kubelet's plugin
 * watcher (-o kubelet_dir=DIR, DESIGN 14), instead of node-driver-registrar.
 *
 * For each csi-node plugin with a current and a provider, a gRPC core
 * server (one per socket: core adds ports only before grpc_server_start)
 * serves pluginregistration.Registration on DIR/<provider>-reg.sock:
 * GetInfo answers PluginInfo{"CSIPlugin", <provider>,
 * "<mnt>/csi-node/<plugin>/current/socket", ["1.0.0"]}, and
 * NotifyRegistrationStatus records the kubelet's verdict. The socket is
 * bound under a dot-name (the kubelet ignores those) and renamed into
 * place; it is removed when the plugin has no current (the kubelet then
 * deregisters the driver). A rolling update behind current leaves it alone.
 *
 * The verdict of each plugin (kubelet_show, the plugin dir's `kubelet`
 * file, and a `kubelet` event when it changes): "waiting", "registered",
 * "error: <the kubelet's text>", "error: socket path over 107 bytes",
 * "error: provider name not usable as a file name", "conflict: <provider>
 * is registered by csi-node/<plugin>" (two plugins with one provider: the
 * first keeps it).
 *
 * Threads: a worker that follows the registry (a subscriber marks plugins,
 * the worker makes and removes servers) and one completion-queue thread
 * serving every socket. Lock: k->mu, taken with no registry lock held and
 * never held across a registry or gRPC call that waits.
 */
#ifndef CSIFS_KUBELET_H
#define CSIFS_KUBELET_H

#include <stddef.h>
#include <sys/types.h>

#include "registry/registry.h"

struct kubelet;
struct kubelet_opts {
    const char *dir;                 /* the kubelet's plugins_registry */
    const char *mountpoint;          /* csifs's mount, for the endpoint */
    struct reg *reg;
};
/* Check dir (a directory; made when missing, its parent must exist), register what the registry holds now,
 * follow it. 0 or -errno with a message in err. */
int kubelet_start(struct kubelet **out, const struct kubelet_opts *o, char *err, size_t errlen);
/* Remove every registration socket, stop the threads, free. NULL: no-op. */
void kubelet_stop(struct kubelet *k);
/* The verdict of a csi-node plugin, with a newline, into buf (NUL-terminated
 * when cap > 0; "unregistered" while it has no current with a provider):
 * its full length; -ENOENT for another type. */
ssize_t kubelet_show(struct kubelet *k, enum reg_type type, const char *plugin, char *buf,
                     size_t cap);

#endif

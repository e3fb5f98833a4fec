/* kubelet: registration of csi-node plugins with the kubelet's plugin
 * watcher (-o kubelet_dir=DIR, DESIGN 14), instead of node-driver-registrar.
 *
 * For each csi-node plugin with a current and a provider, a gRPC core
 * server (one per socket: core adds ports only before grpc_server_start)
 * serves pluginregistration.Registration on DIR/<provider>-reg.sock
 * (csifs binds and listens itself, and hands each accepted connection to
 * that socket's server):
 * GetInfo answers PluginInfo{"CSIPlugin", <provider>,
 * "<mnt>/csi-node/<plugin>/current/socket", ["1.0.0"]}, and
 * NotifyRegistrationStatus records the kubelet's verdict. The socket is
 * bound under a dot-name (the kubelet ignores those) and renamed into
 * place; it is removed when the plugin has no current (the kubelet then
 * deregisters the driver) and at kubelet_stop. A rolling update behind
 * current leaves it alone. Each listening socket goes into the service
 * manager's fd store (DESIGN 13, FDNAME kubelet/<provider>) and is adopted
 * by the next csifs: a takeover or an upgrade is unseen by the kubelet. A path another process serves (a
 * node-driver-registrar) is never taken over.
 *
 * The verdict of each plugin (kubelet_show, the plugin dir's `kubelet`
 * file, and a `kubelet` event when it changes): "waiting", "registered",
 * "error: <the kubelet's text>", "error: socket path over 107 bytes",
 * "error: provider name not usable as a file name", "conflict: <provider>
 * is registered by csi-node/<plugin>" (two plugins with one provider: the
 * first keeps it), "error: <path> is served by another process (...)",
 * "error: cannot serve the socket: <errno text>".
 *
 * Threads: a worker that follows the registry (a subscriber marks plugins;
 * the worker makes and removes sockets and servers and accepts
 * connections) and one completion-queue thread serving every socket. The
 * lock order is written in internal.h: a leaf, never held across a
 * registry call, a gRPC call or a socket made or removed.
 */
#ifndef CSIFS_KUBELET_H
#define CSIFS_KUBELET_H

#include <stddef.h>
#include <sys/types.h>

#include "registry/registry.h"
#include "takeover/takeover.h"

struct kubelet;
struct kubelet_opts {
    const char *dir;                 /* the kubelet's plugins_registry */
    const char *mountpoint;          /* csifs's mount, for the endpoint */
    struct reg *reg;
    /* Registration sockets from the fd store (FDNAME TK_FD_KUBELET
     * <provider>): kubelet's from the call on, failed or not. Each is
     * adopted when its plugin still wants that provider and it is the
     * socket listening at DIR/<provider>-reg.sock (the kubelet sees
     * nothing); else closed, removed from the store, its path unlinked if
     * it is still its socket. */
    struct tk_named *handed;
    size_t n_handed;
};
/* Check dir (a directory; made when missing, its parent must exist), register what the registry holds now,
 * follow it. 0 or -errno with a message in err. */
int kubelet_start(struct kubelet **out, const struct kubelet_opts *o, char *err, size_t errlen);
/* Remove every registration socket (the kubelet deregisters) and take it
 * out of the fd store, stop the threads, free. NULL: no-op. */
void kubelet_stop(struct kubelet *k);
/* For an upgrade in place: as kubelet_stop, but every registration socket
 * stays in place, listening and in the fd store: their fds and names into
 * *out (malloc'd, the caller's, *n of them; NULL and 0 for k NULL). */
void kubelet_stop_keep(struct kubelet *k, struct tk_named **out, size_t *n);
/* The verdict of a csi-node plugin, with a newline, into buf (NUL-terminated
 * when cap > 0; "unregistered" while it has no current with a provider),
 * and its provider into prov ("" none) when prov is not NULL: the
 * verdict's full length; -ENOENT for another type. */
ssize_t kubelet_show(struct kubelet *k, enum reg_type type, const char *plugin, char *buf,
                     size_t cap, char *prov, size_t provcap);

#endif

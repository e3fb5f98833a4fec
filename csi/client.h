/* csi client: the six unary CSI calls a CO makes, over gRPC core.
 *
 * One csi_client owns one completion queue and one thread that always waits
 * on it (so gRPC makes I/O progress); every call is asynchronous on that
 * queue, carries its own deadline, and its callback runs on that thread.
 * A csi_chan per user of a plugin socket path (authority "localhost"); the
 * chans open on one path share one gRPC channel, refcounted (instances on
 * one socket cost one connection). That gRPC channel runs on a connection
 * csifs dials itself, closed when the channel is destroyed; a failed dial
 * fails the call at once ("connect: <strerror>"). The plugin hanging up is
 * seen at once, by every chan on the path (csi_chan_on_lost). Both threads
 * sleep until there is work. A call that ends UNAVAILABLE,
 * DEADLINE_EXCEEDED, UNKNOWN or INTERNAL, or a lost connection, makes the
 * channel's next call dial afresh, so a plugin restarted on the same socket
 * is reached by the next call.
 *
 * Functions return 0 or a negative errno, are thread-safe, and may be called
 * from a callback, except csi_call_sync and csi_client_free. Nothing a plugin
 * does makes them exit or abort.
 */
#ifndef CSIFS_CSI_CLIENT_H
#define CSIFS_CSI_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum csi_method {
    CSI_PROBE,
    CSI_GET_PLUGIN_INFO,
    CSI_GET_PLUGIN_CAPABILITIES,
    CSI_NODE_GET_INFO,
    CSI_NODE_GET_CAPABILITIES,
    CSI_CONTROLLER_GET_CAPABILITIES,
    CSI_METHOD_COUNT            /* also: a csi_call_path call (not decoded) */
};

/* "/csi.v1.Identity/Probe", ...; NULL for an unknown method. */
const char *csi_method_path(enum csi_method m);
/* The method of a path, or -ENOENT. */
int csi_method_from_path(const char *path);

/* The outcome of one call. Strings are malloc'd; decoded strings have
 * control characters and invalid UTF-8 replaced by '?', so each fits one
 * line of a file. */
struct csi_result {
    enum csi_method method;
    bool ok;               /* status OK and the reply decoded */
    int status;            /* gRPC status code (grpc_status_code) */
    char *reason;          /* !ok: one short line, see csi_reason() */
    int dial_err;          /* !ok for want of a connection: connect()'s errno
                              (reason "connect: <its text>"), else 0 */
    int64_t latency_us;    /* start of the call to its completion */
    bool ready;            /* Probe: ready; true when the plugin left it absent */
    char *name;            /* GetPluginInfo */
    char *vendor_version;
    /* *GetCapabilities: "plugin:CONTROLLER_SERVICE\n", "expansion:ONLINE\n",
     * "node:STAGE_UNSTAGE_VOLUME\n", "controller:CREATE_DELETE_VOLUME\n"
     * lines in the order sent, duplicates dropped, an unknown value as its
     * number ("controller:17\n"); "" when none. */
    char *capabilities;
    char *node_id;         /* NodeGetInfo */
    int64_t max_volumes;   /* 0 when unset */
    char *topology;        /* "key=value\n" lines sorted by key, last of a
                              duplicated key wins; "" when none */
};

/* Free the strings of res and zero it. */
void csi_result_clear(struct csi_result *res);

/* Decode the protobuf reply of method m (bytes without the gRPC frame) into
 * res (ok = true). Undecodable: -EBADMSG, res->reason "protocol:
 * undecodable <Method> reply (<n> bytes)". A NodeGetInfo that no
 * fingerprint may hold: -EPROTO, "fingerprint: node_id over 256 bytes" or
 * "fingerprint: bad topology key" (a key or value with '=', ' ' or '\n').
 * -ENOMEM. (A call whose status is OK without a reply message fails with
 * "protocol: no reply message".) Decoded strings: control characters and
 * every byte of an invalid UTF-8 sequence as '?'. */
int csi_decode(enum csi_method m, const void *buf, size_t len, struct csi_result *res);

/* The reason of a failed call of method m, malloc'd (NULL on ENOMEM), short
 * and stable (DESIGN section 3), never a socket path or gRPC's internals:
 *   DEADLINE_EXCEEDED:  "<Method> timed out after <d>" ("NodeGetInfo timed
 *                       out after 5s"; <d> "1500ms" when not whole seconds)
 *   gRPC core's own texts (csi_transport_reason): "protocol: not HTTP/2",
 *                       "protocol: reply over 64 KiB", "UNAVAILABLE:
 *                       connection closed"
 *   otherwise:          "<STATUS_NAME>: <message>", the message's first line
 *                       cut to 200 bytes, control characters and invalid
 *                       UTF-8 as '?'; just "<STATUS_NAME>" when empty.
 * A failed dial: "connect: <strerror>" (csi_call's callback). */
char *csi_reason(enum csi_method m, int status, const char *message, int timeout_ms);
/* The reason for a status text that gRPC core wrote itself, or NULL. */
const char *csi_transport_reason(const char *message);
/* Connect to the unix socket at path directly (non-blocking, closed at
 * once): 0 if something listens there (a full backlog counts), else the
 * errno of socket()/connect() (ENOENT, ECONNREFUSED, ...). On 0, *pid (if
 * pid) is the process that called listen() (SO_PEERCRED), or 0 if unknown.
 * Blocks for no more than a local connect(); call it off the completion-
 * queue thread. */
int csi_dial_check(const char *path, pid_t *pid);
/* "OK", "CANCELLED", ... "UNAUTHENTICATED"; NULL for another number. */
const char *csi_status_name(int status);
/* Status code of a name ("FAILED_PRECONDITION") or number ("9"), or -EINVAL. */
int csi_status_parse(const char *s);

struct csi_client;
struct csi_chan;

/* Runs on the completion-queue thread once per started call, even when the
 * channel is closed or the client freed meanwhile (then CANCELLED). res is
 * cleared after it returns; take a string by setting its field to NULL. Keep
 * it short: no gRPC I/O progresses while it runs. */
typedef void csi_callback(void *arg, struct csi_result *res);

/* grpc_init and start the completion-queue thread. */
int csi_client_new(struct csi_client **out);
/* Cancel every call in flight, wait for their callbacks, close the channels
 * left open, stop the thread, grpc_shutdown. Not from a callback. */
void csi_client_free(struct csi_client *c);

/* A channel to the unix socket at socket_path. Nothing is dialled until the
 * first call. -EINVAL if the path is not absolute, -ENAMETOOLONG over 107
 * bytes, -ESHUTDOWN while the client is being freed. */
int csi_chan_open(struct csi_client *c, const char *socket_path, struct csi_chan **out);
/* Cancel the channel's calls in flight (their callbacks still run) and
 * release it. Inside the callbacks of its calls the channel stays valid
 * (csi_call on it gives -ESHUTDOWN); elsewhere it is gone. */
void csi_chan_close(struct csi_chan *ch);
const char *csi_chan_path(const struct csi_chan *ch);
/* The process that listened on the socket when the channel last dialled
 * (SO_PEERCRED), 0 if unknown or the dial failed. */
pid_t csi_chan_peer_pid(struct csi_chan *ch);
/* Runs on the client's watch thread when the channel's connection, after a
 * call on it succeeded, is closed by the plugin (it exited or closed it);
 * the next call dials afresh. Nothing is polled. Keep it short. */
typedef void csi_lost_callback(void *arg, uint64_t cookie);
/* Set (or with cb NULL clear) the channel's lost-connection callback. */
void csi_chan_on_lost(struct csi_chan *ch, csi_lost_callback *cb, void *arg, uint64_t cookie);
/* Cancel the channel's calls in flight (their callbacks run) and drop its
 * path's connection: the next call of any chan on the path dials afresh.
 * NULL is a no-op. */
void csi_chan_reset(struct csi_chan *ch);

/* Start method m with a deadline of timeout_ms (> 0). On 0, cb(arg, res)
 * runs exactly once; on error never. -EINVAL, -ENOMEM, -ESHUTDOWN (channel
 * closed or client being freed), -EIO (gRPC refused the call). */
int csi_call(struct csi_chan *ch, enum csi_method m, int timeout_ms, csi_callback *cb, void *arg);
/* The same for any method path, with an empty request; the reply is not
 * decoded (res->method = CSI_METHOD_COUNT). For tests and tools. */
int csi_call_path(struct csi_chan *ch, const char *path, int timeout_ms, csi_callback *cb,
                  void *arg);
/* csi_call, waiting for the result (caller clears *res). -EDEADLK from a
 * callback. For tests and tools. */
int csi_call_sync(struct csi_chan *ch, enum csi_method m, int timeout_ms, struct csi_result *res);

#endif

/* csi client: the six unary CSI calls a CO makes, over gRPC core.
 *
 * One csi_client owns one completion queue and one thread that always waits
 * on it (so gRPC makes I/O progress); every call is asynchronous on that
 * queue, carries its own deadline, and its callback runs on that thread.
 * One csi_chan per plugin socket path (target "unix:<path>", authority
 * "localhost"). A call that ends UNAVAILABLE, DEADLINE_EXCEEDED, UNKNOWN or
 * INTERNAL makes the channel's next call use a fresh gRPC channel (its own
 * connection; reconnect backoff 100 ms, capped at 5 s), so gRPC's backoff
 * never delays the caller's schedule: a plugin restarted on the same socket
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
 * control characters replaced by '?', so each fits one line of a file. */
struct csi_result {
    enum csi_method method;
    bool ok;               /* status OK and the reply decoded */
    int status;            /* gRPC status code (grpc_status_code) */
    char *reason;          /* !ok: one short line, see csi_reason() */
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
 * res (ok = true). Undecodable: -EBADMSG, res->reason "bad response:
 * undecodable <Method> reply (<n> bytes)". -ENOMEM. (A call whose status is
 * OK without a reply message fails with "bad response: no reply message".) */
int csi_decode(enum csi_method m, const void *buf, size_t len, struct csi_result *res);

/* The reason of a failed call, malloc'd (NULL on ENOMEM):
 *   UNAVAILABLE, and a direct connect() to socket_path fails:
 *                       "connect: <strerror>" ("connect: Connection refused")
 *   DEADLINE_EXCEEDED:  "probe timed out after <d>", <d> = timeout_ms as
 *                       "5s" when whole seconds, else "1500ms"
 *   otherwise:          "<STATUS_NAME>: <message>" ("UNIMPLEMENTED: ..."),
 *                       just "<STATUS_NAME>" when message is empty;
 * message cut to 256 bytes and control characters replaced by '?'. */
char *csi_reason(int status, const char *message, const char *socket_path, int timeout_ms);
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

/* fake-kubelet DIR [--error TEXT]: what the kubelet's plugin watcher and
 * CSI handler do with a plugins_registry directory, for tests of
 * -o kubelet_dir= (DESIGN 14). It watches DIR with inotify (dot-names
 * ignored; sockets already there are taken first); for a new socket it
 * calls GetInfo (type must be CSIPlugin, supported_versions must hold a
 * 1.x), dials the endpoint afresh for NodeGetInfo, and calls
 * NotifyRegistrationStatus (registered, or with --error not registered
 * with TEXT); a socket removed deregisters its driver. A line
 * "nodeinfo NAME" on stdin dials NAME's endpoint afresh for NodeGetInfo;
 * "getinfo FILE" calls GetInfo on DIR/FILE (no registration).
 * One line on stdout per action (flushed):
 *   WATCHING DIR
 *   GETINFO <file> type=<t> name=<n> endpoint=<e> versions=<v,...>
 *   NODEGETINFO <name> node_id=<id> | NODEGETINFO <name> error=<reason>
 *   NOTIFY <name> registered=<0|1>
 *   REGISTERED <name> | REFUSED <file> <why>
 *   DEREGISTERED <name>
 *   INFO <file> name=<n> | INFO <file> error=<why>     (getinfo)
 * Exit 0 on SIGTERM or end of stdin, 2 on usage errors. */
#include "base/pb.h"
#include "csi/client.h"
#include "proto/pluginregistration.pb-c.h"

#include <dirent.h>
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#define MAXREG 64

static struct {
    char file[256], name[256], endpoint[4200];
} regs[MAXREG];
static const char *dir, *refuse;
static struct csi_client *cli;

/* A unary call on unix:path: the reply, a message of descriptor d, or NULL
 * with why. */
static ProtobufCMessage *unary(const char *path, const char *method, const ProtobufCMessage *req,
                               const ProtobufCMessageDescriptor *d, char *why, size_t cap)
{
    char target[4400];
    snprintf(target, sizeof(target), "unix:%s", path);
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, cr, NULL);
    grpc_channel_credentials_release(cr);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                   gpr_time_from_seconds(5, GPR_TIMESPAN));
    grpc_slice m = grpc_slice_from_copied_string(method);
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
                                               dl, NULL);
    grpc_slice_unref(m);
    grpc_byte_buffer *send = pb_pack(req), *recv = NULL;
    grpc_metadata_array im, tm;
    grpc_metadata_array_init(&im);
    grpc_metadata_array_init(&tm);
    grpc_status_code st = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[] = {
        { .op = GRPC_OP_SEND_INITIAL_METADATA },
        { .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = send },
        { .op = GRPC_OP_SEND_CLOSE_FROM_CLIENT },
        { .op = GRPC_OP_RECV_INITIAL_METADATA,
          .data.recv_initial_metadata.recv_initial_metadata = &im },
        { .op = GRPC_OP_RECV_MESSAGE, .data.recv_message.recv_message = &recv },
        { .op = GRPC_OP_RECV_STATUS_ON_CLIENT,
          .data.recv_status_on_client = { .trailing_metadata = &tm, .status = &st,
                                          .status_details = &details } },
    };
    ProtobufCMessage *out = NULL;
    if (grpc_call_start_batch(call, ops, 6, call, NULL) == GRPC_CALL_OK)
        grpc_completion_queue_pluck(cq, call, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (st == GRPC_STATUS_OK && recv) {
        if (!(out = pb_unpack(d, recv)))
            snprintf(why, cap, "undecodable reply");
    } else {
        char *d = grpc_slice_to_c_string(details);
        snprintf(why, cap, "status %d %s", (int)st, d);
        gpr_free(d);
    }
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(send);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&im);
    grpc_metadata_array_destroy(&tm);
    grpc_call_unref(call);
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_past(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    return out;
}

/* Dial endpoint afresh and call NodeGetInfo. */
static void node_get_info(const char *name, const char *endpoint)
{
    struct csi_chan *ch = NULL;
    struct csi_result res = { 0 };
    int rc = csi_chan_open(cli, endpoint, &ch);
    if (rc == 0)
        rc = csi_call_sync(ch, CSI_NODE_GET_INFO, 5000, &res);
    if (rc == 0 && res.ok)
        printf("NODEGETINFO %s node_id=%s\n", name, res.node_id);
    else
        printf("NODEGETINFO %s error=%s\n", name, rc ? strerror(-rc) : res.reason);
    csi_result_clear(&res);
    if (ch)
        csi_chan_close(ch);
}

static void notify(const char *path, const char *name, bool ok, const char *error)
{
    Pluginregistration__RegistrationStatus st = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    st.plugin_registered = ok;
    st.error = (char *)error;
    char why[512];
    ProtobufCMessage *r = unary(path, "/pluginregistration.Registration/NotifyRegistrationStatus",
                                &st.base, &pluginregistration__registration_status_response__descriptor,
                                why, sizeof(why));
    printf("NOTIFY %s registered=%d%s%s\n", name, ok, r ? "" : " failed: ", r ? "" : why);
    if (r)
        protobuf_c_message_free_unpacked(r, NULL);
}

/* GetInfo on path: the decoded reply, or NULL with why. */
static Pluginregistration__PluginInfo *get_info(const char *path, char *why, size_t cap)
{
    Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    return (Pluginregistration__PluginInfo *)unary(
        path, "/pluginregistration.Registration/GetInfo", &req.base,
        &pluginregistration__plugin_info__descriptor, why, cap);
}

static void added(const char *file)
{
    char path[4400], why[512] = "";
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    Pluginregistration__PluginInfo *pi = get_info(path, why, sizeof(why));
    if (!pi) {
        printf("REFUSED %s GetInfo: %s\n", file, *why ? why : "undecodable");
        return;
    }
    char vs[512] = "";
    bool v1 = false;
    for (size_t k = 0; k < pi->n_supported_versions; k++) {
        snprintf(vs + strlen(vs), sizeof(vs) - strlen(vs), "%s%s", k ? "," : "",
                 pi->supported_versions[k]);
        v1 |= !strncmp(pi->supported_versions[k], "1.", 2);
    }
    printf("GETINFO %s type=%s name=%s endpoint=%s versions=%s\n", file, pi->type, pi->name,
           pi->endpoint, vs);
    if (strcmp(pi->type, "CSIPlugin") || !v1) {
        printf("REFUSED %s type %s, versions %s\n", file, pi->type, vs);
        notify(path, pi->name, false, "fake-kubelet: not a CSI plugin of version 1.x");
    } else {
        node_get_info(pi->name, pi->endpoint);
        notify(path, pi->name, !refuse, refuse ? refuse : "");
        for (int k = 0; !refuse && k < MAXREG; k++)
            if (!regs[k].file[0]) {
                snprintf(regs[k].file, sizeof(regs[k].file), "%s", file);
                snprintf(regs[k].name, sizeof(regs[k].name), "%s", pi->name);
                snprintf(regs[k].endpoint, sizeof(regs[k].endpoint), "%s", pi->endpoint);
                printf("REGISTERED %s\n", pi->name);
                break;
            }
    }
    pluginregistration__plugin_info__free_unpacked(pi, NULL);
}

static void removed(const char *file)
{
    for (int k = 0; k < MAXREG; k++)
        if (!strcmp(regs[k].file, file)) {
            printf("DEREGISTERED %s\n", regs[k].name);
            regs[k].file[0] = '\0';
        }
}

static void command(char *line)
{
    char name[256], path[4400], why[512] = "";
    if (sscanf(line, "getinfo %255s", name) == 1) {
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        Pluginregistration__PluginInfo *pi = get_info(path, why, sizeof(why));
        printf("INFO %s %s%s\n", name, pi ? "name=" : "error=", pi ? pi->name : why);
        if (pi)
            pluginregistration__plugin_info__free_unpacked(pi, NULL);
        return;
    }
    if (sscanf(line, "nodeinfo %255s", name) != 1)
        return;
    for (int k = 0; k < MAXREG; k++)
        if (regs[k].file[0] && !strcmp(regs[k].name, name)) {
            node_get_info(name, regs[k].endpoint);
            return;
        }
    printf("NODEGETINFO %s error=not registered\n", name);
}

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--error"))) {
        fprintf(stderr, "usage: fake-kubelet DIR [--error TEXT]\n");
        return 2;
    }
    dir = argv[1];
    refuse = argc == 4 ? argv[3] : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int in = inotify_init1(IN_CLOEXEC);
    if (in < 0 || inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO | IN_DELETE |
                                                 IN_MOVED_FROM) < 0 ||
        csi_client_new(&cli) < 0) {
        fprintf(stderr, "fake-kubelet: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    printf("WATCHING %s\n", dir);
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (de->d_name[0] != '.')
            added(de->d_name);
    if (d)
        closedir(d);
    char buf[8192] __attribute__((aligned(8))), line[512];
    for (;;) {
        struct pollfd p[2] = { { .fd = in, .events = POLLIN }, { .fd = 0, .events = POLLIN } };
        if (poll(p, 2, -1) < 0)
            continue;
        if (p[1].revents) {
            if (!fgets(line, sizeof(line), stdin))
                break;
            command(line);
        }
        if (!p[0].revents)
            continue;
        ssize_t n = read(in, buf, sizeof(buf));
        for (char *q = buf; n > 0 && q < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)q;
            q += sizeof(*ev) + ev->len;
            if (!ev->len || ev->name[0] == '.')
                continue;
            if (ev->mask & (IN_CREATE | IN_MOVED_TO))
                added(ev->name);
            else
                removed(ev->name);
        }
    }
    csi_client_free(cli);
    return 0;
}

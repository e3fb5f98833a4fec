/* csi: method paths and decoding of the six replies into struct csi_result. */
#include "csi/client.h"
#include "csi/internal.h"
#include "proto/csi.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRING_MAX 4096   /* a decoded string longer than this is cut */
#define NODE_ID_MAX 256   /* the CSI spec's bound on node_id */

/* Capability kinds: the text prefix and the enum that names the values. */
enum cap_kind { CAP_PLUGIN, CAP_EXPANSION, CAP_NODE, CAP_CONTROLLER };
static const struct {
    const char *prefix;
    const ProtobufCEnumDescriptor *names;
} cap_kinds[] = {
    [CAP_PLUGIN] = { "plugin", &csi__v1__plugin_capability__service__type__descriptor },
    [CAP_EXPANSION] = { "expansion", &csi__v1__plugin_capability__volume_expansion__type__descriptor },
    [CAP_NODE] = { "node", &csi__v1__node_service_capability__rpc__type__descriptor },
    [CAP_CONTROLLER] = { "controller", &csi__v1__controller_service_capability__rpc__type__descriptor },
};

typedef int decoder(const ProtobufCMessage *msg, enum cap_kind kind, struct csi_result *res);
static decoder dec_probe, dec_info, dec_plugin_caps, dec_rpc_caps, dec_node_info;

/* NodeGetCapabilitiesResponse and ControllerGetCapabilitiesResponse are the
 * same on the wire (field 1: repeated { field 1: { field 1: enum } }), so
 * both are read as the former; the kind picks the prefix and the names. */
static const struct {
    const char *path;
    const ProtobufCMessageDescriptor *reply;
    decoder *decode;
    enum cap_kind kind;
} methods[CSI_METHOD_COUNT] = {
    [CSI_PROBE] = { "/csi.v1.Identity/Probe", &csi__v1__probe_response__descriptor, dec_probe, 0 },
    [CSI_GET_PLUGIN_INFO] = { "/csi.v1.Identity/GetPluginInfo",
                              &csi__v1__get_plugin_info_response__descriptor, dec_info, 0 },
    [CSI_GET_PLUGIN_CAPABILITIES] = { "/csi.v1.Identity/GetPluginCapabilities",
                                      &csi__v1__get_plugin_capabilities_response__descriptor,
                                      dec_plugin_caps, CAP_PLUGIN },
    [CSI_NODE_GET_INFO] = { "/csi.v1.Node/NodeGetInfo",
                            &csi__v1__node_get_info_response__descriptor, dec_node_info, 0 },
    [CSI_NODE_GET_CAPABILITIES] = { "/csi.v1.Node/NodeGetCapabilities",
                                    &csi__v1__node_get_capabilities_response__descriptor,
                                    dec_rpc_caps, CAP_NODE },
    [CSI_CONTROLLER_GET_CAPABILITIES] = { "/csi.v1.Controller/ControllerGetCapabilities",
                                          &csi__v1__node_get_capabilities_response__descriptor,
                                          dec_rpc_caps, CAP_CONTROLLER },
};

const char *csi_method_path(enum csi_method m)
{
    return (unsigned)m < CSI_METHOD_COUNT ? methods[m].path : NULL;
}

int csi_method_from_path(const char *path)
{
    for (int m = 0; path && m < CSI_METHOD_COUNT; m++)
        if (strcmp(path, methods[m].path) == 0)
            return m;
    return -ENOENT;
}

void csi_result_clear(struct csi_result *res)
{
    free(res->reason);
    free(res->name);
    free(res->vendor_version);
    free(res->capabilities);
    free(res->node_id);
    free(res->topology);
    memset(res, 0, sizeof(*res));
}

static int dec_probe(const ProtobufCMessage *msg, enum cap_kind kind, struct csi_result *res)
{
    const Csi__V1__ProbeResponse *p = (const Csi__V1__ProbeResponse *)msg;
    (void)kind;
    res->ready = !p->ready || p->ready->value;
    return 0;
}

static int dec_info(const ProtobufCMessage *msg, enum cap_kind kind, struct csi_result *res)
{
    const Csi__V1__GetPluginInfoResponse *p = (const Csi__V1__GetPluginInfoResponse *)msg;
    (void)kind;
    res->name = csi_dup_line(p->name, STRING_MAX);
    res->vendor_version = csi_dup_line(p->vendor_version, STRING_MAX);
    return res->name && res->vendor_version ? 0 : -ENOMEM;
}

/* Text built with open_memstream: *buf is the result, NULL after any error. */
static int text_close(FILE *f, char **buf)
{
    bool bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        free(*buf);
        *buf = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* ---- capabilities: lines in the order sent, duplicates dropped ---- */

struct cap {
    enum cap_kind kind;
    int value;
    size_t index;           /* position in the reply */
};

static void cap_add(struct cap *caps, size_t *n, enum cap_kind kind, int value)
{
    caps[*n] = (struct cap){ kind, value, *n };
    (*n)++;
}

static int cap_cmp(const void *a, const void *b)
{
    const struct cap *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Room for n capabilities, for caps_text. */
static struct cap *caps_new(size_t n)
{
    return calloc(n + 1, sizeof(struct cap));
}

/* caps[0..n) in the order sent, as text in res->capabilities; frees caps.
 * Sorting a copy finds duplicates in n log n, whatever a plugin sends. */
static int caps_text(struct cap *caps, size_t n, struct csi_result *res)
{
    struct cap *sorted = malloc((n + 1) * sizeof(*sorted));
    bool *dup = calloc(n + 1, sizeof(*dup));
    size_t size = 0;
    FILE *f = sorted && dup ? open_memstream(&res->capabilities, &size) : NULL;
    if (f) {
        if (n)
            memcpy(sorted, caps, n * sizeof(*caps));
        qsort(sorted, n, sizeof(*sorted), cap_cmp);
        for (size_t i = 1; i < n; i++)
            dup[sorted[i].index] = sorted[i].kind == sorted[i - 1].kind &&
                                   sorted[i].value == sorted[i - 1].value;
        for (size_t i = 0; i < n; i++) {
            if (dup[i])
                continue;
            const char *prefix = cap_kinds[caps[i].kind].prefix;
            const ProtobufCEnumValue *v =
                protobuf_c_enum_descriptor_get_value(cap_kinds[caps[i].kind].names, caps[i].value);
            if (v)
                fprintf(f, "%s:%s\n", prefix, v->name);
            else
                fprintf(f, "%s:%d\n", prefix, caps[i].value);
        }
    }
    free(sorted);
    free(dup);
    free(caps);
    return f ? text_close(f, &res->capabilities) : -ENOMEM;
}

static int dec_plugin_caps(const ProtobufCMessage *msg, enum cap_kind kind, struct csi_result *res)
{
    const Csi__V1__GetPluginCapabilitiesResponse *p =
        (const Csi__V1__GetPluginCapabilitiesResponse *)msg;
    struct cap *caps = caps_new(p->n_capabilities);
    size_t n = 0;
    (void)kind;
    for (size_t i = 0; caps && i < p->n_capabilities; i++) {
        const Csi__V1__PluginCapability *c = p->capabilities[i];
        if (c->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE && c->service)
            cap_add(caps, &n, CAP_PLUGIN, c->service->type);
        else if (c->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION &&
                 c->volume_expansion)
            cap_add(caps, &n, CAP_EXPANSION, c->volume_expansion->type);
        /* else a kind of capability newer than this proto: nothing to show */
    }
    return caps ? caps_text(caps, n, res) : -ENOMEM;
}

static int dec_rpc_caps(const ProtobufCMessage *msg, enum cap_kind kind, struct csi_result *res)
{
    const Csi__V1__NodeGetCapabilitiesResponse *p =
        (const Csi__V1__NodeGetCapabilitiesResponse *)msg;
    struct cap *caps = caps_new(p->n_capabilities);
    size_t n = 0;
    for (size_t i = 0; caps && i < p->n_capabilities; i++) {
        const Csi__V1__NodeServiceCapability *c = p->capabilities[i];
        if (c->type_case == CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC && c->rpc)
            cap_add(caps, &n, kind, c->rpc->type);
    }
    return caps ? caps_text(caps, n, res) : -ENOMEM;
}

/* ---- node info: topology sorted by key, the last of a duplicated key wins ---- */

struct seg {
    const char *key, *value;
    size_t index;           /* position in the reply */
};

static int seg_cmp(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->index < y->index ? -1 : x->index > y->index);
}

static int topology_text(const Csi__V1__Topology *t, char **out)
{
    size_t n = t ? t->n_segments : 0, size = 0;
    struct seg *segs = malloc((n + 1) * sizeof(*segs));
    FILE *f = segs ? open_memstream(out, &size) : NULL;
    int rc = 0;
    if (!f) {
        free(segs);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const char *k = t->segments[i]->key, *v = t->segments[i]->value;
        segs[i] = (struct seg){ k ? k : "", v ? v : "", i };
    }
    qsort(segs, n, sizeof(*segs), seg_cmp);
    for (size_t i = 0; i < n && !rc; i++) {
        if (i + 1 < n && strcmp(segs[i].key, segs[i + 1].key) == 0)
            continue;           /* a later entry of this key wins */
        char *k = csi_dup_line(segs[i].key, STRING_MAX);
        char *v = csi_dup_line(segs[i].value, STRING_MAX);
        if (k && v)
            fprintf(f, "%s=%s\n", k, v);
        else
            rc = -ENOMEM;
        free(k);
        free(v);
    }
    free(segs);
    int rc2 = text_close(f, out);
    if (rc && !rc2) {
        free(*out);
        *out = NULL;
    }
    return rc ? rc : rc2;
}

/* A topology key or value that `key=value` lines cannot show. */
static bool bad_segment(const char *s)
{
    return s && s[strcspn(s, "= \n")] != '\0';
}

/* A fingerprint the registry must refuse: res->reason, -EPROTO. */
static int refuse(struct csi_result *res, const char *why)
{
    res->reason = strdup(why);
    return res->reason ? -EPROTO : -ENOMEM;
}

static int dec_node_info(const ProtobufCMessage *msg, enum cap_kind kind, struct csi_result *res)
{
    const Csi__V1__NodeGetInfoResponse *p = (const Csi__V1__NodeGetInfoResponse *)msg;
    (void)kind;
    if (p->node_id && strlen(p->node_id) > NODE_ID_MAX)
        return refuse(res, "fingerprint: node_id over 256 bytes");
    for (size_t i = 0; p->accessible_topology && i < p->accessible_topology->n_segments; i++)
        if (bad_segment(p->accessible_topology->segments[i]->key) ||
            bad_segment(p->accessible_topology->segments[i]->value))
            return refuse(res, "fingerprint: bad topology key");
    res->max_volumes = p->max_volumes_per_node;
    res->node_id = csi_dup_line(p->node_id, STRING_MAX);
    if (!res->node_id)
        return -ENOMEM;
    return topology_text(p->accessible_topology, &res->topology);
}

int csi_decode(enum csi_method m, const void *buf, size_t len, struct csi_result *res)
{
    if ((unsigned)m >= CSI_METHOD_COUNT || (!buf && len))
        return -EINVAL;
    res->method = m;
    res->ok = false;
    ProtobufCMessage *msg = protobuf_c_message_unpack(methods[m].reply, NULL, len, buf);
    if (!msg) {
        const char *name = strrchr(methods[m].path, '/') + 1;
        if (asprintf(&res->reason, "protocol: undecodable %s reply (%zu bytes)", name, len) < 0)
            res->reason = NULL;
        return -EBADMSG;
    }
    int rc = methods[m].decode(msg, methods[m].kind, res);
    protobuf_c_message_free_unpacked(msg, NULL);
    res->ok = rc == 0;
    return rc;
}

/* csi-test-plugin: the reply messages, packed with protobuf-c. */
#include "tests/plugin/plugin.h"

#include "base/pb.h"
#include "proto/csi.pb-c.h"

#include <stdlib.h>
#include <string.h>

static grpc_byte_buffer *probe(const struct plug_cfg *cfg, int64_t uptime_ms)
{
    Csi__V1__ProbeResponse r = CSI__V1__PROBE_RESPONSE__INIT;
    Csi__V1__BoolValue ready = CSI__V1__BOOL_VALUE__INIT;
    ready.value = cfg->ready == PLUG_READY_TRUE && uptime_ms >= cfg->not_ready_for_ms;
    ready.value = ready.value != (bool)plug_ready_flipped;
    if (cfg->ready != PLUG_READY_ABSENT)
        r.ready = &ready;
    return pb_pack(&r.base);
}

static grpc_byte_buffer *plugin_info(const struct plug_cfg *cfg)
{
    Csi__V1__GetPluginInfoResponse r = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;
    r.name = (char *)cfg->name;
    r.vendor_version = (char *)cfg->version;
    return pb_pack(&r.base);
}

/* One zeroed block: n + 1 pointers, then the slots (see slots_of); the
 * pointers come first, so the slots are pointer-aligned. */
static void **block_new(size_t n, size_t slot_size)
{
    return calloc(n + 1, sizeof(void *) + slot_size);
}

static void *slots_of(void **block, size_t n)
{
    return block + n + 1;
}

/* The sub-messages of one capability, of either list. */
struct cap_slot {
    Csi__V1__PluginCapability plugin;
    Csi__V1__PluginCapability__Service service;
    Csi__V1__PluginCapability__VolumeExpansion expansion;
    Csi__V1__NodeServiceCapability rpc_cap;
    Csi__V1__NodeServiceCapability__RPC rpc;
};

/* c as a PluginCapability in x; false if it belongs to another list. */
static bool plugin_cap(struct cap_slot *x, const struct plug_capv *c)
{
    csi__v1__plugin_capability__init(&x->plugin);
    csi__v1__plugin_capability__service__init(&x->service);
    csi__v1__plugin_capability__volume_expansion__init(&x->expansion);
    if (c->kind == PLUG_CAP_SERVICE) {
        x->service.type = c->value;
        x->plugin.type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
        x->plugin.service = &x->service;
    } else if (c->kind == PLUG_CAP_EXPANSION) {
        x->expansion.type = c->value;
        x->plugin.type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
        x->plugin.volume_expansion = &x->expansion;
    }
    return x->plugin.type_case != CSI__V1__PLUGIN_CAPABILITY__TYPE__NOT_SET;
}

/* GetPluginCapabilities, or (kind NODE or CONTROLLER) one of the RPC lists.
 * Node and controller capabilities are the same on the wire: both are sent
 * as NodeGetCapabilitiesResponse. */
static grpc_byte_buffer *caps_reply(const struct plug_cfg *cfg, enum plug_cap kind)
{
    Csi__V1__GetPluginCapabilitiesResponse pr = CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT;
    Csi__V1__NodeGetCapabilitiesResponse rr = CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;
    void **ptrs = block_new(cfg->ncaps, sizeof(struct cap_slot));
    if (!ptrs)
        return NULL;
    struct cap_slot *sl = slots_of(ptrs, cfg->ncaps);
    size_t n = 0;
    for (size_t i = 0; i < cfg->ncaps; i++) {
        struct cap_slot *x = &sl[n];
        if (kind == PLUG_CAP_SERVICE) {
            if (plugin_cap(x, &cfg->caps[i]))
                ptrs[n++] = &x->plugin;
        } else if (cfg->caps[i].kind == kind) {
            csi__v1__node_service_capability__rpc__init(&x->rpc);
            x->rpc.type = cfg->caps[i].value;
            csi__v1__node_service_capability__init(&x->rpc_cap);
            x->rpc_cap.type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
            x->rpc_cap.rpc = &x->rpc;
            ptrs[n++] = &x->rpc_cap;
        }
    }
    pr.n_capabilities = rr.n_capabilities = n;
    pr.capabilities = (Csi__V1__PluginCapability **)ptrs;
    rr.capabilities = (Csi__V1__NodeServiceCapability **)ptrs;
    grpc_byte_buffer *bb = pb_pack(kind == PLUG_CAP_SERVICE ? &pr.base : &rr.base);
    free(ptrs);
    return bb;
}

static grpc_byte_buffer *node_info(const struct plug_cfg *cfg)
{
    Csi__V1__NodeGetInfoResponse r = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
    Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
    Csi__V1__Topology__SegmentsEntry *segs;
    void **ptrs = block_new(cfg->ntopology, sizeof(*segs));
    if (!ptrs)
        return NULL;
    segs = slots_of(ptrs, cfg->ntopology);
    for (size_t i = 0; i < cfg->ntopology; i++) {
        const char *kv = cfg->topology[i], *eq = strchr(kv, cfg->topology_sep);  /* checked by main */
        csi__v1__topology__segments_entry__init(&segs[i]);
        segs[i].key = strndup(kv, (size_t)(eq - kv));
        segs[i].value = (char *)eq + 1;
        ptrs[i] = &segs[i];
    }
    r.node_id = (char *)cfg->node_id;
    r.max_volumes_per_node = cfg->max_volumes;
    if (cfg->ntopology) {
        topo.n_segments = cfg->ntopology;
        topo.segments = (Csi__V1__Topology__SegmentsEntry **)ptrs;
        r.accessible_topology = &topo;
    }
    bool oom = false;
    for (size_t i = 0; i < cfg->ntopology; i++)
        oom |= !segs[i].key;
    grpc_byte_buffer *bb = oom ? NULL : pb_pack(&r.base);
    for (size_t i = 0; i < cfg->ntopology; i++)
        free(segs[i].key);
    free(ptrs);
    return bb;
}

grpc_byte_buffer *plug_reply(const struct plug_cfg *cfg, enum csi_method m, int64_t uptime_ms)
{
    switch (m) {
    case CSI_PROBE: return probe(cfg, uptime_ms);
    case CSI_GET_PLUGIN_INFO: return plugin_info(cfg);
    case CSI_GET_PLUGIN_CAPABILITIES: return caps_reply(cfg, PLUG_CAP_SERVICE);
    case CSI_NODE_GET_INFO: return node_info(cfg);
    case CSI_NODE_GET_CAPABILITIES: return caps_reply(cfg, PLUG_CAP_NODE);
    case CSI_CONTROLLER_GET_CAPABILITIES: return caps_reply(cfg, PLUG_CAP_CONTROLLER);
    default: return NULL;
    }
}

bool plug_serves(const struct plug_cfg *cfg, enum csi_method m)
{
    switch (m) {
    case CSI_NODE_GET_INFO:
    case CSI_NODE_GET_CAPABILITIES: return cfg->type != PLUG_CONTROLLER;
    case CSI_CONTROLLER_GET_CAPABILITIES: return cfg->type != PLUG_NODE;
    default: return (unsigned)m < CSI_METHOD_COUNT;
    }
}

/* Decoding of the six CSI replies, reasons, and method paths. */
#include "csi/client.h"
#include "proto/csi.pb-c.h"
#include "tests/lib/testutil.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* "0A 03 61" -> bytes; returns the length. */
static size_t hex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    unsigned v;
    int used;
    while (sscanf(s, " %2x%n", &v, &used) == 1) {
        cr_assert_lt(n, cap, "hex too long");
        out[n++] = (uint8_t)v;
        s += used;
    }
    cr_assert(strspn(s, " ") == strlen(s), "bad hex at \"%s\"", s);
    return n;
}

/* Decode hex as method m, expecting success. */
static struct csi_result ok(enum csi_method m, const char *h)
{
    uint8_t buf[512];
    size_t n = hex(h, buf, sizeof(buf));
    struct csi_result r = { 0 };
    int rc = csi_decode(m, buf, n, &r);
    cr_assert_eq(rc, 0, "decode %s: %d (%s)", h, rc, r.reason);
    cr_assert(r.ok && !r.reason && r.method == m);
    return r;
}

static void refused(enum csi_method m, const uint8_t *buf, size_t n)
{
    struct csi_result r = { 0 };
    cr_assert_eq(csi_decode(m, buf, n, &r), -EBADMSG, "accepted %zu bytes", n);
    cr_assert(!r.ok);
    cr_assert(r.reason && strncmp(r.reason, "protocol: undecodable ", 22) == 0, "%s", r.reason);
    csi_result_clear(&r);
}

static void refused_hex(enum csi_method m, const char *h)
{
    uint8_t buf[512];
    refused(m, buf, hex(h, buf, sizeof(buf)));
}

static void caps_are(enum csi_method m, const char *h, const char *want)
{
    struct csi_result r = ok(m, h);
    cr_assert_str_eq(r.capabilities, want, "for %s", h);
    csi_result_clear(&r);
}

/* ---- csi-wire-facts.md section 5 ---- */

#define S_INFO "0A 03 61 2E 62 12 01 31 1A 06 0A 01 6B 12 01 76"
#define S_PCAPS "0A 04 0A 02 08 01 0A 04 12 02 08 01"
#define S_NODE "0A 02 6E 31 10 07 1A 0C 0A 0A 0A 04 7A 6F 6E 65 12 02 7A 31"
#define S_NCAPS "0A 04 0A 02 08 01"
#define S_CCAPS "0A 02 0A 00"
#define S_NEG "0A 01 6E 10 FF FF FF FF FF FF FF FF FF 01"

Test(csi_decode, sample_plugin_info)
{
    struct csi_result r = ok(CSI_GET_PLUGIN_INFO, S_INFO);
    cr_assert_str_eq(r.name, "a.b");
    cr_assert_str_eq(r.vendor_version, "1");
    csi_result_clear(&r);
    cr_assert_null(r.name);
}

Test(csi_decode, sample_capabilities)
{
    caps_are(CSI_GET_PLUGIN_CAPABILITIES, S_PCAPS, "plugin:CONTROLLER_SERVICE\nexpansion:ONLINE\n");
    caps_are(CSI_NODE_GET_CAPABILITIES, S_NCAPS, "node:STAGE_UNSTAGE_VOLUME\n");
    caps_are(CSI_CONTROLLER_GET_CAPABILITIES, S_CCAPS, "controller:UNKNOWN\n");
    caps_are(CSI_CONTROLLER_GET_CAPABILITIES, "", "");
}

Test(csi_decode, sample_node_info)
{
    struct csi_result r = ok(CSI_NODE_GET_INFO, S_NODE);
    cr_assert_str_eq(r.node_id, "n1");
    cr_assert_eq(r.max_volumes, 7);
    cr_assert_str_eq(r.topology, "zone=z1\n");
    csi_result_clear(&r);
    r = ok(CSI_NODE_GET_INFO, S_NEG);
    cr_assert_str_eq(r.node_id, "n");
    cr_assert_eq(r.max_volumes, -1);
    cr_assert_str_eq(r.topology, "");
    csi_result_clear(&r);
    r = ok(CSI_NODE_GET_INFO, "");     /* all defaults */
    cr_assert_str_eq(r.node_id, "");
    cr_assert_eq(r.max_volumes, 0);
    cr_assert_str_eq(r.topology, "");
    csi_result_clear(&r);
}

Test(csi_decode, probe_ready_absent_false_true)
{
    struct csi_result r = ok(CSI_PROBE, "");
    cr_assert(r.ready, "absent means ready");
    r = ok(CSI_PROBE, "0A 00");
    cr_assert(!r.ready);
    r = ok(CSI_PROBE, "0A 02 08 01");
    cr_assert(r.ready);
    r = ok(CSI_PROBE, "0A 02 08 00");
    cr_assert(!r.ready);
}

/* ---- unknown fields and values ---- */

/* field 15 varint, 16 fixed64, 17 bytes, 18 fixed32 */
#define UNKNOWN_FIELDS " 78 05 81 01 01 02 03 04 05 06 07 08 8A 01 02 78 79 95 01 01 02 03 04"

Test(csi_decode, unknown_fields_are_skipped)
{
    struct csi_result r = ok(CSI_GET_PLUGIN_INFO, S_INFO UNKNOWN_FIELDS);
    cr_assert_str_eq(r.name, "a.b");
    csi_result_clear(&r);
    r = ok(CSI_NODE_GET_INFO, UNKNOWN_FIELDS " " S_NODE);
    cr_assert_str_eq(r.node_id, "n1");
    cr_assert_str_eq(r.topology, "zone=z1\n");
    csi_result_clear(&r);
    r = ok(CSI_PROBE, "0A 04 08 01 78 05" UNKNOWN_FIELDS);   /* inside BoolValue too */
    cr_assert(r.ready);
    caps_are(CSI_NODE_GET_CAPABILITIES, S_NCAPS UNKNOWN_FIELDS, "node:STAGE_UNSTAGE_VOLUME\n");
    /* an unknown field inside a capability, and a capability of an unknown kind */
    caps_are(CSI_GET_PLUGIN_CAPABILITIES, "0A 06 0A 02 08 01 18 07 0A 02 1A 00 " S_PCAPS,
             "plugin:CONTROLLER_SERVICE\nexpansion:ONLINE\n");
}

Test(csi_decode, unknown_enum_values_are_numbers)
{
    caps_are(CSI_GET_PLUGIN_CAPABILITIES, "0A 04 0A 02 08 63 0A 04 12 02 08 07", "plugin:99\nexpansion:7\n");
    caps_are(CSI_NODE_GET_CAPABILITIES, "0A 04 0A 02 08 2A", "node:42\n");
    caps_are(CSI_CONTROLLER_GET_CAPABILITIES, "0A 04 0A 02 08 11", "controller:17\n");
    caps_are(CSI_CONTROLLER_GET_CAPABILITIES, "0A 0D 0A 0B 08 FF FF FF FF FF FF FF FF FF 01",
             "controller:-1\n");
    caps_are(CSI_CONTROLLER_GET_CAPABILITIES, "0A 04 0A 02 08 0F", "controller:GET_SNAPSHOT\n");
    caps_are(CSI_GET_PLUGIN_CAPABILITIES, "0A 04 0A 02 08 04", "plugin:SNAPSHOT_METADATA_SERVICE\n");
    caps_are(CSI_NODE_GET_CAPABILITIES, "0A 04 0A 02 08 06", "node:VOLUME_MOUNT_GROUP\n");
}

Test(csi_decode, capabilities_in_order_without_duplicates)
{
    /* controller 1, 17, 1, 17, 2 */
    caps_are(CSI_CONTROLLER_GET_CAPABILITIES,
             "0A 04 0A 02 08 01 0A 04 0A 02 08 11 0A 04 0A 02 08 01 0A 04 0A 02 08 11 0A 04 0A 02 08 02",
             "controller:CREATE_DELETE_VOLUME\ncontroller:17\ncontroller:PUBLISH_UNPUBLISH_VOLUME\n");
    /* expansion ONLINE, service 1, service 1, expansion ONLINE, service 2: a
     * service and an expansion of the same number are different */
    caps_are(CSI_GET_PLUGIN_CAPABILITIES,
             "0A 04 12 02 08 01 0A 04 0A 02 08 01 0A 04 0A 02 08 01 0A 04 12 02 08 01 0A 04 0A 02 08 02",
             "expansion:ONLINE\nplugin:CONTROLLER_SERVICE\nplugin:VOLUME_ACCESSIBILITY_CONSTRAINTS\n");
}

/* ---- maps ---- */

Test(csi_decode, topology_sorted_last_key_wins)
{
    /* zone=a, rack=r, zone=b, then an entry without value and one without key */
    struct csi_result r = ok(CSI_NODE_GET_INFO,
                             "0A 01 6E 1A 2E"
                             " 0A 09 0A 04 7A 6F 6E 65 12 01 61"
                             " 0A 09 0A 04 72 61 63 6B 12 01 72"
                             " 0A 09 0A 04 7A 6F 6E 65 12 01 62"
                             " 0A 06 0A 04 68 6F 73 74"
                             " 0A 03 12 01 76");
    cr_assert_str_eq(r.topology, "=v\nhost=\nrack=r\nzone=b\n");
    csi_result_clear(&r);
}

Test(csi_decode, control_characters_replaced)
{
    /* name "a\nb", vendor_version "\t1" */
    struct csi_result r = ok(CSI_GET_PLUGIN_INFO, "0A 03 61 0A 62 12 02 09 31");
    cr_assert_str_eq(r.name, "a?b");
    cr_assert_str_eq(r.vendor_version, "?1");
    csi_result_clear(&r);
}

/* ---- refused input ---- */

Test(csi_decode, truncated_and_malformed_are_refused)
{
    refused_hex(CSI_GET_PLUGIN_INFO, "0A 03 61 2E");         /* string cut */
    refused_hex(CSI_GET_PLUGIN_INFO, "0A");                  /* tag without value */
    refused_hex(CSI_NODE_GET_INFO, "0A 02 6E 31 10");        /* varint missing */
    refused_hex(CSI_NODE_GET_INFO, "0A 01 6E 10 FF FF");     /* varint cut */
    refused_hex(CSI_NODE_GET_INFO, "0A 02 6E 31 10 07 1A 0C 0A 0A 0A 04 7A 6F");   /* map cut */
    refused_hex(CSI_PROBE, "0A 02 08");                      /* BoolValue cut */
    refused_hex(CSI_GET_PLUGIN_CAPABILITIES, "0A 04 0A 02 08");
    refused_hex(CSI_NODE_GET_INFO, "08 01");                 /* node_id with the varint wire type */
    refused_hex(CSI_PROBE, "0F");                            /* wire type 7 */
    refused_hex(CSI_PROBE, "00 00");                         /* field 0 */
    refused_hex(CSI_CONTROLLER_GET_CAPABILITIES, "FF FF FF FF");
    cr_assert_eq(csi_decode(CSI_METHOD_COUNT, "", 0, &(struct csi_result){ 0 }), -EINVAL);
}

/* Every prefix of every sample: decodes or is refused, never crashes; a cut
 * inside the last field is always refused. */
Test(csi_decode, every_prefix_of_the_samples)
{
    const struct { enum csi_method m; const char *h; } samples[] = {
        { CSI_GET_PLUGIN_INFO, S_INFO }, { CSI_GET_PLUGIN_CAPABILITIES, S_PCAPS },
        { CSI_NODE_GET_INFO, S_NODE }, { CSI_NODE_GET_CAPABILITIES, S_NCAPS },
        { CSI_CONTROLLER_GET_CAPABILITIES, S_CCAPS }, { CSI_NODE_GET_INFO, S_NEG },
        { CSI_PROBE, "0A 02 08 01" },
    };
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        uint8_t buf[512];
        size_t n = hex(samples[i].h, buf, sizeof(buf));
        for (size_t cut = 0; cut < n; cut++) {
            struct csi_result r = { 0 };
            int rc = csi_decode(samples[i].m, buf, cut, &r);
            cr_assert(rc == 0 || rc == -EBADMSG, "sample %zu cut %zu: %d", i, cut, rc);
            cr_assert_eq(r.ok, rc == 0);
            csi_result_clear(&r);
        }
        refused(samples[i].m, buf, n - 1);
    }
}

Test(csi_decode, random_bytes_never_crash)
{
    uint64_t x = 0x9E3779B97F4A7C15u;
    uint8_t buf[256];
    int decoded = 0, refusals = 0;
    for (int round = 0; round < 20000; round++) {
        size_t n = 0, len = (size_t)(round % 97);
        for (; n < len; n++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[n] = (uint8_t)x;
        }
        struct csi_result r = { 0 };
        int rc = csi_decode((enum csi_method)(round % CSI_METHOD_COUNT), buf, n, &r);
        cr_assert(rc == 0 || rc == -EBADMSG, "rc %d", rc);
        rc == 0 ? decoded++ : refusals++;
        csi_result_clear(&r);
    }
    cr_assert_gt(refusals, 0);
    cr_assert_gt(decoded, 0);
}

/* ---- method paths ---- */

Test(csi_decode, method_paths_match_the_proto)
{
    const ProtobufCServiceDescriptor *svc[CSI_METHOD_COUNT] = {
        [CSI_PROBE] = &csi__v1__identity__descriptor,
        [CSI_GET_PLUGIN_INFO] = &csi__v1__identity__descriptor,
        [CSI_GET_PLUGIN_CAPABILITIES] = &csi__v1__identity__descriptor,
        [CSI_NODE_GET_INFO] = &csi__v1__node__descriptor,
        [CSI_NODE_GET_CAPABILITIES] = &csi__v1__node__descriptor,
        [CSI_CONTROLLER_GET_CAPABILITIES] = &csi__v1__controller__descriptor,
    };
    for (int m = 0; m < CSI_METHOD_COUNT; m++) {
        const char *path = csi_method_path(m);
        char service[64];
        cr_assert(path && sscanf(path, "/%63[^/]/", service) == 1);
        cr_assert_str_eq(service, svc[m]->name);
        cr_assert(protobuf_c_service_descriptor_get_method_by_name(svc[m], strrchr(path, '/') + 1),
                  "%s not in the proto", path);
        cr_assert_eq(csi_method_from_path(path), m);
    }
    cr_assert_null(csi_method_path(CSI_METHOD_COUNT));
    cr_assert_eq(csi_method_from_path("/csi.v1.Identity/Nope"), -ENOENT);
}

/* ---- reasons ---- */

static void reason_is(enum csi_method m, int status, const char *msg, int ms, const char *want)
{
    char *r = csi_reason(m, status, msg, ms);
    cr_assert_str_eq(r, want);
    free(r);
}

Test(csi_decode, reasons)
{
    reason_is(CSI_PROBE, GRPC_STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded", 5000,
              "Probe timed out after 5s");
    reason_is(CSI_NODE_GET_INFO, GRPC_STATUS_DEADLINE_EXCEEDED, "", 1500,
              "NodeGetInfo timed out after 1500ms");
    reason_is(CSI_PROBE, GRPC_STATUS_UNIMPLEMENTED, "", 1000, "UNIMPLEMENTED");
    /* the first line only */
    reason_is(CSI_PROBE, GRPC_STATUS_FAILED_PRECONDITION, "not\nhealthy", 1000,
              "FAILED_PRECONDITION: not");
    reason_is(CSI_PROBE, GRPC_STATUS_FAILED_PRECONDITION, "a\tb\x01", 1000,
              "FAILED_PRECONDITION: a?b?");
    reason_is(CSI_PROBE, 99, "odd", 1000, "STATUS_99: odd");
    /* gRPC core's own texts: never a path or its internals */
    reason_is(CSI_PROBE, GRPC_STATUS_UNAVAILABLE,
              "failed to connect to all addresses; last error: UNAVAILABLE: "
              "unix:/tmp/x/f-garbage: Failed parsing HTTP/2", 1000, "protocol: not HTTP/2");
    reason_is(CSI_PROBE, GRPC_STATUS_UNAVAILABLE, "Socket closed", 1000,
              "UNAVAILABLE: connection closed");
    reason_is(CSI_NODE_GET_INFO, GRPC_STATUS_RESOURCE_EXHAUSTED,
              "Received message larger than max (1048590 vs. 65536)", 1000,
              "protocol: reply over 64 KiB");

    /* 300 bytes, cut to at most 200 on a character boundary */
    char msg[302] = "a", want[300] = "INTERNAL: a";
    for (int i = 0; i < 150; i++)
        strcat(msg, "\xc3\xa9");
    for (int i = 0; i < 99; i++)
        strcat(want, "\xc3\xa9");
    reason_is(CSI_PROBE, GRPC_STATUS_INTERNAL, msg, 1000, want);
    /* every byte of an invalid UTF-8 sequence is a '?' */
    reason_is(CSI_PROBE, GRPC_STATUS_INTERNAL, "x\xff\xc3(\xe2\x82y\xed\xa0\x80", 1000,
              "INTERNAL: x??" "(??y???");
}

/* The dial diagnosis: refused when nothing listens on the socket, 0 and
 * the listener's pid when something does. */
Test(csi_decode, dial_check_connects_to_the_socket)
{
    char *dir = tu_tmpdir("reason");
    cr_assert(dir);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s.sock", dir);
    pid_t pid = -1;
    cr_assert_eq(csi_dial_check(sa.sun_path, &pid), ENOENT);
    cr_assert_eq(pid, 0);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 4), 0);
    cr_assert_eq(csi_dial_check(sa.sun_path, &pid), 0);
    cr_assert_eq(pid, getpid());
    close(fd);      /* the file stays: a stale socket */
    cr_assert_eq(csi_dial_check(sa.sun_path, NULL), ECONNREFUSED);
    tu_rmrf(dir);
    free(dir);
}

/* ---- what no fingerprint may hold ---- */

static struct csi_result node_info(const char *node_id, const char *key, const char *value)
{
    Csi__V1__NodeGetInfoResponse r = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
    Csi__V1__Topology t = CSI__V1__TOPOLOGY__INIT;
    Csi__V1__Topology__SegmentsEntry seg = CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT;
    Csi__V1__Topology__SegmentsEntry *segs[] = { &seg };
    r.node_id = (char *)node_id;
    if (key) {
        seg.key = (char *)key;
        seg.value = (char *)value;
        t.n_segments = 1;
        t.segments = segs;
        r.accessible_topology = &t;
    }
    size_t n = csi__v1__node_get_info_response__get_packed_size(&r);
    uint8_t *buf = malloc(n + 1);
    cr_assert(buf);
    csi__v1__node_get_info_response__pack(&r, buf);
    struct csi_result res = { 0 };
    (void)csi_decode(CSI_NODE_GET_INFO, buf, n, &res);
    free(buf);
    return res;
}

static void node_info_refused(const char *node_id, const char *key, const char *value,
                              const char *why)
{
    struct csi_result r = node_info(node_id, key, value);
    cr_assert(!r.ok, "accepted node_id %.20s topology %s=%s", node_id, key, value);
    cr_assert_str_eq(r.reason, why);
    csi_result_clear(&r);
}

Test(csi_decode, bad_fingerprints_are_refused)
{
    char id[300];
    memset(id, 'n', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    node_info_refused(id, NULL, NULL, "fingerprint: node_id over 256 bytes");
    id[256] = '\0';
    struct csi_result r = node_info(id, "zone", "a");
    cr_assert(r.ok, "%s", r.reason);
    cr_assert_str_eq(r.node_id, id);
    csi_result_clear(&r);
    node_info_refused("n", "zo=ne", "a", "fingerprint: bad topology key");
    node_info_refused("n", "zone", "a=b", "fingerprint: bad topology key");
    node_info_refused("n", "zo ne", "a", "fingerprint: bad topology key");
    node_info_refused("n", "zone", "a\nb", "fingerprint: bad topology key");
}

Test(csi_decode, invalid_utf8_replaced)
{
    /* name "\xff" "é" "\xc3", vendor "\xe2\x82" "1" */
    struct csi_result r = ok(CSI_GET_PLUGIN_INFO, "0A 04 FF C3 A9 C3 12 03 E2 82 31");
    cr_assert_str_eq(r.name, "?\xc3\xa9?");
    cr_assert_str_eq(r.vendor_version, "??1");
    csi_result_clear(&r);
}

Test(csi_decode, status_names)
{
    cr_assert_str_eq(csi_status_name(0), "OK");
    cr_assert_str_eq(csi_status_name(GRPC_STATUS_UNAUTHENTICATED), "UNAUTHENTICATED");
    cr_assert_null(csi_status_name(17));
    cr_assert_null(csi_status_name(-1));
    cr_assert_eq(csi_status_parse("FAILED_PRECONDITION"), GRPC_STATUS_FAILED_PRECONDITION);
    cr_assert_eq(csi_status_parse("14"), GRPC_STATUS_UNAVAILABLE);
    cr_assert_eq(csi_status_parse("17"), -EINVAL);
    cr_assert_eq(csi_status_parse("9x"), -EINVAL);
    cr_assert_eq(csi_status_parse(""), -EINVAL);
}

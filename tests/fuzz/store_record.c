/* Store records (registry/store_codec.c): store_unpack of a key and value
 * as LMDB would hand them over, then the conversion to the registry's
 * structs. Input: [mode][key length][key][value]; mode & 7 picks the kind
 * expected, mode & 0x80 fixes the CRC first so that the protobuf decoding
 * behind it is reached too. */
#include "tests/fuzz/fuzz.h"
#include "registry/store_int.h"

static const enum store_kind kinds[] = { SK_PLUGIN, SK_INST, SK_META, SK_V1_PLUGIN, SK_V1_META };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned mode = data[0];
    size_t klen = data[1];
    if (klen > size - 2)
        return 0;
    MDB_val key = { .mv_size = klen, .mv_data = (void *)(data + 2) };
    size_t vlen = size - 2 - klen;
    uint8_t *v = malloc(vlen ? vlen : 1);
    if (!v)
        return 0;
    memcpy(v, data + 2 + klen, vlen);
    if ((mode & 0x80) && vlen >= STORE_HDR) {
        uint32_t crc = store_crc32(0, key.mv_data, klen);
        crc = store_crc32(crc, v, 4);
        crc = store_crc32(crc, v + STORE_HDR, vlen - STORE_HDR);
        for (int i = 0; i < 4; i++)
            v[4 + i] = (uint8_t)(crc >> (8 * i));
    }
    MDB_val val = { .mv_size = vlen, .mv_data = v };
    enum store_kind kind = kinds[(mode & 7) % (sizeof(kinds) / sizeof(kinds[0]))];
    char why[256] = "";
    ProtobufCMessage *msg = store_unpack(&key, &val, kind, why, sizeof(why));
    if (!msg && !why[0])
        fuzz_fail("store_unpack refused a record without saying why");
    if (msg && kind == SK_PLUGIN) {
        struct store_plugin p;
        store_plugin_from_pb((const Csifs__Store__Plugin *)msg, &p);
        if (!p.name)
            fuzz_fail("plugin record without a name string");
    } else if (msg && kind == SK_INST) {
        struct store_inst i;
        store_inst_from_pb((const Csifs__Store__Instance *)msg, &i);
        Csifs__Store__Instance out;
        Csifs__Store__Fingerprint fp;
        store_inst_to_pb(&i, &out, &fp);
        size_t n = protobuf_c_message_get_packed_size(&out.base);
        uint8_t *buf = malloc(n ? n : 1);
        if (buf)
            protobuf_c_message_pack(&out.base, buf);
        free(buf);
    }
    if (msg)
        protobuf_c_message_free_unpacked(msg, NULL);
    free(v);
    return 0;
}

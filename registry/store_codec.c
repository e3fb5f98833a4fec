/* The store's records: CRC32, keys, the value header and protobuf packing
 * (layout in store_int.h and proto/registry.proto); the walk over them that
 * checks each on its own: store_scan.c. */
#include "registry/store_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- CRC32 (reflected IEEE polynomial: zlib's) ---- */

uint32_t store_crc32(uint32_t crc, const void *buf, size_t len)
{
    for (; len > UINT_MAX; len -= UINT_MAX, buf = (const char *)buf + UINT_MAX)
        crc = (uint32_t)crc32(crc, buf, UINT_MAX);
    return (uint32_t)crc32(crc, buf, (uInt)len);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Least significant byte first, 8 bits a pass, only the bytes some key
 * uses (2 passes below 65,536): the start-up sorts every record by seq, and
 * qsort's comparisons were a tenth of the load (the takeover rows). */
int store_sort_by_u64(void *v, size_t n, size_t size, size_t key)
{
    unsigned char *a = v, *tmp, *from = a, *to;
    uint64_t all = 0, k;
    for (size_t i = 0; i < n; i++) {
        memcpy(&k, a + i * size + key, sizeof(k));
        all |= k;
    }
    if (n < 2 || !all)
        return 0;
    if (!(tmp = to = malloc(n * size)))
        return -ENOMEM;
    for (unsigned shift = 0; shift < 64 && all >> shift; shift += 8) {
        size_t at[256] = { 0 }, sum = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(&k, from + i * size + key, sizeof(k));
            at[(k >> shift) & 0xff]++;
        }
        for (size_t d = 0; d < 256; d++) {
            size_t c = at[d];
            at[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) {
            memcpy(&k, from + i * size + key, sizeof(k));
            memcpy(to + at[(k >> shift) & 0xff]++ * size, from + i * size, size);
        }
        unsigned char *t = from;
        from = to;
        to = t;
    }
    if (from != a)
        memcpy(a, from, n * size);
    free(tmp);
    return 0;
}

void store_sort_u64(uint64_t *v, size_t n)
{
    if (n && store_sort_by_u64(v, n, sizeof(*v), 0) < 0)
        qsort(v, n, sizeof(*v), cmp_u64);
}

/* ---- messages ---- */

int store_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *store_key_text(const MDB_val *key, char *buf, size_t cap)
{
    const unsigned char *k = key->mv_data;
    size_t o = 0;
    for (size_t i = 0; i < key->mv_size && o + 5 < cap; i++) {
        if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '"' && k[i] != '\\')
            buf[o++] = (char)k[i];
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", k[i]);
    }
    buf[o < cap ? o : cap - 1] = '\0';
    return buf;
}

/* ---- keys ---- */

const MDB_val store_key_version = { 7, "version" };
const MDB_val store_key_meta = { 4, "meta" };
const MDB_val store_key_ring = { 4, "ring" };

/* Append s to buf at *n, cut at STORE_KEY_MAX - 1 bytes. */
static void key_put(char *buf, size_t *n, const char *s)
{
    size_t len = strlen(s), room = STORE_KEY_MAX - 1 - *n;
    len = len < room ? len : room;
    memcpy(buf + *n, s, len);
    *n += len;
}

/* "<prefix><type>/<plugin>[/<alloc>]", built without printf: every record
 * of a restore makes one or two (restart_100k). */
static void key_fmt(MDB_val *key, char *buf, const char *prefix, enum reg_type type,
                    const char *plugin, const char *alloc)
{
    size_t n = 0;
    const char *parts[] = { prefix, reg_type_names[type], "/", plugin, alloc ? "/" : "",
                            alloc ? alloc : "" };
    for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++)
        key_put(buf, &n, parts[k]);
    buf[n] = '\0';
    key->mv_data = buf;
    key->mv_size = n;
}

void store_key_plugin(MDB_val *key, char *buf, enum reg_type type, const char *plugin)
{
    key_fmt(key, buf, "p/", type, plugin, NULL);
}

void store_key_inst(MDB_val *key, char *buf, enum reg_type type, const char *plugin,
                    const char *alloc)
{
    key_fmt(key, buf, "i/", type, plugin, alloc);
}

void store_key_v1(MDB_val *key, char *buf, enum reg_type type, const char *plugin)
{
    key_fmt(key, buf, "", type, plugin, NULL);
}

/* ---- values ---- */

static uint32_t record_crc(const MDB_val *key, const unsigned char *val, size_t len)
{
    uint32_t crc = store_crc32(0, key->mv_data, key->mv_size);
    crc = store_crc32(crc, val, 4);
    return store_crc32(crc, val + STORE_HDR, len - STORE_HDR);
}

/* Room for a record of kind with n bytes of payload under key, in place
 * (MDB_RESERVE): *payload, to fill before store_seal. */
static int reserve(MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, enum store_kind kind,
                   size_t n, MDB_val *val)
{
    *val = (MDB_val){ STORE_HDR + n, NULL };
    int rc = mdb_put(txn, dbi, (MDB_val *)key, val, MDB_RESERVE);
    if (rc != 0)
        return rc;
    unsigned char *v = val->mv_data;
    v[0] = STORE_HDR_FORMAT;
    v[1] = (unsigned char)kind;
    v[2] = v[3] = 0;
    return 0;
}

/* The header's CRC, once the payload is in place. */
static void seal(const MDB_val *key, const MDB_val *val)
{
    unsigned char *v = val->mv_data;
    uint32_t crc = record_crc(key, v, val->mv_size);
    for (int i = 0; i < 4; i++)
        v[4 + i] = (unsigned char)(crc >> (8 * i));
}

int store_put_msg(MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, enum store_kind kind,
                  const ProtobufCMessage *msg)
{
    MDB_val val;
    int rc = reserve(txn, dbi, key, kind, protobuf_c_message_get_packed_size(msg), &val);
    if (rc != 0)
        return rc;
    protobuf_c_message_pack(msg, (unsigned char *)val.mv_data + STORE_HDR);
    seal(key, &val);
    return 0;
}

int store_put_raw(MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, enum store_kind kind,
                  const void *payload, size_t n)
{
    MDB_val val;
    int rc = reserve(txn, dbi, key, kind, n, &val);
    if (rc != 0)
        return rc;
    memcpy((unsigned char *)val.mv_data + STORE_HDR, payload, n);
    seal(key, &val);
    return 0;
}

static const ProtobufCMessageDescriptor *kind_desc(enum store_kind kind)
{
    switch (kind) {
    case SK_PLUGIN: return &csifs__store__plugin__descriptor;
    case SK_INST: return &csifs__store__instance__descriptor;
    case SK_META: return &csifs__store__meta__descriptor;
    case SK_V1_PLUGIN: return &csifs__store__v1_plugin__descriptor;
    case SK_V1_META: return &csifs__store__v1_meta__descriptor;
    case SK_RING: case SK_RING_CTL: break;   /* no message: store_ring.c */
    }
    return NULL;
}

ProtobufCMessage *store_unpack(const MDB_val *key, const MDB_val *val, enum store_kind kind,
                               char *why, size_t whylen)
{
    return store_unpack_with(key, val, kind, NULL, true, why, whylen);
}

int store_check_hdr(const MDB_val *key, const MDB_val *val, enum store_kind kind, bool crc,
                    char *why, size_t whylen)
{
    const unsigned char *v = val->mv_data;
    if (val->mv_size < STORE_HDR || v[0] != STORE_HDR_FORMAT || v[2] || v[3]) {
        snprintf(why, whylen, "has no valid record header");
        return -EBADMSG;
    }
    uint32_t stored = (uint32_t)v[4] | (uint32_t)v[5] << 8 | (uint32_t)v[6] << 16 |
                      (uint32_t)v[7] << 24;
    uint32_t computed = crc ? record_crc(key, v, val->mv_size) : stored;
    if (stored != computed) {
        snprintf(why, whylen, "fails its checksum (CRC32 stored 0x%08x, computed 0x%08x)",
                 stored, computed);
        return -EBADMSG;
    }
    const ProtobufCMessageDescriptor *d = kind_desc(kind);
    if (v[1] != kind) {
        snprintf(why, whylen, "is a record of kind %u where kind %u (%s) belongs", v[1], kind,
                 d ? d->short_name : "Ring");
        return -EBADMSG;
    }
    return 0;
}

ProtobufCMessage *store_unpack_with(const MDB_val *key, const MDB_val *val,
                                    enum store_kind kind, ProtobufCAllocator *a, bool crc,
                                    char *why, size_t whylen)
{
    if (store_check_hdr(key, val, kind, crc, why, whylen) < 0)
        return NULL;
    const ProtobufCMessageDescriptor *d = kind_desc(kind);
    const unsigned char *v = val->mv_data;
    ProtobufCMessage *m = protobuf_c_message_unpack(d, a, val->mv_size - STORE_HDR,
                                                    v + STORE_HDR);
    if (!m)
        snprintf(why, whylen, "does not decode as %s", d->short_name);
    return m;
}

/* ---- version ---- */

void store_version_val(int version, MDB_val *val, char *buf)
{
    int n = snprintf(buf, 12, "%d", version);
    val->mv_data = buf;
    val->mv_size = n > 0 ? (size_t)n : 0;
}

int store_read_version(MDB_txn *txn, MDB_dbi dbi, int *version, const char *file,
                       char *err, size_t errlen)
{
    MDB_val val;
    int rc = mdb_get(txn, dbi, (MDB_val *)&store_key_version, &val);
    if (rc == MDB_NOTFOUND) {
        MDB_stat st;
        if ((rc = mdb_stat(txn, dbi, &st)) != 0)
            return store_fail(err, errlen, store_errno(rc), "%s: %s", file,
                              mdb_strerror(rc));
        *version = 0;
        if (st.ms_entries == 0)
            return 0;
        return store_fail(err, errlen, -ENOKEY,
                          "%s: the version key is missing but the store holds %zu "
                          "records: not a csifs store, or damaged", file, st.ms_entries);
    }
    if (rc != 0)
        return store_fail(err, errlen, store_errno(rc), "%s: reading the version: %s",
                          file, mdb_strerror(rc));
    for (int v = 1; v <= STORE_VERSION; v++) {
        char buf[12];
        MDB_val want;
        store_version_val(v, &want, buf);
        if (store_key_eq(&val, &want)) {
            *version = v;
            return 0;
        }
    }
    char text[64];
    return store_fail(err, errlen, -ENOTSUP,
                      "%s: unknown schema version \"%s\" (this csifs knows 1 to %d)", file,
                      store_key_text(&val, text, sizeof(text)), STORE_VERSION);
}

/* ---- conversions ---- */


void store_plugin_from_pb(const Csifs__Store__Plugin *m, struct store_plugin *p)
{
    p->type = (enum reg_type)m->type;
    p->name = store_str(m->name);
    p->seq = m->seq;
    p->registered_ns = m->registered_ns;
    p->current = m->current;
}

void store_inst_from_pb(const Csifs__Store__Instance *m, struct store_inst *i)
{
    memset(i, 0, sizeof(*i));
    i->type = (enum reg_type)m->type;
    i->plugin = store_str(m->plugin);
    i->alloc = store_str(m->alloc);
    i->seq = m->seq;
    i->registered_ns = m->registered_ns;
    i->socket = store_str(m->socket);
    i->ready = m->ready;
    const Csifs__Store__Fingerprint *f = m->fp;
    i->fp.provider = store_str(f ? f->provider : NULL);
    i->fp.version = store_str(f ? f->version : NULL);
    i->fp.nodeid = store_str(f ? f->nodeid : NULL);
    i->fp.max_volumes = f ? f->max_volumes : 0;
    i->fp.topology = store_str(f ? f->topology : NULL);
    i->fp.capabilities = store_str(f ? f->capabilities : NULL);
    i->mount_point = store_str(m->mount_point);
    i->container_mount_point = store_str(m->container_mount_point);
}

void store_inst_to_pb(const struct store_inst *i, Csifs__Store__Instance *m,
                      Csifs__Store__Fingerprint *fp)
{
    csifs__store__instance__init(m);
    csifs__store__fingerprint__init(fp);
    m->type = (Csifs__Store__PluginType)i->type;
    m->plugin = (char *)i->plugin;
    m->alloc = (char *)i->alloc;
    m->seq = i->seq;
    m->registered_ns = i->registered_ns;
    m->socket = (char *)store_str(i->socket);
    m->ready = i->ready;
    fp->provider = (char *)store_str(i->fp.provider);
    fp->version = (char *)store_str(i->fp.version);
    fp->nodeid = (char *)store_str(i->fp.nodeid);
    fp->max_volumes = i->fp.max_volumes;
    fp->topology = (char *)store_str(i->fp.topology);
    fp->capabilities = (char *)store_str(i->fp.capabilities);
    if (*fp->provider || *fp->version || *fp->nodeid || fp->max_volumes || *fp->topology ||
        *fp->capabilities)
        m->fp = fp;
    m->mount_point = (char *)store_str(i->mount_point);
    m->container_mount_point = (char *)store_str(i->container_mount_point);
}

/* ---- checks of one record ---- */

int store_errno(int rc)
{
    switch (rc) {
    case MDB_INVALID:
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
        return -EUCLEAN;
    case MDB_VERSION_MISMATCH:
        return -EPROTONOSUPPORT;
    case MDB_MAP_FULL:
        return -ENOSPC;
    default:
        return rc > 0 && rc < 4096 ? -rc : -EIO;
    }
}

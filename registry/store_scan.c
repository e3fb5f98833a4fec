/* The walk over a store's records (store_int.h store_scan): each decoded
 * and checked on its own -- header, CRC, the key matching the content, valid
 * type, names and values; the ring's records by store_ring.c. */
#include "registry/store_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* msg when v is not a valid writable attribute value, else NULL. */
static const char *check_value(const char *msg, const char *v)
{
    return strlen(v) > REG_VALUE_MAX || strchr(v, '\n') ? msg : NULL;
}

/* The fields of an instance that both schema versions share. */
static const char *check_inst(const char *alloc, const char *socket, const char *mp,
                              const char *cmp)
{
    if (reg_name_check(alloc) < 0)
        return "has an invalid alloc name";
    if (*socket && (socket[0] != '/' || strlen(socket) > REG_SOCKET_MAX))
        return "has an invalid socket";
    const char *why = check_value("has an invalid mount_point", mp);
    return why ? why : check_value("has an invalid container_mount_point", cmp);
}

/* Why msg (of kind, found under key) is not a valid record, or NULL. */
static const char *check_rec(enum store_kind kind, const ProtobufCMessage *msg,
                             const MDB_val *key, struct store_scan *s)
{
    char buf[STORE_KEY_MAX];
    MDB_val want = { 0, NULL };
    unsigned type = 0;
    const char *name = "", *why = NULL;
    if (kind == SK_PLUGIN) {
        const Csifs__Store__Plugin *p = (const void *)msg;
        type = p->type;
        name = store_str(p->name);
        if (p->seq == 0)
            why = "has no sequence number";
    } else if (kind == SK_INST) {
        const Csifs__Store__Instance *i = (const void *)msg;
        type = i->type;
        name = store_str(i->plugin);
        why = i->seq == 0 ? "has no sequence number"
              : check_inst(store_str(i->alloc), store_str(i->socket), store_str(i->mount_point),
                           store_str(i->container_mount_point));
        if (type < REG_NTYPES && !why)
            store_key_inst(&want, buf, type, name, store_str(i->alloc));
    } else if (kind == SK_V1_PLUGIN) {
        const Csifs__Store__V1Plugin *p = (const void *)msg;
        const Csifs__Store__V1Instance *i = p->instance;
        type = p->type;
        name = store_str(p->name);
        if (i)
            why = check_inst(store_str(i->alloc), store_str(i->socket), store_str(i->mount_point),
                             store_str(i->container_mount_point));
    } else {
        const Csifs__Store__Meta *m = (const void *)msg;
        const Csifs__Store__V1Meta *m1 = (const void *)msg;
        s->has_meta = true;
        s->meta.next_seq = kind == SK_META ? m->next_seq : 1;
        s->meta.ev_reserved = kind == SK_META ? m->ev_reserved : m1->ev_reserved;
        return NULL;
    }
    if (why)
        return why;
    if (type >= REG_NTYPES)
        return "has an unknown plugin type";
    if (reg_name_check(name) < 0)
        return "has an invalid plugin name";
    if (kind == SK_PLUGIN)
        store_key_plugin(&want, buf, type, name);
    else if (kind == SK_V1_PLUGIN)
        store_key_v1(&want, buf, type, name);
    return store_key_eq(key, &want) ? NULL : "does not match its key";
}

static enum store_kind kind_of(int version, const MDB_val *key)
{
    const char *k = key->mv_data;
    if (store_key_eq(key, &store_key_meta))
        return version == 1 ? SK_V1_META : SK_META;
    if (version == 1)
        return SK_V1_PLUGIN;
    if (key->mv_size > 2 && k[0] == 'p' && k[1] == '/')
        return SK_PLUGIN;
    if (key->mv_size > 2 && k[0] == 'i' && k[1] == '/')
        return SK_INST;
    if ((key->mv_size > 2 && k[0] == 'r' && k[1] == '/') || store_key_eq(key, &store_key_ring))
        return SK_RING;              /* a record or the control: store_ring_check */
    return 0;
}

int store_scan(MDB_txn *txn, MDB_dbi dbi, int version, struct store_scan *s,
               const char *file, char *err, size_t errlen)
{
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc != 0)
        return store_fail(err, errlen, store_errno(rc), "%s: %s", file, mdb_strerror(rc));
    MDB_val key, val;
    char kt[STORE_KEY_MAX * 2], why[160];
    s->has_meta = s->has_ring_ctl = false;
    int op = MDB_FIRST;
    while ((rc = mdb_cursor_get(c, &key, &val, op)) == 0) {
        op = MDB_NEXT;
        if (store_key_eq(&key, &store_key_version))
            continue;
        enum store_kind kind = kind_of(version, &key);
        ProtobufCMessage *m = NULL;
        const char *bad = "is not a key of schema version 2";
        bool meta = kind == SK_META || kind == SK_V1_META, ring = kind == SK_RING;
        if (ring) {                  /* not the registry's: checked, never handed to rec */
            bad = s->trusted || store_ring_check(&key, &val, why, sizeof(why)) == 0 ? NULL : why;
            s->has_ring_ctl |= store_key_eq(&key, &store_key_ring);
        }
        else if (kind && (m = store_unpack_with(&key, &val, kind, s->alloc, !s->trusted || meta,
                                           why, sizeof(why))))
            bad = s->trusted && !meta ? NULL : check_rec(kind, m, &key, s);
        else if (kind)
            bad = why;
        int kept = bad ? -EBADMSG : meta || ring ? 0 : s->rec(s->arg, kind, m);
        if (kept <= 0 && m)
            protobuf_c_message_free_unpacked(m, s->alloc);
        if (bad || kept < 0) {        /* rec() wrote its own message */
            mdb_cursor_close(c);
            return bad ? store_fail(err, errlen, -EBADMSG, "%s: record \"%s\" %s", file,
                                    store_key_text(&key, kt, sizeof(kt)), bad)
                       : kept;
        }
    }
    mdb_cursor_close(c);
    if (rc != MDB_NOTFOUND)
        return store_fail(err, errlen, store_errno(rc), "%s: %s", file, mdb_strerror(rc));
    return 0;
}

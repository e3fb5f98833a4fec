/* make-v1-store DIR: write a small csifs state store of schema version 1 in
 * DIR (created 0700 if missing; must not hold a data.mdb yet).
 *
 * Version 1 was the first registry layout: one instance per type and plugin
 * (a singleton), no sequence numbers. Keys in the main database:
 *   "version"            ASCII "1"
 *   "meta"               V1Meta { ev_reserved }
 *   "<type>/<plugin>"    V1Plugin { type, name, registered_ns, instance? }
 * each value but the version being the record header with its CRC32 and the
 * packed message (registry/store_int.h, proto/registry.proto).
 *
 * The content is fixed, so the fixture tests/fixtures/v1/data.mdb is
 * reproducible (`make-v1-store /tmp/x && cp /tmp/x/data.mdb
 * tests/fixtures/v1/`) and tests/unit/store.c knows what to expect:
 *   csi-controller/ebs  instance ebs-ctrl-0: ready, socket, fingerprint
 *   csi-node/ebs        instance ebs-node-0: ready, socket, full fingerprint,
 *                       mount_point, container_mount_point
 *   csi-node/nfs        instance nfs-7: socket, not ready, no fingerprint
 *   csi-node/hostpath   no instance
 *   meta                ev_reserved 131073
 */
#include "registry/store_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T0 1700000000000000000LL     /* 2023-11-14T22:13:20Z */
#define SEC 1000000000LL

struct v1def {
    enum reg_type type;
    const char *plugin;
    int64_t plugin_at;
    const char *alloc;               /* NULL: no instance */
    int64_t alloc_at;
    const char *socket;
    bool ready;
    Csifs__Store__Fingerprint *fp;
    const char *mount_point, *container_mount_point;
};

static int put_plugin(MDB_txn *txn, MDB_dbi dbi, const struct v1def *d)
{
    Csifs__Store__V1Plugin p = CSIFS__STORE__V1_PLUGIN__INIT;
    Csifs__Store__V1Instance i = CSIFS__STORE__V1_INSTANCE__INIT;
    p.type = (Csifs__Store__PluginType)d->type;
    p.name = (char *)d->plugin;
    p.registered_ns = d->plugin_at;
    if (d->alloc) {
        i.alloc = (char *)d->alloc;
        i.registered_ns = d->alloc_at;
        i.socket = (char *)d->socket;
        i.ready = d->ready;
        i.fp = d->fp;
        i.mount_point = (char *)(d->mount_point ? d->mount_point : "");
        i.container_mount_point =
            (char *)(d->container_mount_point ? d->container_mount_point : "");
        p.instance = &i;
    }
    char buf[STORE_KEY_MAX];
    MDB_val key;
    store_key_v1(&key, buf, d->type, d->plugin);
    return store_put_msg(txn, dbi, &key, SK_V1_PLUGIN, &p.base);
}

static int write_store(MDB_env *env)
{
    Csifs__Store__Fingerprint ctrl = CSIFS__STORE__FINGERPRINT__INIT;
    ctrl.provider = "ebs.csi.aws.com";
    ctrl.version = "v1.30.0";
    ctrl.capabilities = "plugin:CONTROLLER_SERVICE\ncontroller:CREATE_DELETE_VOLUME\n";
    Csifs__Store__Fingerprint node = CSIFS__STORE__FINGERPRINT__INIT;
    node.provider = "ebs.csi.aws.com";
    node.version = "v1.30.0";
    node.nodeid = "i-0abc123";
    node.max_volumes = 25;
    node.topology = "topology.ebs.csi.aws.com/zone=eu-west-1a\n";
    node.capabilities = "node:STAGE_UNSTAGE_VOLUME\n";
    const struct v1def defs[] = {
        { REG_CONTROLLER, "ebs", T0, "ebs-ctrl-0", T0 + 1 * SEC,
          "/var/lib/nomad/plugins/ebs-ctrl-0/csi.sock", true, &ctrl, NULL, NULL },
        { REG_NODE, "ebs", T0 + 2 * SEC, "ebs-node-0", T0 + 3 * SEC,
          "/var/lib/nomad/plugins/ebs-node-0/csi.sock", true, &node,
          "/var/lib/nomad/client/csi/node/ebs", "/local/csi" },
        { REG_NODE, "nfs", T0 + 4 * SEC, "nfs-7", T0 + 5 * SEC,
          "/var/lib/nomad/plugins/nfs-7/csi.sock", false, NULL, NULL, NULL },
        { REG_NODE, "hostpath", T0 + 6 * SEC, NULL, 0, NULL, false, NULL, NULL, NULL },
    };
    MDB_txn *txn;
    MDB_dbi dbi;
    int rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (rc != 0)
        return rc;
    if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) == 0)
        rc = mdb_put(txn, dbi, (MDB_val *)&store_key_version, &(MDB_val){ 1, "1" }, 0);
    for (size_t k = 0; rc == 0 && k < sizeof(defs) / sizeof(defs[0]); k++)
        rc = put_plugin(txn, dbi, &defs[k]);
    if (rc == 0) {
        Csifs__Store__V1Meta m = CSIFS__STORE__V1_META__INIT;
        m.ev_reserved = 131073;
        rc = store_put_msg(txn, dbi, &store_key_meta, SK_V1_META, &m.base);
    }
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make-v1-store DIR\n");
        return 2;
    }
    char file[4096];
    snprintf(file, sizeof(file), "%s/%s", argv[1], STORE_DATA);
    if (mkdir(argv[1], 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "make-v1-store: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    if (access(file, F_OK) == 0) {
        fprintf(stderr, "make-v1-store: %s exists already\n", file);
        return 1;
    }
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc == 0) {
        if ((rc = mdb_env_set_mapsize(env, STORE_MAP_SIZE)) == 0 &&
            (rc = mdb_env_open(env, argv[1], 0, 0600)) == 0)
            rc = write_store(env);
        mdb_env_close(env);
    }
    if (rc != 0) {
        fprintf(stderr, "make-v1-store: %s: %s\n", file, mdb_strerror(rc));
        return 1;
    }
    return 0;
}

/* fs: the csifs FUSE filesystem (libfuse low-level API) over a registry.
 *
 * fs_mount() creates the session and mounts (no threads, no registry yet:
 * DESIGN section 7 mounts before daemonizing); fs_attach() hands it the
 * registry; fs_loop() serves requests until unmounted, fs_exit() or a
 * signal: on one FUSE thread, and the ones that commit on writer threads it
 * starts and stops (fs/workq.h).
 */
#ifndef CSIFS_FS_H
#define CSIFS_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "registry/registry.h"

struct fs_opts {
    const char *mountpoint;
    int argc;                  /* FUSE options (argv[0] first), e.g. -d, -o ... */
    char **argv;
    bool has_registrar;        /* registrar_gid given */
    gid_t registrar_gid;
    int64_t pending_ttl_ms;    /* pending links (ln -sfn); 0 = 10 s */
};

struct fs;

int fs_mount(struct fs **out, const struct fs_opts *opts);
/* Serve reg from now on. Must be called once, before fs_loop. */
int fs_attach(struct fs *fs, struct reg *reg);
/* Serve until unmounted or asked to exit; returns 0 or a negative errno.
 * signals: SIGTERM, SIGINT and SIGHUP end the loop (libfuse's handlers). */
int fs_loop(struct fs *fs, bool signals);
/* Make fs_loop return (any thread). */
void fs_exit(struct fs *fs);
/* Requests served so far (a debug counter for tests and metrics). */
uint64_t fs_requests(struct fs *fs);
/* Requests of one op ("opendir", "getattr"... as csifs_fuse_requests_total
 * names them) served so far; 0 for an unknown name. */
uint64_t fs_requests_of(struct fs *fs, const char *op);
/* Inode invalidations sent so far; *missed: of those, how many the kernel
 * answered ENOENT (it held no such inode). */
uint64_t fs_invalidations(struct fs *fs, uint64_t *missed);
/* Unmount and close the connection now: requests still waiting on the mount
 * fail instead of hanging. The fs stays valid (notifications become no-ops)
 * until fs_destroy. */
void fs_unmount(struct fs *fs);
/* Unmount (if still mounted) and free. */
void fs_destroy(struct fs *fs);

#endif

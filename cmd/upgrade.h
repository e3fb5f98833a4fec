/* SIGUSR2: an upgrade in place (DESIGN 13 "Upgrade in place"), in an order
 * where nothing that can wait for the kernel runs once the FUSE loop stops
 * reading requests. An inode invalidation (a subscriber of the commit
 * thread, or of a probe result) waits for every page of the inode, and a
 * page stays locked while a reader's READ or READLINK of it waits in
 * /dev/fuse: were the loop stopped first, that thread would never return,
 * and reg_close (or the execve, which waits for every other thread to die)
 * with it. So, on a thread of its own while the loop serves on:
 *
 *   1. committing requests are no longer run: each new one is left
 *      unanswered (fs_hold_commits), the kernel keeps it and the new image
 *      gets it again (FUSE_NOTIFY_RESEND); those taken before are answered
 *      by the commit thread, their subscribers run;
 *   2. the cluster view and the prober stop (their threads' invalidations
 *      and probe results end), and the registry's commit thread has
 *      answered every queued mutation and run its subscribers
 *      (reg_quiesce);
 *   3. the loop stops reading; the caller (cmd/daemon.c) stops the rest --
 *      the kubelet registrar, which writes nothing to the kernel and whose
 *      `kubelet` files the loop reads until then, the publisher, the
 *      registry, the store -- and execs.
 *
 * `events` readers and pollers are deferred as before: the new image takes
 * them over as after a crash. */
#ifndef CSIFS_UPGRADE_H
#define CSIFS_UPGRADE_H

#include <stdbool.h>

struct fs;
struct reg;
struct csi_prober;
struct cl_view;

/* What steps 1 and 2 act on (view and pr may be NULL). */
struct csifs_upgrade {
    struct fs *fs;
    struct reg *reg;
    struct csi_prober *pr;
    struct cl_view *view;
};

/* On the thread that runs fs_loop, before it: catch SIGUSR2 and start the
 * thread that does steps 1 and 2 on it, then ends the loop. 0 or -errno
 * (SIGUSR2 is then not caught). */
int csifs_upgrade_catch(const struct csifs_upgrade *u);
/* Right after fs_loop returned (on its thread): true when steps 1 and 2
 * were done (the loop ended for SIGUSR2, or meanwhile): go on with the
 * upgrade. Ends and joins the thread either way; nothing without catch. */
bool csifs_upgrade_end(void);

#endif

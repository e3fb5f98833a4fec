/* Test-only options, `-o debug_*` (tests/README.md). They exist only in a
 * build with -DCSIFS_TEST_OPTS (the Makefile's TEST_OPTS=1, the default: the
 * build tests run); `make install` builds csifs with TEST_OPTS=0, where every
 * debug_* option is refused as unknown. The registry's own test options
 * (debug_commit_delay_ms, debug_fail_commit) are parsed in options.c.
 *
 *   debug_hold=mkdir   the next mkdir request is held: never answered (its
 *                      caller keeps the parent directory's lock)
 *   debug_hold_inval   with it: once held, the notifier is asked to
 *                      invalidate the held name in that directory, so its
 *                      thread blocks in the kernel on the caller's lock
 *                      (the wedge of issue 13)
 *   debug_stall_reply=FILE
 *                      the commit's leader stops for good after the first
 *                      commit that holds a FUSE request, before answering
 *                      it, once it has created FILE (the test then kills
 *                      csifs: the change must be durable)
 *   debug_stall_op=OP  with debug_stall_reply: the stall waits instead for
 *                      the first request of OP (mkdir, rmdir, symlink,
 *                      unlink or rename) that succeeded, committed or not:
 *                      on the FUSE thread before the answer of one that
 *                      committed nothing (the symlink or unlink of a
 *                      pending link), on the commit's leader otherwise
 *   debug_notifier_shared_fd
 *                      the notifier writes through the process's own
 *                      /dev/fuse fd, not its private clone: a SIGKILL then
 *                      wedges the mount as it did before (inval.c)
 */
#ifndef CSIFS_TESTOPT_H
#define CSIFS_TESTOPT_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>

/* opt is one -o option. 0: not a test option; 1: taken; -EINVAL: a test
 * option refused (message in err), or any debug_* without CSIFS_TEST_OPTS. */
int fs_testopt_parse(const char *opt, char *err, size_t errlen);
/* Wrap the handlers the options given act on (nothing without them). */
void fs_testopt_wrap(struct fuse_lowlevel_ops *ops);
/* Before the answer rc to a mutating request of FUSE opcode op: on the
 * commit's leader after the commit that held it (committed), or on the FUSE
 * thread for one that committed nothing. debug_stall_reply stops here.
 * Nothing otherwise. */
void fs_testopt_before_reply(unsigned op, int rc, bool committed);

#endif

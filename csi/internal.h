/* csi: helpers shared by the files of csi/ (not part of the module contract). */
#ifndef CSIFS_CSI_INTERNAL_H
#define CSIFS_CSI_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

/* A malloc'd copy of s, at most max bytes (cut on a UTF-8 character
 * boundary), control characters and every byte of an invalid UTF-8
 * sequence (overlong, surrogate, beyond U+10FFFF, truncated) replaced by
 * '?'. NULL on ENOMEM. */
char *csi_dup_line(const char *s, size_t max);

/* A non-blocking connect() to the unix socket at path: the connected fd
 * (O_NONBLOCK, O_CLOEXEC), or -errno (-EAGAIN: the listener's backlog is
 * full). *pid (if pid) is the process that called listen(), 0 if unknown. */
int csi_dial(const char *path, pid_t *pid);

#endif

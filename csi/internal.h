/* csi: helpers shared by the files of csi/ (not part of the module contract). */
#ifndef CSIFS_CSI_INTERNAL_H
#define CSIFS_CSI_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

/* A malloc'd copy of s, at most max bytes (cut on a UTF-8 character
 * boundary), control characters replaced by '?'. NULL on ENOMEM. */
char *csi_dup_line(const char *s, size_t max);
/* The pid that listens on the unix socket at path (SO_PEERCRED of a
 * connection to it), or 0 when none answers. */
pid_t csi_peer_pid(const char *path);

#endif

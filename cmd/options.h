/* The csifs command line (DESIGN section 9), parsed with libfuse's fuse_opt:
 *   csifs [-f] [-d] [-o opt[,opt...]] [[SOURCE] MOUNTPOINT]
 * Our options are taken out, and so are the generic ones of mount(8) that
 * mean nothing here; the rest (argv[0], -d, other -o) is left in o->fuse
 * for fuse_session_new. state and mountpoint come out absolute (against
 * the cwd, lexically: nothing is looked up). */
#ifndef CSIFS_OPTIONS_H
#define CSIFS_OPTIONS_H

#include <fuse_opt.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/version.h"
#include "cluster/opts.h"

struct csifs_opts {
    char *mountpoint, *state;
    bool foreground, debug, nosync, help, version;
    int64_t heartbeat_ms, probe_timeout_ms, health_timeout_ms;
    bool has_registrar;
    gid_t registrar_gid;
    unsigned events_ring, max_instances;
    int log_level;                   /* LOG_ERR .. LOG_DEBUG */
    char *http;                      /* -o http=[ADDR:]PORT, or NULL (http/) */
    struct cl_opts cluster;          /* cluster=, cluster_* (cluster/opts.h) */
    char *kubelet_dir;               /* -o kubelet_dir=DIR, absolute, or NULL (kubelet/) */
    char *log_file;                  /* absolute, or NULL */
    struct fuse_args fuse;
};

/* 0, or -EINVAL with a message in err. Free with csifs_opts_free. */
int csifs_cmdline_parse(int argc, char **argv, struct csifs_opts *o, char *err, size_t errlen);
void csifs_opts_free(struct csifs_opts *o);
void csifs_help_print(const char *prog);
/* "250ms", "5s", "2m", "30" (seconds) -> ms; -EINVAL. */
int csifs_duration_parse(const char *s, int64_t *ms);

#endif

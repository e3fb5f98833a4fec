/* csi-test-plugin: a CSI plugin for tests, with fault modes (see --help). */
#ifndef CSIFS_TEST_PLUGIN_H
#define CSIFS_TEST_PLUGIN_H

#include "csi/client.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum plug_type { PLUG_MONOLITH, PLUG_NODE, PLUG_CONTROLLER };
enum plug_mode { PLUG_GRPC, PLUG_BLACKHOLE, PLUG_GARBAGE };
enum plug_ready { PLUG_READY_TRUE, PLUG_READY_FALSE, PLUG_READY_ABSENT };
/* Capability lists: kinds of capability, in the order of the flags. */
enum plug_cap { PLUG_CAP_SERVICE, PLUG_CAP_EXPANSION, PLUG_CAP_NODE, PLUG_CAP_CONTROLLER,
                PLUG_NCAPKINDS };

struct plug_capv {
    enum plug_cap kind;
    int value;
};

struct plug_cfg {
    char **sockets;
    size_t nsockets;
    enum plug_type type;
    enum plug_mode mode;
    const char *name, *version, *node_id;
    int64_t max_volumes;
    char **topology;               /* "key=value", in the order given */
    size_t ntopology;
    struct plug_capv *caps;        /* all four lists, in the order given */
    size_t ncaps;
    /* faults, for the calls of method `only` (every CSI method when -1) */
    enum plug_ready ready;
    int64_t not_ready_for_ms;      /* Probe answers not ready until then */
    bool ready_toggle;             /* SIGHUP flips plug_ready_flipped */
    bool hang;
    int64_t delay_ms;
    int error_code;                /* -1: none */
    const char *error_msg;
    long exit_on_call;             /* 0: never */
    int only;
    char topology_sep;             /* splits --topology KEY<sep>VALUE ('=') */
    bool signals;                  /* accept itself: SIGUSR1/SIGUSR2 (fdserve.c) */
};

/* Set by SIGTERM/SIGINT: shut down cleanly (the socket files are removed). */
extern volatile sig_atomic_t plug_stop;
/* --ready-toggle: flipped by each SIGHUP; Probe's ready answer is turned
 * over while it is set. */
extern volatile sig_atomic_t plug_ready_flipped;

/* Serve cfg->sockets with gRPC until plug_stop. 0 or -1 (reported). */
int plug_serve_grpc(const struct plug_cfg *cfg);
/* Blackhole or garbage mode: plain listening sockets, no gRPC. */
int plug_serve_raw(const struct plug_cfg *cfg);
/* A non-blocking unix listener at path (a stale file replaced); -1 on error. */
int plug_listen_unix(const char *path);
/* The packed reply of method m, uptime_ms after start; NULL on ENOMEM. */
grpc_byte_buffer *plug_reply(const struct plug_cfg *cfg, enum csi_method m, int64_t uptime_ms);
/* Whether the plugin's --type serves m (Identity always). */
bool plug_serves(const struct plug_cfg *cfg, enum csi_method m);
/* --signals: listen on every socket, accept in a thread, hand each
 * connection to srv (started). 0 or -1. */
int plug_fd_listen(const struct plug_cfg *cfg, grpc_server *srv);
/* Stop that thread, close everything, remove the socket files. */
void plug_fd_stop(const struct plug_cfg *cfg);
/* Print "READY <socket>" for every socket, flushed. */
void plug_announce(const struct plug_cfg *cfg);

#endif

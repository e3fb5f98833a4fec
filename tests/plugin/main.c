/* csi-test-plugin: command line, socket locks, and the choice of server. */
#include "tests/plugin/plugin.h"

#include "csi/client.h"
#include "proto/csi.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

volatile sig_atomic_t plug_stop, plug_ready_flipped;

static const char usage[] =
    "usage: csi-test-plugin --socket PATH [options]\n"
    "A CSI v1 plugin for tests: serves Identity, and Node and/or Controller,\n"
    "on unix sockets with gRPC core; anything else answers UNIMPLEMENTED.\n"
    "When every socket listens it prints one line \"READY <socket>\" per socket\n"
    "(flushed). SIGTERM or SIGINT: clean shutdown, socket files removed, exit 0.\n"
    "A socket held by a live server (lock file PATH.lock, left in place, or\n"
    "something accepting on PATH) is refused: exit 1. Usage errors exit 2.\n"
    "\n"
    "  --socket PATH          serve PATH (repeatable)\n"
    "  --sockets N            with one --socket PATH: serve PATH.0 .. PATH.<N-1>\n"
    "  --type T               monolith (default) | node | controller\n"
    "  --name NAME            GetPluginInfo name (default csi-test-plugin)\n"
    "  --vendor-version V     GetPluginInfo vendor_version (default 1.0.0)\n"
    "  --node-id ID           NodeGetInfo node_id (default test-node)\n"
    "  --max-volumes N        NodeGetInfo max_volumes_per_node (default 0)\n"
    "  --topology K=V         a NodeGetInfo topology segment (repeatable, sent in order)\n"
    "  --plugin-cap LIST      PluginCapability.Service types\n"
    "  --expansion-cap LIST   PluginCapability.VolumeExpansion types\n"
    "  --node-cap LIST        NodeServiceCapability.RPC types\n"
    "  --controller-cap LIST  ControllerServiceCapability.RPC types\n"
    "      LIST: comma-separated enum names or numbers, sent in the order given\n"
    "      (duplicates too); repeatable; '' for none. Defaults: CONTROLLER_SERVICE\n"
    "      unless --type node, STAGE_UNSTAGE_VOLUME, CREATE_DELETE_VOLUME.\n"
    "Probe:\n"
    "  --not-ready            answer ready = false\n"
    "  --not-ready-for MS     answer ready = false for MS ms after start\n"
    "  --ready-absent         answer without the ready field\n"
    "  --ready-toggle         SIGHUP turns the ready answer over (true <-> false)\n"
    "Faults, for every CSI method (or only METHOD with --only):\n"
    "  --hang                 never answer\n"
    "  --delay MS             answer after MS ms\n"
    "  --error CODE[:MSG]     answer gRPC status CODE (name or number) with MSG;\n"
    "                         OK answers OK with no reply message\n"
    "  --exit-on-call N       _exit(3) on receiving the Nth call (socket file left behind)\n"
    "  --node-id-size N       NodeGetInfo node_id of N bytes ('n'), instead of --node-id\n"
    "  --topology-sep C       split --topology at C rather than '=' (a key with '=')\n"
    "  --signals              accept connections itself; SIGUSR1: stop serving, staying\n"
    "                         alive (listeners and connections closed, socket files\n"
    "                         left); SIGUSR2: close every connection, keep listening\n"
    "  --only METHOD          Probe, GetPluginInfo, GetPluginCapabilities, NodeGetInfo,\n"
    "                         NodeGetCapabilities or ControllerGetCapabilities\n"
    "Not gRPC at all:\n"
    "  --blackhole            accept connections and never speak\n"
    "  --garbage              accept connections and write bytes that are not HTTP/2\n";

static void die_usage(const char *what, const char *arg)
{
    fprintf(stderr, "csi-test-plugin: %s%s%s (see --help)\n", what, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static void *push(void *arr, size_t *n, size_t size)
{
    char *a = realloc(arr, (*n + 1) * size);
    if (!a) {
        perror("csi-test-plugin");
        exit(1);
    }
    memset(a + *n * size, 0, size);
    (*n)++;
    return a;
}

static int64_t parse_int(const char *s, const char *what, int64_t min)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !*s || *end || v < min)
        die_usage(what, s);
    return v;
}

static const ProtobufCEnumDescriptor *const cap_names[PLUG_NCAPKINDS] = {
    [PLUG_CAP_SERVICE] = &csi__v1__plugin_capability__service__type__descriptor,
    [PLUG_CAP_EXPANSION] = &csi__v1__plugin_capability__volume_expansion__type__descriptor,
    [PLUG_CAP_NODE] = &csi__v1__node_service_capability__rpc__type__descriptor,
    [PLUG_CAP_CONTROLLER] = &csi__v1__controller_service_capability__rpc__type__descriptor,
};

static void parse_caps(struct plug_cfg *cfg, enum plug_cap kind, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        die_usage("out of memory", NULL);
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(cap_names[kind], t);
        cfg->caps = push(cfg->caps, &cfg->ncaps, sizeof(*cfg->caps));
        cfg->caps[cfg->ncaps - 1] = (struct plug_capv){
            kind, v ? v->value : (int)parse_int(t, "bad capability", INT32_MIN) };
    }
    free(copy);
}

static void default_cap(struct plug_cfg *cfg, const bool *set, enum plug_cap kind, const char *name)
{
    if (!set[kind])
        parse_caps(cfg, kind, name);
}

enum { O_SOCKET = 256, O_SOCKETS, O_TYPE, O_NAME, O_VERSION, O_NODE_ID, O_MAX_VOLUMES,
       O_TOPOLOGY, O_PLUGIN_CAP, O_EXPANSION_CAP, O_NODE_CAP, O_CONTROLLER_CAP, O_NOT_READY,
       O_NOT_READY_FOR, O_READY_ABSENT, O_READY_TOGGLE, O_HANG, O_DELAY, O_ERROR, O_EXIT_ON_CALL, O_ONLY,
       O_BLACKHOLE, O_GARBAGE, O_NODE_ID_SIZE, O_TOPOLOGY_SEP, O_SIGNALS, O_HELP };

static const struct option options[] = {
    { "socket", required_argument, 0, O_SOCKET }, { "sockets", required_argument, 0, O_SOCKETS },
    { "type", required_argument, 0, O_TYPE }, { "name", required_argument, 0, O_NAME },
    { "vendor-version", required_argument, 0, O_VERSION },
    { "node-id", required_argument, 0, O_NODE_ID },
    { "max-volumes", required_argument, 0, O_MAX_VOLUMES },
    { "topology", required_argument, 0, O_TOPOLOGY },
    { "plugin-cap", required_argument, 0, O_PLUGIN_CAP },
    { "expansion-cap", required_argument, 0, O_EXPANSION_CAP },
    { "node-cap", required_argument, 0, O_NODE_CAP },
    { "controller-cap", required_argument, 0, O_CONTROLLER_CAP },
    { "not-ready", no_argument, 0, O_NOT_READY },
    { "not-ready-for", required_argument, 0, O_NOT_READY_FOR },
    { "ready-absent", no_argument, 0, O_READY_ABSENT },
    { "ready-toggle", no_argument, 0, O_READY_TOGGLE }, { "hang", no_argument, 0, O_HANG },
    { "delay", required_argument, 0, O_DELAY }, { "error", required_argument, 0, O_ERROR },
    { "exit-on-call", required_argument, 0, O_EXIT_ON_CALL },
    { "only", required_argument, 0, O_ONLY }, { "blackhole", no_argument, 0, O_BLACKHOLE },
    { "garbage", no_argument, 0, O_GARBAGE }, { "help", no_argument, 0, O_HELP },
    { "node-id-size", required_argument, 0, O_NODE_ID_SIZE },
    { "topology-sep", required_argument, 0, O_TOPOLOGY_SEP },
    { "signals", no_argument, 0, O_SIGNALS },
    { 0, 0, 0, 0 },
};

static void parse_error(struct plug_cfg *cfg, const char *arg)
{
    char *code = strdup(arg);
    if (!code)
        die_usage("out of memory", NULL);
    char *colon = strchr(code, ':');
    if (colon)
        *colon = '\0';
    cfg->error_code = csi_status_parse(code);
    if (cfg->error_code < 0)
        die_usage("bad --error code", arg);
    cfg->error_msg = colon ? strchr(arg, ':') + 1 : "";
    free(code);
}

static void expand_sockets(struct plug_cfg *cfg, long n)
{
    if (cfg->nsockets != 1)
        die_usage("--sockets needs exactly one --socket", NULL);
    char *base = cfg->sockets[0];
    cfg->nsockets = 0;
    for (long i = 0; i < n; i++) {
        cfg->sockets = push(cfg->sockets, &cfg->nsockets, sizeof(*cfg->sockets));
        if (asprintf(&cfg->sockets[i], "%s.%ld", base, i) < 0)
            die_usage("out of memory", NULL);
    }
}

static void parse_args(int argc, char **argv, struct plug_cfg *cfg)
{
    bool set[PLUG_NCAPKINDS] = { false };
    long nsockets = 0;
    int o;
    *cfg = (struct plug_cfg){ .name = "csi-test-plugin", .version = "1.0.0",
                              .node_id = "test-node", .error_code = -1, .only = -1,
                              .topology_sep = '=' };
    while ((o = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (o) {
        case O_SOCKET:
            cfg->sockets = push(cfg->sockets, &cfg->nsockets, sizeof(*cfg->sockets));
            cfg->sockets[cfg->nsockets - 1] = optarg;
            break;
        case O_SOCKETS: nsockets = parse_int(optarg, "bad --sockets", 1); break;
        case O_TYPE:
            if (strcmp(optarg, "monolith") == 0)
                cfg->type = PLUG_MONOLITH;
            else if (strcmp(optarg, "node") == 0)
                cfg->type = PLUG_NODE;
            else if (strcmp(optarg, "controller") == 0)
                cfg->type = PLUG_CONTROLLER;
            else
                die_usage("bad --type", optarg);
            break;
        case O_NAME: cfg->name = optarg; break;
        case O_VERSION: cfg->version = optarg; break;
        case O_NODE_ID: cfg->node_id = optarg; break;
        case O_MAX_VOLUMES: cfg->max_volumes = parse_int(optarg, "bad --max-volumes", INT64_MIN); break;
        case O_TOPOLOGY:
            cfg->topology = push(cfg->topology, &cfg->ntopology, sizeof(*cfg->topology));
            cfg->topology[cfg->ntopology - 1] = optarg;
            break;
        case O_PLUGIN_CAP:
        case O_EXPANSION_CAP:
        case O_NODE_CAP:
        case O_CONTROLLER_CAP:
            set[o - O_PLUGIN_CAP] = true;
            parse_caps(cfg, (enum plug_cap)(o - O_PLUGIN_CAP), optarg);
            break;
        case O_NOT_READY: cfg->ready = PLUG_READY_FALSE; break;
        case O_NOT_READY_FOR: cfg->not_ready_for_ms = parse_int(optarg, "bad --not-ready-for", 0); break;
        case O_READY_ABSENT: cfg->ready = PLUG_READY_ABSENT; break;
        case O_READY_TOGGLE: cfg->ready_toggle = true; break;
        case O_HANG: cfg->hang = true; break;
        case O_DELAY: cfg->delay_ms = parse_int(optarg, "bad --delay", 0); break;
        case O_ERROR: parse_error(cfg, optarg); break;
        case O_EXIT_ON_CALL: cfg->exit_on_call = (long)parse_int(optarg, "bad --exit-on-call", 1); break;
        case O_ONLY:
            for (cfg->only = 0; cfg->only < CSI_METHOD_COUNT; cfg->only++)
                if (strcmp(strrchr(csi_method_path(cfg->only), '/') + 1, optarg) == 0)
                    break;
            if (cfg->only == CSI_METHOD_COUNT)
                die_usage("bad --only method", optarg);
            break;
        case O_BLACKHOLE: cfg->mode = PLUG_BLACKHOLE; break;
        case O_GARBAGE: cfg->mode = PLUG_GARBAGE; break;
        case O_NODE_ID_SIZE: {
            size_t n = (size_t)parse_int(optarg, "bad --node-id-size", 0);
            char *id = malloc(n + 1);
            if (!id)
                die_usage("out of memory", NULL);
            memset(id, 'n', n);
            id[n] = '\0';
            cfg->node_id = id;      /* lives until exit */
            break;
        }
        case O_TOPOLOGY_SEP:
            if (strlen(optarg) != 1)
                die_usage("--topology-sep wants one character", optarg);
            cfg->topology_sep = optarg[0];
            break;
        case O_SIGNALS: cfg->signals = true; break;
        case O_HELP: fputs(usage, stdout); exit(0);
        default: die_usage("bad option", NULL);
        }
    }
    if (optind < argc)
        die_usage("unexpected argument", argv[optind]);
    for (size_t i = 0; i < cfg->ntopology; i++)
        if (!strchr(cfg->topology[i], cfg->topology_sep))
            die_usage("--topology wants KEY=VALUE", cfg->topology[i]);
    if (!cfg->nsockets)
        die_usage("--socket is required", NULL);
    if (nsockets)
        expand_sockets(cfg, nsockets);
    if (!set[PLUG_CAP_SERVICE] && !set[PLUG_CAP_EXPANSION] && cfg->type != PLUG_NODE)
        default_cap(cfg, set, PLUG_CAP_SERVICE, "CONTROLLER_SERVICE");
    default_cap(cfg, set, PLUG_CAP_NODE, "STAGE_UNSTAGE_VOLUME");
    default_cap(cfg, set, PLUG_CAP_CONTROLLER, "CREATE_DELETE_VOLUME");
}

/* Take PATH.lock (kept until exit) and make sure nothing accepts on PATH. */
static int claim_socket(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (path[0] != '/' || strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "csi-test-plugin: %s: not an absolute path under %zu bytes\n", path,
                sizeof(sa.sun_path));
        return -1;
    }
    char *lock = NULL;
    if (asprintf(&lock, "%s.lock", path) < 0)
        return -1;
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "csi-test-plugin: %s: %s\n", lock,
                errno == EWOULDBLOCK ? "held by a live server" : strerror(errno));
        free(lock);
        return -1;
    }
    free(lock);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) {
        perror("csi-test-plugin: socket");
        return -1;
    }
    int rc = connect(s, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(s);
    if (rc == 0 || e == EAGAIN) {
        fprintf(stderr, "csi-test-plugin: %s: a live server accepts on it\n", path);
        return -1;
    }
    return 0;
}

void plug_announce(const struct plug_cfg *cfg)
{
    for (size_t i = 0; i < cfg->nsockets; i++)
        printf("READY %s\n", cfg->sockets[i]);
    if (fflush(stdout) != 0 || ferror(stdout))
        perror("csi-test-plugin: stdout");
}

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        plug_ready_flipped = !plug_ready_flipped;
    else
        plug_stop = 1;
}

int main(int argc, char **argv)
{
    static struct plug_cfg cfg;     /* static: reachable until exit, for LeakSanitizer */
    parse_args(argc, argv, &cfg);

    struct rlimit rl;   /* --sockets N: a lock, a listener and clients per socket */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            perror("csi-test-plugin: setrlimit");
    }
    for (size_t i = 0; i < cfg.nsockets; i++)
        if (claim_socket(cfg.sockets[i]) != 0)
            return 1;

    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
        (cfg.ready_toggle && sigaction(SIGHUP, &sa, NULL) != 0) ||
        signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        perror("csi-test-plugin: sigaction");
        return 1;
    }
    int rc = cfg.mode == PLUG_GRPC ? plug_serve_grpc(&cfg) : plug_serve_raw(&cfg);
    return rc ? 1 : 0;
}

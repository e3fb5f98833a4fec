/* The HTTP server of -o http= (see http.h): libmicrohttpd on its own epoll
 * thread. Handlers read the registry (its read lock only) and the FUSE
 * loop's figures; nothing here goes through the mount. */
#include "http/http.h"
#include "fs/serve.h"
#include "base/defaults.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct http {
    struct MHD_Daemon *d;
    char waiting[128];               /* "" when unknown */
    struct fs *fs;
    struct reg *reg;
};

/* What a route answers: status and a body (malloc'd, or static when
 * owned is false). */
struct reply {
    unsigned status;
    char *body;
    size_t len;
    bool owned;
    const char *type;
};

static void say(struct reply *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(struct reply *r, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&r->body, fmt, ap);
    va_end(ap);
    r->status = n < 0 ? MHD_HTTP_INTERNAL_SERVER_ERROR : status;
    r->len = n < 0 ? 0 : (size_t)n;
    r->owned = n >= 0;
    if (n < 0)
        r->body = NULL;
}

static void metrics(struct http *h, const char *rest, struct reply *r)
{
    (void)rest;
    int rc = fs_metrics_text(h->fs, &r->body, &r->len);
    if (rc < 0) {
        say(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics: %s\n", strerror(-rc));
        return;
    }
    r->status = MHD_HTTP_OK;
    r->owned = true;
    r->type = "text/plain; version=0.0.4; charset=utf-8";
}

/* Requests the kernel waits on, but those csifs keeps on purpose; -1 when
 * fusectl cannot tell. */
static long stuck_requests(struct http *h)
{
    char b[32];
    int fd = *h->waiting ? open(h->waiting, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    b[n] = '\0';
    return strtol(b, NULL, 10) - (long)fs_parked(h->fs);
}

static void healthz(struct http *h, const char *rest, struct reply *r)
{
    (void)rest;
    long waiting = stuck_requests(h);
    int64_t idle_ms = (csifs_mono_ns() - fs_serve_last_done_ns()) / 1000000;
    if (waiting > 0 && idle_ms >= HTTP_STUCK_MS)
        say(r, MHD_HTTP_SERVICE_UNAVAILABLE,
            "stuck: %ld FUSE requests waiting, none finished for %" PRId64 " ms\n", waiting,
            idle_ms);
    else
        say(r, MHD_HTTP_OK, "ok\n");
}

/* rest: "<type>/<plugin>". */
static void plugin_health(struct http *h, const char *rest, struct reply *r)
{
    char type[32];
    const char *slash = strchr(rest, '/');
    const char *plugin = slash ? slash + 1 : "";
    size_t tl = slash ? (size_t)(slash - rest) : 0;
    int t = -ENOENT;
    if (tl < sizeof(type)) {
        memcpy(type, rest, tl);
        type[tl] = '\0';
        t = reg_type_parse(type);
    }
    struct reg_node p, cur;
    if (t < 0 || reg_name_check(plugin) < 0 ||
        reg_plugin_lookup(h->reg, (enum reg_type)t, plugin, &p) < 0) {
        say(r, MHD_HTTP_NOT_FOUND, "no plugin %s\n", rest);
        return;
    }
    if (!p.current || reg_get(h->reg, p.current, &cur) < 0) {
        say(r, MHD_HTTP_SERVICE_UNAVAILABLE, "%s: no current instance\n", rest);
        return;
    }
    if (cur.health == REG_HEALTHY) {
        say(r, MHD_HTTP_OK, "%s: healthy (%s)\n", rest, cur.alloc);
        return;
    }
    char reason[512] = "";
    if (reg_attr_show(h->reg, p.current, REG_A_REASON, reason, sizeof(reason)) < 0)
        reason[0] = '\0';
    reason[strcspn(reason, "\n")] = '\0';
    say(r, MHD_HTTP_SERVICE_UNAVAILABLE, "%s: current %s is %s: %s\n", rest, cur.alloc,
        reg_health_names[cur.health], reason);
}

struct route {
    const char *path;
    bool prefix;                     /* path is a prefix; the rest goes on */
    void (*fn)(struct http *h, const char *rest, struct reply *r);
};
static const struct route routes[] = {
    { "/metrics", false, metrics },
    { "/healthz", false, healthz },
    { "/healthz/", true, plugin_health },
};

/* A ".." segment anywhere: refused, whatever route it would reach. */
static bool dotdot(const char *url)
{
    for (const char *p = strstr(url, ".."); p; p = strstr(p + 1, ".."))
        if ((p == url || p[-1] == '/') && (p[2] == '/' || !p[2]))
            return true;
    return false;
}

static void route(struct http *h, const char *url, struct reply *r)
{
    if (strlen(url) > HTTP_URL_MAX) {
        say(r, MHD_HTTP_URI_TOO_LONG, "URL over %d bytes\n", HTTP_URL_MAX);
        return;
    }
    if (dotdot(url)) {
        say(r, MHD_HTTP_BAD_REQUEST, "no .. in a path\n");
        return;
    }
    for (size_t k = 0; k < sizeof(routes) / sizeof(routes[0]); k++) {
        size_t n = strlen(routes[k].path);
        if (routes[k].prefix ? !strncmp(url, routes[k].path, n) : !strcmp(url, routes[k].path)) {
            routes[k].fn(h, url + n, r);
            return;
        }
    }
    say(r, MHD_HTTP_NOT_FOUND, "not found\n");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **state)
{
    (void)version, (void)upload, (void)upload_size, (void)state;
    struct reply r = { .type = "text/plain; charset=utf-8" };
    bool allowed = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    if (allowed)
        route(cls, url, &r);
    else
        say(&r, MHD_HTTP_METHOD_NOT_ALLOWED, "method %s not allowed\n", method);
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r.len, r.body ? r.body : "", r.owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        if (r.owned)
            free(r.body);
        return MHD_NO;
    }
    enum MHD_Result ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.type);
    if (ok == MHD_YES && !allowed)
        ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    if (ok == MHD_YES)
        ok = MHD_queue_response(c, r.status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    csifs_log(LOG_WARNING, "http: %s", line);
}

int http_start(struct http **out, const struct http_opts *o)
{
    struct http *h = calloc(1, sizeof(*h));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (!h || getsockname(o->listen_fd, (struct sockaddr *)&ss, &sl) < 0) {
        int e = h ? errno : ENOMEM;
        free(h);
        close(o->listen_fd);
        return -e;
    }
    *h = (struct http){ .fs = o->fs, .reg = o->reg };
    snprintf(h->waiting, sizeof(h->waiting), "%s", o->waiting ? o->waiting : "");
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
                     (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)o->listen_fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_LIMIT,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_CONN_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, 0u,
                            MHD_OPTION_END);
    if (!h->d) {
        close(o->listen_fd);
        http_stop(h);
        return -EIO;
    }
    *out = h;
    return 0;
}

void http_stop(struct http *h)
{
    if (!h)
        return;
    if (h->d)
        MHD_stop_daemon(h->d);
    free(h);
}

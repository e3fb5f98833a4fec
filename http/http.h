/* http: csifs's HTTP endpoint (-o http=ADDR:PORT, DESIGN 14), served by
 * libmicrohttpd on a thread of its own, never through the FUSE mount:
 *   GET /metrics                  the metrics file's content
 *   GET /healthz                  503 while the FUSE connection has waiting
 *                                 requests and the FUSE thread finished
 *                                 none for 2 s, else 200
 *   GET /healthz/<type>/<plugin>  200 when current exists and is healthy,
 *                                 503 with the reason, 404 no such plugin
 * HEAD as GET without the body; other methods 405, other paths 404, a path
 * with a ".." segment 400, a URL over HTTP_URL_MAX bytes 414.
 *
 * http_listen runs before the fork (a bad address or a port in use stops
 * the start with a message, before anything is mounted); http_start after
 * it, when the registry serves (it starts the thread). */
#ifndef CSIFS_HTTP_H
#define CSIFS_HTTP_H

#include <stddef.h>

#include "fs/fs.h"
#include "registry/registry.h"

#define HTTP_CONN_LIMIT 4096         /* connections at once (DESIGN 14) */
#define HTTP_CONN_TIMEOUT_S 10       /* an idle connection is closed after */
#define HTTP_CONN_MEMORY 8192        /* bytes of request per connection */
#define HTTP_URL_MAX 1024            /* longer URLs: 414 */
#define HTTP_STUCK_MS 2000           /* /healthz: no request finished for */

/* spec: "PORT", ":PORT" (loopback), "ADDR:PORT", "[V6ADDR]:PORT"; ADDR a
 * numeric address or a host name. A listening socket (O_CLOEXEC) in *fd, or
 * -EINVAL / -errno with a message in err. */
int http_listen(const char *spec, int *fd, char *err, size_t errlen);

struct http;
struct http_opts {
    int listen_fd;                   /* from http_listen; taken */
    const char *waiting;             /* fusectl's <conn>/waiting (not seekable:
                                      * opened per /healthz), or NULL */
    struct fs *fs;
    struct reg *reg;
};
/* Start serving; 0 or -errno (listen_fd is closed either way). */
int http_start(struct http **out, const struct http_opts *o);
/* Stop the thread, close every connection, free. NULL is a no-op. */
void http_stop(struct http *h);

#endif

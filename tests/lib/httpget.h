/* HTTP for tests of -o http= (DESIGN 14): a free loopback port, and curl. */
#ifndef CSIFS_HTTPGET_H
#define CSIFS_HTTPGET_H

#include <stddef.h>

/* A TCP port free on 127.0.0.1 just now (bound to port 0, then closed). */
int th_free_port(void);
/* Run `curl -s --max-time <tu_ms(10 s)> <args>` and return the HTTP status
 * (0 when curl got no answer); the body (cut at cap - 1) into body if not
 * NULL. args is handed to sh: quote it. */
int th_curl(const char *args, char *body, size_t cap);
/* GET http://127.0.0.1:<port><path>: the status; body as th_curl. */
int th_get(int port, const char *path, char *body, size_t cap);

#endif

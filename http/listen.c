/* The listening socket of -o http= (see http.h). */
#include "http/http.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BAD(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

/* Split spec into host (NULL: loopback) and port, in buf. */
static int split(const char *spec, char *buf, size_t cap, char **host, char **port)
{
    if (snprintf(buf, cap, "%s", spec) >= (int)cap)
        return -EINVAL;
    char *colon = strrchr(buf, ':');
    *host = NULL;
    *port = buf;
    if (colon) {
        *colon = '\0';
        *port = colon + 1;
        *host = *buf ? buf : NULL;
    }
    if (*host && **host == '[') {    /* [::1]:9808 */
        size_t n = strlen(*host);
        if (n < 3 || (*host)[n - 1] != ']')
            return -EINVAL;
        (*host)[n - 1] = '\0';
        (*host)++;
    }
    char *end;
    long p = strtol(*port, &end, 10);
    return *port[0] && !*end && p > 0 && p < 65536 ? 0 : -EINVAL;
}

int http_listen(const char *spec, int *fd, char *err, size_t errlen)
{
    char buf[512], *host, *port;
    if (split(spec, buf, sizeof(buf), &host, &port) < 0)
        return BAD("bad http=%s (want [ADDR:]PORT, e.g. 9808 or 0.0.0.0:9808)", spec);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host ? host : "127.0.0.1", port, &hints, &ai);
    if (g)
        return BAD("http=%s: %s", spec, gai_strerror(g));
    int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int one = 1, e = 0;
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(s, ai->ai_addr, ai->ai_addrlen) < 0 || listen(s, 1024) < 0)
        e = errno;
    freeaddrinfo(ai);
    if (e) {
        if (s >= 0)
            close(s);
        snprintf(err, errlen, "http=%s: cannot listen: %s", spec, strerror(e));
        return -e;
    }
    *fd = s;
    return 0;
}

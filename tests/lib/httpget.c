/* See httpget.h. */
#include "tests/lib/httpget.h"
#include "tests/lib/testutil.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int th_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof(a);
    int port = -1;
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

int th_curl(const char *args, char *body, size_t cap)
{
    char tmpl[] = "/tmp/csifs-curl-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return -1;
    close(fd);
    char cmd[32768];
    snprintf(cmd, sizeof(cmd), "curl -s --max-time %" PRId64 " -o %s -w '%%{http_code}' %s",
             (tu_ms(10000) + 999) / 1000, tmpl, args);
    FILE *p = popen(cmd, "r");
    int code = 0;
    if (p) {
        if (fscanf(p, "%d", &code) != 1)
            code = 0;
        pclose(p);
    }
    FILE *f = body && cap ? fopen(tmpl, "r") : NULL;
    if (f) {
        size_t n = fread(body, 1, cap - 1, f);
        body[n] = '\0';
        fclose(f);
    } else if (body && cap) {
        body[0] = '\0';
    }
    unlink(tmpl);
    return code;
}

int th_get(int port, const char *path, char *body, size_t cap)
{
    char args[16384];
    snprintf(args, sizeof(args), "'http://127.0.0.1:%d%s'", port, path);
    return th_curl(args, body, cap);
}

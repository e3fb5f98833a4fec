/* csi: the short, stable reasons of failed calls (DESIGN section 3). */
#include "csi/client.h"
#include "csi/internal.h"
#include "base/defaults.h"

#include <errno.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESSAGE_MAX 200     /* bytes of a plugin's message kept */

static const char *const status_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
};
#define NSTATUS ((int)(sizeof(status_names) / sizeof(status_names[0])))

const char *csi_status_name(int status)
{
    return status >= 0 && status < NSTATUS ? status_names[status] : NULL;
}

int csi_status_parse(const char *s)
{
    if (!s || !*s)
        return -EINVAL;
    for (int i = 0; i < NSTATUS; i++)
        if (strcmp(s, status_names[i]) == 0)
            return i;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v >= NSTATUS)
        return -EINVAL;
    return (int)v;
}

/* Texts gRPC core itself puts in a status (not the plugin's), and what a
 * reason says instead: never a socket path or gRPC's internals. */
static const struct {
    const char *fragment, *reason;
} transport_texts[] = {
    { "Failed parsing HTTP/2", "protocol: not HTTP/2" },
    { "Received message larger than max", "protocol: reply over 64 KiB" },
    { "Socket closed", "UNAVAILABLE: connection closed" },
    { "Connection reset", "UNAVAILABLE: connection closed" },
    { "Broken pipe", "UNAVAILABLE: connection closed" },
    { "Transport closed", "UNAVAILABLE: connection closed" },
    { "GOAWAY", "UNAVAILABLE: connection closed" },
};

const char *csi_transport_reason(const char *message)
{
    for (size_t k = 0; message && k < sizeof(transport_texts) / sizeof(transport_texts[0]); k++)
        if (strstr(message, transport_texts[k].fragment))
            return transport_texts[k].reason;
    return NULL;
}

char *csi_reason(enum csi_method m, int status, const char *message, int timeout_ms)
{
    char *r = NULL;
    int n;
    const char *fixed = status == GRPC_STATUS_OK ? NULL : csi_transport_reason(message);
    if (status == GRPC_STATUS_DEADLINE_EXCEEDED) {
        char d[32];
        const char *path = csi_method_path(m);
        n = asprintf(&r, "%s timed out after %s", path ? strrchr(path, '/') + 1 : "call",
                     csifs_fmt_duration(timeout_ms, d, sizeof(d)));
    } else if (fixed) {
        r = strdup(fixed);
        n = r ? 0 : -1;
    } else {
        const char *name = csi_status_name(status);
        char num[32];
        if (!name) {
            snprintf(num, sizeof(num), "STATUS_%d", status);
            name = num;
        }
        const char *msg = message ? message : "";
        char *m1 = csi_dup_line(msg, strcspn(msg, "\r\n") < MESSAGE_MAX ? strcspn(msg, "\r\n")
                                                                         : MESSAGE_MAX);
        if (!m1)
            return NULL;
        n = *m1 ? asprintf(&r, "%s: %s", name, m1) : asprintf(&r, "%s", name);
        free(m1);
    }
    return n < 0 ? NULL : r;
}

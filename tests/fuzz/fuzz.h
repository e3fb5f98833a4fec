/* Shared by the libFuzzer targets of tests/fuzz (make fuzz). Each target is
 * a thin wrapper over one public function of csifs that decodes untrusted
 * bytes, plus an oracle that holds whatever the implementation behind it.
 * A broken oracle calls fuzz_fail, which aborts: libFuzzer saves the input. */
#ifndef CSIFS_FUZZ_H
#define CSIFS_FUZZ_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz oracle: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* Split data at NUL bytes into at most max malloc'd strings (one block,
 * free(v[0]) frees all); returns how many. */
static inline int fuzz_split(const uint8_t *data, size_t size, char **v, int max)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int n = 0;
    for (char *p = s; n < max;) {
        v[n++] = p;
        char *z = memchr(p, '\0', (size_t)(s + size - p));
        if (!z || z == s + size)
            break;
        p = z + 1;
    }
    if (n == 0)
        free(s);
    return n;
}

#endif

/* csi: csi_dup_line (csi/internal.h), the one copy of a plugin's text that
 * both the decoder (names, reasons of a reply) and the reasons of failed
 * calls keep: cut to a length on a character boundary, made safe to print. */
#include "csi/internal.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    /* overlong, surrogates, beyond U+10FFFF */
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) ||
        (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

char *csi_dup_line(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;            /* s[n] continues a character: cut before it */
    }
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len(u + i, n - i);
        if (len == 0 || u[i] < 0x20 || u[i] == 0x7f) {
            d[o++] = '?';   /* a control character or a byte of a bad sequence */
            i++;
            continue;
        }
        memcpy(d + o, u + i, len);
        o += len;
        i += len;
    }
    d[o] = '\0';
    return d;
}

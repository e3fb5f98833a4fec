/* CSI responses (csi/decode.c): csi_decode of a reply of each method.
 * Input: [method][reply bytes]. Oracle: a decoded reply has its strings
 * on one line (no control character but tab, as files and events need),
 * lines of capabilities and topology newline-terminated; a refused one
 * has a reason. */
#include "tests/fuzz/fuzz.h"
#include "csi/client.h"

#include <errno.h>

static void one_line(const char *what, const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t')
            fuzz_fail("%s holds control character 0x%02x", what, (unsigned char)*s);
}

static void lines(const char *what, const char *s)
{
    if (!s || !*s)
        return;
    size_t n = strlen(s);
    if (s[n - 1] != '\n')
        fuzz_fail("%s does not end in a newline", what);
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\n')
            fuzz_fail("%s holds control character 0x%02x", what, (unsigned char)*p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct csi_result res = { 0 };
    enum csi_method m = (enum csi_method)(data[0] % CSI_METHOD_COUNT);
    int rc = csi_decode(m, data + 1, size - 1, &res);
    if (rc == 0) {
        if (!res.ok)
            fuzz_fail("decoded but not ok");
        one_line("name", res.name);
        one_line("vendor_version", res.vendor_version);
        one_line("node_id", res.node_id);
        lines("capabilities", res.capabilities);
        lines("topology", res.topology);
    } else if (rc != -ENOMEM && !res.reason) {
        fuzz_fail("refused (%d) without a reason", rc);
    } else {
        one_line("reason", res.reason);
    }
    csi_result_clear(&res);
    return 0;
}

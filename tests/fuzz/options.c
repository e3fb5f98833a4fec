/* Option parsing (fs/options.c): fs_parse_cmdline on an argv made of the
 * NUL-separated input after "csifs", and fs_parse_duration on the first
 * string. Oracle: 0 or -EINVAL, a message with -EINVAL, a freeable result;
 * a parsed duration is not negative. */
#include "tests/fuzz/fuzz.h"
#include "fs/options.h"

#include <errno.h>

#define MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *v[MAX_ARGS], *argv[MAX_ARGS + 2];
    int n = fuzz_split(data, size, v, MAX_ARGS);
    if (n == 0)
        return 0;
    int64_t ms = -1;
    int rc = fs_parse_duration(v[0], &ms);
    if (rc == 0 && ms < 0)
        fuzz_fail("fs_parse_duration('%s') = %lld", v[0], (long long)ms);
    if (rc != 0 && rc != -EINVAL)
        fuzz_fail("fs_parse_duration('%s') returned %d", v[0], rc);
    argv[0] = "csifs";
    for (int i = 0; i < n; i++)
        argv[i + 1] = v[i];
    argv[n + 1] = NULL;
    struct csifs_opts o;
    memset(&o, 0, sizeof(o));
    char err[512] = "";
    rc = fs_parse_cmdline(n + 1, argv, &o, err, sizeof(err));
    if (rc != 0 && rc != -EINVAL && rc != -ENOMEM)
        fuzz_fail("fs_parse_cmdline returned %d", rc);
    if (rc == -EINVAL && !err[0])
        fuzz_fail("fs_parse_cmdline refused without a message");
    fs_opts_free(&o);
    free(v[0]);
    return 0;
}

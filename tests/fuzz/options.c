/* Option parsing (cmd/options.c): csifs_cmdline_parse on an argv made of the
 * NUL-separated input after "csifs", and csifs_duration_parse on the first
 * string. Oracle: 0 or -EINVAL, a message with -EINVAL, a freeable result;
 * a parsed duration is not negative. */
#include "tests/fuzz/fuzz.h"
#include "cmd/options.h"

#include <errno.h>

#define MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *v[MAX_ARGS], *argv[MAX_ARGS + 2];
    int n = fuzz_split(data, size, v, MAX_ARGS);
    if (n == 0)
        return 0;
    int64_t ms = -1;
    int rc = csifs_duration_parse(v[0], &ms);
    if (rc == 0 && ms < 0)
        fuzz_fail("csifs_duration_parse('%s') = %lld", v[0], (long long)ms);
    if (rc != 0 && rc != -EINVAL)
        fuzz_fail("csifs_duration_parse('%s') returned %d", v[0], rc);
    argv[0] = "csifs";
    for (int i = 0; i < n; i++)
        argv[i + 1] = v[i];
    argv[n + 1] = NULL;
    struct csifs_opts o;
    memset(&o, 0, sizeof(o));
    char err[512] = "";
    rc = csifs_cmdline_parse(n + 1, argv, &o, err, sizeof(err));
    if (rc != 0 && rc != -EINVAL && rc != -ENOMEM)
        fuzz_fail("csifs_cmdline_parse returned %d", rc);
    if (rc == -EINVAL && !err[0])
        fuzz_fail("csifs_cmdline_parse refused without a message");
    csifs_opts_free(&o);
    free(v[0]);
    return 0;
}

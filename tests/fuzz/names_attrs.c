/* Name and attribute validation (registry): reg_name_check against the
 * rule of DESIGN section 1, and reg_attr_store / reg_socket_set on a
 * memory registry. Input: [selector][bytes]. Oracles: a name is valid
 * exactly when DESIGN says; a stored value reads back exactly as stored
 * (one trailing newline stripped) and values the contract refuses
 * (over 4096 bytes, a NUL or newline inside; a socket target not absolute
 * or over 107 bytes) are refused. */
#include "tests/fuzz/fuzz.h"
#include "registry/registry.h"

#include <errno.h>

static struct reg *reg;
static uint64_t inst;

static bool design_name(const char *s, size_t n)
{
    if (n < 1 || n > REG_NAME_MAX || s[0] == '.' || (n == 7 && !memcmp(s, "current", 7)))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]) ||
            !s[i])
            return false;
    return true;
}

static void setup(void)
{
    struct reg_opts o = { 0 };
    struct reg_node p, i;
    if (reg_open(&reg, &o) || reg_plugin_create(reg, REG_NODE, "p") ||
        reg_instance_register(reg, REG_NODE, "p", "a") ||
        reg_plugin_lookup(reg, REG_NODE, "p", &p) || reg_instance_lookup(reg, p.seq, "a", &i))
        fuzz_fail("setup of the memory registry failed");
    inst = i.seq;
}

static void attr(const char *v, size_t n)
{
    static char buf[REG_VALUE_MAX + 64];
    enum reg_attr a = n % 2 ? REG_A_MOUNT_POINT : REG_A_CONTAINER_MOUNT_POINT;
    size_t core = n && v[n - 1] == '\n' ? n - 1 : n;
    bool bad = core > REG_VALUE_MAX || memchr(v, '\0', core) || memchr(v, '\n', core);
    int rc = reg_attr_store(reg, inst, a, v, n);
    if (bad && rc != -EINVAL)
        fuzz_fail("reg_attr_store accepted (%d) a value the contract refuses", rc);
    if (rc != 0)
        return;
    ssize_t got = reg_attr_show(reg, inst, a, buf, sizeof(buf));
    size_t want = core ? core + 1 : 0;     /* shown newline-terminated, empty when cleared */
    if (got != (ssize_t)want || (core && (memcmp(buf, v, core) || buf[core] != '\n')))
        fuzz_fail("stored %zu bytes, reads back %zd", core, got);
}

static void sock(const char *v, size_t n)
{
    static char t[512], buf[512];
    if (n >= sizeof(t) || memchr(v, '\0', n))
        return;                     /* a C string: no NUL inside */
    memcpy(t, v, n);
    t[n] = '\0';
    int rc = reg_socket_set(reg, inst, t);
    if (n && (t[0] != '/' || n > REG_SOCKET_MAX) && rc == 0)
        fuzz_fail("reg_socket_set accepted '%s'", t);
    if (rc != 0)
        return;
    ssize_t got = reg_socket_get(reg, inst, buf, sizeof(buf));
    if (n == 0 ? got != -ENOENT : (got != (ssize_t)n || strcmp(buf, t)))
        fuzz_fail("socket set to '%s', reads back %zd '%s'", t, got, got > 0 ? buf : "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!reg)
        setup();
    if (size < 1)
        return 0;
    const char *v = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 3) {
    case 0: {
        char name[300];
        if (n >= sizeof(name))
            return 0;
        memcpy(name, v, n);
        name[n] = '\0';
        size_t len = strlen(name);      /* the name as a C string sees it */
        bool want = design_name(name, len);
        if ((reg_name_check(name) == 0) != want)
            fuzz_fail("reg_name_check('%s') disagrees with DESIGN (valid: %d)", name, want);
        break;
    }
    case 1: attr(v, n); break;
    default: sock(v, n); break;
    }
    return 0;
}

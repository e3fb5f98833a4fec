/* Upgrades in place under load (issue 26, DESIGN 13): 50 SIGUSR2
 * re-executions of csifs under the test fd store with the crash test's
 * load and checks (tests/crash/takeover.c, UPGRADE=1): after each, the same
 * pid, READY=1 at the holder, and no user of the mount noticed anything.
 * A system suite: `make test` runs it, `make test-asan` does not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/lib/testutil.h"

#define UPGRADES 50

TestSuite(upgrade, .timeout = 600);

Test(upgrade, fifty_sigusr2_under_load_go_unnoticed)
{
    char cmd[4200], line[4096], want[64];
    snprintf(cmd, sizeof(cmd), "UPGRADE=1 TAKEOVER= BUILD='%s' '%s/csifs-crash-test' %d 2>&1",
             tu_build_dir(), tu_build_dir(), UPGRADES);
    snprintf(want, sizeof(want), "crash rounds: %d passed, 0 failed\n", UPGRADES);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    bool passed = false;
    while (fgets(line, sizeof(line), p)) {
        fputs(line, stderr);             /* every round and every reason, in the log */
        passed |= !strcmp(line, want);
    }
    int st = pclose(p);
    cr_assert(passed && st == 0, "not every upgrade went unnoticed (the reasons above)");
}

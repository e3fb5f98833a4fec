/* csifs: the CSI plugin registry of this host as a filesystem. */
#include "cmd/daemon.h"
#include "base/log.h"
#include "takeover/takeover.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    struct csifs_opts o;
    char err[512];
    int rc = csifs_cmdline_parse(argc, argv, &o, err, sizeof(err));
    if (rc == 0 && o.help)
        csifs_help_print(argv[0]);
    else if (rc == 0 && o.version)
        printf("csifs %s\n", CSIFS_VERSION);
    else if (rc == 0) {
        tk_upgrade_prepare(argv);    /* SIGUSR2 execs it again (DESIGN 13) */
        rc = csifs_daemon_run(&o);
    }
    else
        csifs_log(LOG_WARNING, "%s (see --help)", err);   /* a refused start */
    csifs_opts_free(&o);
    return rc == 0 ? 0 : rc > 0 ? rc : 2;
}

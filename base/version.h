/* csifs: the version the command prints (csifs --version) and <mnt>/metrics
 * reports (csifs_build_info). */
#ifndef CSIFS_VERSION_H
#define CSIFS_VERSION_H

#define CSIFS_VERSION "0.1.0"

#endif

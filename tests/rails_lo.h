/* Rails on the loopback for the multi-rank tests: the emulated cluster's
 * node topology (4 NICs, tests/cluster/zc_cluster --topo-xml) with every NIC
 * bound to lo, so that transfers between emulated nodes split over 4 rails.
 * Header-only. */
#ifndef ZC_TESTS_RAILS_LO_H
#define ZC_TESTS_RAILS_LO_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Write the topology to a temporary file (its name into path[len], for
 * unlink) and point ZC_TOPO_FILE and ZC_NIC_NETDEV at it; 0 when the
 * topology cannot be made (then there are no rails). */
static inline int rails_on_loopback(char *path, size_t len)
{
    const char *srcdir = getenv("ZC_TEST_SRCDIR");
    char cmd[1200];
    int fd;

    snprintf(path, len, "/tmp/zc_test_rails.XXXXXX");
    if ((fd = mkstemp(path)) < 0)
        return 0;
    close(fd);
    snprintf(cmd, sizeof(cmd), "bash '%s/cluster/zc_cluster' -K 4 --topo-xml > '%s' 2>/dev/null",
             srcdir ? srcdir : "tests", path);
    if (system(cmd) != 0) {
        unlink(path);
        return 0;
    }
    setenv("ZC_TOPO_FILE", path, 1);
    setenv("ZC_NIC_NETDEV", "mlx5_0=lo,mlx5_1=lo,mlx5_2=lo,mlx5_3=lo", 1);
    setenv("UCX_TLS", "self,sm,tcp", 0);
    return 1;
}

#endif

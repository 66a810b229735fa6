/* Rails: the NICs of this rank's node that carry inter-node traffic, and
 * which one is this rank's own (its GPU's nearest NIC). */
#ifndef ZC_RAILS_H
#define ZC_RAILS_H

#include "zcomm.h"

#define ZC_MAX_RAILS ZC_PLAN_MAX_RAILS  /* public: a plan routes over as many */
#define ZC_RAIL_DEVICES_LEN 160

typedef struct {
    int count;                  /* NICs found (0: no striping, one UCX lane) */
    int mine;                   /* this rank's rail, -1 when count is 0 */
    /* UCX_NET_DEVICES value of each rail ("veth0", "mlx5_0:1,ib0"). */
    char devices[ZC_MAX_RAILS][ZC_RAIL_DEVICES_LEN];
    double rate_gbps[ZC_MAX_RAILS]; /* each rail's port rate, 0 where unknown */
} zc_rails_t;

/* From the topology (ZC_TOPO_FILE, HWLOC_XMLFILE or the live machine):
 * NICs with a network device or an active verbs port become rails; the
 * rank's rail is the NIC assigned to GPU (local_rank mod GPUs), or
 * local_rank mod NICs on a node without GPUs.  A topology that cannot be
 * read means no rails, with a log line: never an error. */
void zc_rails_discover(int local_rank, zc_rails_t *rails);

#endif

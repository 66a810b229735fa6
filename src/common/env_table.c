/* The one table of environment variables libzcomm reads (zc_info -e), and
 * the lookup of a value or its default.  Below logging and status (which
 * read ZC_LOG_LEVEL through it), so it reports nothing itself. */
#include "config.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/env.h"

static const zc_env_var_t zc_env_table[] = {
    {"ZC_LOG_LEVEL", "WARN", "log level: NONE, ERROR, WARN, INFO, DEBUG or TRACE"},
    {"ZC_LOG_FILE", NULL, "log to this file instead of stderr (%h: host name, %p: pid)"},
    {"ZC_TIMEOUT", "60000",
     "milliseconds a rank waits for the bootstrap or for a peer before ZC_ERR_TIMEOUT"},
    {"ZC_NODE_ID", NULL,
     "node identity of this rank; default: host name plus boot id (set it to emulate nodes)"},
    {"ZC_SOCKET_IFNAME", NULL,
     "interface the bootstrap root listens on (zc_get_unique_id); default: first non-loopback"},
    {"ZC_RANK", NULL, "rank of this process for zc_comm_init_env (over launcher variables)"},
    {"ZC_SIZE", NULL, "number of ranks for zc_comm_init_env (over launcher variables)"},
    {"ZC_LOCAL_RANK", NULL, "rank within the node for zc_comm_init_env (informational)"},
    {"ZC_MASTER_ADDR", NULL,
     "address of rank 0 for zc_comm_init_env; default: MASTER_ADDR, else 127.0.0.1"},
    {"ZC_MASTER_PORT", NULL,
     "port rank 0 listens on for zc_comm_init_env; default: MASTER_PORT + 1 (torchrun's store "
     "owns MASTER_PORT), else from the job id"},
    {"ZC_SECRET", NULL,
     "shared secret for zc_comm_init_env bootstrap (32 hex digits); default: from the job id"},
    {"ZC_UCX_TLS", "self,sm,tcp",
     "UCX transports of the host path when there are no rails (UCX_TLS syntax; UCX_TLS wins)"},
    {"ZC_ROUTED_MIN_BYTES", "65536",
     "zc_routed_sendrecv: transfers between nodes smaller than this go direct on one rail"},
    {"ZC_ROUTED_CHUNK", "1048576",
     "zc_routed_sendrecv: pipeline chunk in bytes (grown so a slice has at most 1024)"},
    {"ZC_UCX_INTRA_TLS", "self,sm",
     "UCX transports between the ranks of one node when there are rails (UCX_TLS wins)"},
    {"ZC_UCX_NET_TLS", "tcp",
     "UCX transports of each rail's lane to other nodes, restricted to that NIC (e.g. rc,ud "
     "on InfiniBand)"},
    {"ZC_TOPO_FILE", NULL,
     "topology XML (hwloc or NCCL format) zc_topo_load reads instead of the live machine "
     "(then hwloc's HWLOC_XMLFILE)"},
    {"ZC_IB_HCA", NULL,
     "NICs to use, NCCL_IB_HCA syntax: prefixes, ^ to exclude, = for exact names, dev:port"},
    {"ZC_NIC_NETDEV", NULL,
     "network interface of each NIC, e.g. mlx5_0=veth0,mlx5_1=veth1 (default: from hwloc)"},
    {"ZC_NUM_THREADS", NULL,
     "threads of the CPU attention kernels (the caller included); default: online cores"},
    {"ZC_CPU_ISA", "auto",
     "SIMD path of the CPU attention kernels: auto, avx512, avx2 or scalar"},
    {"ZC_ALLTOALLV_CHECK", "1",
     "zc_remap_alltoallv: agree on every block's size before moving data (0: skip; a mismatch "
     "then fails only at the receiver, or as a timeout)"},
    {"ZC_ALLTOALLV_SPLIT_BYTES", "65536",
     "zc_remap_alltoallv: blocks between nodes from this size on are split over every rail "
     "(same value on every rank)"},
    {"ZC_ALLTOALLV_ROWS_MAX", "64",
     "zc_remap_alltoallv: communicators up to this size agree on the counts in one round of "
     "whole count rows (16 n bytes to each rank), larger ones in two rounds of 16 and 40 bytes"},
    {"ZC_ALLTOALLV_WINDOW", "2",
     "zc_remap_alltoallv: pairwise-exchange steps in flight at once (0: all)"},
    {"ZC_RING_ATTN_CHECK", "1",
     "zc_ring_attn: agree on the plan and the attention shape before moving data (0: skip; a "
     "disagreement then shows as a size mismatch or a timeout)"},
    {"ZC_RING_ATTN_SLICE_MFLOP", "1024",
     "zc_ring_attn: attention work (MFLOP) between two progress calls while transfers are in "
     "flight (0: never cut a block)"},
    {"ZC_RING_ATTN_BWD_ORDER", "forward",
     "zc_ring_attn_bwd: queue order of the host engine's backward, forward (inter-node, "
     "intra-node, local) or reverse (local, intra-node, inter-node: the paper's Fig. 12c); same "
     "value on every rank"},
};

const zc_env_var_t *zc_env_vars(size_t *count)
{
    if (count)
        *count = sizeof(zc_env_table) / sizeof(zc_env_table[0]);
    return zc_env_table;
}

static const zc_env_var_t *zc_env_find(const char *name)
{
    for (size_t i = 0; i < sizeof(zc_env_table) / sizeof(zc_env_table[0]); i++)
        if (strcmp(zc_env_table[i].name, name) == 0)
            return &zc_env_table[i];
    return NULL;
}

const char *zc_env_get(const char *name)
{
    const zc_env_var_t *var = zc_env_find(name);
    const char *value = getenv(name);

    assert(var != NULL && "every variable read must be in zc_env_table");
    if (value && *value)
        return value;
    return var ? var->default_value : NULL;
}

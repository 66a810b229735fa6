/* The one typed table of environment variables libzcomm reads (zc_info -e,
 * zcomm(7) through man/update-zcomm7.py): name, default, type with its
 * range or choices, scope, help; and the lookup of a value or its default.
 * Below logging and status (which read ZC_LOG_LEVEL through it), so it
 * reports nothing itself.
 *
 * The first ZC_ENV_NCOMM entries are the per-communicator variables, in
 * the order of zc_env_id_t (env.h).  Each entry is one C initializer:
 * {name, default, type, min, max, choices, flags, help}. */
#include "config.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/env.h"

static const zc_env_spec_t zc_env_table[] = {
    {"ZC_TIMEOUT", "60000", ZC_ENV_INT, 1, INT32_MAX, NULL, ZC_ENV_COMM,
     "milliseconds a rank waits for the bootstrap (up to 4 s more: the root's grace for a "
     "loaded rank) or for a peer before ZC_ERR_TIMEOUT"},
    {"ZC_ROUTED_MIN_BYTES", "65536", ZC_ENV_INT, 0, INT64_MAX, NULL, ZC_ENV_COMM | ZC_ENV_SAME,
     "zc_routed_sendrecv: transfers between nodes smaller than this go direct on one rail"},
    {"ZC_ROUTED_CHUNK", "1048576", ZC_ENV_INT, 1, 1073741824, NULL, ZC_ENV_COMM | ZC_ENV_SAME,
     "zc_routed_sendrecv: pipeline chunk in bytes (grown so a slice has at most 1024)"},
    {"ZC_ALLTOALLV_CHECK", "1", ZC_ENV_INT, 0, 1, NULL, ZC_ENV_COMM | ZC_ENV_SAME,
     "zc_remap_alltoallv: agree on every block's size before moving data (0: blocks over 8 KiB "
     "do not wait for it; up to ZC_ALLTOALLV_ROWS_MAX ranks a mismatch still fails every "
     "rank, beyond only the receiver or as a timeout)"},
    {"ZC_ALLTOALLV_SPLIT_BYTES", "65536", ZC_ENV_INT, 0, INT64_MAX, NULL,
     ZC_ENV_COMM | ZC_ENV_SAME,
     "zc_remap_alltoallv: blocks between nodes from this size on are split over every rail"},
    {"ZC_ALLTOALLV_ROWS_MAX", "64", ZC_ENV_INT, 0, INT32_MAX, NULL, ZC_ENV_COMM | ZC_ENV_SAME,
     "zc_remap_alltoallv: communicators up to this size agree on the counts in one round of "
     "whole count rows (16 n bytes to each rank), larger ones in two rounds of 16 and 40 bytes"},
    {"ZC_ALLTOALLV_WINDOW", "2", ZC_ENV_INT, 0, INT32_MAX, NULL, ZC_ENV_COMM,
     "zc_remap_alltoallv: pairwise-exchange steps with a large block between nodes in flight "
     "at once (0: all)"},
    {"ZC_RING_ATTN_CHECK", "1", ZC_ENV_INT, 0, 1, NULL, ZC_ENV_COMM | ZC_ENV_SAME,
     "zc_ring_attn: agree on the plan and the attention shape before moving data (0: skip; a "
     "disagreement then shows as a size mismatch or a timeout)"},
    {"ZC_RING_ATTN_SLICE_MFLOP", "1024", ZC_ENV_INT, 0, INT32_MAX, NULL, ZC_ENV_COMM,
     "zc_ring_attn: attention work (MFLOP) between two progress calls while transfers are in "
     "flight (0: never cut a block)"},
    {"ZC_RING_ATTN_BWD_ORDER", "forward", ZC_ENV_CHOICE, 0, 0, "forward|reverse",
     ZC_ENV_COMM | ZC_ENV_SAME,
     "zc_ring_attn_bwd: queue order of the host engine's backward, forward (inter-node, "
     "intra-node, local) or reverse (local, intra-node, inter-node: the paper's Fig. 12c)"},
    {"ZC_WAIT_SPIN_US", "50", ZC_ENV_INT, 0, 1000000, NULL, ZC_ENV_COMM,
     "microseconds a waiting rank polls before it sleeps on the transport's event fds "
     "(0: sleep at once); where its machine runs more of the communicator's ranks than the "
     "cores they can use (online, cut to a container's cgroup cpuset), it yields the core "
     "to runnable threads between polls"},
    {"ZC_HOST_SPLIT_BYTES", "262144", ZC_ENV_INT, 0, INT64_MAX, NULL, ZC_ENV_COMM | ZC_ENV_SAME,
     "messages between ranks of one host (and pid namespace) larger than this travel in two "
     "halves at once, one copied by the receiver and one by the sender (0: never split)"},
    {"ZC_RAIL_STRIPE", "rate", ZC_ENV_CHOICE, 0, 0, "rate|equal", ZC_ENV_COMM | ZC_ENV_SAME,
     "how transfers between nodes share the rails: in proportion to each rail's rate "
     "(ZC_RAIL_RATES or the port's, then the rate it delivers), or in equal shares"},
    {"ZC_RAIL_STALL_MS", "3000", ZC_ENV_INT, 1, INT32_MAX, NULL, ZC_ENV_COMM,
     "a rail that owes data and completes none for this long (at most a quarter of "
     "ZC_TIMEOUT), while the peer still answers on another rail and not on it for as long "
     "again (twice as long after each time it came back), is taken out and its data sent "
     "again on the others"},
    {"ZC_RAIL_PROBE_MS", "1000", ZC_ENV_INT, 1, INT32_MAX, NULL, ZC_ENV_COMM,
     "how often a rank probes a rail it holds out (while it progresses), to use it again "
     "once it answers"},
    {"ZC_LOG_LEVEL", "WARN", ZC_ENV_CHOICE, 0, 0, "NONE|ERROR|WARN|INFO|DEBUG|TRACE",
     ZC_ENV_PROCESS, "log level (any case)"},
    {"ZC_LOG_FILE", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_PROCESS,
     "log to this file instead of stderr (%h: host name, %p: pid)"},
    {"ZC_NODE_ID", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "node identity of this rank; default: host name plus boot id (set it to emulate nodes)"},
    {"ZC_SOCKET_IFNAME", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "interface the bootstrap root listens on (zc_get_unique_id); default: first non-loopback"},
    {"ZC_RANK", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "rank of this process for zc_comm_init_env (over launcher variables)"},
    {"ZC_SIZE", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "number of ranks for zc_comm_init_env (over launcher variables)"},
    {"ZC_LOCAL_RANK", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "rank within the node for zc_comm_init_env (informational)"},
    {"ZC_MASTER_ADDR", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "address of rank 0 for zc_comm_init_env; default: MASTER_ADDR, else 127.0.0.1"},
    {"ZC_MASTER_PORT", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "port rank 0 listens on for zc_comm_init_env; default: MASTER_PORT + 1 (torchrun's store "
     "owns MASTER_PORT), else from the job id"},
    {"ZC_SECRET", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "shared secret for zc_comm_init_env bootstrap (32 hex digits); default: from the job id"},
    {"ZC_RAIL_RATES", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "rate of each of this node's rails, a list (e.g. 200mbit,200mbit,100mbit,50mbit; a bare "
     "number is Gbit/s); default: each verbs port's rate, equal where unknown; the "
     "communicator takes the lowest over the nodes"},
    {"ZC_UCX_TLS", "self,sm,tcp", ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "UCX transports of the host path when there are no rails (UCX_TLS syntax; UCX_TLS wins)"},
    {"ZC_UCX_INTRA_TLS", "self,sm", ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "UCX transports between the ranks of one node when there are rails (UCX_TLS wins)"},
    {"ZC_UCX_NET_TLS", "tcp", ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_LAUNCH,
     "UCX transports of each rail's lane to other nodes, restricted to that NIC (e.g. rc,ud "
     "on InfiniBand)"},
    {"ZC_TOPO_FILE", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_TOPO,
     "topology XML (hwloc or NCCL format) zc_topo_load reads instead of the live machine "
     "(then hwloc's HWLOC_XMLFILE)"},
    {"ZC_IB_HCA", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_TOPO,
     "NICs to use, NCCL_IB_HCA syntax: prefixes, ^ to exclude, = for exact names, dev:port"},
    {"ZC_NIC_NETDEV", NULL, ZC_ENV_STRING, 0, 0, NULL, ZC_ENV_TOPO,
     "network interface of each NIC, e.g. mlx5_0=veth0,mlx5_1=veth1 (default: from hwloc)"},
    {"ZC_HOST_HUGE_PAGES", "1", ZC_ENV_INT, 0, 1, NULL, ZC_ENV_PROCESS,
     "zc_host_alloc and libzcomm's own host staging back buffers of a huge page (2 MiB on "
     "x86-64) and more with transparent huge pages (MADV_HUGEPAGE); 0: plain pages"},
    {"ZC_NUM_THREADS", NULL, ZC_ENV_INT, 1, INT32_MAX, NULL, ZC_ENV_PROCESS,
     "threads of the CPU attention kernels (the caller included, at most 1024); default: "
     "online cores"},
    {"ZC_CPU_ISA", "auto", ZC_ENV_CHOICE, 0, 0, "auto|avx512|avx2|scalar", ZC_ENV_PROCESS,
     "SIMD path of the CPU attention kernels"},
    {"ZC_ATTN_BACKEND", "native", ZC_ENV_CHOICE, 0, 0, "native|cudnn", ZC_ENV_PROCESS,
     "per-block attention of zc_ring_attn_*_stream: native (libzcomm's CUDA kernels) or cudnn "
     "(cuDNN's fused SDPA where the build has it and the shape suits it, else native with one "
     "INFO line)"},
};

#define ZC_ENV_COUNT (sizeof(zc_env_table) / sizeof(zc_env_table[0]))

const zc_env_spec_t *zc_env_specs(size_t *count)
{
    if (count)
        *count = ZC_ENV_COUNT;
    return zc_env_table;
}

const zc_env_spec_t *zc_env_spec(zc_env_id_t id)
{
    assert((unsigned)id < ZC_ENV_NCOMM && (zc_env_table[id].flags & ZC_ENV_COMM));
    return &zc_env_table[id];
}

/* ---- the public table: help with the range, choices and scope ----------- */

static zc_env_var_t zc_env_public[ZC_ENV_COUNT];
static char *zc_env_public_help[ZC_ENV_COUNT];
static pthread_once_t zc_env_public_once = PTHREAD_ONCE_INIT;

/* " [range 1 to 2147483647; same value on every rank; per communicator]":
 * man/update-zcomm7.py writes the same text into zcomm(7). */
static void zc_env_describe(const zc_env_spec_t *v, char *buf, size_t len)
{
    size_t n = 0;

#define ZC_ENV_APPEND(...)                                                    \
    do {                                                                      \
        int w_ = snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__);       \
        n += w_ > 0 ? (size_t)w_ : 0;                                         \
    } while (0)
    if (v->type == ZC_ENV_INT) {
        ZC_ENV_APPEND("range %" PRId64 " to %" PRId64 "; ", v->min, v->max);
    } else if (v->type == ZC_ENV_CHOICE) {
        ZC_ENV_APPEND("one of ");
        for (const char *p = v->choices; *p; p++)
            ZC_ENV_APPEND(*p == '|' ? ", " : "%c", *p);
        ZC_ENV_APPEND("; ");
    }
    if (v->flags & ZC_ENV_SAME)
        ZC_ENV_APPEND("same value on every rank, checked at init; ");
    if (v->flags & ZC_ENV_COMM)
        ZC_ENV_APPEND("read once per communicator, at its creation");
    else if (v->flags & ZC_ENV_PROCESS)
        ZC_ENV_APPEND("read once per process");
    else if (v->flags & ZC_ENV_TOPO)
        ZC_ENV_APPEND("read by every zc_topo_load");
    else
        ZC_ENV_APPEND("read at communicator creation");
#undef ZC_ENV_APPEND
}

static void zc_env_public_build(void)
{
    for (size_t i = 0; i < ZC_ENV_COUNT; i++) {
        const zc_env_spec_t *v = &zc_env_table[i];
        char extra[256];
        size_t len;

        zc_env_describe(v, extra, sizeof(extra));
        len = strlen(v->help) + strlen(extra) + 4;
        zc_env_public_help[i] = malloc(len);
        if (zc_env_public_help[i])
            snprintf(zc_env_public_help[i], len, "%s [%s]", v->help, extra);
        zc_env_public[i].name = v->name;
        zc_env_public[i].default_value = v->default_value;
        zc_env_public[i].help = zc_env_public_help[i] ? zc_env_public_help[i] : v->help;
    }
}

const zc_env_var_t *zc_env_vars(size_t *count)
{
    pthread_once(&zc_env_public_once, zc_env_public_build);
    if (count)
        *count = ZC_ENV_COUNT;
    return zc_env_public;
}

static const zc_env_spec_t *zc_env_find(const char *name)
{
    for (size_t i = 0; i < ZC_ENV_COUNT; i++)
        if (strcmp(zc_env_table[i].name, name) == 0)
            return &zc_env_table[i];
    return NULL;
}

const char *zc_env_get(const char *name)
{
    const zc_env_spec_t *var = zc_env_find(name);
    const char *value = getenv(name);

    assert(var != NULL && "every variable read must be in zc_env_table");
    if (value && *value)
        return value;
    return var ? var->default_value : NULL;
}

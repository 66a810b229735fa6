/*
 * libzcomm: the communication substrate of Zeppelin-style long-context
 * training.  This header is the whole public API.
 *
 * Conventions (see zcomm(7)):
 *  - every call returns zc_status_t: ZC_OK (0), ZC_INPROGRESS (1) or a
 *    negative error; zc_strerror() names it and zc_get_last_error() gives the
 *    detail of the last error raised in the calling thread;
 *  - handles are opaque (`_h`), outputs come last and are written only on
 *    success, every _init/_create has its _destroy;
 *  - the library never frees memory the caller owns.
 *
 * Structs that grow (the ABI; zcomm(7), "ABI"):
 *  - a struct the caller fills (zc_config_t, zc_oob_t, zc_plan_opts_t,
 *    zc_cluster_t, zc_ring_attn_args_t, zc_attn_args_t, zc_attn_kernels_t)
 *    starts with its size (zc_oob_t: struct_size), set by its
 *    ZC_*_INITIALIZER.  New fields
 *    are only ever added at the end.  The library reads only the caller's
 *    size and gives every field past it its default, so a program built
 *    against an older zcomm.h keeps working; a size below the struct's
 *    first layout (0 included) is ZC_ERR_INVALID_ARG naming the argument,
 *    and bytes past this library's sizeof must be zero (else
 *    ZC_ERR_UNSUPPORTED: a newer field this library does not know);
 *  - a struct the library fills through a pointer (zc_topo_gpu_t,
 *    zc_topo_nic_t, zc_plan_info_t, zc_cost_t, zc_ring_attn_stats_t,
 *    zc_cluster_t from zc_cluster_load) also starts with a size, which the
 *    caller sets before the call (its ZC_*_INITIALIZER does): the library
 *    writes at most that many bytes, never past them, and sets size to the
 *    count it wrote (min(size, sizeof) of the library's struct), so a newer
 *    caller sees which fields an older library filled.  A size below the
 *    first layout's is ZC_ERR_INVALID_ARG;
 *  - a struct the library fills and hands to a callback (zc_attn_varlen_t)
 *    starts with the library's sizeof: a callback reads a field only when
 *    size reaches past it;
 *  - the other structs are fixed records: elements of arrays (zc_transfer_t,
 *    zc_plan_piece_t, zc_plan_hop_t, zc_plan_transfer_t, zc_plan_run_t,
 *    zc_env_var_t) and
 *    the small per-item records zc_plan_seq_t, zc_plan_ring_t,
 *    zc_plan_rank_t and zc_topo_assignment_t never change; more information
 *    comes as a new call.
 */
#ifndef ZCOMM_H
#define ZCOMM_H

#include <stddef.h>
#include <stdint.h>

#include <zcomm_version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ZC_BUILDING_LIBRARY) && defined(__GNUC__)
#define ZC_API __attribute__((visibility("default")))
#else
#define ZC_API
#endif

/* ------------------------------------------------------------------------
 * Status, version, types
 * ------------------------------------------------------------------------ */

typedef enum {
    ZC_OK                 = 0,
    ZC_INPROGRESS         = 1,   /* a nonblocking operation is still running */
    ZC_ERR_INVALID_ARG    = -1,  /* an argument is wrong; the detail names it */
    ZC_ERR_NO_MEMORY      = -2,
    ZC_ERR_SYSTEM         = -3,  /* a system call failed (errno in the detail) */
    ZC_ERR_TRANSPORT      = -4,  /* UCX or NCCL reported an error */
    ZC_ERR_TIMEOUT        = -5,  /* a peer did not answer within the timeout */
    ZC_ERR_PEER_FAILED    = -6,  /* a peer died or closed its connection */
    ZC_ERR_UNSUPPORTED    = -7,  /* not built in, or not possible on this path */
    ZC_ERR_TOPOLOGY       = -8,  /* the machine's topology could not be read */
    ZC_ERR_INTERNAL       = -9,  /* a bug in libzcomm: please report it */
    ZC_ERR_CAPACITY       = -10, /* the batch does not fit the devices' capacity */
    ZC_ERR_MISMATCH       = -11, /* ranks disagree (counts, plans, sizes) */
    ZC_ERR_REFUSED        = -12  /* bootstrap refused the connection (wrong secret) */
} zc_status_t;

/* Short, static, human-readable name of a status ("invalid argument"). */
ZC_API const char *zc_strerror(zc_status_t status);
/* Detail of the last error raised in the calling thread, "" if none. */
ZC_API const char *zc_get_last_error(void);
/* The library's version as ZC_VERSION_CODE(major, minor, patch). */
ZC_API int zc_get_version(void);

/* Where a buffer lives.  The host-path calls (zc_routed_sendrecv,
 * zc_remap_alltoallv, zc_ring_attn_fwd/bwd) take ZC_MEM_HOST and refuse
 * ZC_MEM_CUDA with ZC_ERR_UNSUPPORTED; zc_send, zc_recv and zc_sendrecv take
 * ZC_MEM_CUDA when the UCX found at run time moves CUDA memory; the
 * stream-ordered calls (zc_*_stream) move ZC_MEM_CUDA memory, and
 * zc_ring_attn_*_stream requires args->memtype ZC_MEM_CUDA. */
typedef enum {
    ZC_MEM_HOST = 0,
    ZC_MEM_CUDA = 1
} zc_memtype_t;

typedef enum {
    ZC_BYTE     = 0,
    ZC_FLOAT32  = 1,
    ZC_FLOAT16  = 2,
    ZC_BFLOAT16 = 3,
    ZC_INT32    = 4,
    ZC_INT64    = 5,
    ZC_DTYPE_COUNT
} zc_datatype_t;

/* Size in bytes of one element, 0 for an unknown type. */
ZC_API size_t zc_datatype_size(zc_datatype_t dtype);
ZC_API const char *zc_datatype_name(zc_datatype_t dtype);

/* Build features, for tools and for callers that pick a path at run time.
 * Each bit is set exactly when its backend is compiled in; a new backend
 * takes a new bit. */
#define ZC_FEATURE_VERBS  (1u << 0)
#define ZC_FEATURE_CUDA   (1u << 1)
#define ZC_FEATURE_NCCL   (1u << 2)
#define ZC_FEATURE_CUDNN  (1u << 3) /* the cuDNN attention backend (ZC_ATTN_BACKEND=cudnn) */
ZC_API unsigned zc_get_features(void);

/* ------------------------------------------------------------------------
 * Environment variables: one table, printed by zc_info(1).
 * ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    const char *default_value;  /* as documented; NULL when unset means "none" */
    const char *help;
} zc_env_var_t;

/* The table of every environment variable libzcomm reads; *count is set. */
ZC_API const zc_env_var_t *zc_env_vars(size_t *count);

/* ------------------------------------------------------------------------
 * Bootstrap and communicator
 * ------------------------------------------------------------------------ */

#define ZC_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[ZC_UNIQUE_ID_BYTES];
} zc_unique_id_t;

typedef struct zc_comm *zc_comm_h;

/* Out-of-band allgather, blocking (unlike UCC's oob allgather, which is
 * non-blocking and completed with req_test): gather `len` bytes from every
 * rank into `recvbuf` (rank-ordered, len * size bytes) and return 0 on
 * success, non-zero on failure.  Called only from inside zc_comm_init_oob,
 * from the calling thread; see zc_comm_init_rank(3).  Start from
 * ZC_OOB_INITIALIZER (struct_size: `size` is the number of ranks). */
typedef struct {
    size_t struct_size;     /* sizeof(zc_oob_t), set by ZC_OOB_INITIALIZER */
    int (*allgather)(const void *sendbuf, void *recvbuf, size_t len, void *ctx);
    void *ctx;
    int rank;
    int size;               /* ranks */
} zc_oob_t;

#define ZC_OOB_INITIALIZER { sizeof(zc_oob_t), NULL, NULL, 0, 0 }

typedef struct {
    size_t size;            /* sizeof(zc_config_t) the caller was built with (first
                               layout: up to node_id); set by ZC_CONFIG_INITIALIZER */
    int timeout_ms;         /* bootstrap and wait timeout; 0: ZC_TIMEOUT */
    const char *node_id;    /* node identity; NULL: ZC_NODE_ID or the host */
    /* The per-communicator ZC_* variables of the same names (zc_env_vars(),
     * zcomm(7)), over the environment.  0 keeps the variable (or its
     * default); ZC_CONFIG_ZERO sets 0 where the variable takes 0; any other
     * value must lie in the variable's range, else ZC_ERR_INVALID_ARG
     * naming the field.  The ones marked (*) must be the same on every
     * rank: creation fails with ZC_ERR_MISMATCH on every rank otherwise. */
    int64_t routed_min_bytes;      /* ZC_ROUTED_MIN_BYTES (*) */
    int64_t routed_chunk;          /* ZC_ROUTED_CHUNK (*) */
    int64_t alltoallv_split_bytes; /* ZC_ALLTOALLV_SPLIT_BYTES (*) */
    int alltoallv_check;           /* ZC_ALLTOALLV_CHECK: 1, or ZC_CONFIG_ZERO: data does
                                      not wait for the agreement (*) */
    int alltoallv_rows_max;        /* ZC_ALLTOALLV_ROWS_MAX (*) */
    int alltoallv_window;          /* ZC_ALLTOALLV_WINDOW */
    int ring_attn_check;           /* ZC_RING_ATTN_CHECK: 1, or ZC_CONFIG_ZERO to skip (*) */
    int ring_attn_slice_mflop;     /* ZC_RING_ATTN_SLICE_MFLOP */
    int ring_attn_bwd_order;       /* ZC_RING_ATTN_BWD_ORDER: ZC_BWD_ORDER_FORWARD or
                                      ZC_BWD_ORDER_REVERSE (*) */
    int wait_spin_us;              /* ZC_WAIT_SPIN_US */
    int64_t host_split_bytes;      /* ZC_HOST_SPLIT_BYTES, or ZC_CONFIG_ZERO: never split (*) */
} zc_config_t;

/* zc_config_t: a setting of 0 where 0 means "not set". */
#define ZC_CONFIG_ZERO (-1)
/* zc_config_t.ring_attn_bwd_order */
#define ZC_BWD_ORDER_FORWARD 1
#define ZC_BWD_ORDER_REVERSE 2

#define ZC_CONFIG_INITIALIZER { sizeof(zc_config_t), 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Create an id on one rank (it also starts the bootstrap root in this
 * process); pass it to every rank by any means. */
ZC_API zc_status_t zc_get_unique_id(zc_unique_id_t *id);
ZC_API zc_status_t zc_comm_init_rank(zc_comm_h *comm, int nranks, const zc_unique_id_t *id,
                                     int rank, const zc_config_t *config);
ZC_API zc_status_t zc_comm_init_oob(zc_comm_h *comm, const zc_oob_t *oob,
                                    const zc_config_t *config);
/* From ZC_RANK/ZC_SIZE/ZC_MASTER_ADDR..., mpirun, srun, PMI or torchrun. */
ZC_API zc_status_t zc_comm_init_env(zc_comm_h *comm, const zc_config_t *config);
ZC_API void zc_comm_destroy(zc_comm_h comm);

ZC_API zc_status_t zc_comm_rank(zc_comm_h comm, int *rank);
ZC_API zc_status_t zc_comm_size(zc_comm_h comm, int *size);
ZC_API zc_status_t zc_comm_node(zc_comm_h comm, int *node);
ZC_API zc_status_t zc_comm_node_count(zc_comm_h comm, int *nnodes);
ZC_API zc_status_t zc_comm_local_rank(zc_comm_h comm, int *local_rank);
ZC_API zc_status_t zc_comm_local_size(zc_comm_h comm, int *local_size);
/* Node index of another rank (nodes are numbered by their lowest rank). */
ZC_API zc_status_t zc_comm_rank_node(zc_comm_h comm, int rank, int *node);
/* Collective: returns once every rank has entered it. */
ZC_API zc_status_t zc_barrier(zc_comm_h comm);

/* ------------------------------------------------------------------------
 * Point-to-point (nonblocking; complete with zc_test or zc_wait)
 * ------------------------------------------------------------------------ */

typedef struct zc_request *zc_request_h;

/* Messages between a pair of ranks match in the order they were posted.
 * The receiver's count must equal the sender's: a different size completes
 * the receive with ZC_ERR_MISMATCH. */
ZC_API zc_status_t zc_send(const void *buf, int64_t count, zc_datatype_t dtype,
                           zc_memtype_t memtype, int peer, zc_comm_h comm,
                           zc_request_h *request);
ZC_API zc_status_t zc_recv(void *buf, int64_t count, zc_datatype_t dtype,
                           zc_memtype_t memtype, int peer, zc_comm_h comm,
                           zc_request_h *request);
/* ZC_INPROGRESS while running; otherwise the request's final status, and
 * *request is released and set to NULL. */
ZC_API zc_status_t zc_test(zc_request_h *request);
/* Blocks (without spinning) until done or the comm's timeout; releases. */
ZC_API zc_status_t zc_wait(zc_request_h *request);
/* Blocking exchange: send to `dst` and receive from `src` at once. */
ZC_API zc_status_t zc_sendrecv(const void *sendbuf, int64_t sendcount, int dst,
                               void *recvbuf, int64_t recvcount, int src,
                               zc_datatype_t dtype, zc_memtype_t memtype, zc_comm_h comm);

/* Host memory that moves faster between the ranks of a node: from the
 * huge page size (2 MiB on x86-64) up, aligned to it and backed by
 * transparent huge pages where the kernel has them (ZC_HOST_HUGE_PAGES=0:
 * plain), so that a shared-memory copy pins 512 times fewer pages; smaller
 * sizes are 64-byte aligned.  Any host buffer works with every call; this
 * one is faster as a send buffer.  Unlike other calls, a failure sets
 * *ptr to NULL.  Release it with zc_host_free only; zc_host_free(NULL)
 * does nothing. */
ZC_API zc_status_t zc_host_alloc(size_t bytes, void **ptr);
ZC_API void zc_host_free(void *ptr);

/* ---- topology (topology/) ---------------------------------------------- */

/* GPUs, NICs and the PCIe path between them, from hwloc (the live machine or
 * an hwloc XML export), libibverbs when it works, or an NCCL topology XML.
 * GPUs are listed in PCI bus id order (CUDA device order when CUDA sees
 * them), NICs by name and port; NICs whose port is not ACTIVE and NICs that
 * ZC_IB_HCA excludes are not listed. */
typedef struct zc_topo *zc_topo_h;

/* Path classes, nearest first, as NCCL and `nvidia-smi topo -m` name them. */
typedef enum {
    ZC_PATH_PIX  = 0, /* at most one PCIe bridge on each side of a common switch */
    ZC_PATH_PXB  = 1, /* several PCIe bridges, without the host bridge */
    ZC_PATH_PHB  = 2, /* through a PCIe host bridge */
    ZC_PATH_NODE = 3, /* between the host bridges of one NUMA node */
    ZC_PATH_SYS  = 4  /* between NUMA nodes (SMP interconnect) */
} zc_path_t;

/* zc_topo_load flags. */
#define ZC_TOPO_ALL_PORTS (1u << 0) /* keep NIC ports that are not ACTIVE */

typedef enum {
    ZC_PORT_UNKNOWN = 0, /* no port state in the source: treated as usable */
    ZC_PORT_DOWN    = 1,
    ZC_PORT_INIT    = 2,
    ZC_PORT_ARMED   = 3,
    ZC_PORT_ACTIVE  = 4
} zc_port_state_t;

#define ZC_TOPO_PCI_LEN  16 /* "dddd:bb:dd.f" and its NUL */
#define ZC_TOPO_NAME_LEN 64

/* Filled by zc_topo_gpu_info: set size first (ZC_TOPO_GPU_INITIALIZER). */
typedef struct {
    size_t size;               /* in: bytes the caller has; out: bytes written */
    char pci[ZC_TOPO_PCI_LEN]; /* PCI bus id, lower case */
    int numa;                  /* NUMA node (OS index), -1 if unknown */
    double link_gbs;           /* PCIe link bandwidth in GB/s, 0 if unknown */
    int cuda_device;           /* CUDA device index, -1 if CUDA does not see it */
} zc_topo_gpu_t;

#define ZC_TOPO_GPU_INITIALIZER { sizeof(zc_topo_gpu_t), "", 0, 0.0, 0 }

/* Filled by zc_topo_nic_info: set size first (ZC_TOPO_NIC_INITIALIZER). */
typedef struct {
    size_t size;                   /* in: bytes the caller has; out: bytes written */
    char name[ZC_TOPO_NAME_LEN];   /* verbs device name ("mlx5_0") */
    int port;                      /* port number, from 1 */
    char pci[ZC_TOPO_PCI_LEN];     /* "" if the NIC has no PCI address */
    int numa;                      /* -1 if unknown */
    double link_gbs;               /* PCIe link bandwidth in GB/s, 0 if unknown */
    zc_port_state_t state;
    char link_layer[16];           /* "InfiniBand", "Ethernet" or "" if unknown */
    double rate_gbps;              /* port rate in Gbit/s, -1 if unknown */
    char netdev[ZC_TOPO_NAME_LEN]; /* network interface for UCX, "" if none */
} zc_topo_nic_t;

#define ZC_TOPO_NIC_INITIALIZER                                                         \
    { sizeof(zc_topo_nic_t), "", 0, "", 0, 0.0, ZC_PORT_UNKNOWN, "", 0.0, "" }

typedef struct {
    int nic;       /* index of the assigned NIC, -1 if there is no NIC */
    int rail;      /* rail of the GPU: its NIC's index, -1 if none */
    zc_path_t path; /* path class between the GPU and that NIC */
    int nic_gpus;  /* GPUs assigned to that NIC (more than 1: shared) */
} zc_topo_assignment_t;

/* Load the topology from `xml_path` (hwloc or NCCL format) or, when it is
 * NULL, from ZC_TOPO_FILE, HWLOC_XMLFILE or the live machine. */
ZC_API zc_status_t zc_topo_load(const char *xml_path, unsigned flags, zc_topo_h *topo);
ZC_API void zc_topo_destroy(zc_topo_h topo);
/* Where the topology came from, e.g. "hwloc-xml", "nccl-xml", "live". */
ZC_API zc_status_t zc_topo_source(zc_topo_h topo, const char **source);
ZC_API zc_status_t zc_topo_gpu_count(zc_topo_h topo, int *count);
ZC_API zc_status_t zc_topo_nic_count(zc_topo_h topo, int *count);
ZC_API zc_status_t zc_topo_gpu_info(zc_topo_h topo, int gpu, zc_topo_gpu_t *info);
ZC_API zc_status_t zc_topo_nic_info(zc_topo_h topo, int nic, zc_topo_nic_t *info);
ZC_API zc_status_t zc_topo_path(zc_topo_h topo, int gpu, int nic, zc_path_t *path);
/* The NIC each GPU uses: its nearest, balanced over equally near NICs. */
ZC_API zc_status_t zc_topo_assignment(zc_topo_h topo, int gpu, zc_topo_assignment_t *assignment);
/* "PIX", "PXB", "PHB", "NODE", "SYS"; "?" for any other value. */
ZC_API const char *zc_path_name(zc_path_t path);
/* "DOWN", "INIT", "ARMED", "ACTIVE" or "UNKNOWN". */
ZC_API const char *zc_port_state_name(zc_port_state_t state);

/* ---- planner (src/plan) ------------------------------------------------ */

/* A plan turns a batch of sequence lengths into the placement every other
 * part executes (zeppelin paper, section 3): zones, rings, zigzag chunks,
 * routing proxies and the remap.  Building one is pure and deterministic:
 * every rank that calls zc_plan_create() with the same arguments gets the
 * same plan, which is how the collectives that consume it
 * (zc_ring_attn_fwd/bwd and their stream forms, zc_remap_alltoallv_plan)
 * stay consistent without a communicator; zc_routed_sendrecv takes a
 * transfer list, not a plan.  Rank r lives on node r / gpus_per_node, device
 * r % gpus_per_node.  See zc_plan_create(3). */
typedef struct zc_plan *zc_plan_h;

typedef enum {
    ZC_ZONE_LOCAL = 0,   /* whole on one device, no communication */
    ZC_ZONE_INTRA = 1,   /* a ring inside one node */
    ZC_ZONE_INTER = 2    /* a ring over several nodes */
} zc_zone_t;

/* Plan flags (zc_plan_opts_t.flags and, as outcome, zc_plan_info_t.flags). */
#define ZC_PLAN_EVEN_SPLIT   (1u << 0) /* in: TE CP layout, every sequence on all ranks */
#define ZC_PLAN_CUT          (1u << 1) /* out: the fill step cut some sequence (ZC_PLAN_SEQ_*) */
#define ZC_PLAN_WINDOW       (1u << 2) /* in: opts' window_left/window_right are the attention
                                          mask the plan balances (default: causal) */

/* Why a sequence's ring is what it is (zc_plan_seq_t.cut); see
 * zc_plan_create(3), "The fill step". */
#define ZC_PLAN_SEQ_CUT_NODES   (1u << 0) /* fit whole in no node: cut over consecutive nodes */
#define ZC_PLAN_SEQ_CUT_DEVICES (1u << 1) /* fit whole (or on an even ring) in no device of a
                                            node: cut over consecutive devices */
#define ZC_PLAN_SEQ_UNEVEN      (1u << 2) /* a ring whose even split had no room: poured into
                                            the nodes (z2) or devices (z1) with most room */

#define ZC_PLAN_MAX_RAILS 16   /* rails a communicator or a plan uses, at most */

typedef struct {
    size_t size;        /* sizeof(zc_plan_opts_t), for compatibility */
    double b_intra;     /* cost of moving one token inside a node (inverse bandwidth) */
    double b_inter;     /* cost of moving one token between nodes; >= b_intra */
    unsigned flags;     /* ZC_PLAN_EVEN_SPLIT, ZC_PLAN_WINDOW */
    /* Newer than the first layout (size 32; then 40, now 48): a caller
     * built against an older one passes its size and gets the defaults of
     * the fields past it. */
    int rails;          /* NIC rails of a node that routed hops split over, 1..ZC_PLAN_MAX_RAILS:
                           zc_comm_rail_count of the communicator that runs the plan, or the
                           cluster's nics_per_node for zc_plan_cost; 0: one rail per GPU
                           (gpus_per_node, at most ZC_PLAN_MAX_RAILS) */
    int reserved;       /* 0 */
    /* The attention mask the plan balances, with ZC_PLAN_WINDOW in flags
     * (else both 0: causal), as zc_attn_args_t's window fields: (-1, -1)
     * full, (-1, 0) causal, (w - 1, 0) a sliding window of w keys.  It
     * prices every sequence by its visible (query, key) pairs and picks
     * each ring's layout (zc_plan_ring_layout); zc_plan_create(3), "Masks". */
    int window_left;
    int window_right;
} zc_plan_opts_t;

/* Token costs in the paper's 10:1 ratio; only their ratio changes a plan. */
#define ZC_PLAN_OPTS_INITIALIZER { sizeof(zc_plan_opts_t), 1.0, 10.0, 0u, 0, 0, 0, 0 }

/* Filled by zc_plan_info: set size first (ZC_PLAN_INFO_INITIALIZER). */
typedef struct {
    size_t size;            /* in: bytes the caller has; out: bytes written */
    int nnodes;
    int gpus_per_node;
    int nranks;             /* nnodes * gpus_per_node */
    int64_t capacity;       /* L, tokens per device */
    size_t nseqs;
    int nrings;
    int64_t total_tokens;
    int64_t s1;             /* final inter-node threshold of Alg. 1 (0: even split) */
    unsigned flags;         /* ZC_PLAN_CUT, ZC_PLAN_EVEN_SPLIT, ZC_PLAN_WINDOW */
    double remap_objective; /* largest per-rank transfer cost of the remap */
    /* Newer than the first layout (which ended at remap_objective): */
    int window_left;        /* the mask the plan balances: (-1, 0) for causal */
    int window_right;
} zc_plan_info_t;

#define ZC_PLAN_INFO_INITIALIZER                                                        \
    { sizeof(zc_plan_info_t), 0, 0, 0, 0, 0, 0, 0, 0, 0u, 0.0, 0, 0 }

typedef struct {
    int64_t length;
    zc_zone_t zone;
    int ring;               /* ring id, -1 for a local sequence */
    int node;               /* node holding it (first node of an inter ring) */
    int rank;               /* local: its rank; ring: the rank at ring position 0 */
    unsigned cut;           /* ZC_PLAN_SEQ_* bits, 0 for a sequence placed whole or on an
                               even ring */
} zc_plan_seq_t;

typedef struct {
    size_t seq;             /* each ring carries exactly one sequence */
    zc_zone_t zone;
    int nranks;             /* G */
    int nnodes;             /* nodes the ring spans */
    const int *ranks;       /* ring order: position i sends to i+1 (mod G) */
    const int64_t *tokens;  /* tokens of position i (its chunks, zc_plan_ring_layout), equal
                               within a token on an even ring, any split on a cut one */
} zc_plan_ring_t;

/* How a ring lays its sequence over its positions (zc_plan_ring_layout). */
typedef enum {
    ZC_RING_LAYOUT_ZIGZAG = 0,     /* 2G chunks: position i holds chunks i and 2G-1-i, the
                                      first ceil(tokens[i] / 2) and the rest */
    ZC_RING_LAYOUT_CONTIGUOUS = 1  /* G chunks: position i holds chunk i, tokens[i] long */
} zc_ring_layout_t;

typedef struct {
    size_t seq;
    int64_t begin, end;     /* token range [begin, end) of the sequence */
    zc_zone_t zone;
    int ring;               /* -1 for a local sequence */
    int chunk;              /* chunk index: [0, 2G) zigzag, [0, G) contiguous; -1 local */
} zc_plan_piece_t;

typedef struct {
    int64_t tokens;         /* tokens in the attention layout (A) */
    int64_t linear_tokens;  /* tokens in the balanced linear layout (B) */
    double attn_pairs;      /* (query, key) pairs this rank computes under the plan's mask */
    int node;
    int64_t s0;             /* final intra-node threshold of its node (Alg. 2) */
} zc_plan_rank_t;

/* One inter-node hop of a ring, with its routes (section 3.3) as
 * zc_routed_sendrecv and the ring attention engine run them: the hop's
 * payload of n elements is cut into one slice per rail (zc_plan_slice(n,
 * x_send, k): the remainder one element each to the first rails), and
 * slice k goes src_rank -> send_proxies[k] (inside the node; no move when
 * they are the same rank) -> recv_proxies[k] (over rail k) -> dst_rank
 * (inside the node; no move when the same).  The proxies are the ones the
 * runtime picks (the rank itself when it sits on rail k, else the node's
 * ranks on rail k taken in turn by src_rank + k) for a communicator that
 * places rank r on node r / gpus_per_node and its GPU g = r % gpus_per_node
 * on rail g * rails / gpus_per_node (zc_plan_opts_t.rails), the cost
 * model's NIC sharing.  zc_plan_slice(3) says where a run can differ. */
typedef struct {
    int src_rank, dst_rank;
    int src_node, dst_node;
    int x_send;             /* slices: the plan's rails (zc_plan_opts_t.rails) */
    int x_recv;             /* the same: each slice arrives on the rail it left on */
    const int *send_proxies; /* [x_send]: rank of src_node that sends slice k on rail k */
    const int *recv_proxies; /* [x_recv]: rank of dst_node that receives it */
} zc_plan_hop_t;

typedef struct {
    int from, to;
    int64_t tokens;
} zc_plan_transfer_t;

typedef enum {
    ZC_REMAP_FORWARD = 0,   /* attention layout -> balanced linear layout */
    ZC_REMAP_INVERSE = 1    /* and back */
} zc_remap_dir_t;

/* The layouts of a plan's tokens, for moves between any two of them
 * (zc_plan_move_runs, zc_remap_alltoallv_layouts).  T tokens in the batch's
 * order (its sequences one after another) over R ranks. */
typedef enum {
    ZC_LAYOUT_LOADER    = 0, /* the batch in order, split evenly: rank r holds tokens
                              * [floor(r T / R), floor((r + 1) T / R)), what a data
                              * loader gives each rank */
    ZC_LAYOUT_ATTENTION = 1, /* zc_plan_rank_pieces() in buffer order */
    ZC_LAYOUT_LINEAR    = 2  /* zc_plan_rank_linear_pieces() in buffer order */
} zc_layout_t;

/* Tokens that a move between two layouts takes from one rank to another as
 * one piece: `count` tokens, consecutive at token `offset` of this rank's
 * buffer and at token `peer_offset` of rank `peer`'s. */
typedef struct {
    int64_t offset;
    int64_t peer_offset;
    int64_t count;
    int peer;
} zc_plan_run_t;

ZC_API zc_status_t zc_plan_create(int nnodes, int gpus_per_node, int64_t capacity,
                                  const int64_t *lengths, size_t count,
                                  const zc_plan_opts_t *opts, zc_plan_h *plan);
ZC_API void zc_plan_destroy(zc_plan_h plan);
/* Every token placed exactly once, no device over capacity, rings and
 * remap consistent: ZC_OK, else ZC_ERR_INTERNAL with the first violation. */
ZC_API zc_status_t zc_plan_check(zc_plan_h plan);

ZC_API zc_status_t zc_plan_info(zc_plan_h plan, zc_plan_info_t *info);
ZC_API zc_status_t zc_plan_seq(zc_plan_h plan, size_t seq, zc_plan_seq_t *out);
ZC_API zc_status_t zc_plan_ring(zc_plan_h plan, int ring, zc_plan_ring_t *out);
/* The ring's layout: zigzag for causal masks and even splits, the one that
 * balances its positions' visible pairs otherwise (zc_plan_create(3),
 * "Masks"). */
ZC_API zc_status_t zc_plan_ring_layout(zc_plan_h plan, int ring, zc_ring_layout_t *layout);
ZC_API zc_status_t zc_plan_rank(zc_plan_h plan, int rank, zc_plan_rank_t *out);
/* The rank's pieces in buffer order: inter, then intra, then local rings,
 * by ring id, chunks ascending.  The array lives as long as the plan. */
ZC_API zc_status_t zc_plan_rank_pieces(zc_plan_h plan, int rank,
                                       const zc_plan_piece_t **pieces, size_t *count);
/* The same for the balanced linear layout (after the forward remap). */
ZC_API zc_status_t zc_plan_rank_linear_pieces(zc_plan_h plan, int rank,
                                              const zc_plan_piece_t **pieces, size_t *count);
ZC_API zc_status_t zc_plan_ring_hops(zc_plan_h plan, int ring,
                                     const zc_plan_hop_t **hops, size_t *count);
/* Slice k of n elements routed over x rails, the runtime's rule: n / x
 * each, the remainder n % x one element each to slices 0..n%x-1. */
ZC_API zc_status_t zc_plan_slice(int64_t n, int x, int k, int64_t *offset, int64_t *length);
/* The rate of each of the plan's rails, Gbit/s (n: its rails; NULL and 0:
 * none), which its routed hops are cut in proportion to (zc_plan_hop_slice)
 * and zc_plan_cost slices them by: as zc_comm_rail_rates reports a run's,
 * the plan's slices are that run's.  A plan starts without: equal slices. */
ZC_API zc_status_t zc_plan_set_rail_rates(zc_plan_h plan, const double *gbps, int n);
/* Slice k of n elements of one of the plan's routed hops: in proportion to
 * its rail rates (the remainder one element each to the largest fractional
 * shares), zc_plan_slice(n, rails, k) without. */
ZC_API zc_status_t zc_plan_hop_slice(zc_plan_h plan, int64_t n, int k, int64_t *offset,
                                     int64_t *length);
/* The remap's transfer matrix M as its nonzero entries, ordered by (from, to). */
ZC_API zc_status_t zc_plan_remap_transfers(zc_plan_h plan, const zc_plan_transfer_t **transfers,
                                           size_t *count);
/* alltoallv arguments of `rank` for the remap; each array has nranks
 * entries; the self block (tokens that stay) is included at offset 0. */
ZC_API zc_status_t zc_plan_remap_counts(zc_plan_h plan, int rank, zc_remap_dir_t dir,
                                        int64_t *sendcounts, int64_t *sdispls,
                                        int64_t *recvcounts, int64_t *rdispls);
/* The runs of `rank` for the move of every token from layout `from` to
 * layout `to`: send[] what it sends (offset in its `from` buffer,
 * peer_offset in the peer's `to` buffer), by peer, each peer's in the order
 * of the peer's buffer; recv[] what it receives (offset in its `to`
 * buffer), by peer, in the order of its own buffer.  Both include the runs
 * to itself (peer == rank), and the k-th run rank i sends j is the k-th j
 * receives from i.  Runs adjacent at both ends are one run.  On entry
 * *nsend (*nrecv) is the room in send (recv); NULL arrays only ask for the
 * counts.  O(the rank's pieces + ranks); see zc_plan_move_runs(3). */
ZC_API zc_status_t zc_plan_move_runs(zc_plan_h plan, int rank, zc_layout_t from,
                                     zc_layout_t to, zc_plan_run_t *send, size_t *nsend,
                                     zc_plan_run_t *recv, size_t *nrecv);

/* Cost model (zc_plan_cost(3)): a cluster and a model, priced per iteration.
 * zc_cluster_load fills a cluster (set size first: ZC_CLUSTER_INITIALIZER),
 * zc_plan_cost reads one (size from the first layout up). */
typedef struct {
    size_t size;            /* sizeof(zc_cluster_t); zc_cluster_load: bytes written */
    char name[32];
    int gpus_per_node;
    int nics_per_node;      /* NICs; GPU g uses NIC g * nics / gpus */
    double nic_gbps;        /* rate of one NIC, Gbit/s, one direction */
    double intra_gbytes;    /* GPU-to-GPU bandwidth inside a node, GB/s */
    double attn_tflops;     /* achieved attention throughput per device */
    double linear_tflops;   /* achieved dense (GEMM) throughput per device */
    int layers, hidden, heads, head_dim, kv_heads, ffn_hidden;
    int bytes_per_elem;     /* activations: 2 for bf16 */
    /* Newer than the first layout: */
    double nic_rates[ZC_PLAN_MAX_RAILS]; /* Gbit/s of NIC k where they differ (cluster file
                                            key nic_rates, a list); 0: nic_gbps */
} zc_cluster_t;

#define ZC_CLUSTER_INITIALIZER                                                          \
    { sizeof(zc_cluster_t), "", 0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0, { 0.0 } }

typedef enum {
    ZC_COST_TE_CP = 0,      /* every sequence evenly split over one global ring */
    ZC_COST_LLAMA_CP,       /* even split, KV all-gathered before attention */
    ZC_COST_HYBRID_DP,      /* ByteScale-style: DP for short, ring CP for long */
    ZC_COST_ROUTING,        /* TE CP layout with routed inter-node hops (Eq. (1)) */
    ZC_COST_PARTITION,      /* + hierarchical partitioner and zone engine */
    ZC_COST_ZEPPELIN,       /* + remap for the linear modules */
    ZC_COST_METHOD_COUNT
} zc_cost_method_t;

/* Filled by zc_plan_cost: set size first (ZC_COST_INITIALIZER). */
typedef struct {
    size_t size;            /* in: bytes the caller has; out: bytes written */
    double attention;       /* seconds, slowest device, fwd + bwd, all layers */
    double linear;          /* seconds, slowest device */
    double remap;           /* seconds, forward + inverse, fwd + bwd, all layers */
    double total;           /* attention + linear + remap */
    double bytes_intra;     /* bytes moved inside nodes per iteration */
    double bytes_inter;     /* bytes moved between nodes per iteration */
} zc_cost_t;

#define ZC_COST_INITIALIZER { sizeof(zc_cost_t), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 }

/* Read a cluster file ("key value" lines, # comments; zc_plan(1)). */
ZC_API zc_status_t zc_cluster_load(const char *path, zc_cluster_t *cluster);
ZC_API const char *zc_cost_method_name(zc_cost_method_t method);
/* Price the plan's batch with `method` on `cluster` (its gpus_per_node
 * must match the plan's, its nics_per_node the plan's rails): routed hops
 * are priced over the routes zc_plan_ring_hops names. */
ZC_API zc_status_t zc_plan_cost(zc_plan_h plan, const zc_cluster_t *cluster,
                                zc_cost_method_t method, zc_cost_t *cost);

/* ---- collectives (src/coll/routed, src/coll/alltoallv) ------------------- */

/* Rails: the NICs that carry traffic between nodes, rail k of every node
 * on one network.  0 when the communicator has one node or the nodes have
 * no NICs in their topology (then UCX picks the devices). */
ZC_API zc_status_t zc_comm_rail_count(zc_comm_h comm, int *nrails);
/* Rail `rank` sends on by default (its GPU's nearest NIC), -1 if none. */
ZC_API zc_status_t zc_comm_rank_rail(zc_comm_h comm, int rank, int *rail);
/* Bytes of data this rank sent and received on `rail` since the
 * communicator was created (rail -1: inside the node); a chunk sent again
 * after its rail went out counts on each rail it left on. */
ZC_API zc_status_t zc_comm_rail_bytes(zc_comm_h comm, int rail, uint64_t *sent,
                                      uint64_t *received);
/* The rate, Gbit/s, by which this rank's last routed transfer or ring
 * attention call cut its transfers between nodes into per-rail slices
 * (zc_routed_sendrecv(3), "Rails"): 0 for a rail that was out; before any,
 * the configured rates (ZC_RAIL_RATES or the ports', the lowest over the
 * nodes).  Given to zc_plan_set_rail_rates, the plan's slices are
 * the run's.  n: the rail count. */
ZC_API zc_status_t zc_comm_rail_rates(zc_comm_h comm, double *gbps, int n);
/* Pin the rates the next calls slice by (n: the rail count, each rate
 * positive), instead of measuring them; NULL and 0 measure again.  Local:
 * every rank must pin alike before its next collective, else that call
 * fails with ZC_ERR_MISMATCH on every rank before any data moves. */
ZC_API zc_status_t zc_comm_set_rail_rates(zc_comm_h comm, const double *gbps, int n);

/* One logical transfer of a routed call. */
typedef struct {
    int src;        /* sending rank */
    int dst;        /* receiving rank */
    int64_t count;  /* elements of the call's dtype */
} zc_transfer_t;

#define ZC_ROUTED_MAX_TRANSFERS 4096

/* Routed send/receive: every rank of `comm` calls it with the same list of
 * transfers; a rank is the src of at most one (its data in sendbuf) and the
 * dst of at most one (received into recvbuf).  A transfer between nodes of
 * at least ZC_ROUTED_MIN_BYTES is split over every rail: dispatched inside
 * the source node to one proxy rank per rail, sent over each rail's NIC
 * (rail-aligned), and combined inside the destination node, in
 * ZC_ROUTED_CHUNK pieces so the three steps overlap.  Smaller transfers and
 * transfers inside a node go direct.  Complete with zc_test or zc_wait. */
ZC_API zc_status_t zc_routed_sendrecv(const zc_transfer_t *transfers, int ntransfers,
                                      const void *sendbuf, void *recvbuf, zc_datatype_t dtype,
                                      zc_memtype_t memtype, zc_comm_h comm,
                                      zc_request_h *request);

/* Variable-count all-to-all (MPI_Alltoallv with 64-bit counts and
 * displacements, in elements of dtype; each array has one entry per rank
 * and may be reused once the call returns).  Every rank of `comm` calls it.
 * Before any data reaches a receive buffer the ranks agree on the counts:
 * if a sender's and its receiver's sizes for a block differ, no data moves
 * and every rank gets ZC_ERR_MISMATCH (the two ranks of the block name it).
 * Up to ZC_ALLTOALLV_ROWS_MAX ranks the agreement is one round of count rows
 * in the call's schedule, in which blocks up to 8 KiB travel too; beyond,
 * two rounds before the call returns.  ZC_ALLTOALLV_CHECK=0 lets the larger
 * blocks move without waiting for the verdict (the round of rows still
 * runs; beyond ZC_ALLTOALLV_ROWS_MAX there is no agreement).  Then
 * blocks move in the background: the self block as a copy, blocks inside a
 * node over shared memory, blocks between nodes of at least
 * ZC_ALLTOALLV_SPLIT_BYTES split over every rail.  Complete with zc_test or
 * zc_wait; see zc_remap_alltoallv(3). */
ZC_API zc_status_t zc_remap_alltoallv(const void *sendbuf, const int64_t *sendcounts,
                                      const int64_t *sdispls, void *recvbuf,
                                      const int64_t *recvcounts, const int64_t *rdispls,
                                      zc_datatype_t dtype, zc_memtype_t memtype, zc_comm_h comm,
                                      zc_request_h *request);
/* The remap of `plan` (its direction `dir`) for this rank: counts from
 * zc_plan_remap_counts() in tokens of `elems_per_token` elements (e.g. the
 * hidden size).  The plan's rank count must be the communicator's size
 * (else ZC_ERR_MISMATCH). */
ZC_API zc_status_t zc_remap_alltoallv_plan(zc_plan_h plan, zc_remap_dir_t dir,
                                           const void *sendbuf, void *recvbuf,
                                           int64_t elems_per_token, zc_datatype_t dtype,
                                           zc_memtype_t memtype, zc_comm_h comm,
                                           zc_request_h *request);
/* This rank's tokens of `plan` from layout `from` (sendbuf) to layout `to`
 * (recvbuf), tokens of `elems_per_token` elements, along the runs of
 * zc_plan_move_runs(): a run of at least 64 KiB goes from sendbuf straight
 * into recvbuf as a message of its own, the smaller runs between two ranks
 * travel packed in one message; no token is copied on its own.  Every rank
 * of `comm` calls it with the same plan, layouts and token size (checked
 * unless ZC_ALLTOALLV_CHECK=0: a difference is ZC_ERR_MISMATCH on every
 * rank, before any data moves).  Complete with zc_test or zc_wait; see
 * zc_remap_alltoallv_layouts(3). */
ZC_API zc_status_t zc_remap_alltoallv_layouts(zc_plan_h plan, zc_layout_t from, zc_layout_t to,
                                              const void *sendbuf, void *recvbuf,
                                              int64_t elems_per_token, zc_datatype_t dtype,
                                              zc_memtype_t memtype, zc_comm_h comm,
                                              zc_request_h *request);

/* Ring attention (zeppelin paper, section 3.2): causal attention of every
 * sequence of a plan's batch, each rank holding its pieces of q, k, v in
 * the plan's attention layout (zc_plan_rank_pieces() buffer order).  The
 * zone queues run inter-node, then intra-node, then local; in each ring the
 * KV block moves to the next rank while the current block computes, and in
 * the backward the dK/dV accumulators follow it (fp32) and come home after
 * one more hop.  Every rank of `comm` calls it with the same plan and
 * attention shape (checked unless ZC_RING_ATTN_CHECK=0: a disagreement is
 * ZC_ERR_MISMATCH on every rank); the call returns when this rank's
 * outputs are complete.  See zc_ring_attn_fwd(3). */
typedef enum {
    ZC_RING_ATTN_ZEPPELIN = 0, /* the plan's rings; inter-node hops routed over every rail */
    ZC_RING_ATTN_TE_CP    = 1, /* the plan's rings, every hop direct (TransformerEngine CP
                                * when the plan has ZC_PLAN_EVEN_SPLIT) */
    ZC_RING_ATTN_LLAMA_CP = 2  /* KV all-gathered in each ring, then local attention; the
                                * backward reduce-scatters dK/dV (LLaMA 3 CP) */
} zc_ring_attn_mode_t;

/* Where the time of one call went (args->stats): set size first
 * (ZC_RING_ATTN_STATS_INITIALIZER). */
typedef struct {
    size_t size;             /* in: bytes the caller has; out: bytes written */
    double total_seconds;
    double compute_seconds;  /* inside the attention kernels */
    double wait_seconds;     /* blocked on transfers that compute did not hide */
    uint64_t bytes_sent;     /* KV and dK/dV this rank sent (not what it forwarded as a proxy) */
    int64_t kernel_calls;    /* attention blocks issued: blocks_cudnn + blocks_native
                              * (+ blocks_table) */
    /* Where the blocks ran (the _stream forms: ZC_ATTN_BACKEND), and why a
     * block did not run on cuDNN; each native block counts in one native_*. */
    int64_t blocks_cudnn;
    int64_t blocks_native;   /* the native CUDA kernels, or the CPU kernels of the host forms */
    int64_t native_chosen;   /* ZC_ATTN_BACKEND=native, no cuDNN built in, or the host forms */
    int64_t native_dtype;    /* float32 tensors (cuDNN takes bfloat16 and float16) */
    int64_t native_head_dim; /* not a multiple of 8 up to 128 */
    int64_t native_shape;    /* a head count or block cuDNN's graphs do not express */
    int64_t native_no_engine;/* cuDNN has no engine for the block's graph (or this version) */
    int64_t native_failed;   /* cuDNN failed when enqueued: the block ran natively instead */
    /* args->kernels: calls its table ran, and calls it refused (ZC_ERR_UNSUPPORTED), which
     * then ran on libzcomm's kernels and count in blocks_cudnn or blocks_native too */
    int64_t blocks_table;
    int64_t table_refused;
    /* Newer: with args->kernels, the banded blocks of a window (some row's
     * window cuts its keys on the left), which flash-attention's causal or
     * full contract cannot express: run on libzcomm's kernels, counted in
     * blocks_native too */
    int64_t table_banded;
} zc_ring_attn_stats_t;

#define ZC_RING_ATTN_STATS_INITIALIZER                                        \
    { sizeof(zc_ring_attn_stats_t), 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Bring your own attention kernel (zc_attn_kernels(3)): a ring attention
 * call decides which blocks to compute, moves KV and dK/dV, merges the
 * partial outputs (stable log-sum-exp, fp32) and accumulates dK/dV in fp32
 * across hops; a kernel table computes the blocks.  Each call of a table
 * is flash-attention's varlen form: `batch` segments packed one after the
 * other, segment b owning query rows [cu_seqlens_q[b], cu_seqlens_q[b+1])
 * and key rows [cu_seqlens_kv[b], cu_seqlens_kv[b+1]), at least one of
 * each, its queries attending only to its keys:
 *  - causal 0: every query sees every key of its segment;
 *  - causal 1: the segment has as many keys as queries and query i sees
 *    keys 0..i (top-left, which with equal lengths is also bottom-right);
 *    with ZC_ATTN_KERNELS_BOTTOM_RIGHT a segment may have more keys than
 *    queries, query i seeing keys 0..i + (keys - queries) (flash-attention's
 *    causal since 2.1); without it the engine splits such a block into a
 *    causal=0 call and a causal=1 call.
 * Query head h reads key/value head h / (num_heads_q / num_heads_kv).
 * Tensors are in the ring call's memory (host forms: host; _stream forms:
 * device, the work enqueued on `stream`); cu_seqlens_q/kv too, and their
 * host_ copies are always host memory.  A call writes every row it is
 * given.  Called on the thread that called zc_ring_attn_*, while the call
 * runs, one call at a time. */
typedef struct {
    size_t size;                  /* sizeof(zc_attn_varlen_t) of the library: the fields
                                   * past it are absent */
    int batch;                    /* segments, at least 1 */
    int num_heads_q;
    int num_heads_kv;             /* divides num_heads_q */
    int head_dim;
    int causal;                   /* 0 or 1, see above */
    float scale;                  /* softmax scale */
    zc_datatype_t dtype;          /* q, k, v, dout and the backward's out */
    zc_datatype_t out_dtype;      /* what the call writes: dtype, or ZC_FLOAT32 with
                                   * ZC_ATTN_KERNELS_FLOAT32_OUT */
    zc_memtype_t memtype;
    void *stream;                 /* _stream forms: the caller's cudaStream_t; else NULL */
    const int32_t *cu_seqlens_q;  /* [batch + 1] from 0, in memtype's memory */
    const int32_t *cu_seqlens_kv;
    const int32_t *host_cu_seqlens_q;  /* the same in host memory */
    const int32_t *host_cu_seqlens_kv;
    int max_seqlen_q;             /* the longest segment's queries, keys */
    int max_seqlen_kv;
    int64_t total_q;              /* cu_seqlens_q[batch], cu_seqlens_kv[batch] */
    int64_t total_kv;
    const void *q;                /* [total_q, num_heads_q, head_dim] */
    const void *k;                /* [total_kv, num_heads_kv, head_dim] */
    const void *v;
    void *out;                    /* fwd: written (out_dtype); bwd: the final output of
                                   * these rows over all their keys (dtype), read */
    float *lse;                   /* [num_heads_q, total_q], natural log (flash-attention's
                                   * layout); fwd: written; bwd: the final lse, read */
    const void *dout;             /* bwd: like q */
    void *dq;                     /* bwd: written (out_dtype), like q */
    void *dk;                     /* bwd: written (out_dtype), like k */
    void *dv;
} zc_attn_varlen_t;

/* zc_attn_kernels_t.flags */
#define ZC_ATTN_KERNELS_BOTTOM_RIGHT (1u << 0) /* causal segments may have more keys */
#define ZC_ATTN_KERNELS_FLOAT32_OUT  (1u << 1) /* out, dq, dk, dv written in float32 */

/* A kernel table.  fwd writes out and lse of the call's rows; bwd writes
 * dq, dk, dv of its rows given dout, q, k, v and the final out and lse
 * (rowsum(dout * out) is the kernel's to take).  Either returns ZC_OK,
 * ZC_ERR_UNSUPPORTED for a call it does not take (libzcomm's kernels then
 * compute it: stats table_refused), or an error, which fails the ring call
 * on every rank with that status (the call still moves all its data, so
 * nobody waits).  Every rank passes a table or none.  A NULL fwd or bwd is
 * refused when that pass is called.  Start from ZC_ATTN_KERNELS_INITIALIZER. */
typedef struct {
    size_t size;                  /* sizeof(zc_attn_kernels_t); ZC_ATTN_KERNELS_INITIALIZER */
    void *ctx;                    /* passed to fwd and bwd */
    zc_status_t (*fwd)(void *ctx, const zc_attn_varlen_t *call);
    zc_status_t (*bwd)(void *ctx, const zc_attn_varlen_t *call);
    unsigned flags;               /* ZC_ATTN_KERNELS_* */
} zc_attn_kernels_t;

#define ZC_ATTN_KERNELS_INITIALIZER { sizeof(zc_attn_kernels_t), NULL, NULL, NULL, 0u }

typedef struct {
    size_t size;             /* sizeof(zc_ring_attn_args_t); ZC_RING_ATTN_ARGS_INITIALIZER */
    zc_ring_attn_mode_t mode;
    int num_heads_q;
    int num_heads_kv;        /* divides num_heads_q (GQA, MQA) */
    int head_dim;            /* 1 .. 256 */
    float scale;             /* softmax scale; 0: 1 / sqrt(head_dim) */
    zc_datatype_t dtype;     /* every tensor below but lse: ZC_FLOAT32 or ZC_BFLOAT16
                              * (the _stream forms also ZC_FLOAT16) */
    zc_memtype_t memtype;    /* ZC_MEM_HOST; ZC_MEM_CUDA for the _stream forms */
    int64_t tokens;          /* rows each buffer holds: at least the plan's tokens here */
    const void *q;           /* [tokens, num_heads_q, head_dim] */
    const void *k;           /* [tokens, num_heads_kv, head_dim] */
    const void *v;
    void *out;               /* like q; fwd: written, bwd: read */
    float *lse;              /* [tokens, num_heads_q]; fwd: written, bwd: read */
    const void *dout;        /* bwd: like q */
    void *dq;                /* bwd: written, like q */
    void *dk;                /* bwd: written, like k */
    void *dv;
    zc_ring_attn_stats_t *stats; /* optional, written on success (its size set) */
    /* Newer than the first layout (which ended at stats): the mask, causal
     * unless flags has ZC_ATTN_WINDOW; with it the window alone ((-1, -1)
     * full), as zc_attn_args_t's window fields, whatever mask the plan was
     * balanced for.  Both forms compute every mask (the _stream forms
     * without skipping hops: zc_ring_attn_fwd(3), "Masks"). */
    unsigned flags;          /* ZC_ATTN_WINDOW */
    int window_left;
    int window_right;
    const zc_attn_kernels_t *kernels; /* optional: the blocks' kernels (zc_attn_kernels(3)) */
} zc_ring_attn_args_t;

#define ZC_RING_ATTN_ARGS_INITIALIZER                                                       \
    { sizeof(zc_ring_attn_args_t), ZC_RING_ATTN_ZEPPELIN, 0, 0, 0, 0.0f, ZC_FLOAT32,         \
      ZC_MEM_HOST, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0u, 0, 0, NULL }

/* Forward: out and lse of this rank's queries over every key of their
 * sequence.  out is accumulated in fp32 across the ring and rounded once. */
ZC_API zc_status_t zc_ring_attn_fwd(zc_comm_h comm, zc_plan_h plan,
                                    const zc_ring_attn_args_t *args);
/* Backward: dq, dk, dv from dout and the forward's out and lse. */
ZC_API zc_status_t zc_ring_attn_bwd(zc_comm_h comm, zc_plan_h plan,
                                    const zc_ring_attn_args_t *args);

/* ---- GPU path (src/core/device_nccl.c, src/core/p2p_stream.c, kernels/) --- */

/* Stream-ordered calls on device memory.  `stream` is a cudaStream_t (NULL:
 * the legacy default stream) of the CUDA device current in the calling
 * thread.  A call checks its arguments, enqueues its work on the stream and
 * returns; the data are ready when the stream reaches that point.  Host
 * arrays among the arguments (counts, cu_seqlens...) may be reused as soon
 * as the call returns.
 *
 * Transfers run on NCCL.  Its communicator is made from `comm` (the
 * ncclUniqueId travels over the host path) by zc_comm_cuda_init or by the
 * first transfer call, so that the first of these calls is collective:
 * every rank of `comm` must make one, on the device it will use.  Without
 * CUDA, without NCCL or without a device, every call returns
 * ZC_ERR_UNSUPPORTED (the detail names the memtype); host memory passed
 * where device memory is expected is ZC_ERR_INVALID_ARG where CUDA can
 * tell.  See zc_sendrecv_stream(3). */

/* Collective: make the NCCL communicator of `comm` now. */
ZC_API zc_status_t zc_comm_cuda_init(zc_comm_h comm);
/* Wait until `stream` is done, but never past the communicator's timeout:
 * a failed peer, an NCCL error or the timeout aborts the NCCL communicator
 * and returns the error (later device transfers on `comm` return it too). */
ZC_API zc_status_t zc_stream_synchronize(zc_comm_h comm, void *stream);

/* Point-to-point on device memory; as in NCCL, a send waits on the stream
 * for its receive, so two ranks exchanging data use zc_sendrecv_stream
 * (one group: no deadlock).  Counts must be equal on both sides. */
ZC_API zc_status_t zc_send_stream(const void *buf, int64_t count, zc_datatype_t dtype, int peer,
                                  zc_comm_h comm, void *stream);
ZC_API zc_status_t zc_recv_stream(void *buf, int64_t count, zc_datatype_t dtype, int peer,
                                  zc_comm_h comm, void *stream);
/* dst or src -1: that side is empty (its count must be 0). */
ZC_API zc_status_t zc_sendrecv_stream(const void *sendbuf, int64_t sendcount, int dst,
                                      void *recvbuf, int64_t recvcount, int src,
                                      zc_datatype_t dtype, zc_comm_h comm, void *stream);

/* zc_routed_sendrecv on device memory: the same transfer list, routes and
 * slices (ZC_ROUTED_MIN_BYTES, ZC_ROUTED_CHUNK); dispatch, wire and
 * combine are NCCL sends and receives pipelined chunk by chunk, and NCCL
 * picks the NIC of each wire hop. */
ZC_API zc_status_t zc_routed_sendrecv_stream(const zc_transfer_t *transfers, int ntransfers,
                                             const void *sendbuf, void *recvbuf,
                                             zc_datatype_t dtype, zc_comm_h comm,
                                             void *stream);
/* zc_remap_alltoallv on device memory: one group of sends and receives
 * (zero counts skipped), the self block as a device copy.  With
 * ZC_ALLTOALLV_CHECK=1 (default) the ranks first agree on the block sizes
 * over the host path: on a disagreement nothing is enqueued and every rank
 * gets ZC_ERR_MISMATCH. */
ZC_API zc_status_t zc_remap_alltoallv_stream(const void *sendbuf, const int64_t *sendcounts,
                                             const int64_t *sdispls, void *recvbuf,
                                             const int64_t *recvcounts, const int64_t *rdispls,
                                             zc_datatype_t dtype, zc_comm_h comm, void *stream);
/* zc_remap_alltoallv_layouts on device memory: the runs of at least 64 KiB
 * as sends and receives of their own in one group, the smaller ones packed
 * and unpacked by device copies, the runs to itself as device copies; no
 * kernel and no wait on the stream.  The agreement as the host form's. */
ZC_API zc_status_t zc_remap_alltoallv_layouts_stream(zc_plan_h plan, zc_layout_t from,
                                                     zc_layout_t to, const void *sendbuf,
                                                     void *recvbuf, int64_t elems_per_token,
                                                     zc_datatype_t dtype, zc_comm_h comm,
                                                     void *stream);

/* zc_ring_attn_fwd and zc_ring_attn_bwd on device memory (args->memtype
 * ZC_MEM_CUDA; dtype float32, bfloat16 or float16): the same plans, modes,
 * layouts, checks and results, enqueued on `stream`, which computes.  The
 * call's transfers (NCCL, routed over every rail in Zeppelin mode) run on
 * a stream of its own, ordered against `stream` by events, so that the KV
 * of the next ring step moves while the current one computes.  Every rank
 * of `comm` calls it, every rank the same form (host or stream: checked);
 * the host part (the agreement on plan and shape) is done when it returns,
 * the outputs are ready when `stream` reaches that point.  args->stats, when
 * given, counts kernel calls and bytes; its times are those of enqueueing.
 * See zc_ring_attn_fwd_stream(3). */
ZC_API zc_status_t zc_ring_attn_fwd_stream(zc_comm_h comm, zc_plan_h plan,
                                           const zc_ring_attn_args_t *args, void *stream);
ZC_API zc_status_t zc_ring_attn_bwd_stream(zc_comm_h comm, zc_plan_h plan,
                                           const zc_ring_attn_args_t *args, void *stream);

/* Zigzag layout of a ring of `ring_size` ranks (zc_plan(3)): each sequence
 * is cut into 2 * ring_size chunks (the first n % (2 * ring_size) one token
 * longer) and ring position `position` holds chunks position and
 * 2 * ring_size - 1 - position.  `seq` holds `batch` whole sequences packed
 * one after the other (host cu_seqlens[batch + 1] in tokens of
 * `token_bytes`); `share` holds this position's two chunks of every
 * sequence, sequence after sequence.  Pack: seq -> share; unpack: share ->
 * seq (the other positions' chunks of seq are left alone). */
ZC_API zc_status_t zc_zigzag_pack_stream(const void *seq, const int32_t *cu_seqlens, int batch,
                                         size_t token_bytes, int ring_size, int position,
                                         void *share, void *stream);
ZC_API zc_status_t zc_zigzag_unpack_stream(const void *share, const int32_t *cu_seqlens,
                                           int batch, size_t token_bytes, int ring_size,
                                           int position, void *seq, void *stream);

/* ---- attention kernels (kernels/) -------------------------------------- */

/* Flash attention (blockwise, online softmax) on the CPU, the reference of
 * every other kernel.  A call covers `batch` segments packed one after the
 * other (varlen): segment b owns query tokens [cu_seqlens_q[b],
 * cu_seqlens_q[b+1]) and key/value tokens [cu_seqlens_kv[b],
 * cu_seqlens_kv[b+1]), and its queries attend only to its keys.
 *
 * Layouts (row-major, packed): q, out, dout, dq [total_q, num_heads_q,
 * head_dim]; k, v, dk, dv [total_kv, num_heads_kv, head_dim]; lse and delta
 * [total_q, num_heads_q] fp32, natural log.  Query head h reads key/value
 * head h / (num_heads_q / num_heads_kv) (GQA, MQA).
 *
 * Causal masking compares global positions: query token i of segment b sits
 * at q_start[b] + i, key token j at kv_start[b] + j, and the query sees the
 * key when the key's position is not greater.  A ring-attention step passes
 * the positions of the blocks it holds, so a block pair is full, diagonal or
 * masked out by itself.  NULL starts mean 0 (top-left aligned).  A query
 * that sees no key gets out = 0 and lse = -inf.
 *
 * Masks beyond causal (zc_attn_fwd(3), "Masks"), flash-attention's
 * window_size: with ZC_ATTN_WINDOW in flags, the query at position p sees
 * the key at k when k >= p - window_left and k <= p + window_right, -1
 * leaving that side unbounded: (-1, -1) full, (-1, 0) causal, (w - 1, 0) a
 * sliding causal window of w keys.  causal, when set with it, also hides
 * every key right of the query (window_right must then be -1 or 0).
 * Without the flag both window fields must be 0 and causal alone decides.
 * One mask for every segment of the call. */

/* zc_attn_args_t.flags; ZC_ATTN_WINDOW also in zc_ring_attn_args_t.flags */
#define ZC_ATTN_ACCUMULATE (1u << 0) /* merge into out/lse (fwd) or add into dq/dk/dv (bwd) */
#define ZC_ATTN_WINDOW     (1u << 1) /* window_left and window_right give the mask */

typedef struct {
    size_t size;                 /* sizeof(zc_attn_args_t); ZC_ATTN_ARGS_INITIALIZER */
    int batch;                   /* segments; 0 is a no-op */
    int num_heads_q;
    int num_heads_kv;            /* divides num_heads_q */
    int head_dim;                /* 1 .. 256 */
    const int32_t *cu_seqlens_q; /* [batch + 1], starts at 0, non-decreasing */
    const int32_t *cu_seqlens_kv;
    const int32_t *q_start;      /* [batch] global position of each segment's first query */
    const int32_t *kv_start;     /* [batch] same for keys; both NULL: 0 */
    int causal;                  /* no key right of its query (with a window: see above) */
    float scale;                 /* softmax scale, usually 1 / sqrt(head_dim) */
    unsigned flags;              /* ZC_ATTN_ACCUMULATE, ZC_ATTN_WINDOW */
    zc_datatype_t dtype;         /* q, k, v, dout: ZC_FLOAT32 or ZC_BFLOAT16 */
    zc_datatype_t out_dtype;     /* out: ZC_FLOAT32 or ZC_BFLOAT16 (fp32 to accumulate) */
    zc_datatype_t grad_dtype;    /* dq, dk, dv: ZC_FLOAT32 or ZC_BFLOAT16 (fp32 to accumulate) */
    const void *q;
    const void *k;
    const void *v;
    void *out;                   /* fwd: written (merged with ACCUMULATE); bwd: read for delta */
    float *lse;                  /* fwd: written (merged); bwd: the final lse, read */
    const void *dout;            /* bwd */
    float *delta;                /* bwd: rowsum(dout * out) from zc_attn_bwd_delta, or NULL */
    void *dq;                    /* bwd outputs */
    void *dk;
    void *dv;
    /* Newer than the first layout (which ended at dv): */
    int window_left;             /* with ZC_ATTN_WINDOW: keys left of the query it sees, -1 all */
    int window_right;            /* with ZC_ATTN_WINDOW: keys right of it, -1 all */
} zc_attn_args_t;

/* Every field 0 or NULL but size; fill in the rest. */
#define ZC_ATTN_ARGS_INITIALIZER                                                          \
    { sizeof(zc_attn_args_t), 0, 0, 0, 0, NULL, NULL, NULL, NULL, 0, 0.0f, 0u, ZC_FLOAT32, \
      ZC_FLOAT32, ZC_FLOAT32, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,  \
      0, 0 }

/* Forward: out = softmax(q k^T * scale) v per head, and lse.  With
 * ZC_ATTN_ACCUMULATE, out (fp32) and lse hold a partial result over other
 * keys (or out = 0, lse = -inf) and receive the stable merge; out stays fp32
 * across all blocks of a ring and is rounded once at the end. */
ZC_API zc_status_t zc_attn_fwd(const zc_attn_args_t *args);

/* Backward for the keys of this call, given the final out/lse over all keys:
 * dq, dk, dv from dout.  With ZC_ATTN_ACCUMULATE (fp32 gradients) they are
 * added to what the buffers hold, so a ring adds each hop's dq partial and
 * each hop's dk/dv into the buffers that travel.  delta = rowsum(dout * out)
 * is computed by the call when args->delta is NULL. */
ZC_API zc_status_t zc_attn_bwd(const zc_attn_args_t *args);

/* args->delta = rowsum(dout * out) for every query row (once per iteration
 * of a ring, then passed to every zc_attn_bwd hop). */
ZC_API zc_status_t zc_attn_bwd_delta(const zc_attn_args_t *args);

/* Stable merge of a partial result over other keys into an accumulated one,
 * in fp32: out/lse <- merge(out/lse, part_out/part_lse).  Rows with lse =
 * -inf are empty and take the other side as is. */
ZC_API zc_status_t zc_attn_merge(const float *part_out, const float *part_lse, int64_t tokens,
                                 int num_heads, int head_dim, float *out, float *lse);

/* Convert `count` elements between ZC_FLOAT32 and ZC_BFLOAT16 (round to
 * nearest even; same type: copy), e.g. a ring's fp32 out at the end. */
ZC_API zc_status_t zc_attn_convert(const void *src, zc_datatype_t src_dtype, int64_t count,
                                   zc_datatype_t dst_dtype, void *dst);

/* ---- GPU attention kernels (kernels/cuda) -------------------------------- */

/* zc_attn_fwd, zc_attn_bwd, zc_attn_bwd_delta, zc_attn_merge and
 * zc_attn_convert on device memory, enqueued on `stream` (see the GPU path
 * above): the same layouts, masks and results, with ZC_FLOAT16 storage
 * allowed besides ZC_FLOAT32 and ZC_BFLOAT16.  Tensors (q, k, v, out, lse,
 * dout, delta, dq, dk, dv) are device memory; cu_seqlens_q/kv, q_start and
 * kv_start are host arrays.  See zc_attn_fwd_stream(3). */
ZC_API zc_status_t zc_attn_fwd_stream(const zc_attn_args_t *args, void *stream);
ZC_API zc_status_t zc_attn_bwd_stream(const zc_attn_args_t *args, void *stream);
ZC_API zc_status_t zc_attn_bwd_delta_stream(const zc_attn_args_t *args, void *stream);
ZC_API zc_status_t zc_attn_merge_stream(const float *part_out, const float *part_lse,
                                        int64_t tokens, int num_heads, int head_dim, float *out,
                                        float *lse, void *stream);
ZC_API zc_status_t zc_attn_convert_stream(const void *src, zc_datatype_t src_dtype,
                                          int64_t count, zc_datatype_t dst_dtype, void *dst,
                                          void *stream);

#ifdef __cplusplus
}
#endif

#endif /* ZCOMM_H */

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

/* Build features, for tools and for callers that pick a path at run time. */
#define ZC_FEATURE_VERBS  (1u << 0)
#define ZC_FEATURE_CUDA   (1u << 1)
#define ZC_FEATURE_NCCL   (1u << 2)
#define ZC_FEATURE_CUDNN  (1u << 3)
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

/* Out-of-band allgather, UCC style: gather `len` bytes from every rank into
 * `recvbuf` (rank-ordered, len * size bytes).  Return 0 on success. */
typedef struct {
    int (*allgather)(const void *sendbuf, void *recvbuf, size_t len, void *ctx);
    void *ctx;
    int rank;
    int size;
} zc_oob_t;

typedef struct {
    size_t size;            /* sizeof(zc_config_t), for compatibility */
    int timeout_ms;         /* bootstrap and wait timeout; 0: ZC_TIMEOUT */
    const char *node_id;    /* node identity; NULL: ZC_NODE_ID or the host */
} zc_config_t;

#define ZC_CONFIG_INITIALIZER { sizeof(zc_config_t), 0, NULL }

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

/* ---- topology (topology/) ---------------------------------------------- */

/* ---- planner (src/plan_*) ---------------------------------------------- */

/* ---- collectives (src/coll_*) ------------------------------------------ */

/* ---- attention kernels (kernels/) -------------------------------------- */

#ifdef __cplusplus
}
#endif

#endif /* ZCOMM_H */

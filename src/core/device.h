/* The device-memory backend of a communicator, which the stream-ordered
 * calls (src/core/stream.c, the ring attention's transfers) run on.  The
 * library's own is NCCL (device_nccl.c, or device_none.c in a build
 * without it), created by the first call that needs it, so host-only users
 * never touch CUDA, and released with the communicator.  A test may
 * install another before that first call: tests/device_emu.c runs the
 * stream calls on host memory over UCX with NCCL's matching rules.  Every
 * function converts the backend's own errors to zc_status_t. */
#ifndef ZC_DEVICE_H
#define ZC_DEVICE_H

#include <stddef.h>

#include "src/core/comm.h"

typedef struct zc_device zc_device_t;

/* One send or receive of a group (device memory, bytes). */
typedef struct {
    zc_request_kind_t kind;  /* ZC_REQ_SEND or ZC_REQ_RECV */
    void *buf;
    size_t bytes;
    int peer;
} zc_device_op_t;

/* What a backend does; see the functions of the same names below. */
typedef struct {
    const char *name;
    zc_status_t (*check_memory)(const void *buf, const char *arg);
    zc_status_t (*group)(zc_device_t *device, const zc_device_op_t *ops, int nops, void *stream);
    zc_status_t (*sync)(zc_device_t *device, void *stream);
    zc_status_t (*alloc)(zc_device_t *device, size_t bytes, void *stream, void **ptr);
    void (*free)(zc_device_t *device, void *ptr, void *stream);
    zc_status_t (*copy)(zc_device_t *device, void *dst, const void *src, size_t bytes,
                        void *stream);
    void (*release)(zc_device_t *device);   /* finalize (or abort) and free */
    void (*abort)(zc_device_t *device, zc_status_t status); /* see zc_device_abort */
} zc_device_ops_t;

/* Every backend's state starts with this. */
struct zc_device {
    const zc_device_ops_t *ops;
    zc_comm_h comm;
    int cuda_device;         /* the CUDA device its transfers run on (NCCL's, the one
                              * current at its creation); -1: not CUDA */
    zc_status_t failed;      /* sticky: creation failed or the backend was aborted */
    char why[256];           /* the detail of that failure */
};

/* The communicator's backend, created on first use.  Creation is
 * collective: every rank of `comm` must reach it (the first stream call
 * of every rank, or zc_comm_cuda_init).  A creation that failed, or a
 * backend aborted after a peer failure, keeps returning its error. */
zc_status_t zc_device_get(zc_comm_h comm, zc_device_t **device);
/* Called by zc_comm_destroy. */
void zc_device_release(zc_comm_h comm);
/* Use `device` (its ops, comm and failed set) as comm's backend; before
 * any stream call on comm, else ZC_ERR_INVALID_ARG. */
zc_status_t zc_device_install(zc_comm_h comm, zc_device_t *device);
/* ZC_OK when `buf` is memory the backend of `comm` moves (NULL: empty),
 * asked before the backend is created: device memory for NCCL. */
zc_status_t zc_device_check_memory(zc_comm_h comm, const void *buf, const char *arg);

/* Enqueue `ops` on `stream` as one group (they progress together, so a
 * group may hold both directions with the same peer; the k-th send from a
 * to b matches b's k-th receive from a, across groups too). */
zc_status_t zc_device_group(zc_device_t *device, const zc_device_op_t *ops, int nops,
                            void *stream);
/* Block until `stream` is done, without waiting past the communicator's
 * timeout: a peer failure, an asynchronous error or the timeout aborts the
 * backend and returns the error. */
zc_status_t zc_device_sync(zc_device_t *device, void *stream);
/* Give up on everything enqueued (NCCL: ncclCommAbort, so that the
 * enqueued transfers end instead of waiting for peers that will never
 * post theirs) and keep failing with `status` and the last error. */
void zc_device_abort(zc_device_t *device, zc_status_t status);
/* Stream-ordered memory and copies for the collectives. */
zc_status_t zc_device_alloc(zc_device_t *device, size_t bytes, void *stream, void **ptr);
void zc_device_free(zc_device_t *device, void *ptr, void *stream);
zc_status_t zc_device_copy(zc_device_t *device, void *dst, const void *src, size_t bytes,
                           void *stream);

/* A group being built for zc_device_group: ops grown as needed; the first
 * failure sticks and is what zc_group_flush returns. */
typedef struct {
    zc_device_op_t *ops;
    int n, cap;
    zc_status_t error;
} zc_group_t;

void zc_group_add(zc_group_t *g, zc_request_kind_t kind, const void *buf, size_t bytes, int peer);
/* Enqueue the group on `stream` and empty it for the next one. */
zc_status_t zc_group_flush(zc_group_t *g, zc_device_t *dev, void *stream);
/* The start of a stream-ordered call: device buffers (NULL for empty
 * ones), then the communicator's backend; `sname` and `rname` name the
 * buffers in messages. */
zc_status_t zc_stream_begin(zc_comm_h comm, const void *sendbuf, const char *sname,
                            const void *recvbuf, const char *rname, zc_device_t **dev);

/* Make the library's own backend for `comm`: NCCL, kept as comm->device
 * also when its creation fails (failed and why then say why); or, in a
 * build without NCCL, ZC_ERR_UNSUPPORTED and nothing kept. */
zc_status_t zc_device_create(zc_comm_h comm);

#endif

/* The device-memory backend of a communicator, which the stream-ordered
 * calls (src/coll_stream.c) run on: NCCL (transport/nccl).  It is created by
 * the first call that needs it, so host-only users never touch CUDA, and
 * released with the communicator.  Every function converts the backend's
 * own errors to zc_status_t. */
#ifndef ZC_DEVICE_H
#define ZC_DEVICE_H

#include <stddef.h>

#include "comm.h"

typedef struct zc_device zc_device_t;

/* One send or receive of a group (device memory, bytes). */
typedef struct {
    zc_request_kind_t kind;  /* ZC_REQ_SEND or ZC_REQ_RECV */
    void *buf;
    size_t bytes;
    int peer;
} zc_device_op_t;

/* The communicator's backend, created on first use.  Creation is
 * collective: every rank of `comm` must reach it (the first stream call
 * of every rank, or zc_comm_cuda_init).  A creation that failed, or a
 * backend aborted after a peer failure, keeps returning its error. */
zc_status_t zc_device_get(zc_comm_h comm, zc_device_t **device);
/* Called by zc_comm_destroy: finalizes (or aborts) and frees. */
void zc_device_release(zc_comm_h comm);
/* Enqueue `ops` on `stream` as one group (they progress together, so a
 * group may hold both directions with the same peer). */
zc_status_t zc_device_group(zc_device_t *device, const zc_device_op_t *ops, int nops,
                            void *stream);
/* Block until `stream` is done, without waiting past the communicator's
 * timeout: a peer failure, an asynchronous NCCL error or the timeout
 * aborts the backend and returns the error. */
zc_status_t zc_device_sync(zc_device_t *device, void *stream);

/* Stream-ordered device memory and device copies for the collectives. */
zc_status_t zc_device_alloc(size_t bytes, void *stream, void **ptr);
void zc_device_free(void *ptr, void *stream);
zc_status_t zc_device_copy(void *dst, const void *src, size_t bytes, void *stream);

#endif

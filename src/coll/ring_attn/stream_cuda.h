/* The CUDA side of the stream engine's state on a communicator
 * (src/coll/ring_attn/stream_cuda.c): the `dev` of its operations
 * (stream_engine.h), kept between calls with the memory it hands out.
 *
 * Which device.  Everything here (the communication stream, the events,
 * the memory) is made on one CUDA device: the device of the
 * communicator's NCCL communicator, which NCCL binds to the device current
 * when it is made.  Every later stream call on the communicator must run
 * with that device current; ring attention refuses another
 * (zc_ras_cuda_bind) before it enqueues anything. */
#ifndef ZC_RING_ATTN_STREAM_CUDA_H
#define ZC_RING_ATTN_STREAM_CUDA_H

#include "src/coll/ring_attn/stream_engine.h"

typedef struct {
    int device;                     /* the CUDA device all of it is on */
    void *streams[ZC_DS_NSTREAMS];  /* this call's compute stream (the caller's), and the
                                     * communicator's communication stream (its own) */
    void **events;                  /* by the engine's numbers, made on first record */
    int nevents;
    /* this call's, for the operations of ring_attn_stream.c */
    zc_comm_h comm;
    zc_device_t *nccl;
    zc_attn_backend_t backend;      /* ZC_ATTN_BACKEND, as this build can run it */
} zc_ras_cuda_t;

/* The state on CUDA device `device`: its communication stream (non-blocking)
 * made now, events on first use. */
zc_status_t zc_ras_cuda_make(int device, zc_ras_cuda_t **out);
/* A call on `stream` of the calling thread's current device: ZC_ERR_INVALID_ARG
 * naming stream when that device is not d's. */
zc_status_t zc_ras_cuda_bind(zc_ras_cuda_t *d, void *stream);

/* The memory and ordering operations of zc_ds_ops_t (dev: a zc_ras_cuda_t). */
zc_status_t zc_ras_cuda_alloc(void *dev, size_t bytes, void **ptr);
void zc_ras_cuda_free(void *dev, void *ptr);
zc_status_t zc_ras_cuda_record(void *dev, zc_ds_stream_t stream, int event);
zc_status_t zc_ras_cuda_wait(void *dev, zc_ds_stream_t stream, int event);
void zc_ras_cuda_release(void *dev, void *const *blocks, int nblocks, int ended);

#endif

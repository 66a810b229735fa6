/* Stream-ordered ring attention (zc_ring_attn_fwd_stream/bwd_stream).
 *
 * The engine (src/coll/ring_attn/stream_engine.c) enqueues a call's work on two streams:
 * the caller's stream computes, a communication stream moves KV and dK/dV,
 * and events order them, so that the KV of step s + 1 moves while step s
 * computes.  It is written against the device operations below rather
 * than against CUDA and NCCL directly:
 *   src/coll/ring_attn/ring_attn_stream.c  the public calls and the CUDA/NCCL operations
 *   tests/stream_emu.c       a host emulation that runs the same schedule
 *                            on the CPU kernels and UCX, and checks that
 *                            every pair of operations of the two streams
 *                            touching the same bytes is ordered by events
 * so that the schedule, its transfers' matching across ranks and its
 * stream ordering are tested on machines without a GPU. */
#ifndef ZC_RING_ATTN_STREAM_H
#define ZC_RING_ATTN_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn_rows.h"
#include "kernels/cudnn/attn_cudnn.h"
#include "src/core/device.h"
#include "src/coll/ring_attn/ring_attn.h"
#include "zcomm.h"

typedef enum { ZC_DS_COMPUTE = 0, ZC_DS_COMM = 1, ZC_DS_NSTREAMS } zc_ds_stream_t;

typedef enum { ZC_DS_FWD, ZC_DS_BWD, ZC_DS_DELTA } zc_ds_pass_t;

/* What the engine asks of a device.  `dev` is the backend's own state.
 * Unless named, an operation is enqueued on the compute stream.  Events
 * are numbered by the engine, each recorded once before it is waited on. */
typedef struct zc_ds_ops {
    /* Device memory for the whole call, usable on the communication stream
     * once it has waited on an event recorded after the allocation; freed
     * when the compute stream reaches the free. */
    zc_status_t (*alloc)(void *dev, size_t bytes, void **ptr);
    void (*free)(void *dev, void *ptr);
    zc_status_t (*record)(void *dev, zc_ds_stream_t stream, int event);
    zc_status_t (*wait)(void *dev, zc_ds_stream_t stream, int event);
    /* Communication stream: one group of sends and receives (NCCL
     * semantics: the k-th send from a to b matches b's k-th receive from
     * a), and one routed transfer of bytes (zc_routed_sendrecv_stream). */
    zc_status_t (*group)(void *dev, const zc_device_op_t *ops, int nops);
    zc_status_t (*routed)(void *dev, const zc_transfer_t *transfers, int ntransfers,
                          const void *sendbuf, void *recvbuf);
    /* Compute stream: the attention kernels (zc_attn_fwd/bwd/bwd_delta) and
     * element-wise work.  *route gets where a forward or backward block
     * ran (cuDNN, or the native kernels and why: attn_cudnn.h). */
    zc_status_t (*attn)(void *dev, zc_ds_pass_t pass, const zc_attn_args_t *args,
                        zc_attn_route_t *route);
    zc_status_t (*copy)(void *dev, void *dst, const void *src, size_t bytes);
    zc_status_t (*fill)(void *dev, float *dst, size_t count, float value);
    zc_status_t (*add)(void *dev, float *dst, const float *src, size_t count);
    zc_status_t (*convert)(void *dev, const void *src, zc_datatype_t src_dtype, int64_t count,
                           zc_datatype_t dst_dtype, void *dst);
    /* Kernel tables (src/coll/ring_attn/dispatch.c): the table's pass on
     * `call`, given the compute stream and cu_seqlens_q/kv on the device
     * (the host_ ones filled), its status returned; and the row-mapped
     * copies around it (kernels/attn_rows.h). */
    zc_status_t (*kernels)(void *dev, int backward, const zc_attn_kernels_t *table,
                           zc_attn_varlen_t *call);
    zc_status_t (*rows)(void *dev, const zc_attn_rows_t *op);
} zc_ds_ops_t;

/* Enqueue a call on `ops`, after zc_ra_begin: every ring group (or, in
 * LLaMA CP mode, gather) in the order of the host engine, then the local
 * zone, then the rounding of the fp32 accumulators; returns once all of
 * it is enqueued, the compute stream waiting for the last transfer (with
 * a kernel table, once the ranks agreed on whether one failed:
 * ctx->table.verdict).  Every
 * rank of the communicator calls it (a rank of a ring's node outside the
 * ring would forward its routed hops: it walks them too). */
zc_status_t zc_ra_stream_run(zc_ra_ctx_t *ctx, const zc_ds_ops_t *ops, void *dev);

#endif

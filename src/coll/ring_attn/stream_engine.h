/* Stream-ordered ring attention (zc_ring_attn_fwd_stream/bwd_stream).
 *
 * The engine (src/coll/ring_attn/stream_engine.c) enqueues a call's work on two streams:
 * the caller's stream computes, a communication stream moves KV and dK/dV,
 * and events order them, so that the KV of step s + 1 moves while step s
 * computes.  It is written against the device operations below rather
 * than against CUDA and NCCL directly:
 *   src/coll/ring_attn/ring_attn_stream.c  the public calls and the CUDA/NCCL operations
 *   src/coll/ring_attn/stream_keep.c         what it keeps on a communicator between
 *                                            calls: the backend's state and its memory
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

/* The event recorded on the compute stream at the end of every call,
 * after all of its work: the next call's compute stream waits on it before
 * it uses the memory the engine keeps, whichever stream that call is on.
 * A call numbers its other events from 1. */
#define ZC_DS_EVENT_END 0

/* What the engine asks of a device.  `dev` is the backend's own state,
 * kept with the communicator (zc_ras_keep_get) and told the call's compute
 * stream before each call.  Unless named, an operation is enqueued on the
 * compute stream.  Events are numbered by the engine; within a call each
 * is recorded before it is waited on, and a number is recorded again by
 * later calls (a wait sees the latest record before it). */
typedef struct zc_ds_ops {
    /* Device memory the engine keeps across calls (src/coll/ring_attn/stream_keep.c),
     * usable on the compute stream after the call and on the communication
     * stream once it has waited on an event recorded after it; freed when
     * the compute stream reaches the free. */
    zc_status_t (*alloc)(void *dev, size_t bytes, void **ptr);
    void (*free)(void *dev, void *ptr);
    /* The state goes (zc_comm_destroy, or a call failed and the
     * communicator's device backend was aborted): free `blocks` once
     * nothing the engine enqueued uses them, then dev itself.  `ended`:
     * ZC_DS_EVENT_END was recorded after all of the latest call's work;
     * otherwise the backend waits for its streams first. */
    void (*release)(void *dev, void *const *blocks, int nblocks, int ended);
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

/* ---- src/coll/ring_attn/stream_keep.c: what the engine keeps ---- */

/* The stream engine's state on a communicator: its backend (ops, dev) and
 * an arena of device memory grown to the largest call's need. */
typedef struct zc_ras_keep zc_ras_keep_t;

/* comm's state on backend `ops`: the one kept, or made now with the dev
 * that make(comm, &dev) returns; ZC_ERR_INVALID_ARG naming comm when it
 * keeps another backend's. */
zc_status_t zc_ras_keep_get(zc_comm_h comm, const zc_ds_ops_t *ops,
                            zc_status_t (*make)(zc_comm_h comm, void **dev),
                            zc_ras_keep_t **keep);
void *zc_ras_keep_dev(const zc_ras_keep_t *keep);
const zc_ds_ops_t *zc_ras_keep_ops(const zc_ras_keep_t *keep);

/* A call's start: its compute stream waits for the previous call's end
 * (ZC_DS_EVENT_END), and the arena's bytes are all free again. */
zc_status_t zc_ras_keep_begin(zc_ras_keep_t *keep);
/* `bytes` of the arena for the rest of the call (a new block when the
 * kept ones are full).  Every take is 256-byte aligned. */
zc_status_t zc_ras_keep_take(zc_ras_keep_t *keep, size_t bytes, void **ptr);
/* What has been taken so far, and back to it: the bytes taken since are
 * free for later takes of the call, which the caller orders after every
 * use of them. */
typedef struct {
    int block;
    size_t used, total;
} zc_ras_mark_t;
zc_ras_mark_t zc_ras_keep_mark(const zc_ras_keep_t *keep);
void zc_ras_keep_back(zc_ras_keep_t *keep, zc_ras_mark_t mark);
/* A call's end, after all of its work (the compute stream waited for the
 * communication stream): ZC_DS_EVENT_END recorded on the compute stream;
 * a call that needed more than one block gives them back, and the next
 * call's first block holds all it needed. */
zc_status_t zc_ras_keep_end(zc_ras_keep_t *keep);
/* Blocks held now (at most 1 between calls). */
int zc_ras_keep_blocks(const zc_ras_keep_t *keep);

/* ---- src/coll/ring_attn/stream_engine.c ---- */

/* Enqueue a call on the communicator's stream engine state `keep`, after
 * zc_ra_begin: every ring group (or, in LLaMA CP mode, gather) in the
 * order of the host engine, then the local zone, then the rounding of the
 * fp32 accumulators; returns once all of it is enqueued, the compute
 * stream waiting for the last transfer.  Every rank of the communicator
 * calls it (a rank of a ring's node outside the ring would forward its
 * routed hops: it walks them too).  A failure half-way leaves hops that
 * the peers enqueued unmatched (or ours unmatched on their side): the
 * communicator's device backend is aborted, so that the enqueued transfers
 * end and every later device call on comm says why, and the state goes
 * (zc_ras_keep_t's memory freed once nothing uses it).  With a kernel
 * table, it returns once the ranks agreed on whether a callback failed
 * (ctx->table.verdict): such a failure left no transfer unmatched, and
 * aborts nothing. */
zc_status_t zc_ra_stream_run(zc_ra_ctx_t *ctx, zc_ras_keep_t *keep);

#endif

/* zc_ring_attn_fwd_stream / zc_ring_attn_bwd_stream: the stream engine
 * (src/coll/ring_attn/stream_engine.c) on CUDA and NCCL.  The caller's
 * stream computes; the communicator's own non-blocking stream carries the
 * NCCL transfers, and events order the two; stream, events and memory are
 * kept with the communicator between calls (src/coll/ring_attn/stream_cuda.h).
 * Without CUDA, or without a device, a call checks its arguments and
 * returns ZC_ERR_UNSUPPORTED at once, with no communication (so that one
 * rank calling alone cannot hang). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/coll/routed/route.h"
#include "src/core/memtype.h"
#include "src/coll/ring_attn/stream_engine.h"
#include "src/common/status.h"
#ifdef HAVE_CUDA
#include "kernels/cuda/attn_cuda.h"
#include "kernels/cuda/attn_gpu.h"
#include "kernels/cuda/cuda_mem.h"
#include "kernels/cuda/staging.h"
#include "kernels/cudnn/attn_cudnn.h"
#include "src/coll/ring_attn/stream_cuda.h"
#include "src/common/log.h"
#endif

static zc_status_t zc_ras_device_memory(const void *buf, zc_memtype_t memtype, const char *arg)
{
    (void)memtype; /* checked to be ZC_MEM_CUDA */
    return zc_memtype_check_device(buf, arg);
}

/* The stream forms' tensors: device memory, fp16 allowed; and the
 * device: the communicator's (stream_cuda.h), refused on every rank
 * through the agreement when one rank's differs. */
static zc_status_t zc_ras_device_check(zc_comm_h comm, const zc_ring_attn_args_t *a,
                                       int backward)
{
    ZC_ARG_CHECK(a->dtype == ZC_FLOAT32 || a->dtype == ZC_BFLOAT16 || a->dtype == ZC_FLOAT16,
                 "dtype: %s, must be float32, bfloat16 or float16", zc_datatype_name(a->dtype));
    ZC_ARG_CHECK(a->memtype == ZC_MEM_CUDA, "memtype: %d, the stream forms take ZC_MEM_CUDA "
                 "tensors (zc_ring_attn_fwd for host memory)", (int)a->memtype);
    ZC_CHECK(zc_ra_check_tensors(a, backward, zc_ras_device_memory));
#ifdef HAVE_CUDA
    /* what a kernel launch would refuse, refused before anything is
     * enqueued: a rank failing half-way would leave its peers' hops
     * unmatched */
    if (zc_cuda_devices() > 0) {
        int current = -1;

        ZC_CHECK(zc_attn_gpu_smem_check(backward, a->head_dim));
        ZC_CHECK(zc_cuda_device_get(&current));
        if (comm->device && comm->device->cuda_device >= 0 && current != comm->device->cuda_device)
            return zc_error(ZC_ERR_INVALID_ARG, "stream: the calling thread's CUDA device is "
                            "%d; comm's NCCL communicator and stream state are on device %d: "
                            "make that one current", current, comm->device->cuda_device);
    }
#else
    (void)comm;
#endif
    return ZC_OK;
}

#ifdef HAVE_CUDA
static zc_status_t zc_ras_cuda_group(void *dev, const zc_device_op_t *ops, int nops)
{
    zc_ras_cuda_t *d = dev;

    return zc_device_group(d->nccl, ops, nops, d->streams[ZC_DS_COMM]);
}

static zc_status_t zc_ras_cuda_routed(void *dev, const zc_transfer_t *transfers, int ntransfers,
                                      const void *sendbuf, void *recvbuf)
{
    zc_ras_cuda_t *d = dev;

    /* the plan's lists, which every rank agreed on with the plan */
    return zc_routed_stream_post(transfers, ntransfers, sendbuf, recvbuf, ZC_BYTE, d->comm,
                                 d->streams[ZC_DS_COMM], 0);
}

/* The engine checked its tensors and the head dim once per call, and its
 * segments and staging are its own: the kernels without the public
 * calls' per-call checks (zc_attn_gpu_launch numbers its passes as
 * zc_ds_pass_t does). */
_Static_assert(ZC_DS_FWD == 0 && ZC_DS_BWD == 1 && ZC_DS_DELTA == 2, "pass numbers");

static zc_status_t zc_ras_cuda_attn(void *dev, zc_ds_pass_t pass, const zc_attn_args_t *args,
                                    zc_attn_route_t *route)
{
    zc_ras_cuda_t *d = dev;

    *route = ZC_ATTN_NATIVE_CHOSEN;
    /* ZC_ATTN_BACKEND=cudnn: the forward and backward blocks on cuDNN's
     * SDPA where it takes their shape (kernels/cudnn/attn_cudnn.h), the
     * native kernels otherwise and for the delta pass.  A cuDNN failure
     * before it wrote anything runs the block natively: the call goes on,
     * every hop its peers enqueued still matched, the NCCL communicator
     * untouched. */
    if (d->backend == ZC_ATTN_BACKEND_CUDNN && pass != ZC_DS_DELTA) {
        zc_status_t st = zc_cudnn_attn_launch((int)pass, args, d->streams[ZC_DS_COMPUTE], route);

        if (st == ZC_OK && *route == ZC_ATTN_ON_CUDNN)
            return ZC_OK;
        if (st != ZC_OK) {
            if (*route != ZC_ATTN_NATIVE_FAILED)
                return st;
            zc_log_warn("ring attention: cuDNN failed (%s: %s); the block runs on the native "
                        "kernels", zc_strerror(st), zc_get_last_error());
            zc_error_clear();
        }
    }
    return zc_attn_gpu_launch((int)pass, args, d->streams[ZC_DS_COMPUTE]);
}

/* The per-block backend of a call: ZC_ATTN_BACKEND, native where the build
 * has no cuDNN (one INFO line per process). */
static zc_attn_backend_t zc_ras_backend(void)
{
    zc_attn_backend_t b = zc_attn_backend();
#ifndef HAVE_CUDNN
    static int said;

    if (b == ZC_ATTN_BACKEND_CUDNN) {
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            zc_log_info("ZC_ATTN_BACKEND=cudnn: libzcomm was built without cuDNN; the native "
                        "kernels run");
        b = ZC_ATTN_BACKEND_NATIVE;
    }
#endif
    return b;
}

static zc_status_t zc_ras_cuda_copy(void *dev, void *dst, const void *src, size_t bytes)
{
    return zc_cuda_copy_async(dst, src, bytes, ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE]);
}

static zc_status_t zc_ras_cuda_fill(void *dev, float *dst, size_t count, float value)
{
    void *stream = ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE];

    return zc_cuda_status(zc_cuda_fill_f32(dst, (int64_t)count, value, stream), "zk_fill");
}

static zc_status_t zc_ras_cuda_add(void *dev, float *dst, const float *src, size_t count)
{
    void *stream = ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE];

    return zc_cuda_status(zc_cuda_add_f32(dst, src, (int64_t)count, stream), "zk_add");
}

static zc_status_t zc_ras_cuda_convert(void *dev, const void *src, zc_datatype_t src_dtype,
                                       int64_t count, zc_datatype_t dst_dtype, void *dst)
{
    return zc_attn_convert_stream(src, src_dtype, count, dst_dtype, dst,
                                  ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE]);
}

/* A kernel table's call on the caller's stream, its cu_seqlens staged to
 * the device for as long as the work it enqueues may read them. */
static zc_status_t zc_ras_cuda_kernels(void *dev, int backward, const zc_attn_kernels_t *table,
                                       zc_attn_varlen_t *call)
{
    void *stream = ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE];
    size_t half = ((size_t)call->batch + 1) * sizeof(int32_t);
    zc_cuda_staging_slot_t *slot;
    int32_t *host, *cu;
    zc_status_t st;

    ZC_CHECK(zc_cuda_staging_acquire(2 * half, &slot));
    host = zc_cuda_staging_host(slot);
    memcpy(host, call->host_cu_seqlens_q, half);
    memcpy(host + call->batch + 1, call->host_cu_seqlens_kv, half);
    st = zc_cuda_staging_stage(slot, 2 * half, stream);
    if (st == ZC_OK) {
        cu = zc_cuda_staging_dev(slot);
        call->cu_seqlens_q = cu;
        call->cu_seqlens_kv = cu + call->batch + 1;
        call->stream = stream;
        st = (backward ? table->bwd : table->fwd)(table->ctx, call);
    }
    return zc_cuda_staging_finish(slot, stream, st);
}

static zc_status_t zc_ras_cuda_rows(void *dev, const zc_attn_rows_t *op)
{
    return zc_attn_rows_stream(op, ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE]);
}

static const zc_ds_ops_t zc_ras_cuda_ops = {
    .alloc = zc_ras_cuda_alloc, .free = zc_ras_cuda_free, .release = zc_ras_cuda_release,
    .record = zc_ras_cuda_record, .wait = zc_ras_cuda_wait, .group = zc_ras_cuda_group,
    .routed = zc_ras_cuda_routed, .attn = zc_ras_cuda_attn, .copy = zc_ras_cuda_copy,
    .fill = zc_ras_cuda_fill, .add = zc_ras_cuda_add, .convert = zc_ras_cuda_convert,
    .kernels = zc_ras_cuda_kernels, .rows = zc_ras_cuda_rows,
};

/* The state of comm's first stream call, on its NCCL communicator's device. */
static zc_status_t zc_ras_cuda_make_for(zc_comm_h comm, void **dev)
{
    zc_ras_cuda_t *d;

    ZC_CHECK(zc_ras_cuda_make(comm->device->cuda_device, &d));
    *dev = d;
    return ZC_OK;
}

static zc_status_t zc_ras_cuda_run(zc_ra_ctx_t *ctx, void *stream)
{
    zc_ras_keep_t *keep;
    zc_device_t *nccl;
    zc_ras_cuda_t *d;

    ZC_CHECK(zc_ra_begin(ctx, zc_ras_device_check, 1));
    ZC_CHECK(zc_device_get(ctx->comm, &nccl));
    ZC_CHECK(zc_ras_keep_get(ctx->comm, &zc_ras_cuda_ops, zc_ras_cuda_make_for, &keep));
    d = zc_ras_keep_dev(keep);
    ZC_CHECK(zc_ras_cuda_bind(d, stream));
    d->comm = ctx->comm;
    d->nccl = nccl;
    d->backend = zc_ras_backend();
    return zc_ra_stream_run(ctx, keep);
}
#endif

static zc_status_t zc_ring_attn_stream(zc_comm_h comm, zc_plan_h plan,
                                       const zc_ring_attn_args_t *user_args, int backward,
                                       void *stream)
{
    zc_ring_attn_args_t local;
    const zc_ring_attn_args_t *args = zc_ra_args_read(user_args, &local);
    int64_t tokens;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
#ifdef HAVE_CUDA
    if (zc_cuda_devices() > 0) {
        zc_ra_ctx_t ctx = {.comm = comm, .plan = plan, .args = args, .backward = backward};

        return zc_ras_cuda_run(&ctx, stream);
    }
#else
    (void)stream;
#endif
    ZC_CHECK(zc_ra_check_args(comm, plan, args, backward, zc_ras_device_check, &tokens));
#ifdef HAVE_CUDA
    return zc_error(ZC_ERR_UNSUPPORTED, "memtype: ZC_MEM_CUDA ring attention needs a CUDA "
                    "device; the CUDA runtime finds none");
#else
    return zc_error(ZC_ERR_UNSUPPORTED, "memtype: ZC_MEM_CUDA ring attention needs CUDA and "
                    "NCCL; libzcomm was built without them");
#endif
}

zc_status_t zc_ring_attn_fwd_stream(zc_comm_h comm, zc_plan_h plan,
                                    const zc_ring_attn_args_t *args, void *stream)
{
    return zc_ring_attn_stream(comm, plan, args, 0, stream);
}

zc_status_t zc_ring_attn_bwd_stream(zc_comm_h comm, zc_plan_h plan,
                                    const zc_ring_attn_args_t *args, void *stream)
{
    return zc_ring_attn_stream(comm, plan, args, 1, stream);
}

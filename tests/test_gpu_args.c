/* The GPU path where it can be tested without a GPU: every argument check
 * of every stream call, the refusal of device work without CUDA, NCCL or a
 * device (ZC_ERR_UNSUPPORTED naming the memtype), host memory declared as
 * device memory, the build features, the NCCL error conversion, and the
 * host-side geometry (routes, slices, chunks, kernel blocks, zigzag
 * ranges) that the device code executes. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attn_gpu.h"
#include "src/core/comm.h"
#include "src/core/memtype.h"
#include "src/plan/plan.h"
#include "src/plan/routing.h"
#include "tap.h"
#include "zcomm.h"
#ifdef HAVE_NCCL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "src/core/device_nccl.h"
#endif

static int has(const char *needle)
{
    return strstr(zc_get_last_error(), needle) != NULL;
}

/* A call refused for its argument `name`: ZC_ERR_INVALID_ARG naming it. */
static void bad_arg(zc_status_t st, const char *name, const char *what)
{
    if (!ok(st == ZC_ERR_INVALID_ARG && has(name), "%s: invalid argument naming '%s'", what, name))
        diag("got %s: %s", zc_strerror(st), zc_get_last_error());
}

/* Valid arguments but host memory where device memory is expected: here
 * (no device, or no CUDA) ZC_ERR_UNSUPPORTED naming the memtype; on a GPU
 * machine ZC_ERR_INVALID_ARG saying it is host memory. */
static void refused_device(zc_status_t st, const char *what)
{
    int pass = zc_cuda_devices() == 0 ? st == ZC_ERR_UNSUPPORTED && has("memtype")
                                      : st == ZC_ERR_INVALID_ARG && has("host memory");
    if (!ok(pass, "%s: host buffers refused on the device path", what))
        diag("got %s: %s", zc_strerror(st), zc_get_last_error());
}

static zc_comm_h one_rank_comm(void)
{
    zc_unique_id_t id;
    zc_comm_h comm = NULL;

    if (zc_get_unique_id(&id) != ZC_OK || zc_comm_init_rank(&comm, 1, &id, 0, NULL) != ZC_OK)
        return NULL;
    return comm;
}

static void test_features(void)
{
    unsigned f = zc_get_features();
#ifdef HAVE_NCCL
    ok((f & ZC_FEATURE_NCCL) != 0, "ZC_FEATURE_NCCL reported: the NCCL backend is built");
#else
    ok((f & ZC_FEATURE_NCCL) == 0, "ZC_FEATURE_NCCL not reported: no NCCL backend built");
#endif
    ok((f & ~(ZC_FEATURE_VERBS | ZC_FEATURE_CUDA | ZC_FEATURE_NCCL | ZC_FEATURE_CUDNN)) == 0,
       "no feature bit but VERBS, CUDA, NCCL and CUDNN reported (0x%x)", f);
#ifdef HAVE_CUDNN
    ok((f & ZC_FEATURE_CUDNN) != 0, "ZC_FEATURE_CUDNN reported: the cuDNN backend is built");
#else
    ok((f & ZC_FEATURE_CUDNN) == 0, "ZC_FEATURE_CUDNN not reported: no cuDNN backend built");
#endif
#ifdef HAVE_CUDA
    ok((f & ZC_FEATURE_CUDA) != 0, "ZC_FEATURE_CUDA reported in a CUDA build");
#else
    ok((f & ZC_FEATURE_CUDA) == 0, "ZC_FEATURE_CUDA not reported without CUDA");
#endif
    diag("CUDA devices: %d; UCX moves CUDA memory: %s", zc_cuda_devices(),
         zc_ucx_moves_cuda() ? "yes" : "no");
}

static void test_memtypes(zc_comm_h comm)
{
    char host[64] = {0};
    zc_request_h req = NULL;
    zc_transfer_t t = {0, 0, 8};
    zc_status_t st;

    st = zc_send(host, 8, ZC_BYTE, ZC_MEM_CUDA, 0, comm, &req);
    ok(st != ZC_OK && req == NULL && (has("memtype") || has("host memory")),
       "zc_send of host memory declared ZC_MEM_CUDA refused (%s)", zc_get_last_error());
    st = zc_routed_sendrecv(&t, 1, host, host + 32, ZC_BYTE, ZC_MEM_CUDA, comm, &req);
    ok(st != ZC_OK && req == NULL, "zc_routed_sendrecv with ZC_MEM_CUDA refused (%s)",
       zc_get_last_error());
    ok(zc_memtype_check_host_path(host, ZC_MEM_HOST, "buf") == ZC_OK,
       "host memory accepted on the host path");
    ok(zc_memtype_check_host_path(host, (zc_memtype_t)7, "buf") == ZC_ERR_INVALID_ARG &&
       has("memtype"), "unknown memtype refused");
    st = zc_memtype_check_p2p(host, ZC_MEM_CUDA, "buf");
    ok(st != ZC_OK, "point-to-point refuses host memory declared ZC_MEM_CUDA");
    st = zc_memtype_check_device(host, "buf");
#ifndef HAVE_CUDA
    ok(st == ZC_ERR_UNSUPPORTED && has("memtype") && has("without CUDA"),
       "device path without CUDA: unsupported, the build named");
#else
    refused_device(st, "zc_memtype_check_device");
#endif
}

static void test_p2p_stream(zc_comm_h comm)
{
    char buf[16];

    bad_arg(zc_comm_cuda_init(NULL), "comm", "zc_comm_cuda_init(NULL)");
    bad_arg(zc_stream_synchronize(NULL, NULL), "comm", "zc_stream_synchronize(NULL)");
    bad_arg(zc_send_stream(buf, -1, ZC_BYTE, 0, comm, NULL), "count", "zc_send_stream count");
    bad_arg(zc_send_stream(buf, 4, (zc_datatype_t)42, 0, comm, NULL), "dtype",
            "zc_send_stream dtype");
    bad_arg(zc_send_stream(buf, 4, ZC_BYTE, 1, comm, NULL), "peer", "zc_send_stream peer");
    bad_arg(zc_send_stream(NULL, 4, ZC_BYTE, 0, comm, NULL), "buf", "zc_send_stream buf");
    bad_arg(zc_send_stream(buf, INT64_MAX / 2, ZC_INT64, 0, comm, NULL), "count",
            "zc_send_stream overflow");
    bad_arg(zc_send_stream(buf, 4, ZC_BYTE, 0, NULL, NULL), "comm", "zc_send_stream comm");
    bad_arg(zc_recv_stream(buf, 4, ZC_BYTE, -1, comm, NULL), "peer", "zc_recv_stream peer");
    bad_arg(zc_recv_stream(NULL, 1, ZC_FLOAT32, 0, comm, NULL), "buf", "zc_recv_stream buf");
    bad_arg(zc_sendrecv_stream(buf, 4, -1, buf, 0, -1, ZC_BYTE, comm, NULL), "sendcount",
            "zc_sendrecv_stream data with no dst");
    bad_arg(zc_sendrecv_stream(buf, 0, -1, buf, 4, 3, ZC_BYTE, comm, NULL), "src",
            "zc_sendrecv_stream src");
    bad_arg(zc_sendrecv_stream(buf, 4, 0, NULL, 4, 0, ZC_BYTE, comm, NULL), "recvbuf",
            "zc_sendrecv_stream recvbuf");
    refused_device(zc_send_stream(buf, 4, ZC_BYTE, 0, comm, NULL), "zc_send_stream");
    refused_device(zc_recv_stream(buf, 4, ZC_BYTE, 0, comm, NULL), "zc_recv_stream");
    refused_device(zc_sendrecv_stream(buf, 4, 0, buf + 8, 4, 0, ZC_BYTE, comm, NULL),
                   "zc_sendrecv_stream");
    if (zc_cuda_devices() == 0) {
        /* With no device even an empty call or the init is refused. */
        zc_status_t st = zc_comm_cuda_init(comm);
        ok(st == ZC_ERR_UNSUPPORTED && has("memtype"), "zc_comm_cuda_init: unsupported (%s)",
           zc_get_last_error());
        st = zc_sendrecv_stream(NULL, 0, -1, NULL, 0, -1, ZC_BYTE, comm, NULL);
        ok(st == ZC_ERR_UNSUPPORTED, "empty zc_sendrecv_stream: unsupported without a device");
        st = zc_stream_synchronize(comm, NULL);
        ok(st == ZC_ERR_UNSUPPORTED, "zc_stream_synchronize: unsupported without a device");
    } else {
        tap_skip(3, "a CUDA device is visible");
    }
}

static void test_collectives_stream(zc_comm_h comm)
{
    char buf[64];
    zc_transfer_t t = {0, 0, 8}, bad = {0, 5, 8}, two[2] = {{0, 0, 4}, {0, 0, 4}};
    int64_t counts[1] = {8}, displs[1] = {0}, neg[1] = {-1};

    bad_arg(zc_routed_sendrecv_stream(&t, -1, buf, buf, ZC_BYTE, comm, NULL), "ntransfers",
            "zc_routed_sendrecv_stream ntransfers");
    bad_arg(zc_routed_sendrecv_stream(NULL, 1, buf, buf, ZC_BYTE, comm, NULL), "transfers",
            "zc_routed_sendrecv_stream transfers");
    bad_arg(zc_routed_sendrecv_stream(&bad, 1, buf, buf, ZC_BYTE, comm, NULL), "transfers[0].dst",
            "zc_routed_sendrecv_stream dst out of range");
    bad_arg(zc_routed_sendrecv_stream(two, 2, buf, buf, ZC_BYTE, comm, NULL), "more than one",
            "zc_routed_sendrecv_stream rank is src twice");
    bad_arg(zc_routed_sendrecv_stream(&t, 1, NULL, buf, ZC_BYTE, comm, NULL), "sendbuf",
            "zc_routed_sendrecv_stream sendbuf");
    bad_arg(zc_routed_sendrecv_stream(&t, 1, buf, buf, (zc_datatype_t)-3, comm, NULL), "dtype",
            "zc_routed_sendrecv_stream dtype");
    refused_device(zc_routed_sendrecv_stream(&t, 1, buf, buf + 32, ZC_BYTE, comm, NULL),
                   "zc_routed_sendrecv_stream");

    bad_arg(zc_remap_alltoallv_stream(buf, NULL, displs, buf, counts, displs, ZC_BYTE, comm, NULL),
            "sendcounts", "zc_remap_alltoallv_stream sendcounts");
    bad_arg(zc_remap_alltoallv_stream(buf, counts, displs, buf, counts, neg, ZC_BYTE, comm, NULL),
            "rdispls[0]", "zc_remap_alltoallv_stream rdispls");
    bad_arg(zc_remap_alltoallv_stream(buf, neg, displs, buf, counts, displs, ZC_BYTE, comm, NULL),
            "sendcounts[0]", "zc_remap_alltoallv_stream negative count");
    bad_arg(zc_remap_alltoallv_stream(buf, counts, displs, NULL, counts, displs, ZC_BYTE, comm,
                                      NULL),
            "recvbuf", "zc_remap_alltoallv_stream recvbuf");
    bad_arg(zc_remap_alltoallv_stream(buf, counts, displs, buf, counts, displs, ZC_BYTE, NULL,
                                      NULL),
            "comm", "zc_remap_alltoallv_stream comm");
    refused_device(zc_remap_alltoallv_stream(buf, counts, displs, buf + 32, counts, displs,
                                             ZC_BYTE, comm, NULL),
                   "zc_remap_alltoallv_stream");
}

/* zc_ring_attn_fwd_stream / bwd_stream: each argument named, then host
 * buffers refused (here at once, with no communication). */
static void test_ring_attn_stream(zc_comm_h comm)
{
    static const int64_t lengths[] = {40, 24};
    float q[64 * 8], k[64 * 8], v[64 * 8], out[64 * 8], lse[64 * 2], g[4][64 * 8];
    zc_ring_attn_args_t a = ZC_RING_ATTN_ARGS_INITIALIZER, bad;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_plan_h plan = NULL;

    if (!ok(zc_plan_create(1, 1, 64, lengths, 2, &opts, &plan) == ZC_OK, "a one-rank plan"))
        return;
    a.num_heads_q = 2;
    a.num_heads_kv = 1;
    a.head_dim = 4;
    a.memtype = ZC_MEM_CUDA;
    a.tokens = 64;
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
    a.dout = g[0], a.dq = g[1], a.dk = g[2], a.dv = g[3];
    bad_arg(zc_ring_attn_fwd_stream(comm, NULL, &a, NULL), "plan", "zc_ring_attn_fwd_stream plan");
    bad_arg(zc_ring_attn_fwd_stream(comm, plan, NULL, NULL), "args",
            "zc_ring_attn_fwd_stream args");
    bad_arg(zc_ring_attn_fwd_stream(NULL, plan, &a, NULL), "comm", "zc_ring_attn_fwd_stream comm");
    bad = a, bad.dtype = ZC_INT32;
    bad_arg(zc_ring_attn_fwd_stream(comm, plan, &bad, NULL), "dtype",
            "zc_ring_attn_fwd_stream dtype");
    bad = a, bad.memtype = ZC_MEM_HOST;
    bad_arg(zc_ring_attn_fwd_stream(comm, plan, &bad, NULL), "memtype",
            "zc_ring_attn_fwd_stream host memtype (zc_ring_attn_fwd is the host form)");
    bad = a, bad.head_dim = 0;
    bad_arg(zc_ring_attn_fwd_stream(comm, plan, &bad, NULL), "head_dim",
            "zc_ring_attn_fwd_stream head_dim");
    bad = a, bad.tokens = 63;
    bad_arg(zc_ring_attn_fwd_stream(comm, plan, &bad, NULL), "tokens",
            "zc_ring_attn_fwd_stream buffers shorter than the plan's tokens");
    bad = a, bad.dq = NULL;
    bad_arg(zc_ring_attn_bwd_stream(comm, plan, &bad, NULL), "dq", "zc_ring_attn_bwd_stream dq");
    refused_device(zc_ring_attn_fwd_stream(comm, plan, &a, NULL), "zc_ring_attn_fwd_stream");
    bad = a, bad.dtype = ZC_FLOAT16;
    refused_device(zc_ring_attn_bwd_stream(comm, plan, &bad, NULL),
                   "zc_ring_attn_bwd_stream (float16 accepted, then the memory)");
    zc_plan_destroy(plan);
}

static void test_kernels_stream(void)
{
    int32_t cu[3] = {0, 5, 9}, down[3] = {0, 5, 3};
    float host[64];
    zc_attn_args_t a = {
        .size = sizeof(zc_attn_args_t), .batch = 2, .num_heads_q = 2, .num_heads_kv = 1,
        .head_dim = 4, .cu_seqlens_q = cu, .cu_seqlens_kv = cu, .causal = 1, .scale = 0.5f,
        .dtype = ZC_FLOAT32,
        .out_dtype = ZC_FLOAT32, .grad_dtype = ZC_FLOAT32, .q = host, .k = host, .v = host,
        .out = host, .lse = host, .dout = host, .dq = host, .dk = host, .dv = host};
    zc_attn_args_t b;

    bad_arg(zc_attn_fwd_stream(NULL, NULL), "args", "zc_attn_fwd_stream(NULL)");
    b = a, b.head_dim = 0;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "head_dim", "zc_attn_fwd_stream head_dim 0");
    b = a, b.head_dim = 300;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "head_dim", "zc_attn_fwd_stream head_dim 300");
    b = a, b.num_heads_q = 3, b.num_heads_kv = 2;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "num_heads_kv", "zc_attn_fwd_stream GQA ratio");
    b = a, b.dtype = ZC_INT32;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "dtype", "zc_attn_fwd_stream dtype");
    b = a, b.flags = ZC_ATTN_ACCUMULATE, b.out_dtype = ZC_BFLOAT16;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "out_dtype", "zc_attn_fwd_stream accumulate bf16");
    b = a, b.cu_seqlens_kv = down;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "cu_seqlens_kv", "zc_attn_fwd_stream decreasing");
    b = a, b.scale = INFINITY;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "scale", "zc_attn_fwd_stream scale");
    b = a, b.flags = 8;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "flags", "zc_attn_fwd_stream flags");
    /* one row of blocks per query head: grid y's 65535 is the limit */
    b = a, b.num_heads_q = ZC_ATTN_CUDA_MAX_HEADS + 1, b.num_heads_kv = 1;
    ok(zc_attn_fwd_stream(&b, NULL) == ZC_ERR_UNSUPPORTED && has("num_heads_q") &&
           has("65535"),
       "zc_attn_fwd_stream: 65536 query heads unsupported, the limit named (%s)",
       zc_get_last_error());
    b = a, b.grad_dtype = ZC_INT64;
    bad_arg(zc_attn_bwd_stream(&b, NULL), "grad_dtype", "zc_attn_bwd_stream grad_dtype");
    b = a, b.flags = ZC_ATTN_ACCUMULATE, b.grad_dtype = ZC_FLOAT16;
    bad_arg(zc_attn_bwd_stream(&b, NULL), "grad_dtype", "zc_attn_bwd_stream accumulate fp16");
    bad_arg(zc_attn_bwd_delta_stream(NULL, NULL), "args", "zc_attn_bwd_delta_stream(NULL)");
    /* masks: the window's checks are the CPU calls'; a window or the full
     * mask passes them and gets as far as the device */
    b = a, b.flags = ZC_ATTN_WINDOW, b.window_left = -2;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "window_left", "zc_attn_fwd_stream window_left -2");
    b = a, b.flags = ZC_ATTN_WINDOW, b.window_right = 3;
    bad_arg(zc_attn_bwd_stream(&b, NULL), "window_right",
            "zc_attn_bwd_stream window_right 3 with causal");
    b = a, b.window_left = 3;
    bad_arg(zc_attn_fwd_stream(&b, NULL), "window_left",
            "zc_attn_fwd_stream window_left without ZC_ATTN_WINDOW");
    b = a, b.flags = ZC_ATTN_WINDOW, b.window_left = 3, b.window_right = 0;
    refused_device(zc_attn_fwd_stream(&b, NULL), "zc_attn_fwd_stream, a causal window of 4");
    b = a, b.causal = 0, b.flags = ZC_ATTN_WINDOW, b.window_left = 2, b.window_right = 2;
    refused_device(zc_attn_bwd_stream(&b, NULL), "zc_attn_bwd_stream, a local window (2, 2)");
    b = a, b.causal = 0, b.flags = ZC_ATTN_WINDOW, b.window_left = b.window_right = -1;
    refused_device(zc_attn_fwd_stream(&b, NULL), "zc_attn_fwd_stream, the full mask (-1, -1)");
    refused_device(zc_attn_fwd_stream(&a, NULL), "zc_attn_fwd_stream");
    refused_device(zc_attn_bwd_stream(&a, NULL), "zc_attn_bwd_stream");
    b = a, b.delta = host;
    refused_device(zc_attn_bwd_delta_stream(&b, NULL), "zc_attn_bwd_delta_stream");

    bad_arg(zc_attn_merge_stream(host, host, -1, 1, 4, host, host, NULL), "tokens",
            "zc_attn_merge_stream tokens");
    bad_arg(zc_attn_merge_stream(host, host, 1, 0, 4, host, host, NULL), "num_heads",
            "zc_attn_merge_stream num_heads");
    bad_arg(zc_attn_merge_stream(host, host, 1, 1, 0, host, host, NULL), "head_dim",
            "zc_attn_merge_stream head_dim");
    refused_device(zc_attn_merge_stream(host, host, 2, 1, 4, host, host, NULL),
                   "zc_attn_merge_stream");
    bad_arg(zc_attn_convert_stream(host, ZC_INT64, 4, ZC_FLOAT32, host, NULL), "src_dtype",
            "zc_attn_convert_stream src_dtype");
    bad_arg(zc_attn_convert_stream(host, ZC_FLOAT32, -4, ZC_FLOAT16, host, NULL), "count",
            "zc_attn_convert_stream count");
    refused_device(zc_attn_convert_stream(host, ZC_FLOAT32, 4, ZC_BFLOAT16, host + 8, NULL),
                   "zc_attn_convert_stream");

    bad_arg(zc_zigzag_pack_stream(host, cu, 2, 4, 0, 0, host, NULL), "ring_size",
            "zc_zigzag_pack_stream ring_size");
    bad_arg(zc_zigzag_pack_stream(host, cu, 2, 4, 2, 2, host, NULL), "position",
            "zc_zigzag_pack_stream position");
    bad_arg(zc_zigzag_pack_stream(host, NULL, 2, 4, 2, 0, host, NULL), "cu_seqlens",
            "zc_zigzag_pack_stream cu_seqlens");
    bad_arg(zc_zigzag_unpack_stream(host, down, 2, 4, 2, 0, host, NULL), "cu_seqlens",
            "zc_zigzag_unpack_stream decreasing");
    bad_arg(zc_zigzag_unpack_stream(host, cu, 2, 0, 2, 0, host, NULL), "token_bytes",
            "zc_zigzag_unpack_stream token_bytes");
    bad_arg(zc_zigzag_unpack_stream(NULL, cu, 2, 4, 2, 0, host, NULL), "share",
            "zc_zigzag_unpack_stream share");
    refused_device(zc_zigzag_pack_stream(host, cu, 2, 4, 2, 1, host + 16, NULL),
                   "zc_zigzag_pack_stream");
}

#ifdef HAVE_NCCL
static void test_nccl_status(void)
{
    ok(zc_nccl_status(ncclSuccess, "x") == ZC_OK, "ncclSuccess -> ZC_OK");
    ok(zc_nccl_status(ncclInProgress, "x") == ZC_INPROGRESS, "ncclInProgress -> ZC_INPROGRESS");
    ok(zc_nccl_status(ncclRemoteError, "ncclSend") == ZC_ERR_PEER_FAILED && has("ncclSend") &&
       has("nccl"), "ncclRemoteError -> ZC_ERR_PEER_FAILED, the call named");
    ok(zc_nccl_status(ncclInvalidArgument, "x") == ZC_ERR_INVALID_ARG &&
       zc_nccl_status(ncclInvalidUsage, "x") == ZC_ERR_INVALID_ARG,
       "invalid argument / usage -> ZC_ERR_INVALID_ARG");
    ok(zc_nccl_status(ncclSystemError, "x") == ZC_ERR_TRANSPORT &&
       zc_nccl_status(ncclUnhandledCudaError, "x") == ZC_ERR_TRANSPORT &&
       zc_nccl_status(ncclInternalError, "x") == ZC_ERR_TRANSPORT,
       "system, CUDA and internal errors -> ZC_ERR_TRANSPORT");
}
#endif

/* Slices tile the transfer in order, whole elements, sizes within one. */
static void test_route_geometry(void)
{
    static const int64_t counts[] = {0, 1, 3, 7, 64, 1000, 1 << 20, (1 << 20) + 5};
    int slices_ok = 1, chunks_ok = 1;

    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        for (int nrails = 1; nrails <= 8; nrails++) {
            int64_t next = 0, lo = INT64_MAX, hi = 0;
            for (int k = 0; k < nrails; k++) {
                int64_t off, len;
                zc_route_slice(counts[i], nrails, NULL, k, &off, &len);
                slices_ok &= off == next && len >= 0;
                next = off + len;
                lo = len < lo ? len : lo;
                hi = len > hi ? len : hi;
            }
            slices_ok &= next == counts[i] && hi - lo <= 1;
        }
        for (size_t elem = 1; elem <= 8; elem *= 2) {
            for (int64_t chunk = -1; chunk <= (1 << 20); chunk = chunk <= 0 ? 1000 : chunk * 33) {
                size_t bytes = (size_t)counts[i] * elem;
                size_t c = zc_route_chunk(bytes, elem, chunk);
                chunks_ok &= c % elem == 0 && c > 0 &&
                             (bytes + c - 1) / c <= ZC_ROUTED_MAX_CHUNKS &&
                             (chunk <= 0 || c >= (size_t)chunk);
            }
        }
    }
    ok(slices_ok, "route slices cover each transfer in order, sizes within one element");
    ok(chunks_ok, "route chunks: whole elements, at least ZC_ROUTED_CHUNK, at most 1024");
}

static void test_kernel_blocks(void)
{
    int32_t cu[5] = {0, 0, 17, 49, 50}, blocks[2 * 16];
    int64_t n = zc_attn_gpu_blocks(cu, 4, 16, NULL);
    int64_t m = zc_attn_gpu_blocks(cu, 4, 16, blocks);

    ok(n == 5 && m == 5, "block count: 0 + 2 + 2 + 1 blocks of 16 rows (got %lld)", (long long)n);
    ok(blocks[0] == 1 && blocks[1] == 0 && blocks[2] == 1 && blocks[3] == 1 && blocks[4] == 2 &&
       blocks[5] == 0 && blocks[8] == 3 && blocks[9] == 0,
       "blocks list (segment, index) in order, empty segments skipped");
}

/* Pack every ring position's share on the host through the ranges, then
 * unpack all of them into an empty buffer: the sequences come back exactly,
 * each position's share has the plan's size, chunks i and 2G-1-i. */
static void test_zigzag_ranges(void)
{
    static const int32_t cu[] = {0, 1, 2, 9, 9, 40, 163, 1187};
    const int batch = (int)(sizeof(cu) / sizeof(cu[0])) - 1;
    const size_t tb = 6;
    const size_t bytes = (size_t)cu[batch] * tb;
    unsigned char *seq = malloc(bytes), *back = calloc(bytes, 1), *share = malloc(bytes);
    int64_t ranges[6 * 8];
    int exact = 1, sizes = 1, order = 1;

    for (size_t i = 0; i < bytes; i++)
        seq[i] = (unsigned char)(i * 131 + 7);
    for (int g = 1; g <= 5; g++) {
        memset(back, 0, bytes);
        for (int pos = 0; pos < g; pos++) {
            int n, m;
            int64_t total = 0, expect = 0;
            zc_zigzag_ranges(cu, batch, tb, g, pos, 1, ranges, &n);
            for (int r = 0; r < n; r++) {
                memcpy(share + ranges[3 * r + 1], seq + ranges[3 * r], (size_t)ranges[3 * r + 2]);
                order &= ranges[3 * r + 1] == total;
                total += ranges[3 * r + 2];
            }
            for (int b = 0; b < batch; b++)
                expect += zc_zigzag_share(cu[b + 1] - cu[b], g, pos) * (int64_t)tb;
            sizes &= total == expect;
            zc_zigzag_ranges(cu, batch, tb, g, pos, 0, ranges, &m);
            for (int r = 0; r < m; r++)
                memcpy(back + ranges[3 * r + 1], share + ranges[3 * r], (size_t)ranges[3 * r + 2]);
        }
        exact &= memcmp(seq, back, bytes) == 0;
    }
    ok(order, "zigzag share: chunks packed back to back, sequence after sequence");
    ok(sizes, "zigzag share sizes match the planner's zc_zigzag_share");
    ok(exact, "every position's share unpacked rebuilds the sequences (G = 1..5)");
    free(seq);
    free(back);
    free(share);
}

int main(void)
{
    zc_comm_h comm = one_rank_comm();

    test_features();
    if (!ok(comm != NULL, "a one-rank communicator (%s)", zc_get_last_error()))
        return tap_done();
    test_memtypes(comm);
    test_p2p_stream(comm);
    test_collectives_stream(comm);
    test_ring_attn_stream(comm);
    test_kernels_stream();
#ifdef HAVE_NCCL
    test_nccl_status();
#endif
    test_route_geometry();
    test_kernel_blocks();
    test_zigzag_ranges();
    zc_comm_destroy(comm);
    return tap_done();
}

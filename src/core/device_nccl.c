/* NCCL backend of the device path (src/core/device.h).
 *
 * The NCCL communicator is built from our own: rank 0 makes the
 * ncclUniqueId and sends it to every rank over the host path, and every
 * rank joins with a non-blocking communicator (config.blocking = 0), so
 * that no NCCL call can block forever: each wait polls
 * ncclCommGetAsyncError (and the stream) against the communicator's
 * timeout, watches the peers through the host path, and on a failure or
 * the timeout aborts the NCCL communicator (ncclCommAbort).  After an abort
 * the backend keeps returning the error that caused it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nccl.h declares a few functions as f() instead of f(void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "kernels/cuda/cuda_mem.h"
#include "src/common/clock.h"
#include "src/core/device.h"
#include "src/common/log.h"
#include "src/core/memtype.h"
#include "src/core/p2p.h"
#include "src/common/status.h"
#include "src/core/device_nccl.h"

/* How often a wait asks the host path whether a peer died. */
#define ZC_NCCL_PEER_CHECK_MS 100
/* Longest nap between two polls of a wait. */
#define ZC_NCCL_MAX_NAP_US 1000

typedef struct {
    zc_device_t base;      /* comm, and the sticky failure */
    ncclComm_t nccl;       /* NULL once aborted or never made */
} zc_nccl_t;

/* What rank 0 sends every rank: its verdict, then the id. */
typedef struct {
    int32_t status;
    int32_t reserved;
    ncclUniqueId id;
} zc_nccl_id_msg_t;

zc_status_t zc_nccl_status(int result, const char *what)
{
    ncclResult_t r = (ncclResult_t)result;
    const char *last = ncclGetLastError(NULL);
    zc_status_t st;

    switch (r) {
    case ncclSuccess:
        return ZC_OK;
    case ncclInProgress:
        return ZC_INPROGRESS;
    case ncclRemoteError:
        st = ZC_ERR_PEER_FAILED;
        break;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
        st = ZC_ERR_INVALID_ARG;
        break;
    default: /* unhandled CUDA error, system error, internal error */
        st = ZC_ERR_TRANSPORT;
        break;
    }
    return zc_error(st, "nccl: %s failed: %s%s%s", what, ncclGetErrorString(r),
                    last && *last ? ": " : "", last ? last : "");
}

/* Abort the NCCL communicator and remember why; returns `st`. */
static zc_status_t zc_nccl_fail(zc_nccl_t *dev, zc_status_t st)
{
    snprintf(dev->base.why, sizeof(dev->base.why), "%s", zc_get_last_error());
    if (dev->nccl) {
        zc_log_warn("aborting the NCCL communicator: %s", dev->base.why);
        (void)ncclCommAbort(dev->nccl); /* blocking even in non-blocking mode */
        dev->nccl = NULL;
    }
    dev->base.failed = st;
    return st;
}

static int zc_nccl_dead_peer(zc_nccl_t *dev)
{
    /* The host transport notices broken connections while it progresses. */
    zc_comm_h comm = dev->base.comm;

    comm->host_ops->progress(comm->host);
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank && zc_comm_peer_failed(comm, r))
            return r;
    return -1;
}

/* Wait until the NCCL communicator has left ncclInProgress and, when
 * `stream_done`, until `stream` is done too; `what` names the wait. */
static zc_status_t zc_nccl_watch(zc_nccl_t *dev, const char *what, int stream_done,
                                 void *stream)
{
    int64_t deadline = zc_now_ms() + dev->base.comm->timeout_ms;
    int64_t peer_check = zc_now_ms() + ZC_NCCL_PEER_CHECK_MS;
    long nap_us = 10;

    for (;;) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(dev->nccl, &async);
        zc_status_t st;

        if (r != ncclSuccess)
            return zc_nccl_fail(dev, zc_nccl_status(r, "ncclCommGetAsyncError"));
        if (async != ncclSuccess && async != ncclInProgress)
            return zc_nccl_fail(dev, zc_nccl_status(async, what));
        if (async == ncclSuccess) {
            if (!stream_done)
                return ZC_OK;
            st = zc_cuda_stream_query(stream);
            if (st == ZC_OK)
                return ZC_OK;
            if (st != ZC_INPROGRESS)
                return zc_nccl_fail(dev, st);
        }
        if (zc_now_ms() >= peer_check) {
            int dead = zc_nccl_dead_peer(dev);
            if (dead >= 0)
                return zc_nccl_fail(dev, zc_error(ZC_ERR_PEER_FAILED, "rank %d failed during %s",
                                                  dead, what));
            peer_check = zc_now_ms() + ZC_NCCL_PEER_CHECK_MS;
        }
        if (zc_ms_left(deadline) == 0)
            return zc_nccl_fail(dev, zc_error(ZC_ERR_TIMEOUT, "%s did not finish within %d ms",
                                              what, dev->base.comm->timeout_ms));
        struct timespec nap = {0, nap_us * 1000};
        nanosleep(&nap, NULL);
        nap_us = nap_us * 2 > ZC_NCCL_MAX_NAP_US ? ZC_NCCL_MAX_NAP_US : nap_us * 2;
    }
}

/* Rank 0 makes the id and sends it, with its verdict, to every rank. */
static zc_status_t zc_nccl_share_id(zc_comm_h comm, ncclUniqueId *id)
{
    const uint64_t tag = ZC_TAG(0, ZC_TAG_CLASS_DEVICE, 0);
    zc_nccl_id_msg_t msg;
    zc_status_t st;

    memset(&msg, 0, sizeof(msg));
    if (comm->rank != 0) {
        zc_request_h req;
        ZC_CHECK(zc_p2p_post(comm, ZC_REQ_RECV, &msg, sizeof(msg), 0, tag, ZC_RAIL_AUTO, &req));
        ZC_CHECK(zc_p2p_wait(&req));
        if (msg.status != ZC_OK)
            return zc_error(msg.status, "rank 0 could not make the NCCL id (see its log)");
        *id = msg.id;
        return ZC_OK;
    }
    st = zc_nccl_status(ncclGetUniqueId(&msg.id), "ncclGetUniqueId");
    msg.status = st;
    for (int r = 1; r < comm->size; r++) {
        zc_request_h req;
        ZC_CHECK(zc_p2p_post(comm, ZC_REQ_SEND, &msg, sizeof(msg), r, tag, ZC_RAIL_AUTO, &req));
        ZC_CHECK(zc_p2p_wait(&req));
    }
    if (st == ZC_OK)
        *id = msg.id;
    return st;
}

static zc_status_t zc_nccl_init(zc_nccl_t *dev)
{
    zc_comm_h comm = dev->base.comm;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclResult_t r;

    ZC_CHECK(zc_nccl_share_id(comm, &id));
    config.blocking = 0;
    r = ncclCommInitRankConfig(&dev->nccl, comm->size, id, comm->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        dev->nccl = NULL; /* nothing to abort */
        return zc_nccl_status(r, "ncclCommInitRankConfig");
    }
    ZC_CHECK(zc_nccl_watch(dev, "NCCL communicator creation", 0, NULL));
    zc_log_info("NCCL communicator up: rank %d of %d", comm->rank, comm->size);
    return ZC_OK;
}

static void zc_nccl_release(zc_device_t *base)
{
    zc_nccl_t *dev = (zc_nccl_t *)base;

    if (dev->nccl) {
        /* Finalize flushes what is enqueued; abort if that does not end. */
        zc_status_t st = zc_nccl_status(ncclCommFinalize(dev->nccl), "ncclCommFinalize");
        if (st == ZC_OK || st == ZC_INPROGRESS)
            st = zc_nccl_watch(dev, "NCCL communicator finalization", 0, NULL);
        if (st == ZC_OK)
            (void)ncclCommDestroy(dev->nccl);
        else
            (void)zc_nccl_fail(dev, st);
    }
    free(dev);
}

static zc_status_t zc_nccl_group(zc_device_t *base, const zc_device_op_t *ops, int nops,
                                 void *stream)
{
    zc_nccl_t *dev = (zc_nccl_t *)base;
    cudaStream_t s = (cudaStream_t)stream;
    zc_status_t st = ZC_OK;
    ncclResult_t r;

    ZC_CHECK(zc_nccl_status(ncclGroupStart(), "ncclGroupStart"));
    for (int i = 0; i < nops && st == ZC_OK; i++) {
        const zc_device_op_t *op = &ops[i];
        if (op->kind == ZC_REQ_SEND)
            r = ncclSend(op->buf, op->bytes, ncclUint8, op->peer, dev->nccl, s);
        else
            r = ncclRecv(op->buf, op->bytes, ncclUint8, op->peer, dev->nccl, s);
        st = zc_nccl_status(r, op->kind == ZC_REQ_SEND ? "ncclSend" : "ncclRecv");
        if (st == ZC_INPROGRESS)
            st = ZC_OK;
    }
    /* The group must be closed even when an op failed. */
    r = ncclGroupEnd();
    if (st != ZC_OK)
        return zc_nccl_fail(dev, st);
    st = zc_nccl_status(r, "ncclGroupEnd");
    if (st == ZC_INPROGRESS)
        st = zc_nccl_watch(dev, "enqueueing NCCL sends and receives", 0, NULL);
    return st == ZC_OK ? ZC_OK : zc_nccl_fail(dev, st);
}

static zc_status_t zc_nccl_sync(zc_device_t *base, void *stream)
{
    return zc_nccl_watch((zc_nccl_t *)base, "a stream with NCCL transfers", 1, stream);
}

static zc_status_t zc_nccl_alloc(zc_device_t *base, size_t bytes, void *stream, void **ptr)
{
    (void)base;
    return zc_cuda_alloc_async(bytes, stream, ptr);
}

static void zc_nccl_free(zc_device_t *base, void *ptr, void *stream)
{
    (void)base;
    zc_cuda_free_async(ptr, stream);
}

static zc_status_t zc_nccl_copy(zc_device_t *base, void *dst, const void *src, size_t bytes,
                                void *stream)
{
    (void)base;
    return zc_cuda_copy_async(dst, src, bytes, stream);
}

static void zc_nccl_abort(zc_device_t *base, zc_status_t status)
{
    (void)zc_nccl_fail((zc_nccl_t *)base, status);
}

static const zc_device_ops_t zc_nccl_ops = {
    .name = "NCCL", .check_memory = zc_memtype_check_device, .group = zc_nccl_group,
    .sync = zc_nccl_sync, .alloc = zc_nccl_alloc, .free = zc_nccl_free, .copy = zc_nccl_copy,
    .release = zc_nccl_release, .abort = zc_nccl_abort,
};

zc_status_t zc_device_create(zc_comm_h comm)
{
    zc_nccl_t *dev = calloc(1, sizeof(*dev));
    zc_status_t st;

    if (!dev)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the NCCL backend");
    dev->base.ops = &zc_nccl_ops;
    dev->base.comm = comm;
    comm->device = &dev->base;
    st = zc_nccl_init(dev);
    if (st != ZC_OK)
        (void)zc_nccl_fail(dev, st);
    return st;
}

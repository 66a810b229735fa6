/* NCCL backend of the device path (src/core/device.h).
 *
 * The NCCL communicator is built from our own: rank 0 makes the
 * ncclUniqueId and sends it to every rank over the host path, and every
 * rank joins with a non-blocking communicator (config.blocking = 0), so
 * that no NCCL call can block forever: each wait polls
 * ncclCommGetAsyncError (and the stream) against the communicator's
 * timeout, watches the peers through the host path, and on a failure or
 * the timeout aborts the NCCL communicator (ncclCommAbort).  After an abort
 * the backend keeps returning the error that caused it.
 *
 * On a stream the timeout measures the NCCL work only, not the compute
 * queued before it: every group of sends and receives is bracketed by two
 * events, and a group times out when the stream has reached it (its first
 * event is done) but it has not finished (its second is not) for the
 * timeout.  A long backward before a transfer is no reason to abort. */
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

/* Groups of sends and receives followed at once; a group enqueued while
 * that many are still running goes untimed (it still ends in an error if a
 * peer dies or NCCL fails).  Their events are kept for the next groups
 * (spare), so that a stream call makes none once that many were made. */
#define ZC_NCCL_MARKS 64

/* One group on its stream: `start` is done when the stream reached it,
 * `end` when it finished; started_ms is when `start` was first seen done
 * (0: not yet). */
typedef struct {
    void *start, *end;
    int64_t started_ms;
} zc_nccl_mark_t;

typedef struct {
    zc_device_t base;      /* comm, and the sticky failure */
    ncclComm_t nccl;       /* NULL once aborted or never made */
    zc_nccl_mark_t marks[ZC_NCCL_MARKS];
    int nmarks;
    void *spare[2 * ZC_NCCL_MARKS]; /* events of finished marks */
    int nspare;
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

/* An event for a mark: a spare one, or a new one. */
static zc_status_t zc_nccl_event(zc_nccl_t *dev, void **event)
{
    if (dev->nspare > 0) {
        *event = dev->spare[--dev->nspare];
        return ZC_OK;
    }
    return zc_cuda_event_create(event);
}

/* Keep an event for a later mark (a record again is safe: the waits on it
 * are queries of the host, made before). */
static void zc_nccl_event_put(zc_nccl_t *dev, void *event)
{
    if (event && dev->nspare < 2 * ZC_NCCL_MARKS)
        dev->spare[dev->nspare++] = event;
    else
        zc_cuda_event_destroy(event);
}

static void zc_nccl_mark_drop(zc_nccl_t *dev, int i)
{
    zc_nccl_event_put(dev, dev->marks[i].start);
    zc_nccl_event_put(dev, dev->marks[i].end);
    dev->marks[i] = dev->marks[--dev->nmarks];
}

/* Forget the groups that finished; return for how long the oldest group
 * the stream has reached has been running (0: none is).  *st is the CUDA
 * error if an event cannot be asked. */
static int64_t zc_nccl_stuck_ms(zc_nccl_t *dev, zc_status_t *st)
{
    const int64_t now = zc_now_ms();
    int64_t stuck = 0;

    *st = ZC_OK;
    for (int i = 0; i < dev->nmarks;) {
        zc_nccl_mark_t *m = &dev->marks[i];
        zc_status_t q = zc_cuda_event_query(m->end);

        if (q == ZC_OK) {
            zc_nccl_mark_drop(dev, i); /* moves the last mark into i */
            continue;
        }
        if (q == ZC_INPROGRESS && m->started_ms == 0) {
            q = zc_cuda_event_query(m->start);
            if (q == ZC_OK)
                m->started_ms = now;
            q = q == ZC_OK ? ZC_INPROGRESS : q;
        }
        if (q != ZC_INPROGRESS) {
            *st = q;
            return 0;
        }
        if (m->started_ms != 0 && now - m->started_ms > stuck)
            stuck = now - m->started_ms;
        i++;
    }
    return stuck;
}

/* Bracket the next group on `stream`: its start event, recorded now; NULL
 * when ZC_NCCL_MARKS groups are still running or events fail (the group
 * then goes untimed). */
static zc_nccl_mark_t *zc_nccl_mark_begin(zc_nccl_t *dev, void *stream)
{
    zc_nccl_mark_t *m;
    zc_status_t st;

    if (dev->nmarks == ZC_NCCL_MARKS)
        (void)zc_nccl_stuck_ms(dev, &st);
    if (dev->nmarks == ZC_NCCL_MARKS)
        return NULL;
    m = &dev->marks[dev->nmarks];
    *m = (zc_nccl_mark_t){NULL, NULL, 0};
    if (zc_nccl_event(dev, &m->start) != ZC_OK || zc_nccl_event(dev, &m->end) != ZC_OK ||
        zc_cuda_event_record(m->start, stream) != ZC_OK) {
        zc_nccl_event_put(dev, m->start);
        zc_nccl_event_put(dev, m->end);
        zc_error_clear();
        return NULL;
    }
    dev->nmarks++;
    return m;
}

/* The group bracketed by `m` is enqueued (ok) or not: record its end, or
 * forget it. */
static void zc_nccl_mark_end(zc_nccl_t *dev, zc_nccl_mark_t *m, int ok, void *stream)
{
    if (!m)
        return;
    if (ok) {
        if (zc_cuda_event_record(m->end, stream) == ZC_OK)
            return;
        zc_error_clear(); /* the group runs untimed; it did not fail */
    }
    /* Nothing drops marks between zc_nccl_mark_begin and here (the
     * enqueue's waits have no stream), so m is still where it was. */
    zc_nccl_mark_drop(dev, (int)(m - dev->marks));
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
 * `stream_done`, until `stream` is done too; `what` names the wait.  The
 * timeout runs from the start of a wait without a stream; with one, it
 * applies to each group of transfers from when the stream reached it. */
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
        if (stream_done) {
            zc_status_t qst;
            int64_t stuck = zc_nccl_stuck_ms(dev, &qst);
            if (qst != ZC_OK)
                return zc_nccl_fail(dev, qst);
            if (stuck >= dev->base.comm->timeout_ms)
                return zc_nccl_fail(dev, zc_error(ZC_ERR_TIMEOUT,
                                                  "%s: NCCL transfers the stream reached %lld ms "
                                                  "ago have not finished (timeout %d ms)",
                                                  what, (long long)stuck,
                                                  dev->base.comm->timeout_ms));
        } else if (zc_ms_left(deadline) == 0) {
            return zc_nccl_fail(dev, zc_error(ZC_ERR_TIMEOUT, "%s did not finish within %d ms",
                                              what, dev->base.comm->timeout_ms));
        }
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

    while (dev->nmarks > 0)
        zc_nccl_mark_drop(dev, dev->nmarks - 1);
    while (dev->nspare > 0)
        zc_cuda_event_destroy(dev->spare[--dev->nspare]);
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
    zc_nccl_mark_t *mark = zc_nccl_mark_begin(dev, stream);
    zc_status_t st = ZC_OK;
    ncclResult_t r;

    st = zc_nccl_status(ncclGroupStart(), "ncclGroupStart");
    if (st != ZC_OK) {
        zc_nccl_mark_end(dev, mark, 0, stream);
        return st;
    }
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
    if (st != ZC_OK) {
        st = zc_nccl_fail(dev, st);
        zc_nccl_mark_end(dev, mark, 0, stream);
        return st;
    }
    st = zc_nccl_status(r, "ncclGroupEnd");
    if (st == ZC_INPROGRESS)
        st = zc_nccl_watch(dev, "enqueueing NCCL sends and receives", 0, NULL);
    if (st != ZC_OK)
        st = zc_nccl_fail(dev, st);
    zc_nccl_mark_end(dev, mark, st == ZC_OK, stream);
    return st;
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
    dev->base.cuda_device = -1;
    comm->device = &dev->base;
    st = zc_cuda_device_get(&dev->base.cuda_device);
    if (st == ZC_OK)
        st = zc_nccl_init(dev);
    if (st != ZC_OK)
        (void)zc_nccl_fail(dev, st);
    return st;
}

/* The emulated device backend of the tests: see device_emu.h. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_emu.h"
#include "src/common/clock.h"
#include "src/core/p2p.h"
#include "src/common/status.h"
#include "transport/transport.h"

/* Tags of the emulated NCCL traffic, above what the library's own device
 * setup and agreements use in the same class. */
#define EMU_TAG_DATA 0xc0000000u
#define EMU_TAG_ACK 0xc0000001u
#define EMU_WAIT_MS 10

typedef struct {
    zc_request_h req;
    int peer;
    int acks;        /* a data receive: acknowledge it once it lands */
} emu_req_t;

/* Progress every request once; a landed receive posts its ack (into
 * reqs[*n]).  *moved tells whether anything finished. */
static zc_status_t emu_pass(zc_comm_h comm, emu_req_t *reqs, int *n, int *left, int *moved)
{
    static const char ack = 1;

    for (int i = 0; i < *n; i++) {
        zc_status_t st;

        if (!reqs[i].req)
            continue;
        st = zc_p2p_test(&reqs[i].req);
        if (st == ZC_INPROGRESS)
            continue;
        reqs[i].req = NULL;
        (*left)--;
        *moved = 1;
        if (st != ZC_OK)
            return st;
        if (reqs[i].acks) {
            ZC_CHECK(zc_p2p_post(comm, ZC_REQ_SEND, (void *)&ack, 1, reqs[i].peer,
                                 ZC_TAG(comm->rank, ZC_TAG_CLASS_DEVICE, EMU_TAG_ACK),
                                 ZC_RAIL_AUTO, &reqs[*n].req));
            reqs[(*n)++].peer = reqs[i].peer;
            (*left)++;
        }
    }
    return ZC_OK;
}

zc_status_t device_emu_group(zc_comm_h comm, const zc_device_op_t *ops, int nops)
{
    /* per op its data request, per send the ack it waits for, per receive
     * the ack it sends */
    emu_req_t *reqs = calloc(2 * (size_t)nops + 1, sizeof(*reqs));
    static char sink[2 * 1024];
    int n = 0, left = 0, nsink = 0, dead, dead_seen = 0;
    int64_t stalled_since = zc_now_ms();
    zc_status_t st = ZC_OK;

    if (!reqs)
        return zc_error(ZC_ERR_NO_MEMORY, "emulated device: a group of %d", nops);
    for (int i = 0; i < nops && st == ZC_OK; i++) {
        const zc_device_op_t *op = &ops[i];
        int sender = op->kind == ZC_REQ_SEND ? comm->rank : op->peer;

        st = zc_p2p_post(comm, op->kind, op->buf, op->bytes, op->peer,
                         ZC_TAG(sender, ZC_TAG_CLASS_DEVICE, EMU_TAG_DATA), ZC_RAIL_AUTO,
                         &reqs[n].req);
        if (st != ZC_OK)
            break;
        reqs[n].peer = op->peer;
        reqs[n++].acks = op->kind == ZC_REQ_RECV;
        left++;
        if (op->kind == ZC_REQ_SEND) {
            st = zc_p2p_post(comm, ZC_REQ_RECV, &sink[nsink++ % sizeof(sink)], 1, op->peer,
                             ZC_TAG(op->peer, ZC_TAG_CLASS_DEVICE, EMU_TAG_ACK), ZC_RAIL_AUTO,
                             &reqs[n].req);
            if (st != ZC_OK)
                break;
            reqs[n++].peer = op->peer;
            left++;
        }
    }
    while (st == ZC_OK && left > 0) {
        int moved = 0;

        st = emu_pass(comm, reqs, &n, &left, &moved);
        if (st != ZC_OK || left == 0)
            break;
        if (moved) {
            stalled_since = zc_now_ms();
            dead_seen = 0;
            continue;
        }
        /* Only a peer this rank still waits on counts: one whose part of
         * the group is over may leave, as NCCL's peers do.  The first time
         * one is seen gone, one more pass (which progresses first) takes
         * what it sent before it left: an ack of this rank's send. */
        dead = -1;
        for (int i = 0; i < n && dead < 0; i++)
            if (reqs[i].req && zc_comm_peer_failed(comm, reqs[i].peer))
                dead = reqs[i].peer;
        if (dead >= 0 && dead_seen++ > 0) {
            st = zc_error(ZC_ERR_PEER_FAILED, "emulated device: rank %d failed during a "
                          "group of %d sends and receives", dead, nops);
            break;
        }
        if (dead >= 0)
            continue;
        if (zc_now_ms() - stalled_since > comm->timeout_ms) {
            st = zc_error(ZC_ERR_TIMEOUT, "emulated device: a group of %d sends and receives "
                          "made no progress for %d ms: the peers' groups do not match (NCCL "
                          "would hang here)", nops, comm->timeout_ms);
            break;
        }
        comm->host_ops->wait_event(comm->host, EMU_WAIT_MS);
    }
    for (int i = 0; i < n; i++)
        if (reqs[i].req)
            zc_p2p_abandon(&reqs[i].req, st);
    free(reqs);
    return st;
}

/* ---- the backend ------------------------------------------------------------ */

static zc_status_t emu_check_memory(const void *buf, const char *arg)
{
    (void)buf, (void)arg;
    return ZC_OK; /* the emulated device's memory is host memory */
}

static void emu_abort(zc_device_t *dev, zc_status_t status)
{
    snprintf(dev->why, sizeof(dev->why), "%s", zc_get_last_error());
    dev->failed = status;
}

/* A failed group leaves receives UCX may still fill: as NCCL's abort, the
 * backend is unusable from then on. */
static zc_status_t emu_group(zc_device_t *dev, const zc_device_op_t *ops, int nops, void *stream)
{
    zc_status_t st;

    (void)stream;
    if (dev->failed != ZC_OK)
        return zc_error(dev->failed, "emulated device: unusable after: %s", dev->why);
    st = device_emu_group(dev->comm, ops, nops);
    if (st != ZC_OK)
        emu_abort(dev, st);
    return st;
}

static zc_status_t emu_sync(zc_device_t *dev, void *stream)
{
    (void)dev, (void)stream;
    return ZC_OK; /* every call ran to completion when it was made */
}

static zc_status_t emu_alloc(zc_device_t *dev, size_t bytes, void *stream, void **ptr)
{
    (void)dev, (void)stream;
    *ptr = malloc(bytes ? bytes : 1);
    if (!*ptr)
        return zc_error(ZC_ERR_NO_MEMORY, "emulated device: cannot allocate %zu bytes", bytes);
    memset(*ptr, 0xa5, bytes); /* device memory starts as garbage */
    return ZC_OK;
}

static void emu_free(zc_device_t *dev, void *ptr, void *stream)
{
    (void)stream;
    if (dev->failed == ZC_OK)
        free(ptr); /* else an abandoned receive may still land in it: leak it */
}

static zc_status_t emu_copy(zc_device_t *dev, void *dst, const void *src, size_t bytes,
                            void *stream)
{
    (void)dev, (void)stream;
    memmove(dst, src, bytes);
    return ZC_OK;
}

static void emu_release(zc_device_t *dev)
{
    free(dev);
}

static const zc_device_ops_t emu_device_ops = {
    .name = "emulated", .check_memory = emu_check_memory, .group = emu_group,
    .sync = emu_sync, .alloc = emu_alloc, .free = emu_free, .copy = emu_copy,
    .release = emu_release, .abort = emu_abort,
};

zc_status_t device_emu_install(zc_comm_h comm)
{
    zc_device_t *dev = calloc(1, sizeof(*dev));
    zc_status_t st;

    if (!dev)
        return zc_error(ZC_ERR_NO_MEMORY, "emulated device: no memory");
    dev->ops = &emu_device_ops;
    dev->cuda_device = -1;
    st = zc_device_install(comm, dev);
    if (st != ZC_OK)
        free(dev);
    return st;
}

/* The CUDA state of the stream engine on a communicator (stream_cuda.h).
 *
 * The engine used to make a communication stream and its events for every
 * call, and take its memory with cudaMallocAsync every call; now the stream
 * is made once per communicator, an event number is made once and recorded
 * again by every later call (a stream wait sees the latest record before
 * it, so reuse is safe once the earlier waits are enqueued, which they are
 * when the number is recorded again), and the memory comes from the
 * engine's arena (stream_keep.c), which asks for it here rarely.
 *
 * It calls the CUDA runtime only through kernels/cuda/cuda_mem.h, so that
 * tests/test_stream_cuda runs it on a fake of that (tests/fake_cuda_mem.c)
 * and counts what it makes. */
#include "config.h"

#include <stdlib.h>

#include "kernels/cuda/cuda_mem.h"
#include "src/coll/ring_attn/stream_cuda.h"
#include "src/common/status.h"

zc_status_t zc_ras_cuda_make(int device, zc_ras_cuda_t **out)
{
    zc_ras_cuda_t *d = calloc(1, sizeof(*d));
    zc_status_t st;

    if (!d)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate its CUDA state");
    d->device = device;
    st = zc_cuda_stream_create(&d->streams[ZC_DS_COMM]);
    if (st != ZC_OK) {
        free(d);
        return st;
    }
    *out = d;
    return ZC_OK;
}

zc_status_t zc_ras_cuda_bind(zc_ras_cuda_t *d, void *stream)
{
    int current = -1;

    ZC_CHECK(zc_cuda_device_get(&current));
    if (current != d->device)
        return zc_error(ZC_ERR_INVALID_ARG, "stream: the calling thread's CUDA device is %d, "
                        "the communicator's stream state (NCCL, its stream, events and "
                        "memory) is on device %d: make that one current", current, d->device);
    d->streams[ZC_DS_COMPUTE] = stream;
    return ZC_OK;
}

zc_status_t zc_ras_cuda_alloc(void *dev, size_t bytes, void **ptr)
{
    return zc_cuda_alloc_async(bytes, ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE], ptr);
}

void zc_ras_cuda_free(void *dev, void *ptr)
{
    zc_cuda_free_async(ptr, ((zc_ras_cuda_t *)dev)->streams[ZC_DS_COMPUTE]);
}

zc_status_t zc_ras_cuda_record(void *dev, zc_ds_stream_t stream, int event)
{
    zc_ras_cuda_t *d = dev;

    if (event >= d->nevents) {
        int n = event + 16;
        void **events = realloc(d->events, (size_t)n * sizeof(*events));

        if (!events)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot track %d events", n);
        for (int i = d->nevents; i < n; i++)
            events[i] = NULL;
        d->events = events;
        d->nevents = n;
    }
    if (!d->events[event])
        ZC_CHECK(zc_cuda_event_create(&d->events[event]));
    return zc_cuda_event_record(d->events[event], d->streams[stream]);
}

zc_status_t zc_ras_cuda_wait(void *dev, zc_ds_stream_t stream, int event)
{
    zc_ras_cuda_t *d = dev;

    if (event >= d->nevents || !d->events[event])
        return zc_error(ZC_ERR_INTERNAL, "ring attention: event %d waited on before its record",
                        event);
    return zc_cuda_stream_wait_event(d->streams[stream], d->events[event]);
}

/* The blocks go on the communication stream, which is the state's own
 * (the caller's streams may be gone by zc_comm_destroy): after
 * ZC_DS_EVENT_END, or, when the latest call failed before recording it,
 * after both streams are done (the device backend was aborted first, so
 * its transfers end).  Events and the stream go once their work is done
 * (CUDA defers both). */
void zc_ras_cuda_release(void *dev, void *const *blocks, int nblocks, int ended)
{
    zc_ras_cuda_t *d = dev;
    void *comm = d->streams[ZC_DS_COMM];

    if (nblocks > 0) {
        zc_status_t st = ZC_ERR_INTERNAL;

        if (ended)
            st = zc_ras_cuda_wait(d, ZC_DS_COMM, ZC_DS_EVENT_END);
        if (st != ZC_OK) {
            (void)zc_cuda_stream_sync(d->streams[ZC_DS_COMPUTE]);
            (void)zc_cuda_stream_sync(comm);
        }
    }
    for (int i = 0; i < nblocks; i++)
        zc_cuda_free_async(blocks[i], comm);
    for (int i = 0; i < d->nevents; i++)
        zc_cuda_event_destroy(d->events[i]);
    free(d->events);
    zc_cuda_stream_destroy(comm);
    free(d);
}

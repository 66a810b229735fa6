/* A fake of the kernels/cuda/cuda_mem.h functions that the staging pool
 * and the stream engine's CUDA state call (tests/fake_cuda_mem.c), for
 * tests/test_cuda_staging and tests/test_stream_cuda: host and device
 * memory are malloc, copies are queued and run (memcpy) when an event
 * recorded after them completes, events complete when the test says so
 * (or on a synchronize; cudaFree, which waits for the device, runs every
 * queued copy), streams are counted, the order of the stream calls is
 * traced, and each kind of call can be made to fail. */
#ifndef ZC_TESTS_FAKE_CUDA_MEM_H
#define ZC_TESTS_FAKE_CUDA_MEM_H

#include <stddef.h>

typedef struct {
    /* calls counted, and memory still allocated */
    int host_allocs, host_frees, dev_allocs, dev_frees;
    int event_creates, event_destroys, event_records, event_syncs, stream_syncs;
    int stream_creates, stream_destroys, stream_waits;
    /* stream calls in order, one letter each: W wait on an event, F free
     * (async), S stream sync, R record; and the stream of each */
    char trace[256];
    void *trace_stream[256];
    void *last_waited;       /* the event of the last zc_cuda_stream_wait_event */
    int copies;              /* enqueued */
    size_t last_host_bytes;  /* the size of the last pinned allocation */
    void *last_synced;       /* the event of the last zc_cuda_event_sync */
    /* set to make the next such call fail: host, device alloc, event and
     * stream create with ZC_ERR_NO_MEMORY, record and stream sync with
     * ZC_ERR_TRANSPORT; each is cleared by the failure */
    int fail_host, fail_dev, fail_event, fail_record, fail_stream_sync, fail_stream;
    int device;              /* what zc_cuda_device_get answers */
} fake_cuda_t;

extern fake_cuda_t fake_cuda;

/* Complete one event: the copies enqueued before its last record run. */
void fake_cuda_complete(void *event);
/* Complete every event and run every queued copy. */
void fake_cuda_complete_all(void);
/* The event of the last zc_cuda_event_record. */
void *fake_cuda_last_recorded(void);
/* Allocations (pinned, device, events, streams) not yet freed. */
int fake_cuda_live(void);

#endif

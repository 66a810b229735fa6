/* A fake of the kernels/cuda/cuda_mem.h functions the staging pool calls
 * (tests/fake_cuda_mem.c), for tests/test_cuda_staging: host and device
 * memory are malloc, copies are queued and run (memcpy) when an event
 * recorded after them completes, events complete when the test says so
 * (or on a synchronize; cudaFree, which waits for the device, runs every
 * queued copy), and each kind of call can be made to fail. */
#ifndef ZC_TESTS_FAKE_CUDA_MEM_H
#define ZC_TESTS_FAKE_CUDA_MEM_H

#include <stddef.h>

typedef struct {
    /* calls counted, and memory still allocated */
    int host_allocs, host_frees, dev_allocs, dev_frees;
    int event_creates, event_destroys, event_records, event_syncs, stream_syncs;
    int copies;              /* enqueued */
    size_t last_host_bytes;  /* the size of the last pinned allocation */
    void *last_synced;       /* the event of the last zc_cuda_event_sync */
    /* set to make the next such call fail: host, device alloc and event
     * create with ZC_ERR_NO_MEMORY, record and stream sync with
     * ZC_ERR_TRANSPORT; each is cleared by the failure */
    int fail_host, fail_dev, fail_event, fail_record, fail_stream_sync;
    int device;              /* what zc_cuda_device_get answers */
} fake_cuda_t;

extern fake_cuda_t fake_cuda;

/* Complete one event: the copies enqueued before its last record run. */
void fake_cuda_complete(void *event);
/* Complete every event and run every queued copy. */
void fake_cuda_complete_all(void);
/* The event of the last zc_cuda_event_record. */
void *fake_cuda_last_recorded(void);
/* Allocations (pinned, device, events) not yet freed. */
int fake_cuda_live(void);

#endif

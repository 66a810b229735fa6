/* The fake of kernels/cuda/cuda_mem.h (see fake_cuda_mem.h).  Only the
 * functions kernels/cuda/staging.c and src/coll/ring_attn/stream_cuda.c
 * call are here: a call they gain without a fake fails the tests' link. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_mem.h"
#include "kernels/cuda/cuda_mem.h"
#include "src/common/status.h"

#define FAKE_COPIES 4096

typedef struct {
    int recorded;
    int done;
    int upto; /* copies enqueued before the last record */
} fake_event_t;

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} fake_copy_t;

fake_cuda_t fake_cuda;

/* The pool calls some functions outside its lock: one lock for the fake. */
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static fake_copy_t fake_queue[FAKE_COPIES];
static int fake_ran; /* copies run, in order */
static fake_event_t *fake_recorded;

static void fake_run(int upto)
{
    for (; fake_ran < upto; fake_ran++)
        memcpy(fake_queue[fake_ran].dst, fake_queue[fake_ran].src, fake_queue[fake_ran].bytes);
}

static zc_status_t fake_fail(int *flag, zc_status_t st, const char *what)
{
    *flag = 0;
    return zc_error(st, "cuda: %s failed: injected", what);
}

void fake_cuda_complete(void *event)
{
    fake_event_t *e = event;

    pthread_mutex_lock(&fake_lock);
    fake_run(e->upto);
    e->done = 1;
    pthread_mutex_unlock(&fake_lock);
}

void fake_cuda_complete_all(void)
{
    pthread_mutex_lock(&fake_lock);
    fake_run(fake_cuda.copies);
    pthread_mutex_unlock(&fake_lock);
    /* every recorded event has upto <= copies: a later query finds it done
     * through fake_ran */
}

void *fake_cuda_last_recorded(void)
{
    return fake_recorded;
}

int fake_cuda_live(void)
{
    return fake_cuda.host_allocs - fake_cuda.host_frees + fake_cuda.dev_allocs -
           fake_cuda.dev_frees + fake_cuda.event_creates - fake_cuda.event_destroys +
           fake_cuda.stream_creates - fake_cuda.stream_destroys;
}

/* One stream call in the trace (under the lock). */
static void fake_trace(char what, void *stream)
{
    size_t n = strlen(fake_cuda.trace);

    if (n + 1 < sizeof(fake_cuda.trace)) {
        fake_cuda.trace_stream[n] = stream;
        fake_cuda.trace[n] = what;
        fake_cuda.trace[n + 1] = '\0';
    }
}

/* An allocation of `what` counted in *count, or the injected failure. */
static zc_status_t fake_alloc(int *fail, const char *what, int *count, size_t bytes, int fill,
                              void **ptr)
{
    zc_status_t st = ZC_OK;

    pthread_mutex_lock(&fake_lock);
    if (*fail) {
        st = fake_fail(fail, ZC_ERR_NO_MEMORY, what);
    } else {
        *ptr = memset(malloc(bytes), fill, bytes);
        ++*count;
    }
    pthread_mutex_unlock(&fake_lock);
    return st;
}

static void fake_free(void *ptr, int *count)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&fake_lock);
    if (fake_recorded == ptr)
        fake_recorded = NULL;
    free(ptr);
    ++*count;
    pthread_mutex_unlock(&fake_lock);
}

zc_status_t zc_cuda_host_alloc(size_t bytes, void **ptr)
{
    fake_cuda.last_host_bytes = bytes;
    return fake_alloc(&fake_cuda.fail_host, "cudaHostAlloc", &fake_cuda.host_allocs, bytes, 0,
                      ptr);
}

void zc_cuda_host_free(void *ptr)
{
    fake_free(ptr, &fake_cuda.host_frees);
}

/* 0xee: what a kernel would read before any copy arrives */
zc_status_t zc_cuda_alloc(size_t bytes, void **ptr)
{
    return fake_alloc(&fake_cuda.fail_dev, "cudaMalloc", &fake_cuda.dev_allocs, bytes, 0xee, ptr);
}

/* cudaFree waits for the device: the queued copies run first. */
void zc_cuda_free(void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&fake_lock);
    fake_run(fake_cuda.copies);
    pthread_mutex_unlock(&fake_lock);
    fake_free(ptr, &fake_cuda.dev_frees);
}

zc_status_t zc_cuda_alloc_async(size_t bytes, void *stream, void **ptr)
{
    (void)stream;
    return fake_alloc(&fake_cuda.fail_dev, "cudaMallocAsync", &fake_cuda.dev_allocs, bytes, 0xee,
                      ptr);
}

void zc_cuda_free_async(void *ptr, void *stream)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&fake_lock);
    fake_trace('F', stream);
    pthread_mutex_unlock(&fake_lock);
    fake_free(ptr, &fake_cuda.dev_frees);
}

zc_status_t zc_cuda_stream_create(void **stream)
{
    return fake_alloc(&fake_cuda.fail_stream, "cudaStreamCreateWithFlags",
                      &fake_cuda.stream_creates, 16, 0, stream);
}

void zc_cuda_stream_destroy(void *stream)
{
    fake_free(stream, &fake_cuda.stream_destroys);
}

zc_status_t zc_cuda_stream_wait_event(void *stream, void *event)
{
    pthread_mutex_lock(&fake_lock);
    fake_cuda.stream_waits++;
    fake_cuda.last_waited = event;
    fake_trace('W', stream);
    pthread_mutex_unlock(&fake_lock);
    return ZC_OK;
}

zc_status_t zc_cuda_device_get(int *device)
{
    *device = fake_cuda.device;
    return ZC_OK;
}

zc_status_t zc_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)stream;
    pthread_mutex_lock(&fake_lock);
    if (fake_cuda.copies == FAKE_COPIES) {
        pthread_mutex_unlock(&fake_lock);
        return zc_error(ZC_ERR_INTERNAL, "fake: more than %d copies", FAKE_COPIES);
    }
    fake_queue[fake_cuda.copies++] = (fake_copy_t){dst, src, bytes};
    pthread_mutex_unlock(&fake_lock);
    return ZC_OK;
}

zc_status_t zc_cuda_stream_sync(void *stream)
{
    zc_status_t st = ZC_OK;

    (void)stream;
    pthread_mutex_lock(&fake_lock);
    fake_cuda.stream_syncs++;
    fake_trace('S', stream);
    if (fake_cuda.fail_stream_sync)
        st = fake_fail(&fake_cuda.fail_stream_sync, ZC_ERR_TRANSPORT, "cudaStreamSynchronize");
    else
        fake_run(fake_cuda.copies);
    pthread_mutex_unlock(&fake_lock);
    return st;
}

zc_status_t zc_cuda_event_create(void **event)
{
    return fake_alloc(&fake_cuda.fail_event, "cudaEventCreateWithFlags",
                      &fake_cuda.event_creates, sizeof(fake_event_t), 0, event);
}

void zc_cuda_event_destroy(void *event)
{
    fake_free(event, &fake_cuda.event_destroys);
}

zc_status_t zc_cuda_event_record(void *event, void *stream)
{
    fake_event_t *e = event;
    zc_status_t st = ZC_OK;

    pthread_mutex_lock(&fake_lock);
    if (fake_cuda.fail_record) {
        st = fake_fail(&fake_cuda.fail_record, ZC_ERR_TRANSPORT, "cudaEventRecord");
    } else {
        e->recorded = 1;
        e->done = 0;
        e->upto = fake_cuda.copies;
        fake_recorded = e;
        fake_cuda.event_records++;
        fake_trace('R', stream);
    }
    pthread_mutex_unlock(&fake_lock);
    return st;
}

zc_status_t zc_cuda_event_query(void *event)
{
    fake_event_t *e = event;
    int done;

    pthread_mutex_lock(&fake_lock);
    done = !e->recorded || e->done || fake_ran >= e->upto;
    pthread_mutex_unlock(&fake_lock);
    return done ? ZC_OK : ZC_INPROGRESS;
}

zc_status_t zc_cuda_event_sync(void *event)
{
    fake_cuda.event_syncs++;
    fake_cuda.last_synced = event;
    fake_cuda_complete(event);
    return ZC_OK;
}

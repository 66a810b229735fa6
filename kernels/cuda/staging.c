/* The pool of pinned staging slots (staging.h).  Every CUDA call goes
 * through kernels/cuda/cuda_mem.h, which converts the runtime's errors;
 * this file includes no CUDA header, so tests/test_cuda_staging links it
 * with a fake of those functions.
 *
 * The device buffers come from cudaMalloc, not cudaMallocAsync: a slot
 * outlives the stream of any one call and serves every stream of its
 * device, which memory from a stream's pool may only do once the
 * allocating stream has reached the allocation.  They are allocated
 * when a slot is created or grows, not per call, so cudaMalloc's cost
 * (and cudaFree's wait for the device) is paid rarely. */
#include "config.h"

#include <assert.h>
#include <pthread.h>
#include <stdint.h>

#include "kernels/cuda/cuda_mem.h"
#include "kernels/cuda/staging.h"
#include "src/common/status.h"

typedef enum {
    ZC_STAGING_IDLE,    /* free: never staged, or its event has completed */
    ZC_STAGING_HELD,    /* a caller's, or being (re)allocated or waited on */
    ZC_STAGING_PENDING, /* released: the stream may still read it */
} zc_staging_state_t;

struct zc_cuda_staging_slot {
    void *host;      /* pinned, `capacity` bytes */
    void *dev;       /* device memory of `device`, `capacity` bytes */
    void *event;     /* recorded at release */
    size_t capacity; /* 0: no buffers yet (an empty entry) */
    size_t bytes;    /* acquired by the holder */
    int device;
    int staged;      /* the holder enqueued the copy */
    zc_staging_state_t state;
    uint64_t released; /* release order: the oldest pending is waited for */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t returned; /* a held slot became idle or pending */
    uint64_t releases;
    zc_cuda_staging_slot_t slots[ZC_CUDA_STAGING_SLOTS];
} zc_staging = {.lock = PTHREAD_MUTEX_INITIALIZER, .returned = PTHREAD_COND_INITIALIZER};

static size_t zc_staging_capacity(size_t bytes)
{
    size_t cap = ZC_CUDA_STAGING_MIN_BYTES;

    while (cap < bytes)
        cap *= 2;
    return cap;
}

/* Only for a slot nothing on a device can still read.  cudaFree waits for
 * the device before the pinned buffer goes. */
static void zc_staging_slot_free(zc_cuda_staging_slot_t *s)
{
    zc_cuda_event_destroy(s->event);
    zc_cuda_free(s->dev);
    zc_cuda_host_free(s->host);
    s->event = s->dev = s->host = NULL;
    s->capacity = 0;
}

static zc_status_t zc_staging_slot_alloc(zc_cuda_staging_slot_t *s, size_t capacity, int device)
{
    void *host = NULL, *dev = NULL, *event = NULL;
    zc_status_t st;

    ZC_CHECK(zc_cuda_host_alloc(capacity, &host));
    ZC_CHECK_GOTO(zc_cuda_alloc(capacity, &dev), st, err_host);
    ZC_CHECK_GOTO(zc_cuda_event_create(&event), st, err_dev);
    s->host = host;
    s->dev = dev;
    s->event = event;
    s->capacity = capacity;
    s->device = device;
    return ZC_OK;

err_dev:
    zc_cuda_free(dev);
err_host:
    zc_cuda_host_free(host);
    return st;
}

/* Under the lock: an idle slot for `capacity` bytes on `device`, best
 * first: one of the device big enough (the smallest such), one of the
 * device to grow (the largest), an empty entry, one of another device to
 * rebuild.  NULL when none is idle. */
static zc_cuda_staging_slot_t *zc_staging_pick(size_t capacity, int device)
{
    zc_cuda_staging_slot_t *fit = NULL, *grow = NULL, *empty = NULL, *other = NULL;

    for (int i = 0; i < ZC_CUDA_STAGING_SLOTS; i++) {
        zc_cuda_staging_slot_t *s = &zc_staging.slots[i];

        if (s->state != ZC_STAGING_IDLE)
            continue;
        if (s->capacity == 0) {
            if (!empty)
                empty = s;
        } else if (s->device != device) {
            if (!other)
                other = s;
        } else if (s->capacity >= capacity) {
            if (!fit || s->capacity < fit->capacity)
                fit = s;
        } else if (!grow || s->capacity > grow->capacity) {
            grow = s;
        }
    }
    return fit ? fit : grow ? grow : empty ? empty : other;
}

static int zc_staging_fits(const zc_cuda_staging_slot_t *s, size_t capacity, int device)
{
    return s && s->capacity >= capacity && s->device == device;
}

/* Under the lock: pending slots whose event has completed become idle. */
static zc_status_t zc_staging_poll(void)
{
    for (int i = 0; i < ZC_CUDA_STAGING_SLOTS; i++) {
        zc_cuda_staging_slot_t *s = &zc_staging.slots[i];
        zc_status_t st;

        if (s->state != ZC_STAGING_PENDING)
            continue;
        st = zc_cuda_event_query(s->event);
        if (st == ZC_OK)
            s->state = ZC_STAGING_IDLE;
        else if (st != ZC_INPROGRESS)
            return st;
    }
    return ZC_OK;
}

/* Under the lock: the pending slot released first, or NULL. */
static zc_cuda_staging_slot_t *zc_staging_oldest(void)
{
    zc_cuda_staging_slot_t *oldest = NULL;

    for (int i = 0; i < ZC_CUDA_STAGING_SLOTS; i++) {
        zc_cuda_staging_slot_t *s = &zc_staging.slots[i];

        if (s->state == ZC_STAGING_PENDING && (!oldest || s->released < oldest->released))
            oldest = s;
    }
    return oldest;
}

/* Hand a held slot back (idle or pending) and wake the acquires that found
 * every slot held. */
static void zc_staging_return(zc_cuda_staging_slot_t *s, zc_staging_state_t state)
{
    pthread_mutex_lock(&zc_staging.lock);
    s->state = state;
    s->released = ++zc_staging.releases;
    pthread_cond_broadcast(&zc_staging.returned);
    pthread_mutex_unlock(&zc_staging.lock);
}

/* Under the lock, returns with it held: a slot for the caller, in state
 * held; the slot may need (re)allocating.  Waits outside the lock. */
static zc_status_t zc_staging_take(size_t capacity, int device, zc_cuda_staging_slot_t **slot)
{
    zc_cuda_staging_slot_t *s;
    zc_status_t st;

    for (;;) {
        s = zc_staging_pick(capacity, device);
        /* ask the events only when no idle slot fits */
        if (!zc_staging_fits(s, capacity, device)) {
            ZC_CHECK(zc_staging_poll());
            s = zc_staging_pick(capacity, device);
        }
        if (s)
            break;
        s = zc_staging_oldest();
        if (s) {
            /* held while we wait, so that no other acquire waits on it */
            s->state = ZC_STAGING_HELD;
            pthread_mutex_unlock(&zc_staging.lock);
            st = zc_cuda_event_sync(s->event);
            pthread_mutex_lock(&zc_staging.lock);
            if (st != ZC_OK) {
                s->state = ZC_STAGING_PENDING;
                pthread_cond_broadcast(&zc_staging.returned);
                return st;
            }
            break;
        }
        /* every slot is held by a caller that will release it */
        pthread_cond_wait(&zc_staging.returned, &zc_staging.lock);
    }
    s->state = ZC_STAGING_HELD;
    *slot = s;
    return ZC_OK;
}

zc_status_t zc_cuda_staging_acquire(size_t bytes, zc_cuda_staging_slot_t **slot)
{
    zc_cuda_staging_slot_t *s = NULL;
    size_t capacity;
    zc_status_t st;
    int device;

    ZC_ARG_CHECK(slot != NULL, "slot: NULL");
    ZC_ARG_CHECK(bytes <= SIZE_MAX / 2, "bytes: %zu, too many to stage", bytes);
    capacity = zc_staging_capacity(bytes);
    ZC_CHECK(zc_cuda_device_get(&device));
    pthread_mutex_lock(&zc_staging.lock);
    st = zc_staging_take(capacity, device, &s);
    pthread_mutex_unlock(&zc_staging.lock);
    if (st != ZC_OK)
        return st;
    /* idle, so nothing reads the old buffers: replace them */
    if (!zc_staging_fits(s, capacity, device)) {
        zc_staging_slot_free(s);
        st = zc_staging_slot_alloc(s, capacity, device);
        if (st != ZC_OK) {
            zc_staging_return(s, ZC_STAGING_IDLE);
            return st;
        }
    }
    s->bytes = bytes;
    s->staged = 0;
    *slot = s;
    return ZC_OK;
}

void *zc_cuda_staging_host(const zc_cuda_staging_slot_t *slot)
{
    return slot->host;
}

void *zc_cuda_staging_dev(const zc_cuda_staging_slot_t *slot)
{
    return slot->dev;
}

zc_status_t zc_cuda_staging_stage(zc_cuda_staging_slot_t *slot, size_t bytes, void *stream)
{
    ZC_ARG_CHECK(bytes <= slot->bytes, "bytes: %zu, the slot was acquired for %zu", bytes,
                 slot->bytes);
    slot->staged = 1;
    return zc_cuda_copy_async(slot->dev, slot->host, bytes, stream);
}

zc_status_t zc_cuda_staging_finish(zc_cuda_staging_slot_t *slot, void *stream, zc_status_t st)
{
    zc_status_t release = zc_cuda_staging_release(slot, stream);

    return st != ZC_OK ? st : release;
}

zc_status_t zc_cuda_staging_release(zc_cuda_staging_slot_t *slot, void *stream)
{
    zc_status_t st;

    if (!slot)
        return ZC_OK;
    assert(slot->state == ZC_STAGING_HELD);
    if (!slot->staged) {
        zc_staging_return(slot, ZC_STAGING_IDLE);
        return ZC_OK;
    }
    st = zc_cuda_event_record(slot->event, stream);
    if (st == ZC_OK) {
        zc_staging_return(slot, ZC_STAGING_PENDING);
        return ZC_OK;
    }
    /* No event to tell when the stream is done with the slot: wait for
     * the stream, or, if even that fails, drop the buffers. */
    if (zc_cuda_stream_sync(stream) != ZC_OK)
        zc_staging_slot_free(slot);
    zc_staging_return(slot, ZC_STAGING_IDLE);
    return st;
}

void zc_cuda_staging_teardown(void)
{
    pthread_mutex_lock(&zc_staging.lock);
    for (int i = 0; i < ZC_CUDA_STAGING_SLOTS; i++) {
        zc_cuda_staging_slot_t *s = &zc_staging.slots[i];

        assert(s->state != ZC_STAGING_HELD);
        if (s->state == ZC_STAGING_PENDING)
            (void)zc_cuda_event_sync(s->event);
        zc_staging_slot_free(s);
        s->state = ZC_STAGING_IDLE;
    }
    zc_staging.releases = 0;
    pthread_mutex_unlock(&zc_staging.lock);
}

/* The pinned staging pool of the kernel calls (kernels/cuda/staging.c)
 * against a fake of kernels/cuda/cuda_mem.h (tests/fake_cuda_mem.c), on any
 * machine: the bytes a caller writes are the bytes the device gets; a slot
 * whose event has not completed is not handed out, one whose event has is,
 * without allocating; slots grow; at the cap an acquire waits on the
 * oldest event, and with every slot held for a release; allocation and
 * record failures leak nothing; teardown frees everything. */
#include "config.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda_mem.h"
#include "kernels/cuda/staging.h"
#include "tap.h"
#include "zcomm.h"

typedef zc_cuda_staging_slot_t slot_t;

static int stream_; /* the fake ignores streams: any pointer will do */
#define STREAM ((void *)&stream_)

/* Acquire `bytes`, fill them with `seed`'s pattern, stage and release. */
static slot_t *send(size_t bytes, unsigned char seed)
{
    slot_t *s = NULL;

    if (zc_cuda_staging_acquire(bytes, &s) != ZC_OK)
        return NULL;
    for (size_t i = 0; i < bytes; i++)
        ((unsigned char *)zc_cuda_staging_host(s))[i] = (unsigned char)(seed + i * 7);
    if (zc_cuda_staging_stage(s, bytes, STREAM) != ZC_OK ||
        zc_cuda_staging_release(s, STREAM) != ZC_OK)
        return NULL;
    return s;
}

/* The device buffer of `s` holds `seed`'s pattern. */
static int arrived(const slot_t *s, size_t bytes, unsigned char seed)
{
    const unsigned char *d = zc_cuda_staging_dev(s);

    for (size_t i = 0; i < bytes; i++)
        if (d[i] != (unsigned char)(seed + i * 7))
            return 0;
    return 1;
}

/* Teardown frees every allocation the pool made. */
static void check_teardown(const char *when)
{
    zc_cuda_staging_teardown();
    ok(fake_cuda_live() == 0 && fake_cuda.host_allocs == fake_cuda.host_frees &&
           fake_cuda.dev_allocs == fake_cuda.dev_frees &&
           fake_cuda.event_creates == fake_cuda.event_destroys,
       "%s: teardown frees all (%d pinned, %d device, %d events made)", when,
       fake_cuda.host_allocs, fake_cuda.dev_allocs, fake_cuda.event_creates);
}

static void test_reuse(void)
{
    slot_t *a, *b, *c;
    void *ev_a;

    a = send(100, 1);
    ev_a = fake_cuda_last_recorded();
    ok(a && fake_cuda.host_allocs == 1 && fake_cuda.dev_allocs == 1 &&
           fake_cuda.event_creates == 1 && fake_cuda.last_host_bytes == ZC_CUDA_STAGING_MIN_BYTES,
       "first acquire: one pinned, device and event allocation of %d bytes",
       ZC_CUDA_STAGING_MIN_BYTES);
    ok(a && !arrived(a, 100, 1), "the copy is only enqueued until the stream runs it");
    /* a's event has not completed: a new slot, a's bytes untouched */
    b = send(100, 2);
    ok(b && b != a && zc_cuda_staging_host(b) != zc_cuda_staging_host(a) &&
           fake_cuda.host_allocs == 2,
       "a slot whose event is pending is not handed out again: a new slot");
    fake_cuda_complete(ev_a);
    ok(a && arrived(a, 100, 1), "the device gets exactly what the caller wrote (slot 1)");
    fake_cuda_complete(fake_cuda_last_recorded());
    ok(b && arrived(b, 100, 2), "the device gets exactly what the caller wrote (slot 2)");
    /* both completed: reused, no allocation */
    c = send(200, 3);
    fake_cuda_complete(fake_cuda_last_recorded());
    ok(c && (c == a || c == b) && fake_cuda.host_allocs == 2 && fake_cuda.dev_allocs == 2 &&
           fake_cuda.event_creates == 2 && arrived(c, 200, 3),
       "after its event completed a slot is reused without allocating");
    /* a slot never staged is free at once: no record */
    {
        int records = fake_cuda.event_records;
        slot_t *d = NULL, *e = NULL;

        ok(zc_cuda_staging_acquire(10, &d) == ZC_OK &&
               zc_cuda_staging_release(d, STREAM) == ZC_OK &&
               zc_cuda_staging_acquire(10, &e) == ZC_OK && e == d &&
               fake_cuda.event_records == records,
           "a slot released without a stage is idle at once, no event recorded");
        ok(zc_cuda_staging_stage(e, 11, STREAM) == ZC_ERR_INVALID_ARG,
           "stage of more bytes than acquired: ZC_ERR_INVALID_ARG");
        zc_cuda_staging_release(e, STREAM);
    }
    ok(zc_cuda_staging_release(NULL, STREAM) == ZC_OK, "release of NULL is a no-op");
}

static void test_growth(void)
{
    slot_t *small = send(100, 4);
    int allocs, frees, live;
    slot_t *s;

    fake_cuda_complete(fake_cuda_last_recorded());
    allocs = fake_cuda.host_allocs;
    frees = fake_cuda.host_frees;
    live = fake_cuda_live();
    s = send(10000, 4);
    fake_cuda_complete(fake_cuda_last_recorded());
    ok(small && s == small && fake_cuda.host_allocs == allocs + 1 && fake_cuda.host_frees == frees + 1 &&
           fake_cuda.last_host_bytes == 16384 && fake_cuda_live() == live,
       "a bigger request grows an idle slot to the next power of two (16384), "
       "freeing the old buffers");
    ok(s && arrived(s, 10000, 4), "the grown slot carries the bytes");
    s = send(16384, 5);
    fake_cuda_complete(fake_cuda_last_recorded());
    ok(s && fake_cuda.host_allocs == allocs + 1 && arrived(s, 16384, 5),
       "a request of exactly the capacity fits without growing");
}

static void test_cap(void)
{
    slot_t *s[ZC_CUDA_STAGING_SLOTS], *t;
    const int allocs = fake_cuda.host_allocs, syncs = fake_cuda.event_syncs;
    void *first_event = NULL;
    int fine = 1;

    for (int i = 0; i < ZC_CUDA_STAGING_SLOTS; i++) {
        s[i] = send(64, (unsigned char)(10 + i));
        fine = fine && s[i];
        if (i == 0)
            first_event = fake_cuda_last_recorded();
    }
    ok(fine && fake_cuda.host_allocs == allocs + ZC_CUDA_STAGING_SLOTS &&
           fake_cuda.event_syncs == syncs,
       "%d pending slots: %d allocations, no wait", ZC_CUDA_STAGING_SLOTS,
       ZC_CUDA_STAGING_SLOTS);
    t = send(64, 99);
    ok(t == s[0] && fake_cuda.event_syncs == syncs + 1 && fake_cuda.last_synced == first_event &&
           fake_cuda.host_allocs == allocs + ZC_CUDA_STAGING_SLOTS,
       "at the cap the acquire waits on the oldest event and takes that slot");
    fake_cuda_complete(fake_cuda_last_recorded());
    ok(t && arrived(t, 64, 99) && arrived(s[1], 64, 11),
       "the waited slot carries the new bytes, the others theirs");
}

typedef struct {
    slot_t *got;
    volatile int done;
} waiter_t;

static void *waiter(void *arg)
{
    waiter_t *w = arg;

    if (zc_cuda_staging_acquire(64, &w->got) != ZC_OK)
        w->got = NULL;
    w->done = 1;
    return NULL;
}

static void test_all_held(void)
{
    slot_t *s[ZC_CUDA_STAGING_SLOTS];
    waiter_t w = {NULL, 0};
    pthread_t th;
    int fine = 1, waited;

    fake_cuda_complete_all();
    for (int i = 0; i < ZC_CUDA_STAGING_SLOTS; i++)
        fine = fine && zc_cuda_staging_acquire(64, &s[i]) == ZC_OK;
    if (!ok(fine, "every slot held")) {
        tap_skip(1, "slots not held");
        return;
    }
    pthread_create(&th, NULL, waiter, &w);
    usleep(100 * 1000);
    waited = !w.done;
    zc_cuda_staging_release(s[5], STREAM);
    pthread_join(th, NULL);
    ok(waited && w.got == s[5],
       "every slot held: the acquire waits for a release and gets that slot");
    for (int i = 0; i < ZC_CUDA_STAGING_SLOTS; i++)
        zc_cuda_staging_release(i == 5 ? w.got : s[i], STREAM);
}

static void test_failures(void)
{
    struct {
        int *flag;
        const char *what;
    } inject[] = {{&fake_cuda.fail_host, "pinned"},
                  {&fake_cuda.fail_dev, "device"},
                  {&fake_cuda.fail_event, "event"}};
    slot_t *const unset = (slot_t *)inject;
    slot_t *s;

    for (int i = 0; i < 3; i++) {
        s = unset;
        *inject[i].flag = 1;
        ok(zc_cuda_staging_acquire(100, &s) == ZC_ERR_NO_MEMORY && s == unset &&
               fake_cuda_live() == 0,
           "%s allocation fails: ZC_ERR_NO_MEMORY, output unset, nothing leaked",
           inject[i].what);
    }
    s = send(100, 20);
    fake_cuda_complete(fake_cuda_last_recorded());
    ok(s && arrived(s, 100, 20), "after the failures the entry is used again");
    /* growth failing: the old buffers are gone, nothing leaks */
    fake_cuda.fail_dev = 1;
    ok(zc_cuda_staging_acquire(100000, &s) == ZC_ERR_NO_MEMORY && fake_cuda_live() == 0,
       "growth fails: ZC_ERR_NO_MEMORY, the old buffers freed, nothing leaked");
    /* record fails: the stream is synchronized, the slot idle */
    s = NULL;
    {
        int allocs = fake_cuda.host_allocs, syncs = fake_cuda.stream_syncs;
        slot_t *r = NULL;

        ok(zc_cuda_staging_acquire(100, &s) == ZC_OK &&
               zc_cuda_staging_stage(s, 100, STREAM) == ZC_OK,
           "acquire and stage");
        fake_cuda.fail_record = 1;
        ok(zc_cuda_staging_release(s, STREAM) == ZC_ERR_TRANSPORT &&
               fake_cuda.stream_syncs == syncs + 1,
           "record fails: the release says so and synchronizes the stream");
        ok(zc_cuda_staging_acquire(100, &r) == ZC_OK && r == s &&
               fake_cuda.host_allocs == allocs + 1,
           "... and the slot is reused without allocating");
        zc_cuda_staging_stage(r, 100, STREAM);
        fake_cuda.fail_record = 1;
        fake_cuda.fail_stream_sync = 1;
        ok(zc_cuda_staging_release(r, STREAM) == ZC_ERR_TRANSPORT && fake_cuda_live() == 0,
           "record and stream sync fail: the slot's buffers are dropped");
    }
}

static void test_devices(void)
{
    slot_t *a = send(100, 30), *b;

    fake_cuda_complete(fake_cuda_last_recorded());
    fake_cuda.device = 1;
    b = send(100, 31);
    fake_cuda_complete(fake_cuda_last_recorded());
    ok(a && b && b != a && arrived(a, 100, 30) && arrived(b, 100, 31),
       "an idle slot of device 0 is not handed to device 1");
    fake_cuda.device = 0;
    b = send(100, 32);
    ok(b == a, "device 0 gets its own slot back");
    /* left pending for the teardown */
}

int main(void)
{
    test_reuse();
    check_teardown("reuse");
    test_growth();
    check_teardown("growth");
    test_cap();
    test_all_held();
    {
        int syncs = fake_cuda.event_syncs;

        /* pending slots (test_cap's last) are waited for before freeing */
        send(64, 40);
        zc_cuda_staging_teardown();
        ok(fake_cuda.event_syncs > syncs && fake_cuda_live() == 0,
           "teardown waits for the pending slots and frees all");
    }
    test_failures();
    check_teardown("failures");
    test_devices();
    check_teardown("devices");
    ok(send(100, 50) != NULL, "the pool works again after a teardown");
    check_teardown("end");
    return tap_done();
}

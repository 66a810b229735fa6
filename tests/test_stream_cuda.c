/* The stream engine's CUDA state (src/coll/ring_attn/stream_cuda.c) on a
 * fake of kernels/cuda/cuda_mem.h (tests/fake_cuda_mem.c), on any machine:
 * one communication stream per communicator, not per call; an event
 * number made once and recorded again by every later call, so that N calls
 * make as many events as one; the memory freed on the state's own stream
 * after the end event (or, when the latest call failed before recording
 * it, after both streams are done); a call with another CUDA device
 * current refused before anything is enqueued; failures that leak
 * nothing; nothing left once the state is released. */
#include "config.h"

#include <string.h>

#include "fake_cuda_mem.h"
#include "src/coll/ring_attn/stream_cuda.h"
#include "tap.h"
#include "zcomm.h"

#define CALLS 6
#define EVENTS 20 /* a call's own, besides ZC_DS_EVENT_END */

static int caller_[2]; /* the fake ignores streams: any pointers will do */
#define CALLER(i) ((void *)&caller_[i])

/* What the engine asks of the state in one call: events recorded on both
 * streams and waited on by the other, the end event last. */
static zc_status_t one_call(zc_ras_cuda_t *d, void *stream, int first)
{
    zc_status_t st = zc_ras_cuda_bind(d, stream);

    if (st == ZC_OK && !first)
        st = zc_ras_cuda_wait(d, ZC_DS_COMPUTE, ZC_DS_EVENT_END);
    for (int e = ZC_DS_EVENT_END + 1; st == ZC_OK && e <= EVENTS; e++) {
        zc_ds_stream_t on = e % 2 ? ZC_DS_COMPUTE : ZC_DS_COMM;

        st = zc_ras_cuda_record(d, on, e);
        if (st == ZC_OK)
            st = zc_ras_cuda_wait(d, on == ZC_DS_COMM ? ZC_DS_COMPUTE : ZC_DS_COMM, e);
    }
    return st == ZC_OK ? zc_ras_cuda_record(d, ZC_DS_COMPUTE, ZC_DS_EVENT_END) : st;
}

static void test_calls(void)
{
    zc_ras_cuda_t *d = NULL;
    void *blocks[2] = {NULL, NULL};
    int made_after_one = 0, good = 1;
    const char *tail;

    fake_cuda.device = 0;
    if (zc_ras_cuda_make(0, &d) != ZC_OK) {
        ok(0, "the state: %s", zc_get_last_error());
        return;
    }
    ok(fake_cuda.stream_creates == 1, "the state makes one communication stream (%d)",
       fake_cuda.stream_creates);
    for (int c = 0; c < CALLS; c++) {
        good &= one_call(d, CALLER(c % 2), c == 0) == ZC_OK;
        if (c == 0)
            made_after_one = fake_cuda.event_creates;
    }
    ok(good && made_after_one == EVENTS + 1 && fake_cuda.event_creates == EVENTS + 1 &&
           fake_cuda.event_records == CALLS * (EVENTS + 1) && fake_cuda.stream_creates == 1,
       "%d calls on two caller streams: %d events made (%d after the first call), %d records, "
       "%d stream", CALLS, fake_cuda.event_creates, made_after_one, fake_cuda.event_records,
       fake_cuda.stream_creates);
    ok(zc_ras_cuda_alloc(d, 1000, &blocks[0]) == ZC_OK &&
           zc_ras_cuda_alloc(d, 3000, &blocks[1]) == ZC_OK && fake_cuda.dev_allocs == 2,
       "memory from the compute stream");
    fake_cuda.trace[0] = '\0';
    zc_ras_cuda_release(d, blocks, 2, 1);
    tail = fake_cuda.trace;
    ok(strcmp(tail, "WFF") == 0 && fake_cuda.trace_stream[1] == fake_cuda.trace_stream[0] &&
           fake_cuda.trace_stream[2] == fake_cuda.trace_stream[0] &&
           fake_cuda.trace_stream[0] != CALLER(0) && fake_cuda.trace_stream[0] != CALLER(1),
       "released after a call that ended: its own stream waits on the end event, then frees "
       "both blocks (trace %s)", tail);
    ok(fake_cuda_live() == 0 && fake_cuda.event_destroys == EVENTS + 1 &&
           fake_cuda.stream_destroys == 1,
       "nothing left: %d events and %d stream destroyed", fake_cuda.event_destroys,
       fake_cuda.stream_destroys);
}

static void test_failed_call(void)
{
    zc_ras_cuda_t *d = NULL;
    void *block = NULL;

    fake_cuda.trace[0] = '\0';
    ok(zc_ras_cuda_make(0, &d) == ZC_OK && zc_ras_cuda_bind(d, CALLER(0)) == ZC_OK &&
           zc_ras_cuda_alloc(d, 100, &block) == ZC_OK,
       "a call's memory");
    if (!d)
        return;
    fake_cuda.trace[0] = '\0';
    zc_ras_cuda_release(d, &block, 1, 0);
    ok(strcmp(fake_cuda.trace, "SSF") == 0 && fake_cuda.trace_stream[0] == CALLER(0) &&
           fake_cuda.trace_stream[1] != CALLER(0) && fake_cuda.trace_stream[2] ==
           fake_cuda.trace_stream[1] && fake_cuda_live() == 0,
       "released after a call that failed before its end event: both streams waited for, "
       "then the block freed; nothing left (trace %s)", fake_cuda.trace);
}

static void test_device(void)
{
    zc_ras_cuda_t *d = NULL;
    zc_status_t st;

    fake_cuda.device = 2;
    if (zc_ras_cuda_make(2, &d) != ZC_OK)
        return;
    fake_cuda.device = 1;
    fake_cuda.trace[0] = '\0';
    st = zc_ras_cuda_bind(d, CALLER(1));
    ok(st == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "stream") &&
           strstr(zc_get_last_error(), "device 2") && d->streams[ZC_DS_COMPUTE] == NULL &&
           fake_cuda.trace[0] == '\0',
       "a call with device 1 current on a state of device 2: refused naming stream, nothing "
       "enqueued (%s)", zc_get_last_error());
    fake_cuda.device = 2;
    ok(zc_ras_cuda_bind(d, CALLER(1)) == ZC_OK, "device 2 current: bound");
    fake_cuda.trace[0] = '\0';
    zc_ras_cuda_release(d, NULL, 0, 0);
    ok(fake_cuda.trace[0] == '\0' && fake_cuda_live() == 0,
       "released without memory: no wait, nothing left");
    fake_cuda.device = 0;
}

static void test_failures(void)
{
    zc_ras_cuda_t *d = NULL;
    void *p = NULL;

    fake_cuda.fail_stream = 1;
    ok(zc_ras_cuda_make(0, &d) == ZC_ERR_NO_MEMORY && d == NULL && fake_cuda_live() == 0,
       "no stream: the state is not made, nothing leaks");
    if (zc_ras_cuda_make(0, &d) != ZC_OK)
        return;
    zc_ras_cuda_bind(d, CALLER(0));
    fake_cuda.fail_event = 1;
    ok(zc_ras_cuda_record(d, ZC_DS_COMPUTE, 3) == ZC_ERR_NO_MEMORY &&
           zc_ras_cuda_wait(d, ZC_DS_COMM, 3) == ZC_ERR_INTERNAL &&
           zc_ras_cuda_record(d, ZC_DS_COMPUTE, 3) == ZC_OK &&
           zc_ras_cuda_wait(d, ZC_DS_COMM, 3) == ZC_OK,
       "an event that could not be made is not waited on; the next record makes it");
    fake_cuda.fail_dev = 1;
    ok(zc_ras_cuda_alloc(d, 64, &p) == ZC_ERR_NO_MEMORY, "no device memory: the error");
    zc_ras_cuda_release(d, NULL, 0, 1);
    ok(fake_cuda_live() == 0, "nothing left after the failures (%d)", fake_cuda_live());
}

int main(void)
{
    test_calls();
    test_failed_call();
    test_device();
    test_failures();
    return tap_done();
}

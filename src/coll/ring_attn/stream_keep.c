/* What the stream engine keeps on a communicator between calls
 * (stream_engine.h): its backend's state (for CUDA the communication
 * stream and the events, src/coll/ring_attn/ring_attn_stream.c) and an
 * arena of device memory for each call's accumulators, ring buffers and
 * gathers.
 *
 * Why an arena the engine owns, and not the caller's allocator through a
 * hook: the engine's needs are a stack within one call (ring buffers for
 * the whole call, a gather's buffers given back after its group), the
 * same from one call to the next of a training loop, and ordered by the
 * engine's own events; an arena serves them with no allocation at all
 * once it has grown to the largest call, in C, for every caller, with no
 * API to keep stable.  What it costs: the largest call's need stays
 * allocated until zc_comm_destroy (or an error), which PyTorch's caching
 * allocator would keep too.
 *
 * The arena is a list of blocks taken from the backend (ops->alloc,
 * stream-ordered).  A call takes bytes in order from the first block with
 * room; a call that needed more than one block records how much it needed
 * in all, gives its blocks back at its end, and the next call's first take
 * gets one block of that size, which then serves every later call of that
 * shape or smaller: N calls allocate O(1) times.
 *
 * Reuse across streams.  A call may run on another stream than the
 * previous one, which may still be reading the arena.  Every call ends by
 * recording ZC_DS_EVENT_END on its compute stream, after all of its work
 * (the communication stream's too: the engine hands back to the compute
 * stream first), and the next call's compute stream waits on it before
 * anything else; its communication stream is ordered after its compute
 * stream's start by the engine's own events.  So no call touches the
 * arena before the previous call is done with it.
 *
 * After an error the communicator's device backend is aborted (its
 * transfers end), and the state goes: the backend frees the blocks once
 * nothing uses them (ZC_DS_EVENT_END if it was recorded, else after
 * waiting for its streams), so no buffer stays allocated. */
#include "config.h"

#include <stdlib.h>

#include "src/coll/ring_attn/stream_engine.h"
#include "src/common/status.h"

/* Smallest block: the small takes of a first call share one. */
#define ZC_RAS_BLOCK_MIN ((size_t)64 << 10)
#define ZC_RAS_ALIGN ((size_t)256)

typedef struct {
    size_t bytes, used;
} zc_ras_block_t;

struct zc_ras_keep {
    const zc_ds_ops_t *ops;
    void *dev;
    void **bases;     /* [nblocks]: the blocks' memory */
    zc_ras_block_t *blocks;
    int nblocks, cap;
    int top;          /* the block takes come from (the later ones are empty) */
    size_t total;     /* bytes taken in this call, as one block would hold them */
    size_t peak;      /* the most of it at once */
    size_t want;      /* the first block's size: the largest call's need */
    int ended;        /* the latest call recorded ZC_DS_EVENT_END after its work */
};

static void zc_ras_keep_release(void *arg)
{
    zc_ras_keep_t *keep = arg;

    keep->ops->release(keep->dev, keep->bases, keep->nblocks, keep->ended);
    free(keep->bases);
    free(keep->blocks);
    free(keep);
}

zc_status_t zc_ras_keep_get(zc_comm_h comm, const zc_ds_ops_t *ops,
                            zc_status_t (*make)(zc_comm_h comm, void **dev),
                            zc_ras_keep_t **out)
{
    zc_ra_state_t *state;
    zc_ras_keep_t *keep;
    zc_status_t st;

    ZC_CHECK(zc_ra_state_get(comm, &state));
    if (state->stream) {
        keep = state->stream;
        if (keep->ops != ops)
            return zc_error(ZC_ERR_INVALID_ARG, "comm: its ring attention stream state belongs "
                            "to another device backend");
        *out = keep;
        return ZC_OK;
    }
    keep = calloc(1, sizeof(*keep));
    if (!keep)
        return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate the stream state");
    keep->ops = ops;
    st = make(comm, &keep->dev);
    if (st != ZC_OK) {
        free(keep);
        return st;
    }
    state->stream = keep;
    state->stream_release = zc_ras_keep_release;
    *out = keep;
    return ZC_OK;
}

void *zc_ras_keep_dev(const zc_ras_keep_t *keep)
{
    return keep->dev;
}

const zc_ds_ops_t *zc_ras_keep_ops(const zc_ras_keep_t *keep)
{
    return keep->ops;
}

int zc_ras_keep_blocks(const zc_ras_keep_t *keep)
{
    return keep->nblocks;
}

zc_status_t zc_ras_keep_begin(zc_ras_keep_t *keep)
{
    if (keep->ended)
        ZC_CHECK(keep->ops->wait(keep->dev, ZC_DS_COMPUTE, ZC_DS_EVENT_END));
    keep->ended = 0;
    for (int i = 0; i < keep->nblocks; i++)
        keep->blocks[i].used = 0;
    keep->top = 0;
    keep->total = keep->peak = 0;
    return ZC_OK;
}

static size_t zc_ras_align(size_t n)
{
    return (n + ZC_RAS_ALIGN - 1) & ~(ZC_RAS_ALIGN - 1);
}

/* A new block of at least `bytes`, after the others. */
static zc_status_t zc_ras_keep_grow(zc_ras_keep_t *keep, size_t bytes)
{
    size_t size = bytes;

    if (keep->nblocks == keep->cap) {
        int cap = keep->cap ? 2 * keep->cap : 4;
        zc_ras_block_t *blocks = realloc(keep->blocks, (size_t)cap * sizeof(*blocks));
        void **bases;

        if (blocks)
            keep->blocks = blocks;
        bases = blocks ? realloc(keep->bases, (size_t)cap * sizeof(*bases)) : NULL;
        if (!bases)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot track %d blocks", cap);
        keep->bases = bases;
        keep->cap = cap;
    }
    if (keep->nblocks == 0 && keep->want > size)
        size = keep->want;
    if (size < ZC_RAS_BLOCK_MIN)
        size = ZC_RAS_BLOCK_MIN;
    ZC_CHECK(keep->ops->alloc(keep->dev, size, &keep->bases[keep->nblocks]));
    keep->blocks[keep->nblocks++] = (zc_ras_block_t){size, 0};
    return ZC_OK;
}

zc_status_t zc_ras_keep_take(zc_ras_keep_t *keep, size_t bytes, void **ptr)
{
    size_t n = zc_ras_align(bytes ? bytes : 1);
    zc_ras_block_t *b;

    while (keep->top < keep->nblocks &&
           keep->blocks[keep->top].bytes - keep->blocks[keep->top].used < n)
        keep->top++;
    if (keep->top == keep->nblocks)
        ZC_CHECK(zc_ras_keep_grow(keep, n));
    b = &keep->blocks[keep->top];
    *ptr = (char *)keep->bases[keep->top] + b->used;
    b->used += n;
    keep->total += n;
    if (keep->total > keep->peak)
        keep->peak = keep->total;
    return ZC_OK;
}

zc_ras_mark_t zc_ras_keep_mark(const zc_ras_keep_t *keep)
{
    int top = keep->top < keep->nblocks ? keep->top : keep->nblocks - 1;

    return (zc_ras_mark_t){.block = top, .used = top >= 0 ? keep->blocks[top].used : 0,
                           .total = keep->total};
}

void zc_ras_keep_back(zc_ras_keep_t *keep, zc_ras_mark_t mark)
{
    for (int i = mark.block + 1; i < keep->nblocks; i++)
        keep->blocks[i].used = 0;
    if (mark.block >= 0)
        keep->blocks[mark.block].used = mark.used;
    keep->top = mark.block >= 0 ? mark.block : 0;
    keep->total = mark.total;
}

zc_status_t zc_ras_keep_end(zc_ras_keep_t *keep)
{
    if (keep->nblocks > 1) {
        /* one block of this call's need for the next; these go once the
         * compute stream is past this call, before ZC_DS_EVENT_END, so
         * that a next call on another stream cannot get their memory
         * while they are in use */
        keep->want = zc_ras_align(keep->peak);
        while (keep->nblocks > 0)
            keep->ops->free(keep->dev, keep->bases[--keep->nblocks]);
        keep->top = 0;
    }
    ZC_CHECK(keep->ops->record(keep->dev, ZC_DS_COMPUTE, ZC_DS_EVENT_END));
    keep->ended = 1;
    return ZC_OK;
}

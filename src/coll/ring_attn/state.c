/* What ring attention keeps on a communicator between calls
 * (comm->ring_attn, released by zc_comm_destroy):
 *   - layouts (src/coll/ring_attn/groups.c): the ring groups, the routed-call
 *     list and the gathers of a plan, derived once per plan and shape
 *     instead of once per call.  They are keyed by the plan's serial, which
 *     no other plan ever gets, so a destroyed plan's layout is never used
 *     again (a new plan at the same address has another serial); it stays
 *     until the least recently used goes or the communicator does, and
 *     nothing reads the plan through it meanwhile;
 *   - the stream engine's state (src/coll/ring_attn/stream_engine.h): its
 *     communication stream, events and device memory.
 * A communicator is used by one thread at a time, so none of it is
 * locked. */
#include "config.h"

#include <stdlib.h>

#include "src/coll/ring_attn/ring_attn.h"
#include "src/common/status.h"

void zc_ra_state_drop_stream(zc_ra_state_t *state)
{
    if (state->stream_release)
        state->stream_release(state->stream);
    state->stream = NULL;
    state->stream_release = NULL;
}

static void zc_ra_state_release(void *arg)
{
    zc_ra_state_t *state = arg;

    zc_ra_state_drop_stream(state);
    for (int i = 0; i < state->nlayouts; i++)
        zc_ra_layout_free(state->layouts[i]);
    free(state);
}

zc_status_t zc_ra_state_get(zc_comm_h comm, zc_ra_state_t **out)
{
    if (!comm->ring_attn) {
        zc_ra_state_t *state = calloc(1, sizeof(*state));

        if (!state)
            return zc_error(ZC_ERR_NO_MEMORY, "ring attention: cannot allocate its state");
        comm->ring_attn = state;
        comm->ring_attn_release = zc_ra_state_release;
    }
    *out = comm->ring_attn;
    return ZC_OK;
}

static int zc_ra_key_equal(const zc_ra_layout_key_t *a, const zc_ra_layout_key_t *b)
{
    return a->plan == b->plan && a->row_kv == b->row_kv && a->elem == b->elem &&
           a->mode == b->mode && a->backward == b->backward && a->reverse == b->reverse &&
           a->mask_left == b->mask_left && a->mask_right == b->mask_right;
}

/* The layout of `key` in state, or NULL. */
static zc_ra_layout_t *zc_ra_layout_find(zc_ra_state_t *state, const zc_ra_layout_key_t *key)
{
    for (int i = 0; i < state->nlayouts; i++)
        if (zc_ra_key_equal(&state->layouts[i]->key, key))
            return state->layouts[i];
    return NULL;
}

/* Room for one more: the least recently used goes when the state is full. */
static void zc_ra_layout_room(zc_ra_state_t *state)
{
    int old = 0;

    if (state->nlayouts < ZC_RA_LAYOUTS)
        return;
    for (int i = 1; i < state->nlayouts; i++)
        if (state->layouts[i]->last_use < state->layouts[old]->last_use)
            old = i;
    zc_ra_layout_free(state->layouts[old]);
    state->layouts[old] = state->layouts[--state->nlayouts];
}

zc_status_t zc_ra_layout_use(zc_ra_ctx_t *ctx)
{
    zc_ra_layout_key_t key = zc_ra_layout_key(ctx);
    zc_ra_state_t *state = NULL;
    zc_ra_layout_t *lay;

    ZC_CHECK(zc_ra_state_get(ctx->comm, &state));
    lay = zc_ra_layout_find(state, &key);
    if (!lay) {
        ZC_CHECK(zc_ra_layout_build(ctx, &lay));
        zc_ra_layout_room(state);
        state->layouts[state->nlayouts++] = lay;
        state->layouts_built++;
    }
    lay->last_use = ++state->clock;
    /* a call that failed may have left its routed calls half posted */
    for (int i = 0; i < lay->nrouted; i++) {
        zc_ra_routed_t *c = &lay->routed[i];

        c->ready = !c->mine;
        c->sendbuf = NULL;
        c->recvbuf = NULL;
        c->notify = NULL;
    }
    ctx->layout = lay;
    ctx->groups = lay->groups;
    ctx->ngroups = lay->ngroups;
    ctx->routed = lay->routed;
    ctx->nrouted = lay->nrouted;
    return ZC_OK;
}

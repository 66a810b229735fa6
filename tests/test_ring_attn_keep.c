/* What ring attention keeps on a communicator between calls
 * (src/coll/ring_attn/state.c, stream_keep.c), on the emulated device
 * (tests/stream_emu.h) of forked ranks, no GPU needed:
 *   - N calls in a row allocate device memory O(1) times, not O(N): the
 *     calls after the second allocate nothing, the engine holds at most
 *     one block between calls, and every call's results are bit for bit
 *     those of the first, which match the single-process reference (every
 *     mode of tests/ring_attn_modes.h, forward and backward, 2 ranks on two
 *     emulated nodes);
 *   - the ring layout (groups, routed calls, gathers) is built once per
 *     plan and shape: 2 builds (forward, backward) for N iterations; a
 *     new plan builds again, and so does a plan made after the first was
 *     destroyed (whatever its address); at most ZC_RA_LAYOUTS stay;
 *   - calls on different caller streams reuse the engine's memory, the
 *     emulator's race detector following every stream, with no race;
 *   - a failure of each device operation of a call in turn (1 rank:
 *     every operation of a forward and of a backward; 2 ranks: every
 *     operation of a backward of rank 0, in Zeppelin and LLaMA CP modes)
 *     fails the call with that error and leaves nothing of the engine
 *     allocated; its peer fails or finishes, and keeps nothing either
 *     (memory a failed transfer may still write into is the emulator's to
 *     keep, and counted apart). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu_comm.h"
#include "rails_lo.h"
#include "ring_attn_modes.h"
#include "src/coll/ring_attn/ring_attn.h"
#include "src/core/comm.h"
#include "stream_emu.h"
#include "tap.h"
#include "tools/zc_ring_attn_data.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 120
#define ITERATIONS 5

/* 2 ranks of 170 tokens: the first sequence spans both (a ring), the
 * others fill the ranks. */
static const int64_t lengths[] = {200, 90, 37, 5};
#define NSEQS 4
#define CAPACITY 170

static rad_batch_t ref; /* bf16, 4 query heads, 2 KV heads, head dim 40 */

static zc_status_t make_plan(int nranks, unsigned flags, int64_t capacity, zc_plan_h *plan)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    int nnodes = nranks >= 2 ? 2 : 1;

    opts.flags = flags;
    return zc_plan_create(nnodes, nranks / nnodes, capacity, lengths, NSEQS, &opts, plan);
}


static int64_t layouts_built(zc_comm_h comm)
{
    const zc_ra_state_t *state = comm->ring_attn;

    return state ? state->layouts_built : 0;
}

/* This rank's buffers of `plan`, and its arguments. */
typedef struct {
    rad_local_t l;
    zc_ring_attn_args_t args;
} rank_data_t;

static int data_make(zc_plan_h plan, int rank, zc_ring_attn_mode_t mode, rank_data_t *d)
{
    memset(d, 0, sizeof(*d));
    MP_CHECK(rad_local_make(&ref, plan, rank, 0, &d->l) == 0, "memory");
    d->args = (zc_ring_attn_args_t)ZC_RING_ATTN_ARGS_INITIALIZER;
    rad_local_args(&ref, &d->l, &d->args);
    d->args.mode = mode;
    return 0;
}

/* Bytes of the five results, for comparing calls bit for bit. */
static size_t result_bytes(const rank_data_t *d, void **parts, size_t *sizes)
{
    size_t rq = rad_row_bytes(&ref, 0) * (size_t)d->l.rows;
    size_t rk = rad_row_bytes(&ref, 1) * (size_t)d->l.rows;
    void *p[5] = {d->l.out, d->l.lse, d->l.dq, d->l.dk, d->l.dv};
    size_t s[5] = {rq, (size_t)d->l.rows * (size_t)ref.hq * sizeof(float), rq, rk, rk};
    size_t all = 0;

    for (int i = 0; i < 5; i++) {
        parts[i] = p[i];
        sizes[i] = s[i];
        all += s[i];
    }
    return all;
}

static void results_copy(const rank_data_t *d, char *to)
{
    void *parts[5];
    size_t sizes[5];

    result_bytes(d, parts, sizes);
    for (int i = 0; i < 5; to += sizes[i], i++)
        memcpy(to, parts[i], sizes[i]);
}

/* ---- N calls in a row ------------------------------------------------------- */

static int rank_repeat(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    int64_t allocs[ITERATIONS];

    (void)arg;
    if (emu_comm_init(rank, nranks, 30000, &comm) != 0)
        return 1;
    for (int mi = 0; mi < NMODES; mi++) {
        const mode_cfg_t *m = &modes[mi];
        int64_t built0 = layouts_built(comm), start = emu_counts.allocs;
        zc_plan_h plan;
        rank_data_t d;
        char *first;
        void *parts[5];
        size_t sizes[5];
        double worst[RAD_NRESULTS];

        MP_CHECK(make_plan(nranks, m->plan_flags, CAPACITY, &plan) == ZC_OK, "plan");
        if (data_make(plan, rank, m->mode, &d) != 0)
            return 1;
        first = malloc(result_bytes(&d, parts, sizes));
        MP_CHECK(first != NULL, "memory");
        for (int it = 0; it < ITERATIONS; it++) {
            zc_status_t st = emu_ring_attn(comm, plan, &d.args, 0, NULL);

            MP_CHECK(st == ZC_OK, "%s forward %d: %s", m->name, it, zc_strerror(st));
            st = emu_ring_attn(comm, plan, &d.args, 1, NULL);
            MP_CHECK(st == ZC_OK, "%s backward %d: %s", m->name, it, zc_strerror(st));
            MP_CHECK(emu_counts.live <= 1, "%s: %d allocations live between calls", m->name,
                     emu_counts.live);
            allocs[it] = emu_counts.allocs - start;
            MP_CHECK(rad_local_check(&ref, &d.l, 1, rad_tolerance(ref.dtype),
                                     worst) == 0, "%s iteration %d: results off the reference "
                     "(worst out %.3g dq %.3g dk %.3g)", m->name, it, worst[RAD_OUT],
                     worst[RAD_DQ], worst[RAD_DK]);
            if (it == 0) {
                results_copy(&d, first);
            } else {
                char *at = first;

                for (int i = 0; i < 5; at += sizes[i], i++)
                    MP_CHECK(memcmp(at, parts[i], sizes[i]) == 0, "%s iteration %d: result %d "
                             "differs from the first call's", m->name, it, i);
            }
        }
        fprintf(stderr, "# rank %d, %s: allocations after each of %d iterations:", rank, m->name,
                ITERATIONS);
        for (int it = 0; it < ITERATIONS; it++)
            fprintf(stderr, " %lld", (long long)allocs[it]);
        fprintf(stderr, "\n");
        MP_CHECK(allocs[ITERATIONS - 1] == allocs[1], "%s: %lld allocations in iterations 3..%d",
                 m->name, (long long)(allocs[ITERATIONS - 1] - allocs[1]), ITERATIONS);
        MP_CHECK(layouts_built(comm) - built0 == 2, "%s: %lld layouts built for one plan",
                 m->name, (long long)(layouts_built(comm) - built0));
        free(first);
        rad_local_free(&d.l);
        zc_plan_destroy(plan);
    }
    zc_comm_destroy(comm);
    MP_CHECK(emu_counts.live == 0 && emu_counts.allocs == emu_counts.frees &&
                 emu_counts.leaked == 0 && emu_counts.releases == 1,
             "after zc_comm_destroy: %d live, %d allocations, %d frees, %d leaked, %d releases",
             emu_counts.live, emu_counts.allocs, emu_counts.frees, emu_counts.leaked,
             emu_counts.releases);
    return 0;
}

/* ---- layouts: once per plan, never a destroyed plan's ----------------------- */

static int rank_layouts(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    zc_plan_h plan;
    rank_data_t d;
    int64_t built;

    (void)arg;
    if (emu_comm_init(rank, nranks, 30000, &comm) != 0)
        return 1;
    /* the same plan made, used and destroyed in turn: whether or not the
     * next one lands at the same address, each builds its own layout */
    for (int i = 0; i < ZC_RA_LAYOUTS + 2; i++) {
        built = layouts_built(comm);
        MP_CHECK(make_plan(nranks, 0, CAPACITY + i % 3, &plan) == ZC_OK, "plan");
        if (data_make(plan, rank, ZC_RING_ATTN_ZEPPELIN, &d) != 0)
            return 1;
        MP_CHECK(emu_ring_attn(comm, plan, &d.args, 0, NULL) == ZC_OK, "forward %d", i);
        MP_CHECK(emu_ring_attn(comm, plan, &d.args, 0, NULL) == ZC_OK, "forward again %d", i);
        MP_CHECK(layouts_built(comm) == built + 1, "plan %d: %lld layouts built for two calls",
                 i, (long long)(layouts_built(comm) - built));
        MP_CHECK(rad_local_check(&ref, &d.l, 0, rad_tolerance(ref.dtype),
                                 (double[RAD_NRESULTS]){0}) == 0, "plan %d: results", i);
        MP_CHECK(((zc_ra_state_t *)comm->ring_attn)->nlayouts <= ZC_RA_LAYOUTS,
                 "%d layouts kept", ((zc_ra_state_t *)comm->ring_attn)->nlayouts);
        rad_local_free(&d.l);
        zc_plan_destroy(plan);
    }
    zc_comm_destroy(comm);
    return 0;
}

/* ---- calls on different streams ------------------------------------------ */

static int rank_streams(int rank, int nranks, void *arg)
{
    rank_data_t d[EMU_CALLER_STREAMS];
    zc_comm_h comm;
    zc_plan_h plan;

    (void)arg;
    if (emu_comm_init(rank, nranks, 30000, &comm) != 0)
        return 1;
    MP_CHECK(make_plan(nranks, 0, CAPACITY, &plan) == ZC_OK, "plan");
    /* each stream its own tensors: the caller orders its own work; the
     * engine must order its memory's reuse */
    for (int s = 0; s < EMU_CALLER_STREAMS; s++)
        if (data_make(plan, rank, ZC_RING_ATTN_ZEPPELIN, &d[s]) != 0)
            return 1;
    for (int round = 0; round < 2; round++)
        for (int s = 0; s < EMU_CALLER_STREAMS; s++)
            for (int bwd = 0; bwd < 2; bwd++) {
                zc_status_t st = emu_ring_attn_on(comm, plan, &d[s].args, bwd, s, NULL);

                MP_CHECK(st == ZC_OK, "%s on caller stream %d: %s",
                         bwd ? "backward" : "forward", s, zc_strerror(st));
                MP_CHECK(rad_local_check(&ref, &d[s].l, bwd,
                                         rad_tolerance(ref.dtype),
                                         (double[RAD_NRESULTS]){0}) == 0, "stream %d results", s);
            }
    for (int s = 0; s < EMU_CALLER_STREAMS; s++)
        rad_local_free(&d[s].l);
    zc_plan_destroy(plan);
    zc_comm_destroy(comm);
    return 0;
}

/* ---- an error at every operation ---------------------------------------- */

typedef struct {
    int mode;        /* index in modes */
    int backward;
    int64_t fail_at; /* rank 0's failing operation; 0: none, count them */
    int64_t *ops;    /* shared: rank 0's operations in the call */
    int prime;       /* a good call first, so that the engine holds memory */
} inject_t;

/* One call with rank 0's operation fail_at failing. */
static int rank_inject(int rank, int nranks, void *arg)
{
    inject_t *in = arg;
    const mode_cfg_t *m = &modes[in->mode];
    zc_comm_h comm;
    zc_plan_h plan;
    rank_data_t d;
    int64_t before;
    zc_status_t st;

    /* a peer left waiting on a failed rank's transfers notices it is gone
     * (device_emu.h) well before this timeout */
    if (emu_comm_init(rank, nranks, 20000, &comm) != 0)
        return 1;
    MP_CHECK(make_plan(nranks, m->plan_flags, nranks == 1 ? 400 : CAPACITY, &plan) == ZC_OK,
             "plan");
    if (data_make(plan, rank, m->mode, &d) != 0)
        return 1;
    if (in->prime) { /* the first call's blocks become one, the second call's */
        MP_CHECK(emu_ring_attn(comm, plan, &d.args, 0, NULL) == ZC_OK, "first call");
        MP_CHECK(emu_ring_attn(comm, plan, &d.args, 0, NULL) == ZC_OK, "second call");
        MP_CHECK(emu_counts.live == 1, "%d allocations held after two calls",
                 emu_counts.live);
    }
    before = emu_counts.ops;
    if (rank == 0)
        emu_fail_at(in->fail_at);
    st = emu_ring_attn(comm, plan, &d.args, in->backward, NULL);
    emu_fail_at(0);
    if (in->fail_at == 0) {
        MP_CHECK(st == ZC_OK, "the call without a failure: %s", zc_strerror(st));
        if (rank == 0)
            *in->ops = emu_counts.ops - before;
    } else if (rank == 0) {
        MP_CHECK(st == ZC_ERR_TRANSPORT && strstr(zc_get_last_error(), "injected"),
                 "operation %lld failing: the call returned %s (%s)", (long long)in->fail_at,
                 zc_strerror(st), zc_get_last_error());
        MP_CHECK(emu_counts.live == 0 && emu_counts.leaked == 0 && emu_counts.releases == 1,
                 "operation %lld failing: %d allocations left, %d leaked, %d releases",
                 (long long)in->fail_at, emu_counts.live, emu_counts.leaked,
                 emu_counts.releases);
    } else {
        MP_CHECK(st == ZC_OK ? emu_counts.live <= 1 : emu_counts.live == 0, "peer of operation "
                 "%lld failing: %s, %d allocations left", (long long)in->fail_at,
                 zc_strerror(st), emu_counts.live);
    }
    rad_local_free(&d.l);
    zc_plan_destroy(plan);
    zc_comm_destroy(comm);
    MP_CHECK(emu_counts.live == 0, "%d allocations after zc_comm_destroy", emu_counts.live);
    return 0;
}

/* Every operation of one call in turn; the TAP line says how many. */
static void test_inject(int nranks, int mode, int backward, int prime)
{
    static int64_t *ops;
    inject_t in = {.mode = mode, .backward = backward, .prime = prime};
    int64_t bad = 0, first_bad = 0;
    char name[256], why[sizeof(tap_note_)] = "";

    snprintf(name, sizeof(name), "%d rank%s, %s %s%s: each device operation of the call "
             "failing in turn fails it with that error and leaves nothing of the engine "
             "allocated%s", nranks, nranks > 1 ? "s" : "", modes[mode].name,
             backward ? "backward" : "forward",
             prime ? " after calls that left memory kept" : "",
             nranks > 1 ? " on either rank" : "");
    if (!tap_selected(tap_count_ + 1, name)) {
        printf("ok %d - %s # SKIP not selected by ZC_TEST_CASE\n", ++tap_count_, name);
        return;
    }
    if (!ops)
        ops = mp_shared(sizeof(*ops));
    *ops = 0;
    in.ops = ops;
    if (mp_run_now(nranks, CASE_TIMEOUT_S, rank_inject, &in) != 0 || *ops <= 0) {
        ok(0, "%s (the call without a failure failed)", name);
        return;
    }
    for (in.fail_at = 1; in.fail_at <= *ops; in.fail_at++)
        if (mp_run_now(nranks, CASE_TIMEOUT_S, rank_inject, &in) != 0 && bad++ == 0) {
            first_bad = in.fail_at;
            snprintf(why, sizeof(why), "%s", tap_note_); /* the later runs' notes follow */
        }
    ok(bad == 0, "%s: %lld operations, %lld did not", name, (long long)*ops, (long long)bad);
    if (bad)
        diag("first failing: operation %lld: %s", (long long)first_bad, why);
}

int main(void)
{
    char topo[64] = "";
    int have_rails;

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    setenv("ZC_NUM_THREADS", "1", 1); /* the ranks share 2 cores */
    setenv("ZC_ROUTED_MIN_BYTES", "1024", 1); /* small hops: routed all the same */
    have_rails = rails_on_loopback(topo, sizeof(topo));
    if (rad_batch_init(&ref, lengths, NSEQS, 4, 2, 40, ZC_BFLOAT16, 36) != 0 ||
        rad_batch_reference(&ref, 1) != ZC_OK)
        tap_skip_all("no memory for the reference");
    ok(mp_run(2, CASE_TIMEOUT_S, rank_repeat, NULL) == 0,
       "2 ranks, every mode: %d forward and backward calls in a row allocate "
       "device memory in the first two only, hold one block between calls, give "
       "bit-identical results that match the reference, build 2 layouts per plan; "
       "nothing left after zc_comm_destroy", ITERATIONS);
    ok(mp_run(2, CASE_TIMEOUT_S, rank_layouts, NULL) == 0,
       "2 ranks: %d plans made, used twice and destroyed in turn build one layout each, "
       "at most %d kept", ZC_RA_LAYOUTS + 2, ZC_RA_LAYOUTS);
    ok(mp_run(2, CASE_TIMEOUT_S, rank_streams, NULL) == 0,
       "2 ranks: forward and backward calls on %d caller streams in turn reuse the engine's "
       "memory with no race, results match the reference", EMU_CALLER_STREAMS);
    test_inject(1, MODE_ZEPPELIN, 0, 0);
    test_inject(1, MODE_ZEPPELIN, 1, 1);
    test_inject(2, MODE_ZEPPELIN, 1, 0);
    test_inject(2, MODE_LLAMA_CP, 1, 1);
    if (have_rails)
        unlink(topo);
    rad_batch_free(&ref);
    return tap_done();
}

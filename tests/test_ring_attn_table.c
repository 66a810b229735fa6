/* Kernel tables (zc_attn_kernels(3)) in zc_ring_attn_fwd/bwd: 2 and 4
 * forked ranks on two emulated nodes, every mode (Zeppelin plan, routing
 * only, TE CP, LLaMA CP), float32 and bfloat16 (GQA both), batches with
 * uneven rings, one long sequence, sequences shorter than the ring, an
 * empty one, and ranks without rows.
 *
 * The table is libzcomm's own CPU kernels behind the table's contract
 * (tools/zc_attn_table.h), so the engine's work through it can be held to
 * the bit:
 *  - with ZC_ATTN_KERNELS_BOTTOM_RIGHT | ZC_ATTN_KERNELS_FLOAT32_OUT the
 *    engine gives the table exactly the calls it makes of its own kernels:
 *    out, lse, dq, dk and dv must be identical (memcmp) to the call
 *    without a table, on the host engine and on the stream engine (the
 *    device emulated, tests/stream_emu.h), as many calls, all on the table;
 *  - the same table refusing every other call (ZC_ERR_UNSUPPORTED): those
 *    run on libzcomm's kernels, identical again, and the stats count them;
 *  - a flash-attention-like table (no flags: causal top-left with equal
 *    lengths, outputs in the inputs' dtype), with blocks cut very fine on
 *    the host: every call keeps the contract (segments with queries and
 *    keys, cu_seqlens and their host copies, max_seqlen, totals, memory
 *    type, stream), the calls of all ranks cover every visible (query,
 *    key) pair of the batch exactly once, in the forward and in the
 *    backward, and the results match single-process attention
 *    (tools/zc_ring_attn_data.h's tolerances).
 * Each rank runs with one kernel thread (ZC_NUM_THREADS=1): the CPU
 * kernels add dq partials in thread order.
 *
 * Then a table that fails: every rank returns the status of the lowest
 * failing rank, the failing rank names the pass, nothing hangs, and the
 * communicator works afterwards (host and stream engine); and refused
 * tables: size, NULL callbacks, unknown flags, a table on one rank only. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_emu.h"
#include "mp.h"
#include "rails_lo.h"
#include "ring_attn_cases.h"
#include "src/core/comm.h"
#include "stream_emu.h"
#include "tap.h"
#include "tools/zc_attn_table.h"
#include "tools/zc_ring_attn_data.h"
#include "zcomm.h"

#define NSHAPES 2
#define MAX_BATCHES 4
#define MAX_SEQS 16
#define MAX_RANKS 4
#define PAD_ROWS 2
#define CASE_TIMEOUT_S 240
#define EXACT (ZC_ATTN_KERNELS_BOTTOM_RIGHT | ZC_ATTN_KERNELS_FLOAT32_OUT)

static const struct {
    int hq, hkv, d;
    zc_datatype_t dtype;
} shapes[NSHAPES] = {{4, 2, 32, ZC_FLOAT32}, {4, 1, 40, ZC_BFLOAT16}};

typedef struct {
    char name[64];
    int64_t lengths[MAX_SEQS];
    size_t n;
    int64_t capacity;
    double pairs;             /* visible (query, key) pairs of the batch */
} batch_t;

/* What one rank found in one case (shared memory). */
typedef struct {
    int ran, failed;
    char why[240];
    double pairs[2][2];       /* [host, stream][fwd, bwd] of the flash-like table */
} result_t;

static batch_t batches[MAX_BATCHES];
static int nbatches;
static rad_batch_t refs[MAX_BATCHES][NSHAPES];
static result_t *results;     /* [batch][shape][mode][rank] */

static result_t *result_of(int bi, int si, int mi, int rank)
{
    return &results[((bi * NSHAPES + si) * NMODES + mi) * MAX_RANKS + rank];
}

/* ---- batches ---------------------------------------------------------------- */

static void add_batch(const char *name, const int64_t *lengths, size_t n, int nranks, int full)
{
    batch_t *b = &batches[nbatches++];
    int64_t total = 0;

    snprintf(b->name, sizeof(b->name), "%s", name);
    b->pairs = 0;
    for (size_t i = 0; i < n; i++) {
        total += b->lengths[i] = lengths[i];
        b->pairs += (double)lengths[i] * (double)(lengths[i] + 1) / 2;
    }
    b->n = n;
    b->capacity = full ? total / nranks : (total * 5 / 4 + nranks - 1) / nranks + 8;
}

static void make_batches(int nranks)
{
    int64_t total = 160 * (int64_t)nranks, len[MAX_SEQS], sum = 0;
    size_t n = 0;

    nbatches = 0;
    /* exactly full ranks: the planner cuts sequences into uneven rings;
     * an empty sequence among them */
    len[n++] = total * 3 / 8 + 5;
    len[n++] = total / 4 - 3;
    len[n++] = 0;
    len[n++] = 37;
    len[n++] = 9;
    len[n++] = 1;
    for (size_t i = 0; i < n; i++)
        sum += len[i];
    len[n++] = total - sum;
    add_batch("full ranks, uneven rings, an empty sequence", len, n, nranks, 1);
    len[0] = total - 3;
    add_batch("one sequence", len, 1, nranks, 0);
    n = 0;
    for (int64_t l = 1; n < 10; l = l % (2 * nranks + 1) + 1 + (int64_t)(n % 3))
        len[n++] = l;
    add_batch("sequences shorter than 2G", len, n, nranks, 0);
    len[0] = 1;
    len[1] = 2;
    add_batch("3 tokens, ranks without rows", len, 2, nranks, 0);
}

/* ---- the contract, checked on every call --------------------------------------- */

typedef struct {
    const zc_ring_attn_args_t *args; /* the ring call's */
    unsigned flags;
    int stream_engine;
    int refuse_every;         /* > 0: every refuse_every-th call is refused */
    long calls, refused;
    double pairs[2];
    char bad[160];            /* the first breach of the contract */
} watch_t;

#define BREACH(w, ...)                                                          \
    do {                                                                        \
        if (!(w)->bad[0])                                                       \
            snprintf((w)->bad, sizeof((w)->bad), __VA_ARGS__);                  \
        return ZC_OK;                                                           \
    } while (0)

static zc_status_t watch(void *arg, int backward, const zc_attn_varlen_t *c)
{
    watch_t *w = arg;
    const zc_ring_attn_args_t *a = w->args;
    zc_datatype_t odt = w->flags & ZC_ATTN_KERNELS_FLOAT32_OUT ? ZC_FLOAT32 : a->dtype;
    int max_q = 0, max_kv = 0;

    if (w->refuse_every > 0 && ++w->calls % w->refuse_every == 0) {
        w->refused++;
        return ZC_ERR_UNSUPPORTED;
    }
    if (c->size != sizeof(*c) || c->batch < 1 || c->num_heads_q != a->num_heads_q ||
        c->num_heads_kv != a->num_heads_kv || c->head_dim != a->head_dim ||
        c->dtype != a->dtype || c->out_dtype != odt || c->memtype != a->memtype ||
        (c->causal != 0 && c->causal != 1) || !(c->scale > 0))
        BREACH(w, "call of %d segments: shape, dtypes, memtype or causal %d differ from the "
               "contract", c->batch, c->causal);
    if ((c->stream != NULL) != w->stream_engine)
        BREACH(w, "stream %p on the %s engine", c->stream, w->stream_engine ? "stream" : "host");
    if (!c->q || !c->k || !c->v || !c->out || !c->lse ||
        (backward && (!c->dout || !c->dq || !c->dk || !c->dv)))
        BREACH(w, "a NULL tensor");
    if (c->host_cu_seqlens_q[0] != 0 || c->host_cu_seqlens_kv[0] != 0)
        BREACH(w, "cu_seqlens start at %d, %d", c->host_cu_seqlens_q[0],
               c->host_cu_seqlens_kv[0]);
    for (int b = 0; b < c->batch; b++) {
        int32_t lq = c->host_cu_seqlens_q[b + 1] - c->host_cu_seqlens_q[b];
        int32_t lk = c->host_cu_seqlens_kv[b + 1] - c->host_cu_seqlens_kv[b];

        if (c->cu_seqlens_q[b + 1] != c->host_cu_seqlens_q[b + 1] ||
            c->cu_seqlens_kv[b + 1] != c->host_cu_seqlens_kv[b + 1])
            BREACH(w, "cu_seqlens and their host copies differ at %d", b + 1);
        if (lq < 1 || lk < 1)
            BREACH(w, "segment %d of %d has %d queries and %d keys", b, c->batch, lq, lk);
        if (c->causal && (w->flags & ZC_ATTN_KERNELS_BOTTOM_RIGHT ? lk < lq : lk != lq))
            BREACH(w, "causal segment %d: %d queries, %d keys", b, lq, lk);
        max_q = lq > max_q ? lq : max_q;
        max_kv = lk > max_kv ? lk : max_kv;
        w->pairs[backward] += c->causal ? (double)lq * (lq + 1) / 2 + (double)(lk - lq) * lq
                                        : (double)lq * lk;
    }
    if (c->max_seqlen_q != max_q || c->max_seqlen_kv != max_kv ||
        c->total_q != c->host_cu_seqlens_q[c->batch] ||
        c->total_kv != c->host_cu_seqlens_kv[c->batch])
        BREACH(w, "max_seqlen %d/%d or totals %lld/%lld do not match cu_seqlens",
               c->max_seqlen_q, c->max_seqlen_kv, (long long)c->total_q,
               (long long)c->total_kv);
    return ZC_OK;
}

/* ---- one case on one rank ---------------------------------------------------- */

/* This rank's results of a run: out, lse, dq, dk, dv with their padding. */
typedef struct {
    void *buf[RAD_NRESULTS];
    size_t bytes[RAD_NRESULTS];
} snap_t;

static void snap_sizes(const rad_batch_t *b, const rad_local_t *l, snap_t *s)
{
    size_t rows = (size_t)(l->rows + l->pad);

    s->bytes[RAD_OUT] = s->bytes[RAD_DQ] = rows * rad_row_bytes(b, 0);
    s->bytes[RAD_LSE] = rows * (size_t)b->hq * sizeof(float);
    s->bytes[RAD_DK] = s->bytes[RAD_DV] = rows * rad_row_bytes(b, 1);
}

static void *const *local_results(const rad_local_t *l, void *out[RAD_NRESULTS])
{
    out[RAD_OUT] = l->out;
    out[RAD_LSE] = l->lse;
    out[RAD_DQ] = l->dq;
    out[RAD_DK] = l->dk;
    out[RAD_DV] = l->dv;
    return out;
}

static int snap_take(const rad_batch_t *b, const rad_local_t *l, snap_t *s)
{
    void *got[RAD_NRESULTS];

    local_results(l, got);
    snap_sizes(b, l, s);
    for (int w = 0; w < RAD_NRESULTS; w++) {
        s->buf[w] = malloc(s->bytes[w] ? s->bytes[w] : 1);
        if (!s->buf[w])
            return -1;
        memcpy(s->buf[w], got[w], s->bytes[w]);
    }
    return 0;
}

static void snap_free(snap_t *s)
{
    for (int w = 0; w < RAD_NRESULTS; w++)
        free(s->buf[w]);
}

/* The first result that differs from the snapshot in any bit, or NULL. */
static const char *snap_differs(const snap_t *s, const rad_local_t *l)
{
    static const char *names[RAD_NRESULTS] = {"out", "lse", "dq", "dk", "dv"};
    void *got[RAD_NRESULTS];

    local_results(l, got);
    for (int w = 0; w < RAD_NRESULTS; w++)
        if (memcmp(s->buf[w], got[w], s->bytes[w]) != 0)
            return names[w];
    return NULL;
}

/* Forward and backward through one engine, with `table` (NULL: none). */
static zc_status_t run_pair(zc_comm_h comm, zc_plan_h plan, zc_ring_attn_args_t *args,
                            int stream, zc_attn_kernels_t *table, zc_ring_attn_stats_t st[2])
{
    zc_status_t s;

    args->kernels = table;
    for (int pass = 0; pass < 2; pass++) {
        st[pass] = (zc_ring_attn_stats_t)ZC_RING_ATTN_STATS_INITIALIZER;
        args->stats = &st[pass];
        if (stream)
            s = emu_ring_attn(comm, plan, args, pass, NULL);
        else
            s = pass ? zc_ring_attn_bwd(comm, plan, args) : zc_ring_attn_fwd(comm, plan, args);
        if (s != ZC_OK)
            break;
    }
    args->kernels = NULL;
    args->stats = NULL;
    return s;
}

static void run_case(zc_comm_h comm, int rank, int nranks, int bi, int si, int mi, result_t *r)
{
    const rad_batch_t *ref = &refs[bi][si];
    zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_ring_attn_stats_t base[2], got[2];
    zc_own_table_t table;
    zc_plan_h plan = NULL;
    rad_local_t l = {0};
    snap_t snap[2];
    watch_t w;
    double worst[RAD_NRESULTS];
    const char *diff;
    zc_status_t st;
    int64_t wrong;

    r->ran = 1;
    memset(snap, 0, sizeof(snap));
    zc_own_table_init(&table, EXACT);
    table.before = watch;
    table.arg = &w;
    opts.flags = modes[mi].plan_flags;
    if (zc_plan_create(2, nranks / 2, batches[bi].capacity, batches[bi].lengths, batches[bi].n,
                       &opts, &plan) != ZC_OK)
        CASE_FAIL("plan: %s", zc_get_last_error());
    if (rad_local_make(ref, plan, rank, PAD_ROWS, &l) != 0)
        CASE_FAIL("out of memory");
    rad_local_args(ref, &l, &args);
    args.mode = modes[mi].mode;
    for (int stream = 0; stream < 2; stream++) {
        const char *engine = stream ? "stream engine" : "host engine";

        /* blocks whole: the slices of the host engine follow the transfers'
         * timing, and the bits follow the slices */
        comm->settings.ring_attn_slice_mflop = 0;
        if ((st = run_pair(comm, plan, &args, stream, NULL, base)) != ZC_OK)
            CASE_FAIL("%s without a table: %s: %s", engine, zc_strerror(st), zc_get_last_error());
        if (snap_take(ref, &l, &snap[stream]) != 0)
            CASE_FAIL("out of memory");
        for (int refuse = 0; refuse < 2; refuse++) {
            w = (watch_t){.args = &args, .flags = EXACT, .stream_engine = stream,
                          .refuse_every = refuse ? 2 : 0};
            if ((st = run_pair(comm, plan, &args, stream, &table.kernels, got)) != ZC_OK)
                CASE_FAIL("%s, table%s: %s: %s", engine, refuse ? " refusing" : "",
                          zc_strerror(st), zc_get_last_error());
            if (w.bad[0])
                CASE_FAIL("%s: the contract: %s", engine, w.bad);
            if ((diff = snap_differs(&snap[stream], &l)) != NULL)
                CASE_FAIL("%s, table%s: %s differs from the call without a table", engine,
                          refuse ? " refusing every other call" : "", diff);
            for (int p = 0; p < 2; p++)
                if (got[p].kernel_calls != base[p].kernel_calls ||
                    got[p].blocks_table + got[p].table_refused != got[p].kernel_calls ||
                    got[p].blocks_native != got[p].table_refused ||
                    (!refuse && got[p].table_refused != 0))
                    CASE_FAIL("%s, table%s, %s: stats: %lld calls (%lld without a table), "
                              "%lld on the table, %lld refused, %lld native", engine,
                              refuse ? " refusing" : "", p ? "bwd" : "fwd",
                              (long long)got[p].kernel_calls, (long long)base[p].kernel_calls,
                              (long long)got[p].blocks_table, (long long)got[p].table_refused,
                              (long long)got[p].blocks_native);
            if (got[0].table_refused + got[1].table_refused != (refuse ? w.refused : 0))
                CASE_FAIL("%s: the table refused %ld calls, the stats count %lld", engine,
                          w.refused, (long long)(got[0].table_refused + got[1].table_refused));
        }
        /* flash-attention's contract: splits, dtype outputs, blocks cut fine */
        comm->settings.ring_attn_slice_mflop = 1;
        table.kernels.flags = 0;
        w = (watch_t){.args = &args, .stream_engine = stream};
        st = run_pair(comm, plan, &args, stream, &table.kernels, got);
        table.kernels.flags = EXACT;
        if (st != ZC_OK)
            CASE_FAIL("%s, flash-like table: %s: %s", engine, zc_strerror(st),
                      zc_get_last_error());
        if (w.bad[0])
            CASE_FAIL("%s, flash-like table: the contract: %s", engine, w.bad);
        r->pairs[stream][0] = w.pairs[0];
        r->pairs[stream][1] = w.pairs[1];
        wrong = rad_local_check(ref, &l, 1, rad_tolerance(ref->dtype), worst);
        if (wrong != 0)
            CASE_FAIL("%s, flash-like table: %lld elements off the reference (worst out %.3g "
                      "lse %.3g dq %.3g dk %.3g dv %.3g)", engine, (long long)wrong,
                      worst[0], worst[1], worst[2], worst[3], worst[4]);
    }
out:
    snap_free(&snap[0]);
    snap_free(&snap[1]);
    zc_own_table_free(&table);
    rad_local_free(&l);
    zc_plan_destroy(plan);
}

static int rank_cases(int rank, int nranks, void *arg)
{
    zc_comm_h comm;

    (void)arg;
    setenv("ZC_NUM_THREADS", "1", 1);
    if (comm_init(rank, nranks, &comm) != 0 || device_emu_install(comm) != ZC_OK) {
        fprintf(stderr, "# rank %d: init: %s\n", rank, zc_get_last_error());
        return 1;
    }
    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < NSHAPES; si++)
            for (int mi = 0; mi < NMODES; mi++)
                run_case(comm, rank, nranks, bi, si, mi, result_of(bi, si, mi, rank));
    zc_comm_destroy(comm);
    return 0;
}

static void test_cases(int nranks)
{
    make_batches(nranks);
    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < NSHAPES; si++)
            if (rad_batch_init(&refs[bi][si], batches[bi].lengths, batches[bi].n, shapes[si].hq,
                               shapes[si].hkv, shapes[si].d, shapes[si].dtype,
                               (uint64_t)(nranks * 100 + bi * 10 + si)) != 0 ||
                rad_batch_reference(&refs[bi][si], 1) != ZC_OK)
                diag("reference of %s failed: %s", batches[bi].name, zc_get_last_error());
    memset(results, 0, sizeof(result_t) * MAX_BATCHES * NSHAPES * NMODES * MAX_RANKS);
    int crashed = mp_run(nranks, CASE_TIMEOUT_S, rank_cases, NULL);
    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < NSHAPES; si++)
            for (int mi = 0; mi < NMODES; mi++) {
                const char *why = crashed ? "a rank crashed or timed out" : NULL;
                static char cover[200];
                double pairs[2][2] = {{0, 0}, {0, 0}};

                for (int r = 0; r < nranks && !why; r++) {
                    const result_t *res = result_of(bi, si, mi, r);

                    if (!res->ran || res->failed)
                        why = res->ran ? res->why : "not run";
                    for (int e = 0; e < 2; e++)
                        for (int p = 0; p < 2; p++)
                            pairs[e][p] += res->pairs[e][p];
                }
                for (int e = 0; e < 2 && !why; e++)
                    for (int p = 0; p < 2 && !why; p++)
                        if (pairs[e][p] != batches[bi].pairs) {
                            snprintf(cover, sizeof(cover), "%s engine, %s: the flash-like "
                                     "table's calls cover %.0f pairs, the batch has %.0f",
                                     e ? "stream" : "host", p ? "bwd" : "fwd", pairs[e][p],
                                     batches[bi].pairs);
                            why = cover;
                        }
                ok(why == NULL, "%d ranks, %s, %s, %s: through the table identical to the call "
                   "without one (host and stream engine, every other call refused too); a "
                   "flash-like table keeps the contract, covers every pair once, matches the "
                   "reference%s%s", nranks, batches[bi].name, zc_datatype_name(shapes[si].dtype),
                   modes[mi].name, why ? ": " : "", why ? why : "");
            }
    for (int bi = 0; bi < nbatches; bi++)
        for (int si = 0; si < NSHAPES; si++)
            rad_batch_free(&refs[bi][si]);
}

/* ---- a table that fails ----------------------------------------------------- */

typedef struct {
    int fail_at[2];           /* [pass]: the call that fails (1 = first), 0: none */
    zc_status_t status;
    long calls[2];
} failing_t;

static zc_status_t failing(void *arg, int backward, const zc_attn_varlen_t *c)
{
    failing_t *f = arg;

    (void)c;
    return ++f->calls[backward] == f->fail_at[backward] ? f->status : ZC_OK;
}

/* One rank of the small cases: its communicator (with the emulated device),
 * a TE CP plan of `small`, its rows in args, and a flash-like table. */
static rad_batch_t small;

typedef struct {
    zc_comm_h comm;
    zc_plan_h plan;
    rad_local_t l;
    zc_ring_attn_args_t a;
    zc_own_table_t table;
} small_rank_t;

static int small_setup(int rank, int nranks, small_rank_t *s)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;

    setenv("ZC_NUM_THREADS", "1", 1);
    s->a = (zc_ring_attn_args_t)ZC_RING_ATTN_ARGS_INITIALIZER;
    zc_own_table_init(&s->table, 0);
    opts.flags = ZC_PLAN_EVEN_SPLIT;
    if (comm_init(rank, nranks, &s->comm) != 0 || device_emu_install(s->comm) != ZC_OK ||
        zc_plan_create(2, nranks / 2, (small.total + nranks - 1) / nranks + 8, small.lengths,
                       small.nseqs, &opts, &s->plan) != ZC_OK)
        return -1;
    if (rad_local_make(&small, s->plan, rank, 0, &s->l) != 0)
        return -1;
    rad_local_args(&small, &s->l, &s->a);
    s->a.mode = ZC_RING_ATTN_TE_CP;
    return 0;
}

static void small_teardown(small_rank_t *s)
{
    zc_own_table_free(&s->table);
    rad_local_free(&s->l);
    zc_plan_destroy(s->plan);
    zc_comm_destroy(s->comm);
}

static int rank_fail(int rank, int nranks, void *arg)
{
    failing_t f = {{0, 0}, ZC_OK, {0, 0}};
    small_rank_t s;
    char who[16];

    (void)arg;
    MP_CHECK(small_setup(rank, nranks, &s) == 0, "init: %s", zc_get_last_error());
    zc_comm_h comm = s.comm;
    zc_plan_h plan = s.plan;
    zc_ring_attn_args_t a = s.a;
    s.table.before = failing;
    s.table.arg = &f;
    a.kernels = &s.table.kernels;
    snprintf(who, sizeof(who), "rank %d", 1);

    /* rank 1's second forward call fails */
    f.fail_at[0] = rank == 1 ? 2 : 0;
    f.status = ZC_ERR_SYSTEM;
    EXPECT(zc_ring_attn_fwd(comm, plan, &a), ZC_ERR_SYSTEM, rank == 1 ? "kernels->fwd" : who);
    /* ranks 2 and 3 fail their first backward call, each with its own status:
     * every rank returns rank 2's */
    memset(&f, 0, sizeof(f));
    f.fail_at[1] = rank >= 2 ? 1 : 0;
    f.status = rank == 2 ? ZC_ERR_TRANSPORT : ZC_ERR_NO_MEMORY;
    snprintf(who, sizeof(who), "rank %d", 2);
    EXPECT(zc_ring_attn_bwd(comm, plan, &a), ZC_ERR_TRANSPORT, rank == 2 ? "kernels->bwd" : who);
    /* a status that is not an error is a failure too */
    memset(&f, 0, sizeof(f));
    f.fail_at[0] = rank == 0 ? 1 : 0;
    f.status = (zc_status_t)7;
    snprintf(who, sizeof(who), "rank %d", 0);
    EXPECT(zc_ring_attn_fwd(comm, plan, &a), ZC_ERR_INVALID_ARG,
           rank == 0 ? "not an error" : who);
    /* the stream engine: rank 3 fails; the transfers were all matched, so
     * the communicator's device path goes on */
    memset(&f, 0, sizeof(f));
    f.fail_at[0] = rank == 3 ? 1 : 0;
    f.status = ZC_ERR_TIMEOUT;
    snprintf(who, sizeof(who), "rank %d", 3);
    EXPECT(emu_ring_attn(comm, plan, &a, 0, NULL), ZC_ERR_TIMEOUT,
           rank == 3 ? "kernels->fwd" : who);
    /* and everything works afterwards, with and without the table */
    memset(&f, 0, sizeof(f));
    MP_CHECK(emu_ring_attn(comm, plan, &a, 0, NULL) == ZC_OK &&
                 emu_ring_attn(comm, plan, &a, 1, NULL) == ZC_OK,
             "rank %d: the stream engine after a failure: %s", rank, zc_get_last_error());
    MP_CHECK(zc_ring_attn_fwd(comm, plan, &a) == ZC_OK && zc_ring_attn_bwd(comm, plan, &a) == ZC_OK,
             "rank %d: the host engine after the failures: %s", rank, zc_get_last_error());
    a.kernels = NULL;
    MP_CHECK(zc_ring_attn_fwd(comm, plan, &a) == ZC_OK, "rank %d: without a table: %s", rank,
             zc_get_last_error());
    small_teardown(&s);
    return 0;
}

static int rank_bad(int rank, int nranks, void *arg)
{
    zc_attn_kernels_t bad;
    small_rank_t s;

    (void)arg;
    MP_CHECK(small_setup(rank, nranks, &s) == 0, "init: %s", zc_get_last_error());
    zc_comm_h comm = s.comm;
    zc_plan_h plan = s.plan;
    zc_ring_attn_args_t a = s.a;
    zc_own_table_t *table = &s.table;

    bad = table->kernels;
    bad.size = rank == 1 ? 0 : sizeof(bad);
    a.kernels = &bad;
    EXPECT(zc_ring_attn_fwd(comm, plan, &a), rank == 1 ? ZC_ERR_INVALID_ARG : ZC_ERR_MISMATCH,
           rank == 1 ? "ZC_ATTN_KERNELS_INITIALIZER" : "refused");
    bad = table->kernels;
    bad.fwd = NULL;
    EXPECT(zc_ring_attn_fwd(comm, plan, &a), ZC_ERR_INVALID_ARG, "kernels->fwd");
    a.dout = s.l.dout, a.dq = s.l.dq, a.dk = s.l.dk, a.dv = s.l.dv;
    MP_CHECK(zc_ring_attn_bwd(comm, plan, &a) == ZC_OK,
             "rank %d: a table without fwd serves a backward: %s", rank, zc_get_last_error());
    bad = table->kernels;
    bad.flags = 1u << 7;
    EXPECT(zc_ring_attn_fwd(comm, plan, &a), ZC_ERR_INVALID_ARG, "kernels->flags");
    a.kernels = rank == 0 ? &table->kernels : NULL;
    EXPECT(zc_ring_attn_fwd(comm, plan, &a), ZC_ERR_MISMATCH, "kernel table");
    a.kernels = &table->kernels;
    MP_CHECK(zc_ring_attn_fwd(comm, plan, &a) == ZC_OK, "rank %d: a good table afterwards: %s",
             rank, zc_get_last_error());
    small_teardown(&s);
    return 0;
}

int main(void)
{
    static const int64_t lengths[] = {97, 64, 33, 150};
    char topo[64] = "";
    int have_rails;

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    setenv("ZC_ROUTED_MIN_BYTES", "1024", 1); /* small hops: route them anyway */
    have_rails = rails_on_loopback(topo, sizeof(topo));
    if (!have_rails)
        diag("no node topology (tests/cluster/zc_cluster --topo-xml): routed hops go direct");
    results = mp_shared(sizeof(result_t) * MAX_BATCHES * NSHAPES * NMODES * MAX_RANKS);
    if (!results)
        tap_skip_all("no shared memory");
    test_cases(2);
    test_cases(4);
    if (rad_batch_init(&small, lengths, 4, 4, 2, 16, ZC_FLOAT32, 5) != 0)
        tap_skip_all("out of memory");
    ok(mp_run(4, CASE_TIMEOUT_S, rank_fail, NULL) == 0,
       "a failing table: every rank returns the lowest failing rank's status, that rank names "
       "the pass, a status that is not an error is ZC_ERR_INVALID_ARG, the stream engine too; "
       "nothing hangs and the communicator works afterwards");
    ok(mp_run(4, CASE_TIMEOUT_S, rank_bad, NULL) == 0,
       "refused tables: size 0 (the other ranks ZC_ERR_MISMATCH), a NULL fwd (a backward "
       "needs only bwd), unknown flags, a table on one rank only (ZC_ERR_MISMATCH everywhere)");
    rad_batch_free(&small);
    if (have_rails)
        unlink(topo);
    return tap_done();
}

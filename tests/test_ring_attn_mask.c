/* zc_ring_attn_fwd/bwd under masks other than causal: the full mask and
 * sliding windows, every mode on 2 and 4 forked ranks over two emulated
 * nodes, forward and backward, against the float64 single-process
 * reference with the same mask (tools/zc_attn_ref.h, every row), with
 * libzcomm's kernels and through a kernel table of them
 * (tools/zc_attn_table.h): the table gets every causal or full block,
 * libzcomm's kernels exactly the banded ones (stats table_banded), and on
 * the stream engine over the emulated device (tests/stream_emu.h), whose
 * rings skip what the mask hides as the host engine's do.
 *
 * The batch is adversarial: a sequence longer than a rank holds (a ring),
 * an empty sequence, a sequence of one token, one of 2G + 1 tokens, short
 * ones; grouped-query heads (4 query heads over 2 KV heads).  The masks:
 * full, a window of 1, a window of exactly a (contiguous) chunk of the
 * long sequence, a window wider than every sequence, a window open on
 * both sides, causal with a lookahead (left unbounded), a window bounded
 * on the left only.
 *
 * Then the bytes: one sequence of G chunks of C tokens on a Zeppelin plan
 * balanced for the window (contiguous layout; zigzag where the window
 * reaches the whole sequence; windows of 1, of exactly a chunk, of more
 * than a chunk, wider than the sequence, and the full mask): the forward
 * and backward bytes each rank sends (stats bytes_sent) equal what the window implies:
 * owner o's KV goes to the positions after it whose queries see one of its
 * keys (here o + 1 .. o + reach(o), in a contiguous causal window), and
 * its dK/dV accumulator comes home from there, one message per position.
 * TE CP in the same run sends every block round the ring (G - 1 hops).
 * Both on the host engine and on the stream engine (its NCCL groups
 * leave out the hops the window skips, on both ends), outputs and
 * gradients against the float64 reference too.  Mutations caught: a
 * reach one further (owner G - 1's KV sent to position 0, which sees
 * none of it: bytes), one short (outputs), the stream engine sending KV
 * past the reach (bytes), storing an accumulator sent home directly from
 * the ring's last hop instead (gradients), or leaving a group's last hops
 * unwaited when its last steps compute nothing (the emulator's race). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"
#include "device_emu.h"
#include "ring_attn_cases.h"
#include "stream_emu.h"
#include "tap.h"
#include "tools/zc_attn_table.h"
#include "tools/zc_ring_attn_data.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 120
#define PAD_ROWS 2
#define MAX_SEQS 8

typedef struct {
    const char *name;
    int left, right;      /* window_left, window_right; CHUNK: the chunk minus 1 */
} mask_t;

#define CHUNK (-100)

static const mask_t masks[] = {
    {"full (-1, -1)", -1, -1},
    {"window of 1 (0, 0)", 0, 0},
    {"window of exactly a chunk", CHUNK, 0},
    {"window wider than every sequence (1 << 20, 0)", 1 << 20, 0},
    {"window open on both sides (5, 3)", 5, 3},
    {"causal with a lookahead (-1, 4)", -1, 4},
    {"left side only (3, -1)", 3, -1},
};
#define NMASKS ((int)(sizeof(masks) / sizeof(masks[0])))

typedef struct {
    int64_t lengths[MAX_SEQS];
    size_t n;
    int64_t capacity;
    int left, right;
    rad_batch_t ref;
} case_t;

static case_t cur;

static zc_status_t make_plan(int nranks, const int64_t *lengths, size_t n, int64_t capacity,
                             unsigned flags, int left, int right, zc_plan_h *plan)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;

    opts.flags = flags | ZC_PLAN_WINDOW;
    opts.window_left = left;
    opts.window_right = right;
    return zc_plan_create(2, nranks / 2, capacity, lengths, n, &opts, plan);
}

/* Every mode on this rank, without and with a kernel table, and on the
 * stream engine (the emulated device of tests/stream_emu.h: the code that
 * enqueues on a GPU): forward, backward, the comparison, where the blocks
 * ran. */
static int rank_masked(int rank, int nranks, void *arg)
{
    zc_own_table_t table;
    zc_comm_h comm;

    (void)arg;
    setenv("ZC_NUM_THREADS", "1", 1);
    MP_CHECK(comm_init(rank, nranks, &comm) == 0 && device_emu_install(comm) == ZC_OK,
             "init: %s", zc_get_last_error());
    zc_own_table_init(&table, ZC_ATTN_KERNELS_BOTTOM_RIGHT | ZC_ATTN_KERNELS_FLOAT32_OUT);
    for (int run = 0; run < 3 * NMODES; run++) {
        int mi = run % NMODES, with_table = run / NMODES == 1, on_streams = run / NMODES == 2;
        const char *form = on_streams ? "stream engine" : with_table ? "table" : "host";
        zc_ring_attn_stats_t stats[2] = {ZC_RING_ATTN_STATS_INITIALIZER,
                                         ZC_RING_ATTN_STATS_INITIALIZER};
        zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
        zc_plan_h plan;
        rad_local_t l = {0};
        double worst[RAD_NRESULTS] = {0};
        int64_t wrong;
        zc_status_t st;

        MP_CHECK(make_plan(nranks, cur.lengths, cur.n, cur.capacity, modes[mi].plan_flags,
                           cur.left, cur.right, &plan) == ZC_OK, "plan: %s", zc_get_last_error());
        MP_CHECK(rad_local_make(&cur.ref, plan, rank, PAD_ROWS, &l) == 0, "memory");
        rad_local_args(&cur.ref, &l, &args);
        args.mode = modes[mi].mode;
        args.kernels = with_table ? &table.kernels : NULL;
        args.stats = &stats[0];
        st = on_streams ? emu_ring_attn(comm, plan, &args, 0, NULL)
                        : zc_ring_attn_fwd(comm, plan, &args);
        MP_CHECK(st == ZC_OK, "rank %d, %s, %s: forward: %s: %s", rank, modes[mi].name, form,
                 zc_strerror(st), zc_get_last_error());
        args.stats = &stats[1];
        st = on_streams ? emu_ring_attn(comm, plan, &args, 1, NULL)
                        : zc_ring_attn_bwd(comm, plan, &args);
        MP_CHECK(st == ZC_OK, "rank %d, %s, %s: backward: %s: %s", rank, modes[mi].name, form,
                 zc_strerror(st), zc_get_last_error());
        for (int p = 0; p < 2 && with_table; p++) {
            const zc_ring_attn_stats_t *s = &stats[p];

            MP_CHECK(s->kernel_calls == s->blocks_table + s->blocks_native &&
                         s->blocks_native == s->table_banded && s->table_refused == 0 &&
                         (cur.left >= 0 || s->table_banded == 0),
                     "rank %d, %s, table, %s: %lld calls, %lld on the table, %lld native, "
                     "%lld banded", rank, modes[mi].name, p ? "bwd" : "fwd",
                     (long long)s->kernel_calls, (long long)s->blocks_table,
                     (long long)s->blocks_native, (long long)s->table_banded);
        }
        wrong = rad_local_check(&cur.ref, &l, 1, rad_tolerance(cur.ref.dtype), worst);
        MP_CHECK(wrong >= 0, "rank %d, %s, %s: rows past the plan's tokens written", rank,
                 modes[mi].name, form);
        MP_CHECK(wrong == 0, "rank %d, %s, %s: %lld off (out %.2g lse %.2g dq %.2g dk %.2g "
                 "dv %.2g)", rank, modes[mi].name, form, (long long)wrong, worst[0], worst[1],
                 worst[2], worst[3], worst[4]);
        rad_local_free(&l);
        zc_plan_destroy(plan);
    }
    zc_own_table_free(&table);
    zc_comm_destroy(comm);
    return 0;
}

static void test_masks(int nranks)
{
    int64_t total = 0, chunk;

    cur.n = 0;
    cur.lengths[cur.n++] = 20 * nranks + 3; /* longer than a rank holds: a ring */
    cur.lengths[cur.n++] = 0;
    cur.lengths[cur.n++] = 1;
    cur.lengths[cur.n++] = 2 * nranks + 1;
    cur.lengths[cur.n++] = 7;
    cur.lengths[cur.n++] = 2;
    for (size_t i = 0; i < cur.n; i++)
        total += cur.lengths[i];
    cur.capacity = (total * 5 / 4 + nranks - 1) / nranks + 4;
    chunk = cur.lengths[0] / nranks;
    for (int k = 0; k < NMASKS; k++) {
        cur.left = masks[k].left == CHUNK ? (int)chunk - 1 : masks[k].left;
        cur.right = masks[k].right;
        if (rad_batch_init(&cur.ref, cur.lengths, cur.n, 4, 2, 16, ZC_FLOAT32,
                           (uint64_t)(nranks * 100 + k)) != 0)
            tap_skip_all("out of memory");
        cur.ref.flags = ZC_ATTN_WINDOW;
        cur.ref.window_left = cur.left;
        cur.ref.window_right = cur.right;
        if (rad_batch_reference64(&cur.ref) != ZC_OK)
            tap_skip_all("reference: out of memory");
        /* a window of 1 has dq = dk = 0 exactly (one key: dS = P (dP -
         * delta) = 0); the kernels' fp32 rounding leaves ~1e-8 there,
         * which the tolerance relative to max|ref| = 0 would call wrong:
         * an absolute one there */
        for (int w = 0; w < RAD_NRESULTS; w++)
            if (cur.ref.max_abs[w] == 0)
                cur.ref.max_abs[w] = 1;
        ok(mp_run(nranks, CASE_TIMEOUT_S, rank_masked, NULL) == 0,
           "%d ranks, %s (%d, %d): zeppelin, routing, te_cp, llama_cp forward and backward "
           "match the float64 reference (lengths %lld, 0, 1, %lld, 7, 2; GQA 4/2), through a "
           "kernel table too (banded blocks alone on libzcomm's kernels), and on the stream "
           "engine", nranks,
           masks[k].name, cur.left, cur.right, (long long)cur.lengths[0],
           (long long)cur.lengths[3]);
        rad_batch_free(&cur.ref);
    }
}

/* ---- bytes ------------------------------------------------------------------ */

#define MAX_RINGS 2

/* How far owner o's KV must go in one contiguous sequence of G chunks of
 * c tokens under the causal window (left, 0): the last position whose
 * first query sees o's last key; the full mask (left = -2 here) every
 * position round the ring. */
static int reach(int G, int64_t c, int o, int left)
{
    int r = 0;

    if (left == -2)
        return G - 1;
    for (int s = 1; o + s < G; s++)
        if (left < 0 || (o + 1) * c - 1 >= (o + s) * c - left)
            r = s;
    return r;
}

/* Bytes position p of a ring of chunks of c sends: KV (fwd) or KV and
 * dK/dV (bwd). */
static uint64_t expect_bytes(int G, int64_t c, int p, int left, int backward, size_t kv_row,
                             size_t dkv_row)
{
    uint64_t b = 0;

    for (int o = 0; o < G; o++) {
        int r = reach(G, c, o, left), d = ((p - o) % G + G) % G;

        if (d < r)
            b += (uint64_t)c * kv_row;      /* the KV hop into step d + 1 */
        if (backward && r > 0 && d <= r)
            b += (uint64_t)c * dkv_row;     /* the accumulator on, or home */
    }
    return b;
}

typedef struct {
    int left, right;
    int nseqs;
    int64_t chunk[MAX_RINGS]; /* each sequence: G chunks of this many tokens */
} bytes_arg_t;

static int rank_bytes(int rank, int nranks, void *arg)
{
    const bytes_arg_t *w = arg;
    int64_t len[MAX_RINGS], capacity = 0;
    rad_batch_t b;
    zc_comm_h comm;
    size_t kv_row = 2 * 2 * 8 * sizeof(float), dkv_row = kv_row;

    setenv("ZC_NUM_THREADS", "1", 1);
    for (int k = 0; k < w->nseqs; k++) {
        len[k] = w->chunk[k] * nranks;
        capacity += w->chunk[k];
    }
    MP_CHECK(comm_init(rank, nranks, &comm) == 0 && device_emu_install(comm) == ZC_OK,
             "init: %s", zc_get_last_error());
    MP_CHECK(rad_batch_init(&b, len, (size_t)w->nseqs, 2, 2, 8, ZC_FLOAT32, 5) == 0, "memory");
    b.flags = ZC_ATTN_WINDOW;
    b.window_left = w->left;
    b.window_right = w->right;
    MP_CHECK(rad_batch_reference64(&b) == ZC_OK, "reference: out of memory");
    for (int r = 0; r < RAD_NRESULTS; r++) /* a window of 1: dq = dk = 0 (test_masks) */
        if (b.max_abs[r] == 0)
            b.max_abs[r] = 1;
    for (int run = 0; run < 4; run++) {
        int te = run / 2, on_streams = run % 2;
        const char *form = on_streams ? "stream engine" : "host engine";
        zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
        zc_ring_attn_stats_t fst = ZC_RING_ATTN_STATS_INITIALIZER, bst = fst;
        zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
        zc_plan_h plan;
        rad_local_t l = {0};
        double worst[RAD_NRESULTS] = {0};
        uint64_t f = 0, bw = 0;

        MP_CHECK(make_plan(nranks, len, (size_t)w->nseqs, capacity,
                           te ? ZC_PLAN_EVEN_SPLIT : 0, w->left, w->right, &plan) == ZC_OK,
                 "plan: %s", zc_get_last_error());
        zc_plan_info(plan, &info);
        MP_CHECK(info.nrings == w->nseqs, "a ring per sequence: %d", info.nrings);
        MP_CHECK(rad_local_make(&b, plan, rank, 0, &l) == 0, "memory");
        for (int k = 0; k < w->nseqs && !te; k++) {
            zc_plan_ring_t ring;
            zc_ring_layout_t layout;
            int64_t c, held = 0;
            int pos = -1, round;

            MP_CHECK(zc_plan_ring(plan, k, &ring) == ZC_OK && ring.nranks == nranks,
                     "ring %d over every rank", k);
            zc_plan_ring_layout(plan, k, &layout);
            /* zigzag only where the window reaches the whole sequence: then,
             * as under causal, every owner goes round */
            MP_CHECK(layout == ZC_RING_LAYOUT_CONTIGUOUS || w->left >= len[ring.seq],
                     "ring %d is contiguous", k);
            round = w->right < 0 || layout == ZC_RING_LAYOUT_ZIGZAG;
            for (int i = 0; i < ring.nranks; i++)
                pos = ring.ranks[i] == rank ? i : pos;
            c = w->chunk[ring.seq];
            for (size_t i = 0; i < l.npieces; i++)
                MP_CHECK(l.pieces[i].ring != k || layout == ZC_RING_LAYOUT_ZIGZAG ||
                             (l.pieces[i].begin == pos * c && l.pieces[i].end == (pos + 1) * c),
                         "ring %d: position %d holds chunk %d", k, pos, pos);
            for (size_t i = 0; i < l.npieces; i++)
                held += l.pieces[i].ring == k ? l.pieces[i].end - l.pieces[i].begin : 0;
            MP_CHECK(held == c, "ring %d: position %d holds %lld tokens", k, pos,
                     (long long)held);
            f += expect_bytes(nranks, c, pos, round ? -2 : w->left, 0, kv_row, 0);
            bw += expect_bytes(nranks, c, pos, round ? -2 : w->left, 1, kv_row, dkv_row);
        }
        rad_local_args(&b, &l, &args);
        args.mode = te ? ZC_RING_ATTN_TE_CP : ZC_RING_ATTN_ZEPPELIN;
        args.stats = &fst;
        MP_CHECK((on_streams ? emu_ring_attn(comm, plan, &args, 0, NULL)
                             : zc_ring_attn_fwd(comm, plan, &args)) == ZC_OK,
                 "%s: fwd: %s", form, zc_get_last_error());
        args.stats = &bst;
        MP_CHECK((on_streams ? emu_ring_attn(comm, plan, &args, 1, NULL)
                             : zc_ring_attn_bwd(comm, plan, &args)) == ZC_OK,
                 "%s: bwd: %s", form, zc_get_last_error());
        if (te) {
            /* every rank's share of every sequence all the way round, masked */
            MP_CHECK(fst.bytes_sent == (uint64_t)(nranks - 1) * (uint64_t)capacity * kv_row,
                     "rank %d, %s: TE CP forward sent %llu bytes, every hop is %llu", rank,
                     form, (unsigned long long)fst.bytes_sent,
                     (unsigned long long)((nranks - 1) * (uint64_t)capacity * kv_row));
        } else {
            MP_CHECK(fst.bytes_sent == f && bst.bytes_sent == bw,
                     "rank %d, %s: Zeppelin sent %llu bytes forward, %llu backward; the "
                     "window implies %llu and %llu", rank, form,
                     (unsigned long long)fst.bytes_sent, (unsigned long long)bst.bytes_sent,
                     (unsigned long long)f, (unsigned long long)bw);
        }
        /* and what moved is right */
        MP_CHECK(rad_local_check(&b, &l, 1, rad_tolerance(b.dtype), worst) == 0,
                 "rank %d, %s, %s: off the reference (out %.2g lse %.2g dq %.2g dk %.2g "
                 "dv %.2g)", rank, te ? "te_cp" : "zeppelin", form,
                 worst[0], worst[1], worst[2], worst[3], worst[4]);
        rad_local_free(&l);
        zc_plan_destroy(plan);
    }
    rad_batch_free(&b);
    zc_comm_destroy(comm);
    return 0;
}

static void test_bytes(int nranks)
{
    /* a window of exactly a chunk, the full mask, a window of 1 (nothing
     * moves), one wider than the sequence (every owner round: the planner
     * may take zigzag), then windows the planner lays out contiguously on
     * 4 ranks only (on 2 a wider one balances better in zigzag) */
    static const bytes_arg_t windows[] = {
        {23, 0, 1, {24}}, {-1, -1, 1, {24}}, {0, 0, 1, {24}}, {1 << 20, 0, 1, {24}},
        {24, 0, 1, {24}}, {49, 0, 1, {24}}};
    size_t n = nranks == 2 ? 4 : sizeof(windows) / sizeof(windows[0]);

    for (size_t i = 0; i < n; i++)
        ok(mp_run(nranks, CASE_TIMEOUT_S, rank_bytes, (void *)&windows[i]) == 0,
           "%d ranks, %d sequence%s of %d chunks of %lld%s%s, window (%d, %d): each rank's "
           "forward and backward bytes are what the window implies (no KV block wholly "
           "outside the windows of the queries it reaches), TE CP's every hop, on the host "
           "and the stream engine, outputs and gradients right", nranks,
           windows[i].nseqs, windows[i].nseqs > 1 ? "s" : "", nranks,
           (long long)windows[i].chunk[0], windows[i].nseqs > 1 ? " and " : "",
           windows[i].nseqs > 1 ? "8" : "", windows[i].left, windows[i].right);
}

int main(void)
{
    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    setenv("ZC_ROUTED_MIN_BYTES", "1024", 1); /* route the small inter-node hops too */
    test_masks(2);
    test_masks(4);
    test_bytes(2);
    test_bytes(4);
    return tap_done();
}

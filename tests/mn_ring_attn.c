/* zc_ring_attn across nodes (tests/test_multinode.sh runs it on the
 * emulated 2-node x 4-NIC cluster, 4 ranks per node; mpirun works too).
 *
 * Batches from the three datasets (tools/zc_plan_dataset.c, the paper's
 * Table 2) scaled down 32 times, 256 tokens per rank, plus one sequence
 * over the whole cluster and a nearly full batch whose plan has three
 * inter-node rings of different cycles (on 2 nodes x 4: three routed
 * groups sharing every rank, so the backward's queue order decides the
 * order of their routed calls); fp32 and bf16; the Zeppelin plan, routing
 * only, TE CP and LLaMA CP; forward then backward, the backward in either
 * queue order (ZC_RING_ATTN_BWD_ORDER, alternating so that every mode
 * meets both: the reverse order with routed hops deadlocks unless the
 * routed-call list follows it).  Every rank builds the whole
 * batch from its seed, computes the single-process reference itself and
 * compares its own rows (fp32 1e-5, bf16 2.5e-2 relative).  Routed hops
 * are forced through the proxies (ZC_ROUTED_MIN_BYTES=4096): in routing
 * mode every rank carries inter-node bytes, in TE CP mode only the two
 * ranks whose ring hop crosses nodes do. */
#include "config.h"

#include <stdlib.h>

#include "mn_common.h"
#include "src/core/comm.h"
#include "tools/zc_plan_dataset.h"
#include "tools/zc_ring_attn_data.h"

#define TOKENS_PER_RANK 256
#define SCALE 32
#define PAD_ROWS 2

typedef struct {
    const char *name;
    zc_ring_attn_mode_t mode;
    unsigned plan_flags;
} mode_cfg_t;

static const mode_cfg_t modes[] = {
    {"zeppelin", ZC_RING_ATTN_ZEPPELIN, 0},
    {"routing", ZC_RING_ATTN_ZEPPELIN, ZC_PLAN_EVEN_SPLIT},
    {"te_cp", ZC_RING_ATTN_TE_CP, ZC_PLAN_EVEN_SPLIT},
    {"llama_cp", ZC_RING_ATTN_LLAMA_CP, ZC_PLAN_EVEN_SPLIT},
};
#define NMODES ((int)(sizeof(modes) / sizeof(modes[0])))

static uint64_t rail_bytes_sent(zc_comm_h comm, int nrails)
{
    uint64_t total = 0, sent, recv;

    for (int k = 0; k < nrails; k++)
        if (zc_comm_rail_bytes(comm, k, &sent, &recv) == ZC_OK)
            total += sent;
    return total;
}

/* One batch in one mode: forward, backward, compare; rail bytes checked
 * for the two even-split ring modes. */
static void run_mode(zc_comm_h comm, const rad_batch_t *ref, int nnodes, int ppn, int64_t capacity,
                     const mode_cfg_t *m, int nrails)
{
    zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    double worst[RAD_NRESULTS];
    zc_plan_h plan;
    rad_local_t l;
    uint64_t before;
    zc_status_t st;

    opts.flags = m->plan_flags;
    opts.rails = nrails; /* the plan's hops are this communicator's routes (0: no rails) */
    st = zc_plan_create(nnodes, ppn, capacity, ref->lengths, ref->nseqs, &opts, &plan);
    MN_CHECK(st == ZC_OK, "zc_plan_create: %s", zc_strerror(st));
    if (st != ZC_OK)
        return;
    MN_CHECK(rad_local_make(ref, plan, mn_rank, PAD_ROWS, &l) == 0, "out of memory");
    rad_local_args(ref, &l, &args);
    args.mode = m->mode;
    before = rail_bytes_sent(comm, nrails);
    st = zc_ring_attn_fwd(comm, plan, &args);
    MN_CHECK(st == ZC_OK, "zc_ring_attn_fwd: %s", zc_strerror(st));
    if (nnodes > 1 && nrails > 1 && (m->plan_flags & ZC_PLAN_EVEN_SPLIT) &&
        m->mode != ZC_RING_ATTN_LLAMA_CP) {
        /* the global ring crosses nodes at ppn-1 -> ppn and size-1 -> 0 */
        uint64_t carried = rail_bytes_sent(comm, nrails) - before;
        int crosses = mn_rank % ppn == ppn - 1;

        if (m->mode == ZC_RING_ATTN_ZEPPELIN)
            MN_CHECK(carried >= 4096, "routing: rank %d carried %llu inter-node bytes", mn_rank,
                     (unsigned long long)carried);
        else
            MN_CHECK(crosses ? carried >= 4096 : carried < 1024,
                     "te_cp: rank %d (%s a crossing hop) sent %llu inter-node bytes", mn_rank,
                     crosses ? "on" : "not on", (unsigned long long)carried);
    }
    st = zc_ring_attn_bwd(comm, plan, &args);
    MN_CHECK(st == ZC_OK, "zc_ring_attn_bwd: %s", zc_strerror(st));
    int64_t wrong = rad_local_check(ref, &l, 1, rad_tolerance(ref->dtype), worst);
    MN_CHECK(wrong == 0, "%lld elements off or padding written (worst out %.3g lse %.3g dq %.3g "
             "dk %.3g dv %.3g)", (long long)wrong, worst[0], worst[1], worst[2], worst[3],
             worst[4]);
    rad_local_free(&l);
    zc_plan_destroy(plan);
}

int main(void)
{
    zc_comm_h comm;
    int nnodes = 0, nrails = 0;
    static const struct { int hq, hkv, d; zc_datatype_t dtype; } shapes[] = {
        {4, 1, 32, ZC_FLOAT32}, {4, 2, 40, ZC_BFLOAT16}};
    char name[200];

    setenv("ZC_ROUTED_MIN_BYTES", "4096", 1);
    comm = mn_init();
    zc_comm_node_count(comm, &nnodes);
    zc_comm_rail_count(comm, &nrails);
    if (mn_rank == 0)
        printf("# %d ranks, %d nodes, %d rails\n", mn_size, nnodes, nrails);
    int64_t total = (int64_t)TOKENS_PER_RANK * mn_size;
    int64_t capacity = (total * 5 / 4 + mn_size - 1) / mn_size + 8;

    /* the three-ring batch: 146, 584 and 1318 tokens of 2048 at 264 per rank */
    int64_t three[3] = {146 * total / 2048, 584 * total / 2048, 0};

    three[2] = total - three[0] - three[1];
    for (int b = 0; b <= zc_dataset_count() + 1; b++) {
        int64_t *lengths = NULL, one = total - 5, cap = capacity;
        size_t count = 1;
        const char *what = b < zc_dataset_count()  ? zc_dataset_name(b)
                           : b == zc_dataset_count() ? "one sequence"
                                                     : "three inter-node rings";

        if (b < zc_dataset_count()) {
            count = rad_sample(b, total, SCALE, 4242 + (uint64_t)b, &lengths);
        } else if (b > zc_dataset_count()) {
            count = 3;
            cap = 264 * TOKENS_PER_RANK / 256;
        }
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            rad_batch_t ref;

            MN_CHECK(rad_batch_init(&ref, lengths ? lengths : count == 3 ? three : &one, count,
                                    shapes[s].hq, shapes[s].hkv, shapes[s].d, shapes[s].dtype,
                                    77 + (uint64_t)(b * 10) + s) == 0, "out of memory");
            MN_CHECK(rad_batch_reference(&ref, 1) == ZC_OK, "reference");
            for (int m = 0; m < NMODES; m++) {
                const char *order = (b + (int)s + m) % 2 ? "reverse" : "forward";

                /* the communicator's copy of ZC_RING_ATTN_BWD_ORDER, alike on every rank */
                comm->settings.ring_attn_bwd_reverse = order[0] == 'r';
                run_mode(comm, &ref, nnodes, mn_size / nnodes, cap, &modes[m], nrails);
                snprintf(name, sizeof(name), "%s (%zu seqs, %lld tokens), %s, %s, bwd %s: fwd + "
                         "bwd match the single-process reference", what, count,
                         (long long)ref.total, zc_datatype_name(shapes[s].dtype), modes[m].name,
                         order);
                mn_report(comm, name);
            }
            rad_batch_free(&ref);
        }
        free(lengths);
    }
    return mn_finish(comm);
}

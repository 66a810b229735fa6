/* Planner API argument checks: each bad argument returns
 * ZC_ERR_INVALID_ARG with a detail that names it, and leaves outputs alone. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/common/abi.h"
#include "src/common/env.h"
#include "src/plan/cost.h"
#include "src/plan/plan.h"
#include "tap.h"
#include "zcomm.h"

/* zc_cluster_load of a file holding `text`. */
static zc_status_t cluster_file(const char *text, zc_cluster_t *cl)
{
    char path[] = "/tmp/test_plan_args_cluster.XXXXXX";
    int fd = mkstemp(path);
    zc_status_t st;

    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return ZC_ERR_INTERNAL;
    close(fd);
    st = zc_cluster_load(path, cl);
    unlink(path);
    return st;
}

static void expect(zc_status_t st, zc_status_t want, const char *arg, const char *what)
{
    ok(st == want && strstr(zc_get_last_error(), arg) != NULL, "%s: %s names '%s' (%s)", what,
       zc_strerror(st), arg, zc_get_last_error());
}

/* The cost model prices the routes the plan names: 2 nodes x 2 GPUs on 2
 * rails, one sequence evenly over the ring 0,1,2,3 (1024 tokens a
 * position, 256 KV bytes a token: B = 262144 bytes a hop).  Hop 1 -> 2:
 * rail 0's slice (B/2) is dispatched 1 -> 0, rail 1's combined 3 -> 2, the
 * two rails in parallel: B/intra + (B/2)/nic.  Compute is made negligible,
 * so a layer's attention is 12 of the slowest hop: 3 rounds forward (KV),
 * 3 backward of KV and then fp32 dK/dV (2B: zc_plan_cost prices libzcomm's
 * engine), the hop's time linear in its bytes. */
static void priced_routes(void)
{
    static const char *text = "name routes\ngpus_per_node 2\nnics_per_node 2\nnic_gbps 80\n"
                              "intra_gbytes 100\nattn_tflops 1e12\nlinear_tflops 1e12\n"
                              "layers 1\nhidden 64\nheads 1\nhead_dim 64\nkv_heads 1\n"
                              "ffn_hidden 64\nbytes_per_elem 2\n";
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_cluster_t cl = ZC_CLUSTER_INITIALIZER;
    zc_plan_h plan = NULL;
    zc_cost_t cost = ZC_COST_INITIALIZER;
    int64_t big = 4096, small = 400;
    double B = 262144, nic = 1e10, intra = 1e11, want;

    if (!ok(cluster_file(text, &cl) == ZC_OK, "a 2-GPU, 2-NIC cluster loads (%s)",
            zc_get_last_error()))
        return;
    opts.flags = ZC_PLAN_EVEN_SPLIT;
    opts.rails = 2;
    want = 12 * (B / intra + B / 2 / nic);
    cost.attention = -1;
    if (zc_plan_create(2, 2, 1024, &big, 1, &opts, &plan) == ZC_OK)
        zc_plan_cost(plan, &cl, ZC_COST_ROUTING, &cost);
    ok(cost.attention > want * (1 - 1e-9) && cost.attention < want * (1 + 1e-9),
       "a routed hop costs B/intra + (B/2)/nic over its 2 rails: %.9g s, want %.9g",
       cost.attention, want);
    zc_plan_destroy(plan);
    /* 100 tokens a position: 25600 bytes (and 51200 of dK/dV), under
     * ZC_ROUTED_MIN_BYTES, so the runtime sends them direct on one NIC and
     * the cost model does too */
    want = 12 * (25600 / nic);
    cost.attention = -1;
    if (zc_plan_create(2, 2, 100, &small, 1, &opts, &plan) == ZC_OK)
        zc_plan_cost(plan, &cl, ZC_COST_ROUTING, &cost);
    ok(cost.attention > want * (1 - 1e-9) && cost.attention < want * (1 + 1e-9),
       "a hop under ZC_ROUTED_MIN_BYTES costs B/nic, direct: %.9g s, want %.9g",
       cost.attention, want);
    zc_plan_destroy(plan);
    {
        int64_t runtime = -1;

        unsetenv("ZC_ROUTED_MIN_BYTES");
        if (zc_env_get_int("ZC_ROUTED_MIN_BYTES", &runtime) != ZC_OK)
            runtime = -1;
        ok(runtime == ZC_ROUTED_MIN_BYTES_DEFAULT,
           "the cost model's split threshold (%d) is ZC_ROUTED_MIN_BYTES's default (%lld)",
           ZC_ROUTED_MIN_BYTES_DEFAULT, (long long)runtime);
    }
    opts.rails = 4;
    if (zc_plan_create(2, 2, 1024, &big, 1, &opts, &plan) == ZC_OK)
        expect(zc_plan_cost(plan, &cl, ZC_COST_ROUTING, &cost), ZC_ERR_INVALID_ARG, "rails",
               "a plan over 4 rails priced on 2 NICs");
    zc_plan_destroy(plan);
}

/* A cluster of 2 GPUs and 2 NICs per node, compute negligible, with the
 * step keys; the model 1 layer, hidden 64, 1 head x 64, ffn 64, vocab 100:
 * 64*64*(2+2) + 3*64*64 + 2*64 = 28800 parameters a layer, 2*100*64 + 64
 * outside: 41664. */
#define STEP_CLUSTER                                                                     \
    "name step\ngpus_per_node 2\nnics_per_node 2\nnic_gbps 80\nintra_gbytes 100\n"         \
    "attn_tflops 1e12\nlinear_tflops 1e12\nlayers 1\nhidden 64\nheads 1\nhead_dim 64\n"   \
    "kv_heads 1\nffn_hidden 64\nbytes_per_elem 2\n"
static const char *step_text =
    STEP_CLUSTER "vocab 100\nhbm_gbytes 1000\nrouted_efficiency 0.5\ngrad_bytes 4\n";

static zc_status_t step_file(const char *text, zc_cluster_t *cl, zc_step_model_t *step)
{
    char path[] = "/tmp/test_plan_args_step.XXXXXX";
    int fd = mkstemp(path);
    zc_status_t st;

    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return ZC_ERR_INTERNAL;
    close(fd);
    st = zc_cluster_load_step(path, cl, step);
    unlink(path);
    return st;
}

static int near(double a, double b)
{
    return a > b * (1 - 1e-9) && a < b * (1 + 1e-9);
}

/* The step's terms beyond attention, each against its formula. */
static void step_terms(void)
{
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_cluster_t cl = ZC_CLUSTER_INITIALIZER, pub = ZC_CLUSTER_INITIALIZER;
    zc_step_model_t step, bad;
    zc_step_cost_t c[ZC_COST_METHOD_COUNT], e1;
    zc_cost_t cost = ZC_COST_INITIALIZER;
    zc_plan_h plan = NULL;
    int64_t big = 4096;
    double nic = 1e10, intra = 1e11, params = 41664, B = 262144, kv = 4096 * 256.0, want;

    zc_step_defaults(&step);
    if (!ok(step_file(step_text, &cl, &step) == ZC_OK && step.vocab == 100 &&
                step.hbm_gbytes == 1000 && step.routed_efficiency == 0.5 &&
                step.grad_bytes == 4 && step.dkv_bytes == 4 && step.cp_max == ZC_STEP_CP_MAX,
            "the step keys load, dkv_bytes and cp_max keep their defaults (%s)",
            zc_get_last_error()))
        return;
    ok(cluster_file(step_text, &pub) == ZC_OK && pub.nics_per_node == 2,
       "zc_cluster_load accepts a file with the step keys");
    expect(step_file(STEP_CLUSTER "routed_efficiency 1.5\n", &cl, &bad), ZC_ERR_INVALID_ARG,
           "routed_efficiency", "a routed efficiency above 1");
    expect(step_file("vocab 10\nvocab 10\n", &cl, &bad), ZC_ERR_INVALID_ARG, "twice",
           "a step key given twice");
    expect(zc_cluster_load_step("/nonexistent", &cl, NULL), ZC_ERR_INVALID_ARG, "step",
           "NULL step");
    ok(near(zc_step_params(&cl, &step), params), "parameters: %.0f, want %.0f",
       zc_step_params(&cl, &step), params);
    opts.flags = ZC_PLAN_EVEN_SPLIT;
    opts.rails = 2;
    if (!ok(zc_plan_create(2, 2, 1024, &big, 1, &opts, &plan) == ZC_OK, "a 4-rank plan"))
        return;
    bad = step;
    bad.cp_max = 0;
    expect(zc_plan_step_cost(plan, &cl, &bad, ZC_COST_TE_CP, &c[0]), ZC_ERR_INVALID_ARG,
           "cp_max", "cp_max 0");
    bad = step;
    bad.routed_efficiency = 0;
    expect(zc_plan_step_cost(plan, &cl, &bad, ZC_COST_TE_CP, &c[0]), ZC_ERR_INVALID_ARG,
           "routed_efficiency", "routed efficiency 0");
    for (int m = 0; m < ZC_COST_METHOD_COUNT; m++)
        if (zc_plan_step_cost(plan, &cl, &step, (zc_cost_method_t)m, &c[m]) != ZC_OK)
            break;
    /* 2 nodes: NCCL's rings, one per NIC, 2 (n-1)/n of the bytes */
    want = 2.0 * 3 / 4 * params * 4 / (2 * nic);
    ok(near(c[ZC_COST_TE_CP].allreduce, want) && c[ZC_COST_ZEPPELIN].allreduce ==
           c[ZC_COST_TE_CP].allreduce,
       "all-reduce = 2 (n-1)/n * params * grad_bytes / (nics * nic): %.9g s, want %.9g",
       c[ZC_COST_TE_CP].allreduce, want);
    want = params * ZC_ADAM_BYTES / 1e12;
    ok(near(c[ZC_COST_TE_CP].optimizer, want), "optimizer = params * %g B / hbm: %.9g, want %.9g",
       ZC_ADAM_BYTES, c[ZC_COST_TE_CP].optimizer, want);
    {
        zc_step_cost_t *t = &c[ZC_COST_ZEPPELIN];

        ok(near(t->total, t->attn_fwd + t->attn_bwd + t->linear + t->remap + t->allreduce +
                              t->optimizer),
           "total = attention fwd + bwd + linear + remap + all-reduce + optimizer");
    }
    /* TE CP, direct hops of B bytes, compute negligible: forward 3 hops,
     * backward 3 of KV + fp32 dK/dV (3B each), rounds of B/nic and 3B/nic */
    ok(near(c[ZC_COST_TE_CP].attn_fwd, 3 * B / nic) &&
           near(c[ZC_COST_TE_CP].attn_bwd, 9 * B / nic) && c[ZC_COST_TE_CP].rounds == 4 &&
           near(c[ZC_COST_TE_CP].round_fwd, B / nic) &&
           near(c[ZC_COST_TE_CP].round_bwd, 3 * B / nic) &&
           near(c[ZC_COST_TE_CP].hop_wire, B / nic),
       "TE CP: forward 3 hops of B/nic, backward 3 of KV + fp32 dK/dV (3B/nic): %.9g %.9g",
       c[ZC_COST_TE_CP].attn_fwd, c[ZC_COST_TE_CP].attn_bwd);
    /* routed: Eq. (1) over the efficiency 0.5; the wire step is not */
    want = (B / intra + B / 2 / nic) / 0.5;
    ok(near(c[ZC_COST_ROUTING].round_fwd, want) &&
           near(c[ZC_COST_ROUTING].hop_wire, B / 2 / nic),
       "routed round = Eq. (1) / efficiency: %.9g, want %.9g; wire step (B/2)/nic",
       c[ZC_COST_ROUTING].round_fwd, want);
    /* LLaMA CP: NCCL's ring all-gather, (g-1)/g of the whole KV over a
     * node's NICs together; backward gathers again and reduce-scatters the
     * fp32 dK/dV (twice the KV's bytes) */
    want = kv * 3 / 4 / (2 * nic);
    ok(near(c[ZC_COST_LLAMA_CP].attn_fwd, want) &&
           near(c[ZC_COST_LLAMA_CP].attn_bwd, 3 * want),
       "LLaMA CP: all-gather (g-1)/g KV / (nics * nic) = %.9g s, want %.9g; backward 3x",
       c[ZC_COST_LLAMA_CP].attn_fwd, want);
    /* the public zc_plan_cost: libzcomm's engine on ideal routes */
    e1 = c[ZC_COST_ROUTING];
    step.routed_efficiency = 1;
    step.dkv_bytes = 2;
    zc_plan_step_cost(plan, &cl, &step, ZC_COST_ROUTING, &c[ZC_COST_ROUTING]);
    ok(near(e1.round_fwd, 2 * c[ZC_COST_ROUTING].round_fwd) &&
           near(c[ZC_COST_ROUTING].attn_bwd, 2 * c[ZC_COST_ROUTING].attn_fwd),
       "efficiency 0.5 doubles a routed round; bf16 dK/dV makes backward 2x forward");
    step.dkv_bytes = 4;
    zc_plan_step_cost(plan, &cl, &step, ZC_COST_ROUTING, &c[ZC_COST_ROUTING]);
    ok(zc_plan_cost(plan, &cl, ZC_COST_ROUTING, &cost) == ZC_OK &&
           near(cost.attention, c[ZC_COST_ROUTING].attn_fwd + c[ZC_COST_ROUTING].attn_bwd) &&
           near(cost.total, cost.attention + cost.linear + cost.remap),
       "zc_plan_cost = the step model's attention (efficiency 1, fp32 dK/dV), linear, remap");
    zc_plan_destroy(plan);
}

/* The baselines' CP groups, and speedups that stay bounded as the cluster
 * grows (the cause they did not: one global ring of G rounds). */
static void step_scaling(void)
{
    static const int64_t pattern[] = {16384, 8192, 4096, 2048, 1024, 1024, 512, 512};
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_cluster_t cl = ZC_CLUSTER_INITIALIZER;
    zc_step_model_t step;
    double sp[2][4];
    int gpus[4] = {16, 64, 256, 1024};

    zc_step_defaults(&step);
    if (!ok(step_file("name a\ngpus_per_node 8\nnics_per_node 4\nnic_gbps 200\n"
                      "intra_gbytes 400\nattn_tflops 160\nlinear_tflops 200\nlayers 26\n"
                      "hidden 3200\nheads 32\nhead_dim 100\nkv_heads 32\nffn_hidden 8640\n"
                      "bytes_per_elem 2\nvocab 32000\nhbm_gbytes 2039\n"
                      "routed_efficiency 0.55\ngrad_bytes 4\n", &cl, &step) == ZC_OK,
            "a Cluster A file loads (%s)", zc_get_last_error()))
        return;
    opts.rails = 4;
    for (int k = 0; k < 4; k++) {
        /* 4096 tokens a GPU: the pattern (33792 tokens) repeated, then
         * what fits of it (512 tokens at least a sequence) */
        size_t n = 0, cap = (size_t)gpus[k] * 4096 / 512 + 1;
        int64_t *len = malloc(cap * sizeof(*len)), total = 0;
        zc_plan_h plan = NULL;

        while (len && n < cap && total + pattern[n % 8] <= (int64_t)gpus[k] * 4096) {
            len[n] = pattern[n % 8];
            total += len[n++];
        }
        if (!len || zc_plan_create(gpus[k] / 8, 8, 5120, len, n, &opts, &plan) != ZC_OK) {
            ok(0, "a plan of %d GPUs (%s)", gpus[k], zc_get_last_error());
            free(len);
            return;
        }
        for (int global = 0; global < 2; global++) {
            zc_step_cost_t te, zep;

            step.cp_max = global ? gpus[k] : ZC_STEP_CP_MAX;
            zc_plan_step_cost(plan, &cl, &step, ZC_COST_TE_CP, &te);
            zc_plan_step_cost(plan, &cl, &step, ZC_COST_ZEPPELIN, &zep);
            sp[global][k] = te.total / zep.total;
            if (!global && k == 0) {
                zc_step_cost_t rt, nr;

                zc_plan_step_cost(plan, &cl, &step, ZC_COST_ROUTING, &rt);
                zc_plan_step_cost(plan, &cl, &step, ZC_COST_PARTITION, &nr);
                ok(te.total > rt.total && rt.total > nr.total && nr.total >= zep.total &&
                       te.round_fwd < te.round_bwd,
                   "orderings (16 GPUs): TE CP %.3f s > + routing %.3f > Zeppelin w/o remap "
                   "%.3f >= Zeppelin %.3f; a forward round under a backward one",
                   te.total, rt.total, nr.total, zep.total);
            }
            if (!global && k == 3)
                ok(te.cp_size == ZC_STEP_CP_MAX && te.rounds == ZC_STEP_CP_MAX,
                   "1024 GPUs: TE CP runs groups of %d GPUs, rings of %d rounds",
                   te.cp_size, te.rounds);
        }
        zc_plan_destroy(plan);
        free(len);
    }
    ok(sp[0][3] < 1.5 * sp[0][2] && sp[0][3] > 1,
       "zeppelin's speedup saturates: %.2fx at 256 GPUs, %.2fx at 1024", sp[0][2], sp[0][3]);
    ok(sp[1][3] > 3 * sp[1][2],
       "with one global ring it grows with G (%.2fx at 256, %.2fx at 1024): the cause",
       sp[1][2], sp[1][3]);
    ok(sp[0][0] == sp[1][0], "16 GPUs: one group either way (%.2fx)", sp[0][0]);
}

int main(void)
{
    int64_t len[] = {100, 50}, neg[] = {10, -1}, off, n64;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_plan_h plan = NULL, keep = (zc_plan_h)0x1;
    zc_plan_seq_t seq;
    zc_plan_ring_t ring;
    zc_plan_rank_t rank;
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    const zc_plan_piece_t *pieces;
    const zc_plan_hop_t *hops;
    const zc_plan_transfer_t *tr;
    int64_t a[4], b[4], c[4], d[4];
    size_t count;
    zc_cluster_t cl = ZC_CLUSTER_INITIALIZER;
    zc_cost_t cost = ZC_COST_INITIALIZER;

    expect(zc_plan_create(0, 2, 100, len, 2, NULL, &keep), ZC_ERR_INVALID_ARG, "nnodes", "zero nodes");
    ok(keep == (zc_plan_h)0x1, "output untouched on error");
    expect(zc_plan_create(1, 0, 100, len, 2, NULL, &plan), ZC_ERR_INVALID_ARG, "gpus_per_node",
           "zero devices");
    expect(zc_plan_create(1, 2, 0, len, 2, NULL, &plan), ZC_ERR_INVALID_ARG, "capacity",
           "capacity 0");
    expect(zc_plan_create(1 << 20, 1 << 12, 100, len, 2, NULL, &plan), ZC_ERR_INVALID_ARG,
           "nnodes", "rank overflow");
    expect(zc_plan_create(2, 2, INT64_MAX / 2, len, 2, NULL, &plan), ZC_ERR_INVALID_ARG,
           "capacity", "capacity overflow");
    expect(zc_plan_create(1, 2, 100, NULL, 2, NULL, &plan), ZC_ERR_INVALID_ARG, "lengths",
           "NULL lengths");
    expect(zc_plan_create(1, 2, 100, neg, 2, NULL, &plan), ZC_ERR_INVALID_ARG, "lengths[1]",
           "negative length");
    expect(zc_plan_create(1, 2, 100, len, 2, NULL, NULL), ZC_ERR_INVALID_ARG, "plan",
           "NULL output");
    opts.size = 0;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "opts",
           "uninitialised options");
    opts = (zc_plan_opts_t)ZC_PLAN_OPTS_INITIALIZER;
    opts.b_intra = 0;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "b_intra",
           "zero b_intra");
    opts = (zc_plan_opts_t)ZC_PLAN_OPTS_INITIALIZER;
    opts.b_inter = 0.5;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "b_inter",
           "b_inter below b_intra");
    opts = (zc_plan_opts_t)ZC_PLAN_OPTS_INITIALIZER;
    opts.flags = 0x80;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "flags",
           "unknown flags");
    opts = (zc_plan_opts_t)ZC_PLAN_OPTS_INITIALIZER;
    opts.rails = -1;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "rails",
           "negative rails");
    opts.rails = ZC_PLAN_MAX_RAILS + 1;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "rails",
           "more rails than ZC_PLAN_MAX_RAILS");
    opts.rails = 0;
    opts.reserved = 1;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "reserved",
           "reserved not 0");
    opts = (zc_plan_opts_t)ZC_PLAN_OPTS_INITIALIZER;
    opts.size = ZC_PLAN_OPTS_SIZE_V1 - 8;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "opts",
           "a size below the first layout's");
    opts.size = 0;
    expect(zc_plan_create(1, 2, 100, len, 2, &opts, &plan), ZC_ERR_INVALID_ARG, "opts",
           "size 0");
    /* A caller of the first layout (size 32, nothing after flags): what
     * lies after is not read, the hops get the default rails (one per GPU). */
    opts = (zc_plan_opts_t)ZC_PLAN_OPTS_INITIALIZER;
    opts.size = ZC_PLAN_OPTS_SIZE_V1;
    opts.flags = ZC_PLAN_EVEN_SPLIT;
    opts.rails = 99;
    opts.reserved = 7;
    ok(zc_plan_create(2, 2, 100, len, 2, &opts, &plan) == ZC_OK &&
           zc_plan_ring_hops(plan, 0, &hops, &count) == ZC_OK && count == 2 &&
           hops[0].x_send == 2 && hops[0].x_recv == 2,
       "opts of the first layout (size %d): accepted, rails default to the GPUs (2)",
       (int)ZC_PLAN_OPTS_SIZE_V1);
    zc_plan_destroy(plan);
    plan = NULL;
    expect(zc_plan_create(1, 1, 100, len, 2, NULL, &plan), ZC_ERR_CAPACITY, "lengths",
           "batch over capacity");

    ok(zc_plan_create(2, 2, 100, len, 2, NULL, &plan) == ZC_OK, "valid plan");
    expect(zc_plan_seq(plan, 2, &seq), ZC_ERR_INVALID_ARG, "seq", "sequence out of range");
    expect(zc_plan_seq(NULL, 0, &seq), ZC_ERR_INVALID_ARG, "plan", "NULL plan");
    expect(zc_plan_seq(plan, 0, NULL), ZC_ERR_INVALID_ARG, "out", "NULL out");
    expect(zc_plan_ring(plan, -1, &ring), ZC_ERR_INVALID_ARG, "ring", "negative ring");
    expect(zc_plan_rank(plan, 4, &rank), ZC_ERR_INVALID_ARG, "rank", "rank out of range");
    expect(zc_plan_info(plan, NULL), ZC_ERR_INVALID_ARG, "info", "NULL info");
    expect(zc_plan_rank_pieces(plan, 9, &pieces, &count), ZC_ERR_INVALID_ARG, "rank",
           "pieces of a bad rank");
    expect(zc_plan_rank_linear_pieces(plan, 0, NULL, &count), ZC_ERR_INVALID_ARG, "pieces",
           "NULL pieces");
    expect(zc_plan_ring_hops(plan, 99, &hops, &count), ZC_ERR_INVALID_ARG, "ring",
           "hops of a bad ring");
    expect(zc_plan_remap_transfers(plan, &tr, NULL), ZC_ERR_INVALID_ARG, "count", "NULL count");
    expect(zc_plan_remap_counts(plan, 0, (zc_remap_dir_t)7, a, b, c, d), ZC_ERR_INVALID_ARG,
           "dir", "bad direction");
    expect(zc_plan_remap_counts(plan, 0, ZC_REMAP_FORWARD, a, NULL, c, d), ZC_ERR_INVALID_ARG,
           "sdispls", "NULL sdispls");
    expect(zc_plan_slice(-1, 2, 0, &off, &n64), ZC_ERR_INVALID_ARG, "n", "negative n");
    expect(zc_plan_slice(10, 0, 0, &off, &n64), ZC_ERR_INVALID_ARG, "x", "zero rails");
    expect(zc_plan_slice(10, 2, 2, &off, &n64), ZC_ERR_INVALID_ARG, "k", "slice out of range");
    expect(zc_plan_slice(10, 2, 0, NULL, &n64), ZC_ERR_INVALID_ARG, "offset", "NULL offset");
    ok(zc_plan_slice(10, 3, 0, &off, &n64) == ZC_OK && off == 0 && n64 == 4,
       "slice 0 of 10 elements over 3 rails is [0, 4): the remainder to the first rails");
    ok(zc_plan_slice(10, 3, 2, &off, &n64) == ZC_OK && off == 7 && n64 == 3,
       "slice 2 of 10 elements over 3 rails is [7, 10)");
    expect(zc_plan_cost(plan, NULL, ZC_COST_TE_CP, &cost), ZC_ERR_INVALID_ARG, "cluster",
           "NULL cluster");
    expect(zc_cluster_load("/nonexistent/cluster.conf", &cl), ZC_ERR_INVALID_ARG, "path",
           "missing cluster file");
    expect(cluster_file("gpus_per_node 8\ngpus_per_node 4\n", &cl), ZC_ERR_INVALID_ARG,
           "twice", "a cluster key given twice");
    expect(cluster_file("layers 1e10\n", &cl), ZC_ERR_INVALID_ARG, "layers",
           "an integer key beyond int");
    memset(&cl, 0, sizeof(cl));
    cl.size = sizeof(cl);
    cl.gpus_per_node = 8;
    expect(zc_plan_cost(plan, &cl, ZC_COST_TE_CP, &cost), ZC_ERR_INVALID_ARG, "cluster",
           "cluster of another shape");
    ok(zc_plan_info(plan, &info) == ZC_OK && info.nranks == 4, "info of a valid plan");
    priced_routes();
    step_terms();
    step_scaling();
    zc_plan_destroy(plan);
    zc_plan_destroy(NULL);
    ok(1, "zc_plan_destroy(NULL) is a no-op");
    return tap_done();
}

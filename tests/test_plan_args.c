/* Planner API argument checks: each bad argument returns
 * ZC_ERR_INVALID_ARG with a detail that names it, and leaves outputs alone. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/common/abi.h"
#include "src/common/env.h"
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
 * so a layer's attention is 9 of the slowest hop (1 + 2 rounds x 3). */
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
    want = 9 * (B / intra + B / 2 / nic);
    cost.attention = -1;
    if (zc_plan_create(2, 2, 1024, &big, 1, &opts, &plan) == ZC_OK)
        zc_plan_cost(plan, &cl, ZC_COST_ROUTING, &cost);
    ok(cost.attention > want * (1 - 1e-9) && cost.attention < want * (1 + 1e-9),
       "a routed hop costs B/intra + (B/2)/nic over its 2 rails: %.9g s, want %.9g",
       cost.attention, want);
    zc_plan_destroy(plan);
    /* 100 tokens a position: 25600 bytes, under ZC_ROUTED_MIN_BYTES, so
     * the runtime sends it direct on one NIC and the cost model does too */
    want = 9 * (25600 / nic);
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
    zc_plan_destroy(plan);
    zc_plan_destroy(NULL);
    ok(1, "zc_plan_destroy(NULL) is a no-op");
    return tap_done();
}

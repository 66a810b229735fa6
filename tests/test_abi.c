/* Structs that grow (zcomm.h, "Structs that grow"), through the shared
 * library as a program uses it:
 *  - a caller-filled struct of its first layout's size is accepted, and
 *    what lies past that size is not read (garbage there changes nothing);
 *  - a size of 0 or below the first layout's is ZC_ERR_INVALID_ARG naming
 *    the argument; a size past this library's sizeof with a non-zero tail
 *    is ZC_ERR_UNSUPPORTED, with a zero tail accepted;
 *  - a library-filled struct gets at most its caller's size written:
 *    guard bytes past it stay, a refused size leaves the struct alone, and
 *    size comes back as the bytes written. */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "zcomm.h"

/* First layouts, written out here (not taken from the library's headers):
 * the end of each struct's original fields. */
#define END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define CONFIG_V1     END(zc_config_t, node_id)
#define OOB_V1        END(zc_oob_t, size)
#define ATTN_V1       END(zc_attn_args_t, dv)
#define RING_ATTN_V1  END(zc_ring_attn_args_t, stats)
#define CLUSTER_V1    END(zc_cluster_t, bytes_per_elem)
#define PLAN_INFO_V1  END(zc_plan_info_t, remap_objective)
#define COST_V1       END(zc_cost_t, bytes_inter)
#define STATS_V1      END(zc_ring_attn_stats_t, kernel_calls)
#define TOPO_GPU_V1   END(zc_topo_gpu_t, cuda_device)
#define TOPO_NIC_V1   END(zc_topo_nic_t, netdev)

#define GUARD 0xa5
#define TAIL 64 /* bytes of room past a struct */

/* A struct's bytes and TAIL more, the tail filled with `fill`. */
typedef struct {
    union {
        unsigned char bytes[512 + TAIL];
        max_align_t align;
    };
} room_t;

static int refused(zc_status_t st, zc_status_t want, const char *word)
{
    return st == want && strstr(zc_get_last_error(), word) != NULL;
}

static int guard_intact(const room_t *r, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (r->bytes[i] != GUARD)
            return 0;
    return 1;
}

/* ---- caller-filled: config, oob ---------------------------------------- */

static int oob_self(const void *send, void *recv, size_t len, void *ctx)
{
    (void)ctx;
    memcpy(recv, send, len);
    return 0;
}

static void test_config_oob(void)
{
    zc_unique_id_t id;
    zc_comm_h comm = NULL;
    room_t r;
    zc_config_t *cfg = (zc_config_t *)r.bytes;
    const zc_config_t good = ZC_CONFIG_INITIALIZER;
    zc_oob_t *oob = (zc_oob_t *)r.bytes;
    const zc_oob_t oob_good = {.struct_size = sizeof(zc_oob_t), .allgather = oob_self,
                               .rank = 0, .size = 1};
    int size = 0;

    /* a caller of the first layout: garbage past node_id is never read */
    memset(&r, GUARD, sizeof(r));
    memcpy(cfg, &good, CONFIG_V1);
    cfg->size = CONFIG_V1;
    cfg->timeout_ms = 20000;
    ok(zc_get_unique_id(&id) == ZC_OK, "unique id");
    ok(zc_comm_init_rank(&comm, 1, &id, 0, cfg) == ZC_OK && zc_comm_size(comm, &size) == ZC_OK &&
           size == 1,
       "config of the first layout (size %zu, garbage past it) accepted (%s)", CONFIG_V1,
       zc_get_last_error());
    zc_comm_destroy(comm);
    comm = NULL;

    cfg->size = 0;
    ok(refused(zc_comm_init_rank(&comm, 1, &id, 0, cfg), ZC_ERR_INVALID_ARG, "config") &&
           comm == NULL,
       "config size 0: ZC_ERR_INVALID_ARG naming config (%s)", zc_get_last_error());
    cfg->size = CONFIG_V1 - 1;
    ok(refused(zc_comm_init_env(&comm, cfg), ZC_ERR_INVALID_ARG, "config"),
       "config size below the first layout's: ZC_ERR_INVALID_ARG naming config");
    cfg->size = sizeof(zc_config_t) + 8;
    ok(refused(zc_comm_init_rank(&comm, 1, &id, 0, cfg), ZC_ERR_UNSUPPORTED, "config"),
       "config from a newer caller, a newer field set: ZC_ERR_UNSUPPORTED naming config");

    /* the out-of-band form: struct_size (size is the number of ranks) */
    memset(&r, GUARD, sizeof(r));
    memcpy(oob, &oob_good, OOB_V1);
    oob->struct_size = OOB_V1;
    ok(zc_comm_init_oob(&comm, oob, NULL) == ZC_OK,
       "oob of the first layout (struct_size %zu, garbage past it) accepted (%s)", OOB_V1,
       zc_get_last_error());
    zc_comm_destroy(comm);
    comm = NULL;
    memset(&r, 0, sizeof(r));
    memcpy(oob, &oob_good, sizeof(oob_good));
    oob->struct_size = sizeof(zc_oob_t) + 16;
    ok(zc_comm_init_oob(&comm, oob, NULL) == ZC_OK,
       "oob from a newer caller, its newer bytes zero: accepted (%s)", zc_get_last_error());
    zc_comm_destroy(comm);
    comm = NULL;
    oob->struct_size = 0;
    ok(refused(zc_comm_init_oob(&comm, oob, NULL), ZC_ERR_INVALID_ARG, "oob") && comm == NULL,
       "oob struct_size 0: ZC_ERR_INVALID_ARG naming oob (%s)", zc_get_last_error());
    const zc_oob_t init = ZC_OOB_INITIALIZER;
    ok(init.struct_size == sizeof(zc_oob_t) && init.allgather == NULL,
       "ZC_OOB_INITIALIZER sets struct_size");
}

/* ---- caller-filled: attention kernel args ------------------------------- */

static void test_attn_args(void)
{
    enum { T = 5, H = 1, D = 4 };
    float q[T * H * D], out[T * H * D], lse[T * H];
    int32_t cu[2] = {0, T};
    room_t r;
    zc_attn_args_t *a = (zc_attn_args_t *)r.bytes;
    zc_attn_args_t base = ZC_ATTN_ARGS_INITIALIZER;

    for (int i = 0; i < T * H * D; i++)
        q[i] = (float)(i % 7) * 0.25f;
    base.batch = 1;
    base.num_heads_q = base.num_heads_kv = H;
    base.head_dim = D;
    base.cu_seqlens_q = base.cu_seqlens_kv = cu;
    base.causal = 1;
    base.scale = 0.5f;
    base.q = base.k = base.v = q;
    base.out = out;
    base.lse = lse;
    ok(sizeof(zc_attn_args_t) >= ATTN_V1 && base.size == sizeof(zc_attn_args_t) &&
           base.dtype == ZC_FLOAT32,
       "ZC_ATTN_ARGS_INITIALIZER sets size, fp32 types");

    memset(&r, GUARD, sizeof(r));
    memcpy(a, &base, ATTN_V1);
    a->size = ATTN_V1;
    ok(zc_attn_fwd(a) == ZC_OK && isfinite(lse[T - 1]),
       "attention args of the first layout (size %zu, garbage past it) accepted (%s)", ATTN_V1,
       zc_get_last_error());
    a->size = 0;
    ok(refused(zc_attn_fwd(a), ZC_ERR_INVALID_ARG, "args"),
       "attention args size 0: ZC_ERR_INVALID_ARG naming args (%s)", zc_get_last_error());
    a->size = 8;
    ok(refused(zc_attn_bwd_delta(a), ZC_ERR_INVALID_ARG, "args"),
       "attention args size 8: ZC_ERR_INVALID_ARG naming args");
    a->size = sizeof(zc_attn_args_t) + 8;
    ok(refused(zc_attn_bwd(a), ZC_ERR_UNSUPPORTED, "args"),
       "attention args from a newer caller, a newer field set: ZC_ERR_UNSUPPORTED");
    memset(&r, 0, sizeof(r));
    memcpy(a, &base, sizeof(base));
    a->size = sizeof(zc_attn_args_t) + 8;
    ok(zc_attn_fwd(a) == ZC_OK, "attention args from a newer caller, zero tail: accepted");
}

/* ---- library-filled: plan info, cost, cluster -------------------------- */

static const char cluster_text[] =
    "name abi\ngpus_per_node 2\nnics_per_node 2\nnic_gbps 100\nintra_gbytes 100\n"
    "attn_tflops 100\nlinear_tflops 100\nlayers 2\nhidden 64\nheads 2\nhead_dim 32\n"
    "kv_heads 2\nffn_hidden 128\nbytes_per_elem 2\n";

static void test_plan_structs(void)
{
    int64_t len[2] = {300, 100};
    zc_plan_h plan = NULL;
    room_t r;
    zc_plan_info_t *info = (zc_plan_info_t *)r.bytes;
    zc_cost_t *cost = (zc_cost_t *)r.bytes;
    zc_cluster_t *cl = (zc_cluster_t *)r.bytes, cluster = ZC_CLUSTER_INITIALIZER;
    char path[] = "/tmp/test_abi_cluster.XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;

    if (f) {
        fputs(cluster_text, f);
        fclose(f);
    }
    opts.rails = 2;
    if (!ok(zc_plan_create(2, 2, 200, len, 2, &opts, &plan) == ZC_OK, "a plan (%s)",
            zc_get_last_error()))
        return;

    memset(&r, GUARD, sizeof(r));
    info->size = PLAN_INFO_V1;
    ok(zc_plan_info(plan, info) == ZC_OK && info->size == PLAN_INFO_V1 && info->nranks == 4 &&
           guard_intact(&r, PLAN_INFO_V1, sizeof(r)),
       "plan info of the first layout's size: filled, nothing written past it");
    memset(&r, GUARD, sizeof(r));
    info->size = sizeof(zc_plan_info_t) + 24;
    ok(zc_plan_info(plan, info) == ZC_OK && info->size == sizeof(zc_plan_info_t) &&
           info->nseqs == 2 && guard_intact(&r, sizeof(zc_plan_info_t), sizeof(r)),
       "plan info from a newer caller: sizeof written, size says so, the rest untouched");
    memset(&r, GUARD, sizeof(r));
    info->size = 0;
    ok(refused(zc_plan_info(plan, info), ZC_ERR_INVALID_ARG, "info") && info->size == 0 &&
           guard_intact(&r, sizeof(size_t), sizeof(r)),
       "plan info size 0: ZC_ERR_INVALID_ARG naming info, nothing written (%s)",
       zc_get_last_error());
    info->size = PLAN_INFO_V1 - 1;
    ok(refused(zc_plan_info(plan, info), ZC_ERR_INVALID_ARG, "info"),
       "plan info size below the first layout's: refused");

    /* zc_cluster_load fills a cluster, zc_plan_cost reads one */
    memset(&r, GUARD, sizeof(r));
    cl->size = 4;
    ok(refused(zc_cluster_load(path, cl), ZC_ERR_INVALID_ARG, "cluster") && cl->size == 4 &&
           guard_intact(&r, sizeof(size_t), sizeof(r)),
       "zc_cluster_load into size 4: ZC_ERR_INVALID_ARG naming cluster, nothing written");
    cl->size = CLUSTER_V1;
    ok(zc_cluster_load(path, cl) == ZC_OK && cl->size == CLUSTER_V1 && cl->nics_per_node == 2 &&
           guard_intact(&r, CLUSTER_V1, sizeof(r)),
       "zc_cluster_load into the first layout's size: filled, nothing past it (%s)",
       zc_get_last_error());
    memcpy(&cluster, cl, sizeof(cluster));
    /* a cluster of the first layout's size, garbage past it, is read */
    {
        room_t in;
        zc_cluster_t *old = (zc_cluster_t *)in.bytes;
        zc_cost_t want = ZC_COST_INITIALIZER;

        memset(&in, GUARD, sizeof(in));
        memcpy(old, &cluster, CLUSTER_V1);
        old->size = CLUSTER_V1;
        memset(&r, GUARD, sizeof(r));
        cost->size = COST_V1;
        ok(zc_plan_cost(plan, &cluster, ZC_COST_ZEPPELIN, &want) == ZC_OK &&
               zc_plan_cost(plan, old, ZC_COST_ZEPPELIN, cost) == ZC_OK &&
               cost->size == COST_V1 && cost->total == want.total && want.total > 0 &&
               guard_intact(&r, COST_V1, sizeof(r)),
           "zc_plan_cost: a first-layout cluster accepted, cost filled to its size only (%s)",
           zc_get_last_error());
        old->size = 0;
        ok(refused(zc_plan_cost(plan, old, ZC_COST_ZEPPELIN, &want), ZC_ERR_INVALID_ARG,
                   "cluster"),
           "zc_plan_cost: cluster size 0 refused naming cluster");
    }
    memset(&r, GUARD, sizeof(r));
    cost->size = 0;
    ok(refused(zc_plan_cost(plan, &cluster, ZC_COST_ZEPPELIN, cost), ZC_ERR_INVALID_ARG,
               "cost") &&
           guard_intact(&r, sizeof(size_t), sizeof(r)),
       "zc_plan_cost: cost size 0 refused naming cost, nothing written (%s)",
       zc_get_last_error());
    zc_plan_destroy(plan);
    unlink(path);
}

/* ---- library-filled: topology ------------------------------------------- */

static void test_topo(void)
{
    const char *dir = getenv("ZC_TEST_SRCDIR");
    char path[4096];
    zc_topo_h topo;
    room_t r;
    zc_topo_nic_t *nic = (zc_topo_nic_t *)r.bytes;
    zc_topo_gpu_t *gpu = (zc_topo_gpu_t *)r.bytes;

    snprintf(path, sizeof(path), "%s/fixtures/topo/cluster-a.xml", dir ? dir : "tests");
    if (zc_topo_load(path, 0, &topo) != ZC_OK) {
        ok(0, "cluster-a.xml loads: %s", zc_get_last_error());
        return;
    }
    memset(&r, GUARD, sizeof(r));
    nic->size = TOPO_NIC_V1;
    ok(zc_topo_nic_info(topo, 0, nic) == ZC_OK && nic->size == TOPO_NIC_V1 &&
           nic->name[0] != '\0' && guard_intact(&r, TOPO_NIC_V1, sizeof(r)),
       "NIC info of the first layout's size: filled (%s), nothing written past it", nic->name);
    memset(&r, GUARD, sizeof(r));
    nic->size = 0;
    ok(refused(zc_topo_nic_info(topo, 0, nic), ZC_ERR_INVALID_ARG, "info") &&
           guard_intact(&r, sizeof(size_t), sizeof(r)),
       "NIC info size 0: ZC_ERR_INVALID_ARG naming info, nothing written");
    memset(&r, GUARD, sizeof(r));
    gpu->size = sizeof(zc_topo_gpu_t) + 16;
    ok(zc_topo_gpu_info(topo, 0, gpu) == ZC_OK && gpu->size == sizeof(zc_topo_gpu_t) &&
           guard_intact(&r, sizeof(zc_topo_gpu_t), sizeof(r)),
       "GPU info from a newer caller: sizeof written, size says so, the rest untouched");
    gpu->size = TOPO_GPU_V1 - 4;
    ok(refused(zc_topo_gpu_info(topo, 0, gpu), ZC_ERR_INVALID_ARG, "info"),
       "GPU info size below the first layout's: refused");
    zc_topo_destroy(topo);
}

/* ---- ring attention: args and stats ------------------------------------ */

/* A kernel table that refuses every call (libzcomm's kernels then run
 * them), counting them. */
static int table_calls;

static zc_status_t table_refuse(void *ctx, const zc_attn_varlen_t *call)
{
    (void)ctx;
    table_calls += call->size == sizeof(zc_attn_varlen_t);
    return ZC_ERR_UNSUPPORTED;
}

/* args->kernels, the last field: read only when args->size reaches it;
 * the table is sized too. */
static void test_kernel_tables(zc_comm_h comm, zc_plan_h plan, const zc_ring_attn_args_t *good)
{
    zc_attn_kernels_t table = ZC_ATTN_KERNELS_INITIALIZER;
    zc_ring_attn_stats_t stats = ZC_RING_ATTN_STATS_INITIALIZER;
    zc_ring_attn_args_t args = *good;
    room_t t;
    zc_attn_kernels_t *k = (zc_attn_kernels_t *)t.bytes;

    ok(table.size == sizeof(zc_attn_kernels_t), "ZC_ATTN_KERNELS_INITIALIZER sets size");
    table.fwd = table.bwd = table_refuse;
    args.stats = &stats;
    args.kernels = &table;
    args.size = RING_ATTN_V1;
    table_calls = 0;
    ok(zc_ring_attn_fwd(comm, plan, &args) == ZC_OK && table_calls == 0 &&
           stats.blocks_table == 0 && stats.table_refused == 0,
       "args of the first layout: the kernels field past their size is not read");
    args.size = sizeof(args);
    stats.size = sizeof(stats);
    zc_status_t st = zc_ring_attn_fwd(comm, plan, &args);
    ok(st == ZC_OK && table_calls > 0 && stats.table_refused == table_calls && stats.blocks_native == table_calls &&
           stats.blocks_table == 0 && stats.kernel_calls == table_calls,
       "args with kernels: the table is called, its refusals counted in the stats (%d calls, "
       "%lld refused)", table_calls, (long long)stats.table_refused);
    memset(&t, GUARD, sizeof(t));
    memcpy(k, &table, sizeof(table));
    k->size = END(zc_attn_kernels_t, flags);
    args.kernels = k;
    ok(zc_ring_attn_fwd(comm, plan, &args) == ZC_OK, "a kernel table of its first layout");
    k->size = 0;
    ok(refused(zc_ring_attn_fwd(comm, plan, &args), ZC_ERR_INVALID_ARG, "kernels"),
       "a kernel table of size 0: ZC_ERR_INVALID_ARG naming kernels (%s)", zc_get_last_error());
    k->size = sizeof(zc_attn_kernels_t) + 8;
    ok(refused(zc_ring_attn_fwd(comm, plan, &args), ZC_ERR_UNSUPPORTED, "kernels"),
       "a kernel table from a newer zcomm.h, a byte set past this library's: "
       "ZC_ERR_UNSUPPORTED naming kernels (%s)", zc_get_last_error());
    memset(t.bytes + sizeof(zc_attn_kernels_t), 0, 8);
    ok(zc_ring_attn_fwd(comm, plan, &args) == ZC_OK,
       "a kernel table from a newer zcomm.h with a zero tail: accepted");
}

static void test_ring_attn(void)
{
    enum { T = 8, H = 1, D = 4 };
    int64_t len[1] = {T};
    float q[T * H * D], out[T * H * D], lse[T * H];
    zc_unique_id_t id;
    zc_comm_h comm = NULL;
    zc_plan_h plan = NULL;
    zc_ring_attn_args_t args = ZC_RING_ATTN_ARGS_INITIALIZER;
    room_t r, s;
    zc_ring_attn_args_t *a = (zc_ring_attn_args_t *)r.bytes;
    zc_ring_attn_stats_t *stats = (zc_ring_attn_stats_t *)s.bytes;

    for (int i = 0; i < T * H * D; i++)
        q[i] = (float)(i % 5) * 0.5f;
    if (!ok(zc_get_unique_id(&id) == ZC_OK && zc_comm_init_rank(&comm, 1, &id, 0, NULL) == ZC_OK &&
                zc_plan_create(1, 1, 16, len, 1, NULL, &plan) == ZC_OK,
            "a 1-rank communicator and plan (%s)", zc_get_last_error())) {
        zc_comm_destroy(comm);
        return;
    }
    args.num_heads_q = args.num_heads_kv = H;
    args.head_dim = D;
    args.tokens = T;
    args.q = args.k = args.v = q;
    args.out = out;
    args.lse = lse;
    args.stats = stats;

    memset(&r, GUARD, sizeof(r));
    memcpy(a, &args, RING_ATTN_V1);
    a->size = RING_ATTN_V1;
    memset(&s, GUARD, sizeof(s));
    stats->size = STATS_V1;
    ok(zc_ring_attn_fwd(comm, plan, a) == ZC_OK && stats->size == STATS_V1 &&
           stats->kernel_calls > 0 && guard_intact(&s, STATS_V1, sizeof(s)),
       "ring attention args of the first layout accepted; stats filled to their size only (%s)",
       zc_get_last_error());
    memset(&s, GUARD, sizeof(s));
    stats->size = sizeof(zc_ring_attn_stats_t);
    ok(zc_ring_attn_fwd(comm, plan, a) == ZC_OK && stats->size == sizeof(zc_ring_attn_stats_t) &&
           stats->kernel_calls > 0 && stats->blocks_native == stats->kernel_calls &&
           stats->native_chosen == stats->kernel_calls && stats->blocks_cudnn == 0 &&
           stats->native_dtype + stats->native_head_dim + stats->native_shape +
                   stats->native_no_engine + stats->native_failed == 0 &&
           guard_intact(&s, sizeof(zc_ring_attn_stats_t), sizeof(s)),
       "stats of this layout: the block counters written (host path: every block native by "
       "choice), nothing past them");
    a->size = 0;
    ok(refused(zc_ring_attn_fwd(comm, plan, a), ZC_ERR_INVALID_ARG, "args"),
       "ring attention args size 0: ZC_ERR_INVALID_ARG naming args (%s)", zc_get_last_error());
    a->size = RING_ATTN_V1;
    memset(&s, GUARD, sizeof(s));
    stats->size = 0;
    ok(refused(zc_ring_attn_fwd(comm, plan, a), ZC_ERR_INVALID_ARG, "stats") &&
           guard_intact(&s, sizeof(size_t), sizeof(s)),
       "ring attention stats size 0: ZC_ERR_INVALID_ARG naming args->stats, nothing written "
       "(%s)", zc_get_last_error());
    const zc_ring_attn_stats_t init = ZC_RING_ATTN_STATS_INITIALIZER;
    ok(init.size == sizeof(zc_ring_attn_stats_t), "ZC_RING_ATTN_STATS_INITIALIZER sets size");
    test_kernel_tables(comm, plan, &args);
    zc_plan_destroy(plan);
    zc_comm_destroy(comm);
}

int main(void)
{
    test_config_oob();
    test_attn_args();
    test_plan_structs();
    test_topo();
    test_ring_attn();
    return tap_done();
}

/* Bring your own attention kernel (zc_attn_kernels(3)): ring attention over
 * a plan of packed sequences, its blocks computed by a kernel of your own.
 *
 * The kernel here is plain C loops in float32, written for the table's
 * contract: each call is a batch of packed segments, flash-attention's
 * varlen form (cu_seqlens, causal top-left with as many keys as queries,
 * or every key visible), the lse in [heads, tokens].  An adapter for a
 * real kernel is the same few lines around its varlen call.  It refuses
 * (ZC_ERR_UNSUPPORTED) what it does not implement, bfloat16 here: libzcomm's
 * own kernels compute those blocks.
 *
 * The program checks the ring's results through the table against the
 * same call without it, in float32, then runs a bfloat16 call whose blocks
 * all go back to libzcomm, and prints what the stats counted.  Run it as
 * one process, or as several with ZC_RANK, ZC_SIZE and ZC_MASTER_PORT (or
 * under torchrun, mpirun, srun).
 *
 *   cc attn_kernels.c -lzcomm -lm && ./a.out */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zcomm.h>

enum { HQ = 4, HKV = 2, D = 16 };

/* ---- the kernel: naive attention, float32, host memory ------------------- */

typedef struct {
    float *scores;            /* the scores of one row */
    int cap;
    long calls[2];            /* forward, backward */
} my_kernel_t;

static int my_takes(my_kernel_t *me, const zc_attn_varlen_t *c)
{
    if (c->dtype != ZC_FLOAT32 || c->out_dtype != ZC_FLOAT32 || c->memtype != ZC_MEM_HOST)
        return 0;
    if (c->max_seqlen_kv > me->cap) {
        free(me->scores);
        me->cap = c->max_seqlen_kv;
        me->scores = malloc((size_t)me->cap * sizeof(float));
    }
    return me->scores != NULL;
}

/* Row i of segment b sees keys 0 .. last: scores into s, their max. */
static float my_scores(const zc_attn_varlen_t *c, const float *qi, int k0, int last, int hk,
                       float *s)
{
    const float *k = c->k;
    float m = -INFINITY;

    for (int j = 0; j <= last; j++) {
        float x = 0;

        for (int e = 0; e < c->head_dim; e++)
            x += qi[e] * k[((size_t)(k0 + j) * c->num_heads_kv + hk) * c->head_dim + e];
        s[j] = x * c->scale;
        m = s[j] > m ? s[j] : m;
    }
    return m;
}

static zc_status_t my_fwd(void *ctx, const zc_attn_varlen_t *c)
{
    my_kernel_t *me = ctx;
    const int hq = c->num_heads_q, d = c->head_dim, group = hq / c->num_heads_kv;

    if (!my_takes(me, c))
        return ZC_ERR_UNSUPPORTED;
    me->calls[0]++;
    for (int b = 0; b < c->batch; b++) {
        int q0 = c->host_cu_seqlens_q[b], lq = c->host_cu_seqlens_q[b + 1] - q0;
        int k0 = c->host_cu_seqlens_kv[b], lk = c->host_cu_seqlens_kv[b + 1] - k0;

        for (int i = 0; i < lq; i++)
            for (int h = 0; h < hq; h++) {
                const float *qi = (const float *)c->q + ((size_t)(q0 + i) * hq + h) * d;
                float *o = (float *)c->out + ((size_t)(q0 + i) * hq + h) * d;
                int last = c->causal ? i : lk - 1, hk = h / group;
                float m = my_scores(c, qi, k0, last, hk, me->scores), l = 0;

                memset(o, 0, (size_t)d * sizeof(float));
                for (int j = 0; j <= last; j++) {
                    float p = expf(me->scores[j] - m);
                    const float *vj = (const float *)c->v +
                                      ((size_t)(k0 + j) * c->num_heads_kv + hk) * d;

                    l += p;
                    for (int e = 0; e < d; e++)
                        o[e] += p * vj[e];
                }
                for (int e = 0; e < d; e++)
                    o[e] /= l;
                c->lse[(size_t)h * c->total_q + q0 + i] = m + logf(l); /* [heads, tokens] */
            }
    }
    return ZC_OK;
}

/* Given the final out and lse of these rows: P = exp(S - lse), and the
 * usual dV = P^T dO, dS = P (dO V^T - rowsum(dO * O)), dQ = dS K, dK = dS^T Q. */
static zc_status_t my_bwd(void *ctx, const zc_attn_varlen_t *c)
{
    my_kernel_t *me = ctx;
    const int hq = c->num_heads_q, hkv = c->num_heads_kv, d = c->head_dim, group = hq / hkv;
    float *dq = c->dq, *dk = c->dk, *dv = c->dv;

    if (!my_takes(me, c))
        return ZC_ERR_UNSUPPORTED;
    me->calls[1]++;
    memset(dq, 0, (size_t)c->total_q * hq * d * sizeof(float));
    memset(dk, 0, (size_t)c->total_kv * hkv * d * sizeof(float));
    memset(dv, 0, (size_t)c->total_kv * hkv * d * sizeof(float));
    for (int b = 0; b < c->batch; b++) {
        int q0 = c->host_cu_seqlens_q[b], lq = c->host_cu_seqlens_q[b + 1] - q0;
        int k0 = c->host_cu_seqlens_kv[b], lk = c->host_cu_seqlens_kv[b + 1] - k0;

        for (int i = 0; i < lq; i++)
            for (int h = 0; h < hq; h++) {
                size_t row = ((size_t)(q0 + i) * hq + h) * d;
                const float *qi = (const float *)c->q + row, *doi = (const float *)c->dout + row;
                const float *oi = (const float *)c->out + row;
                int last = c->causal ? i : lk - 1, hk = h / group;
                float lse = c->lse[(size_t)h * c->total_q + q0 + i], delta = 0;

                my_scores(c, qi, k0, last, hk, me->scores);
                for (int e = 0; e < d; e++)
                    delta += doi[e] * oi[e];
                for (int j = 0; j <= last; j++) {
                    size_t kv = ((size_t)(k0 + j) * hkv + hk) * d;
                    const float *vj = (const float *)c->v + kv, *kj = (const float *)c->k + kv;
                    float p = expf(me->scores[j] - lse), dp = 0, ds;

                    for (int e = 0; e < d; e++) {
                        dv[kv + e] += p * doi[e];
                        dp += doi[e] * vj[e];
                    }
                    ds = p * (dp - delta) * c->scale;
                    for (int e = 0; e < d; e++) {
                        dq[row + e] += ds * kj[e];
                        dk[kv + e] += ds * qi[e];
                    }
                }
            }
    }
    return ZC_OK;
}

/* ---- a ring attention call through it ------------------------------------ */

static float uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) % 20001) / 10000.0f - 1.0f;
}

/* This rank's rows (the plan's attention layout) of a batch drawn from a
 * seed that every rank shares: whole batch, then the rank's pieces. */
static void my_rows(zc_plan_h plan, int rank, const int64_t *lengths, int64_t rows, int heads,
                    uint64_t seed, float *x)
{
    const zc_plan_piece_t *pieces;
    size_t n, row = (size_t)heads * D;
    int64_t at = 0, start[8] = {0};

    (void)rows;
    for (int s = 1; s < 8; s++)
        start[s] = start[s - 1] + lengths[s - 1];
    zc_plan_rank_pieces(plan, rank, &pieces, &n);
    for (size_t p = 0; p < n; p++)
        for (int64_t t = pieces[p].begin; t < pieces[p].end; t++, at++) {
            uint64_t s = seed * 1000003u + (uint64_t)(start[pieces[p].seq] + t);

            for (size_t e = 0; e < row; e++)
                x[at * (int64_t)row + (int64_t)e] = uniform(&s);
        }
}

int main(void)
{
    static const int64_t lengths[] = {300, 45, 1, 128, 77};
    const int nseqs = 5;
    zc_comm_h comm;
    zc_plan_h plan;
    zc_plan_rank_t mine;
    int rank = 0, size = 1, failed = 0;
    int64_t total = 0;
    my_kernel_t me = {0};
    zc_attn_kernels_t table = ZC_ATTN_KERNELS_INITIALIZER;

    if (getenv("ZC_SIZE") || getenv("WORLD_SIZE") || getenv("OMPI_COMM_WORLD_SIZE") ||
        getenv("SLURM_NTASKS")) {
        if (zc_comm_init_env(&comm, NULL) != ZC_OK) {
            fprintf(stderr, "attn_kernels: %s\n", zc_get_last_error());
            return 1;
        }
    } else {
        zc_unique_id_t id;

        if (zc_get_unique_id(&id) != ZC_OK || zc_comm_init_rank(&comm, 1, &id, 0, NULL) != ZC_OK) {
            fprintf(stderr, "attn_kernels: %s\n", zc_get_last_error());
            return 1;
        }
    }
    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);
    for (int s = 0; s < nseqs; s++)
        total += lengths[s];
    if (zc_plan_create(1, size, total * 5 / 4 / size + 8, lengths, nseqs, NULL, &plan) != ZC_OK) {
        fprintf(stderr, "attn_kernels: %s\n", zc_get_last_error());
        return 1;
    }
    zc_plan_rank(plan, rank, &mine);
    size_t nq = (size_t)(mine.tokens ? mine.tokens : 1) * HQ * D;
    size_t nk = (size_t)(mine.tokens ? mine.tokens : 1) * HKV * D;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *dout = malloc(nq * 4);
    float *res[2][5]; /* [with the table][out, lse, dq, dk, dv] */
    for (int t = 0; t < 2; t++) {
        res[t][0] = malloc(nq * 4), res[t][1] = malloc(nq / D * 4), res[t][2] = malloc(nq * 4);
        res[t][3] = malloc(nk * 4), res[t][4] = malloc(nk * 4);
    }
    my_rows(plan, rank, lengths, mine.tokens, HQ, 1, q);
    my_rows(plan, rank, lengths, mine.tokens, HKV, 2, k);
    my_rows(plan, rank, lengths, mine.tokens, HKV, 3, v);
    my_rows(plan, rank, lengths, mine.tokens, HQ, 4, dout);

    table.ctx = &me;
    table.fwd = my_fwd;
    table.bwd = my_bwd;
    zc_ring_attn_stats_t stats = ZC_RING_ATTN_STATS_INITIALIZER; /* of the last call */
    for (int t = 0; t < 2; t++) {
        zc_ring_attn_args_t a = ZC_RING_ATTN_ARGS_INITIALIZER;

        a.num_heads_q = HQ;
        a.num_heads_kv = HKV;
        a.head_dim = D;
        a.tokens = mine.tokens;
        a.q = q, a.k = k, a.v = v, a.dout = dout;
        a.out = res[t][0], a.lse = res[t][1], a.dq = res[t][2], a.dk = res[t][3];
        a.dv = res[t][4];
        a.kernels = t ? &table : NULL; /* every rank the same */
        a.stats = &stats;
        if (zc_ring_attn_fwd(comm, plan, &a) != ZC_OK ||
            zc_ring_attn_bwd(comm, plan, &a) != ZC_OK) {
            fprintf(stderr, "attn_kernels: rank %d: %s\n", rank, zc_get_last_error());
            return 1;
        }
    }
    /* the same results, to float32 rounding (the kernels differ) */
    static const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    for (int r = 0; r < 5; r++) {
        size_t n = (size_t)mine.tokens * (r == 1 ? HQ : r < 3 ? HQ * D : HKV * D);
        double worst = 0, scale = 1e-6;

        for (size_t i = 0; i < n; i++)
            scale = fabs(res[0][r][i]) > scale ? fabs(res[0][r][i]) : scale;
        for (size_t i = 0; i < n; i++) {
            double e = fabs(res[1][r][i] - res[0][r][i]) / scale;
            worst = e > worst ? e : worst;
        }
        if (worst > 1e-4) {
            printf("attn_kernels: rank %d: %s differs by %.3g\n", rank, names[r], worst);
            failed = 1;
        }
    }
    if (stats.blocks_table != me.calls[1] || stats.table_refused != 0) {
        printf("attn_kernels: rank %d: the backward's stats count %lld calls on the table, "
               "the kernel made %ld\n", rank, (long long)stats.blocks_table, me.calls[1]);
        failed = 1;
    }
    printf("attn_kernels: rank %d of %d, %lld rows: float32 through the table: %ld forward and "
           "%ld backward calls, results as libzcomm's own kernels give%s\n", rank, size,
           (long long)mine.tokens, me.calls[0], me.calls[1], failed ? " NOT" : "");

    /* bfloat16: the kernel refuses, libzcomm computes every block */
    zc_ring_attn_args_t a = ZC_RING_ATTN_ARGS_INITIALIZER;
    zc_ring_attn_stats_t st = ZC_RING_ATTN_STATS_INITIALIZER;
    uint16_t *q16 = malloc(nq * 2), *k16 = malloc(nk * 2), *v16 = malloc(nk * 2);
    zc_attn_convert(q, ZC_FLOAT32, mine.tokens * HQ * D, ZC_BFLOAT16, q16);
    zc_attn_convert(k, ZC_FLOAT32, mine.tokens * HKV * D, ZC_BFLOAT16, k16);
    zc_attn_convert(v, ZC_FLOAT32, mine.tokens * HKV * D, ZC_BFLOAT16, v16);
    a.num_heads_q = HQ, a.num_heads_kv = HKV, a.head_dim = D, a.tokens = mine.tokens;
    a.dtype = ZC_BFLOAT16;
    a.q = q16, a.k = k16, a.v = v16, a.out = res[0][0], a.lse = res[0][1];
    a.kernels = &table;
    a.stats = &st;
    if (zc_ring_attn_fwd(comm, plan, &a) != ZC_OK || st.table_refused != st.kernel_calls ||
        st.blocks_table != 0) {
        printf("attn_kernels: rank %d: bfloat16: %s (%lld calls, %lld refused)\n", rank,
               zc_get_last_error(), (long long)st.kernel_calls, (long long)st.table_refused);
        failed = 1;
    } else {
        printf("attn_kernels: rank %d: bfloat16: the kernel refused all %lld calls, libzcomm "
               "computed them\n", rank, (long long)st.kernel_calls);
    }
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 5; r++)
            free(res[t][r]);
    free(q), free(k), free(v), free(dout), free(q16), free(k16), free(v16), free(me.scores);
    zc_plan_destroy(plan);
    zc_comm_destroy(comm);
    return failed;
}

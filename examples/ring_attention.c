/* libzcomm from C: causal ring attention over sequences of different lengths, one
 * process per rank (mpirun, srun, torchrun or ZC_RANK/ZC_SIZE/ZC_MASTER_*). */
#include <stdio.h>
#include <stdlib.h>
#include <zcomm.h>

#define CHECK(call) do { zc_status_t s_ = (call); if (s_ != ZC_OK) {                \
        fprintf(stderr, "%s: %s: %s\n", #call, zc_strerror(s_), zc_get_last_error()); \
        exit(1); } } while (0)
enum { HEADS = 4, DIM = 64, ROW = HEADS * DIM };

int main(void)
{
    const int64_t lengths[] = {700, 600, 24, 724}, start[] = {0, 700, 1300, 1324};
    int rank, size, nodes;
    size_t npieces, at = 0;
    zc_comm_h comm;
    zc_plan_h plan;
    zc_plan_rank_t me;
    const zc_plan_piece_t *piece;
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_ring_attn_args_t a = ZC_RING_ATTN_ARGS_INITIALIZER;

    CHECK(zc_comm_init_env(&comm, NULL));
    CHECK(zc_comm_rank(comm, &rank));
    CHECK(zc_comm_size(comm, &size));
    CHECK(zc_comm_node_count(comm, &nodes));
    /* The same plan on every rank, without talking: 2048 tokens, a share each. */
    CHECK(zc_plan_create(nodes, size / nodes, 2048 / size, lengths, 4, &opts, &plan));
    CHECK(zc_plan_rank(plan, rank, &me));
    CHECK(zc_plan_rank_pieces(plan, rank, &piece, &npieces));
    size_t n = (size_t)me.tokens * ROW;
    float *q = malloc(sizeof(float) * (4 * n + 1)), *lse = malloc(sizeof(float) * (n / DIM + 1));
    if (!q || !lse)
        return fprintf(stderr, "out of memory\n"), 1;
    float *k = q + n, *v = k + n, *out = v + n;
    for (size_t p = 0; p < npieces; p++)  /* this rank's rows: a function of the token g */
        for (int64_t t = piece[p].begin; t < piece[p].end; t++)
            for (int64_t i = 0, g = start[piece[p].seq] + t; i < ROW; i++, at++) {
                q[at] = (float)((g * 7 + i) % 13) / 13 - 0.5f;
                k[at] = (float)((g * 5 + i * 3) % 11) / 11 - 0.5f;
                v[at] = (float)((g + i * 7) % 17) / 17;
            }
    a.num_heads_q = a.num_heads_kv = HEADS, a.head_dim = DIM, a.tokens = me.tokens;
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
    CHECK(zc_ring_attn_fwd(comm, plan, &a));
    double sum = 0;  /* over the ranks, the sums add up to one rank's */
    for (size_t i = 0; i < n; i++)
        sum += out[i];
    printf("rank %d of %d: %lld tokens, sum of out %.6f\n", rank, size, (long long)me.tokens, sum);
    free(q), free(lse), zc_plan_destroy(plan), zc_comm_destroy(comm);
    return 0;
}

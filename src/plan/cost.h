/* The whole-step cost model (src/plan/cost.c, src/plan/cluster.c): what
 * zc_plan --compare prints and zc_plan_cost(3) sums.
 *
 * zc_plan_cost(3) and zc_cluster_t are the public face, but the public
 * structs (include/zcomm.h) have no field for the terms of a training step
 * beyond attention, linear and remap.  This internal interface carries
 * them: the step's extra constants (zc_step_model_t, which cluster files
 * may set, every key optional) and the step's terms (zc_step_cost_t).
 * zc_plan_cost prices with zc_step_defaults(). */
#ifndef ZC_PLAN_COST_H
#define ZC_PLAN_COST_H

#include "zcomm.h"

/* Bytes Adam (Megatron's FusedAdam, no distributed optimizer) reads and
 * writes per parameter: param, grad, m, v read (4 x 4 B), param, m, v
 * written (3 x 4 B), then the bf16 model copy (4 B read, 2 B written). */
#define ZC_ADAM_BYTES 34.0

/* The baselines' largest context-parallel group (--cp-size's default):
 * the paper runs TE CP, LLaMA CP and routing as one global ring up to 128
 * GPUs (Fig. 9, TE's throughput flat from 16 to 128 GPUs).  Past it a job
 * is data-parallel over CP groups, as Megatron-LM is configured. */
#define ZC_STEP_CP_MAX 128

typedef struct {
    int vocab;                  /* key vocab: embedding and output rows (0: none) */
    double hbm_gbytes;          /* key hbm_gbytes: device memory GB/s (0: no optimizer term) */
    double routed_efficiency;   /* key routed_efficiency: Eq. (1) time / measured routed hop */
    int grad_bytes;             /* key grad_bytes: bytes of a gradient element all-reduced */
    int dkv_bytes;              /* bytes of a dK/dV element the backward ring sends (libzcomm's
                                   engine: 4, fp32; Transformer Engine: the activations') */
    int cp_max;                 /* the baselines' largest CP group (GPUs) */
} zc_step_model_t;

/* One training step, seconds (slowest device per phase; phases add). */
typedef struct {
    double attn_fwd, attn_bwd;  /* all layers */
    double linear;              /* the layers' dense modules and the output head, fwd + bwd */
    double remap;               /* forward + inverse, fwd + bwd pass, all layers */
    double allreduce;           /* gradient all-reduce over every rank */
    double optimizer;           /* Adam over every parameter */
    double total;
    double bytes_intra, bytes_inter;    /* attention and remap bytes, every device */
    /* The slowest ring of one layer (0 rounds when the method has none):
     * its rounds, a forward and a backward round (compute overlapped with
     * the hop, after the first), and the wire step of its slowest
     * inter-node hop (the largest slice on one NIC; 0 if none). */
    int rounds;
    double round_fwd, round_bwd, hop_wire;
    int cp_size;                /* the baselines' CP group (the whole cluster for Zeppelin) */
    double params;              /* parameters all-reduced */
} zc_step_cost_t;

/* libzcomm's engine on ideal routes: vocab 0, no optimizer term, routed
 * efficiency 1, fp32 gradients and dK/dV, cp_max ZC_STEP_CP_MAX. */
void zc_step_defaults(zc_step_model_t *step);

/* zc_cluster_load that also reads the step keys (vocab, hbm_gbytes,
 * routed_efficiency, grad_bytes) into *step (defaults for those absent). */
zc_status_t zc_cluster_load_step(const char *path, zc_cluster_t *cluster, zc_step_model_t *step);

/* Parameters of the cluster's model: per layer hidden * head_dim * (2 heads
 * + 2 kv_heads) + 3 hidden * ffn_hidden + 2 hidden (norms), and 2 vocab *
 * hidden + hidden outside the layers (untied embedding and head, final
 * norm). */
double zc_step_params(const zc_cluster_t *cluster, const zc_step_model_t *step);

/* Price one training step of the plan's batch with `method`. */
zc_status_t zc_plan_step_cost(zc_plan_h plan, const zc_cluster_t *cluster,
                              const zc_step_model_t *step, zc_cost_method_t method,
                              zc_step_cost_t *cost);

#endif

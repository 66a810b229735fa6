/* Internal interface between the CPU attention driver (attn_cpu.c: argument
 * checks, packing, scheduling) and the block kernels compiled once per SIMD
 * path (attn_cpu_kernel.h included by attn_cpu_{scalar,avx2,avx512}.c),
 * which write their rows through attn_cpu_store.h. */
#ifndef ZC_KERNELS_CPU_ATTN_CPU_H
#define ZC_KERNELS_CPU_ATTN_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attn_math.h"
#include "zcomm.h"

/* Block edges: BQ query rows by BK keys per tile.  K^T and V^T are packed
 * in BK-wide column blocks; head dims are padded to ZC_ATTN_DPAD floats so
 * every SIMD width sees whole vectors. */
#define ZC_ATTN_BQ   64
#define ZC_ATTN_BK   64
#define ZC_ATTN_DPAD 16

/* Per-thread scratch of one block kernel call, in floats. */
#define ZC_ATTN_SCRATCH_FLOATS(dp) \
    (2 * ZC_ATTN_BQ * ZC_ATTN_BK + ZC_ATTN_BQ * (dp) + 2 * ZC_ATTN_BK * (dp) + 2 * ZC_ATTN_BQ)

/* fp32 rows: the row of token t, head h starts at base + t * tok + h * head. */
typedef struct {
    const float *base;
    int64_t tok;
    int64_t head;
} zc_attn_rows_t;

typedef struct {
    const zc_attn_args_t *args;
    zc_attn_mask_t mask;        /* the call's (zc_attn_check_call) */
    int hq, hk, group;          /* query heads, kv heads, hq / hk */
    int d, dp;                  /* head dim, padded head dim */
    float scale;
    float scale2;               /* scale * log2(e) */
    const int64_t *kb_off;      /* [batch + 1] first packed kv block of each segment */
    int64_t total_kb;
    zc_attn_rows_t q, k, v, dout;
    const float *kt;            /* [hk][total_kb][d][BK]: K^T blocks, zero-padded */
    const float *vt;            /* same for V (backward) */
    const float *delta;         /* [total_q][hq] (backward) */
    float *dq;                  /* [total_q][hq][d] fp32 accumulation (backward) */
} zc_attn_cpu_job_t;

/* Element i of a float32 or bfloat16 tensor, as fp32. */
static inline float zc_attn_load(const void *p, zc_datatype_t dtype, int64_t i)
{
    return dtype == ZC_FLOAT32 ? ((const float *)p)[i] : zc_bf16_to_float(((const uint16_t *)p)[i]);
}

static inline void zc_attn_store(void *p, zc_datatype_t dtype, int64_t i, float x)
{
    if (dtype == ZC_FLOAT32)
        ((float *)p)[i] = x;
    else
        ((uint16_t *)p)[i] = zc_float_to_bf16(x);
}

/* Keys [*lo, *hi) of segment b (lk keys) that its query row i sees. */
static inline void zc_attn_keys_seen(const zc_attn_cpu_job_t *job, int b, int64_t i, int64_t lk,
                                     int64_t *lo, int64_t *hi)
{
    const zc_attn_args_t *args = job->args;

    zc_attn_mask_keys(job->mask, i, args->q_start ? args->q_start[b] : 0,
                      args->kv_start ? args->kv_start[b] : 0, lk, lo, hi);
}

/* Rows [*lo, *hi) of segment b (lq rows) that see its key j. */
static inline void zc_attn_rows_seeing(const zc_attn_cpu_job_t *job, int b, int64_t j,
                                       int64_t lq, int64_t *lo, int64_t *hi)
{
    const zc_attn_args_t *args = job->args;

    zc_attn_mask_rows(job->mask, j, args->q_start ? args->q_start[b] : 0,
                      args->kv_start ? args->kv_start[b] : 0, lq, lo, hi);
}

/* Block kernels of one SIMD path. */
typedef struct {
    const char *name;
    /* out/lse rows of query block qb of segment b, head h */
    void (*fwd_block)(const zc_attn_cpu_job_t *job, int b, int h, int qb, float *scratch);
    /* dk/dv of key block kb of segment b, kv head hk, and its dq partials */
    void (*bwd_block)(const zc_attn_cpu_job_t *job, int b, int hk, int kb, float *scratch);
} zc_attn_cpu_kernels_t;

extern const zc_attn_cpu_kernels_t zc_attn_cpu_kernels_scalar;
extern const zc_attn_cpu_kernels_t zc_attn_cpu_kernels_avx2;
extern const zc_attn_cpu_kernels_t zc_attn_cpu_kernels_avx512;

/* SIMD path selection: auto picks the widest the CPU supports (ZC_CPU_ISA
 * overrides); tests force each path. */
typedef enum {
    ZC_ATTN_ISA_AUTO = 0,
    ZC_ATTN_ISA_SCALAR,
    ZC_ATTN_ISA_AVX2,
    ZC_ATTN_ISA_AVX512
} zc_attn_isa_t;

int zc_attn_cpu_isa_supported(zc_attn_isa_t isa);
/* ZC_ERR_UNSUPPORTED when this CPU lacks the path. */
zc_status_t zc_attn_cpu_set_isa(zc_attn_isa_t isa);
zc_attn_isa_t zc_attn_cpu_get_isa(void);
const char *zc_attn_cpu_isa_name(zc_attn_isa_t isa);

#endif

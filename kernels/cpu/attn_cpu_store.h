/* Row outputs of the CPU attention block kernels, shared by every SIMD
 * path (attn_cpu_kernel.h) and written once, in scalar code
 * (attn_cpu_store.c): the kernels call down into them, never into the
 * driver (attn_cpu.c). */
#ifndef ZC_KERNELS_CPU_ATTN_CPU_STORE_H
#define ZC_KERNELS_CPU_ATTN_CPU_STORE_H

#include <stdint.h>

#include "kernels/cpu/attn_cpu.h"

/* Output row of token t, head h: o / l in the caller's out_dtype and its
 * log-sum-exp from the running max m2 (log2 units) and sum l; merged into
 * out/lse under ZC_ATTN_ACCUMULATE. */
void zc_attn_cpu_store_out(const zc_attn_cpu_job_t *job, int64_t t, int h, const float *o,
                           float m2, float l);
/* The lock that serialises adds into the dq rows of query block t0, head h
 * (blocks of different keys add into the same rows concurrently). */
void zc_attn_cpu_dq_lock(const zc_attn_cpu_job_t *job, int64_t t0, int h);
void zc_attn_cpu_dq_unlock(const zc_attn_cpu_job_t *job, int64_t t0, int h);
/* dk/dv rows [t0, t0 + rows) of kv head hk from the fp32 tiles (row stride
 * job->dp), stored in grad_dtype or added under ZC_ATTN_ACCUMULATE. */
void zc_attn_cpu_store_dkv(const zc_attn_cpu_job_t *job, int64_t t0, int rows, int hk,
                           const float *dk, const float *dv);

#endif

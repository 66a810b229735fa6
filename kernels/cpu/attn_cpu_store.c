/* Row outputs of the CPU attention block kernels (attn_cpu_store.h): the
 * out/lse rows of the forward, the dk/dv rows of the backward and the
 * striped locks of the dq adds.  Scalar code shared by every SIMD path;
 * it calls nothing of the driver (attn_cpu.c) or of the paths. */
#include "config.h"

#include <pthread.h>
#include <stdint.h>

#include "kernels/attn_math.h"
#include "kernels/cpu/attn_cpu.h"
#include "kernels/cpu/attn_cpu_store.h"

#define ZC_ATTN_DQ_LOCKS 64

void zc_attn_cpu_store_out(const zc_attn_cpu_job_t *job, int64_t t, int h, const float *o,
                           float m2, float l)
{
    const zc_attn_args_t *args = job->args;
    const int d = job->d;
    const int64_t row = t * job->hq + h;
    const float lse = zc_attn_row_lse(m2, l);
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;

    if (args->flags & ZC_ATTN_ACCUMULATE) {
        float part[ZC_ATTN_MAX_HEAD_DIM];

        for (int i = 0; i < d; i++)
            part[i] = o[i] * inv;
        zc_attn_merge_row((float *)args->out + row * d, &args->lse[row], part, lse, d);
        return;
    }
    for (int i = 0; i < d; i++)
        zc_attn_store(args->out, args->out_dtype, row * d + i, o[i] * inv);
    args->lse[row] = lse;
}

static pthread_mutex_t zc_attn_dq_locks[ZC_ATTN_DQ_LOCKS] = {
    [0 ... ZC_ATTN_DQ_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER
};

static pthread_mutex_t *zc_attn_dq_mutex(int64_t t0, int h)
{
    return &zc_attn_dq_locks[((uint64_t)t0 * 31 + (uint64_t)h) % ZC_ATTN_DQ_LOCKS];
}

void zc_attn_cpu_dq_lock(const zc_attn_cpu_job_t *job, int64_t t0, int h)
{
    pthread_mutex_lock(zc_attn_dq_mutex(t0, h));
}

void zc_attn_cpu_dq_unlock(const zc_attn_cpu_job_t *job, int64_t t0, int h)
{
    pthread_mutex_unlock(zc_attn_dq_mutex(t0, h));
}

void zc_attn_cpu_store_dkv(const zc_attn_cpu_job_t *job, int64_t t0, int rows, int hk,
                           const float *dk, const float *dv)
{
    const zc_attn_args_t *args = job->args;
    const int d = job->d;

    for (int r = 0; r < rows; r++) {
        const int64_t at = ((t0 + r) * job->hk + hk) * d;

        if (args->flags & ZC_ATTN_ACCUMULATE) {
            for (int i = 0; i < d; i++) {
                ((float *)args->dk)[at + i] += dk[r * job->dp + i];
                ((float *)args->dv)[at + i] += dv[r * job->dp + i];
            }
        } else {
            for (int i = 0; i < d; i++) {
                zc_attn_store(args->dk, args->grad_dtype, at + i, dk[r * job->dp + i]);
                zc_attn_store(args->dv, args->grad_dtype, at + i, dv[r * job->dp + i]);
            }
        }
    }
}

/* AVX-512 path of the CPU attention kernels: 16-float vectors, a 6x4
 * register tile (24 zmm accumulators; 6 rows beat 4 and 8 on this Zen 5).
 * Only these functions are compiled for AVX-512; the driver calls them
 * after checking the CPU. */
#include "config.h"

/* Target options for this file's functions only; other compilers and CPUs
 * get an empty table (the path is absent). */
#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif

#include <immintrin.h>

#include "kernels/attn_math.h"

typedef __m512 zv_t;
#define ZV_W 16
#define ZK_R 6
#define ZK_CV 4
#define ZK_NAME(x) x##_avx512
#define ZK_PATH_NAME "avx512"

#define zv_load(p)        _mm512_loadu_ps(p)
#define zv_store(p, v)    _mm512_storeu_ps((p), (v))
#define zv_set1(x)        _mm512_set1_ps(x)
#define zv_zero()         _mm512_setzero_ps()
#define zv_fmadd(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define zv_mul(a, b)      _mm512_mul_ps((a), (b))
#define zv_sub(a, b)      _mm512_sub_ps((a), (b))
#define zv_add(a, b)      _mm512_add_ps((a), (b))
#define zv_max(a, b)      _mm512_max_ps((a), (b))
#define zv_hmax(v)        _mm512_reduce_max_ps(v)
#define zv_hsum(v)        _mm512_reduce_add_ps(v)

/* lanes [0, n) of a mask */
static inline __mmask16 zv_lanes_below(int n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

static inline zv_t zv_keep_range(zv_t x, int a, int b, float fill)
{
    __mmask16 keep = zv_lanes_below(b) & (__mmask16)~zv_lanes_below(a);

    return _mm512_mask_blend_ps(keep, _mm512_set1_ps(fill), x);
}

/* 2^x: x = n + f with f in [-1/2, 1/2], 2^f by the polynomial of
 * attn_math.h, scaled by 2^n with vscalefps.  Below -126 the
 * result is 0 (exp2(-inf) = 0 exactly); max/min keep a NaN operand. */
static inline zv_t zv_exp2(zv_t x)
{
    zv_t xc = _mm512_min_ps(_mm512_set1_ps(128.0f), _mm512_max_ps(_mm512_set1_ps(-127.0f), x));
    zv_t n = _mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    zv_t f = _mm512_sub_ps(xc, n);
    zv_t p = ZC_ATTN_EXP2_POLY(_mm512_fmadd_ps, _mm512_set1_ps, f);

    p = _mm512_scalef_ps(p, n);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ), p);
}

#include "kernels/cpu/attn_cpu_kernel.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

#include "kernels/cpu/attn_cpu.h"

const zc_attn_cpu_kernels_t zc_attn_cpu_kernels_avx512 = {"avx512", NULL, NULL};

#endif

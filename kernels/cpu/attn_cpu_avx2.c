/* AVX2 + FMA path of the CPU attention kernels: 8-float vectors, a 3x4
 * register tile (12 of AVX2's 16 ymm registers).  Only these functions are
 * compiled for AVX2; the driver calls them after checking the CPU. */
#include "config.h"

/* Target options for this file's functions only; other compilers and CPUs
 * get an empty table (the path is absent). */
#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#include <immintrin.h>

#include "kernels/attn_math.h"

typedef __m256 zv_t;
#define ZV_W 8
#define ZK_R 3
#define ZK_CV 4
#define ZK_NAME(x) x##_avx2
#define ZK_PATH_NAME "avx2"

#define zv_load(p)        _mm256_loadu_ps(p)
#define zv_store(p, v)    _mm256_storeu_ps((p), (v))
#define zv_set1(x)        _mm256_set1_ps(x)
#define zv_zero()         _mm256_setzero_ps()
#define zv_fmadd(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define zv_mul(a, b)      _mm256_mul_ps((a), (b))
#define zv_sub(a, b)      _mm256_sub_ps((a), (b))
#define zv_add(a, b)      _mm256_add_ps((a), (b))
#define zv_max(a, b)      _mm256_max_ps((a), (b))

static inline float zv_hmax(zv_t v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline float zv_hsum(zv_t v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

static inline zv_t zv_keep_range(zv_t x, int a, int b, float fill)
{
    const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 keep = _mm256_and_ps(_mm256_cmp_ps(lane, _mm256_set1_ps((float)a), _CMP_GE_OQ),
                                _mm256_cmp_ps(lane, _mm256_set1_ps((float)b), _CMP_LT_OQ));

    return _mm256_blendv_ps(_mm256_set1_ps(fill), x, keep);
}

/* 2^x as in the AVX-512 path; 2^n is built in the exponent field, so x is
 * clamped to [-126, 127] first and results below -126 are set to 0. */
static inline zv_t zv_exp2(zv_t x)
{
    zv_t xc = _mm256_min_ps(_mm256_set1_ps(127.0f), _mm256_max_ps(_mm256_set1_ps(-126.0f), x));
    zv_t n = _mm256_round_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    zv_t f = _mm256_sub_ps(xc, n);
    zv_t p = ZC_ATTN_EXP2_POLY(_mm256_fmadd_ps, _mm256_set1_ps, f);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);

    p = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_and_ps(p, _mm256_cmp_ps(x, _mm256_set1_ps(-126.0f), _CMP_NLT_UQ));
}

#include "kernels/cpu/attn_cpu_kernel.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

#include "kernels/cpu/attn_cpu.h"

const zc_attn_cpu_kernels_t zc_attn_cpu_kernels_avx2 = {"avx2", NULL, NULL};

#endif

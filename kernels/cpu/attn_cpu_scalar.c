/* Portable path of the CPU attention kernels: "vectors" of one float, the
 * same block algorithm as the SIMD paths, exp2f from libm.  It runs on any
 * CPU and is the fallback when neither AVX2 nor AVX-512 is present. */
#include "config.h"

#include <math.h>

typedef float zv_t;
#define ZV_W 1
#define ZK_R 4
#define ZK_CV 4
#define ZK_NAME(x) x##_scalar
#define ZK_PATH_NAME "scalar"

#define zv_load(p)        (*(p))
#define zv_store(p, v)    (*(p) = (v))
#define zv_set1(x)        (x)
#define zv_zero()         0.0f
#define zv_fmadd(a, b, c) ((a) * (b) + (c))
#define zv_mul(a, b)      ((a) * (b))
#define zv_sub(a, b)      ((a) - (b))
#define zv_add(a, b)      ((a) + (b))
#define zv_max(a, b)      ((a) > (b) ? (a) : (b))
#define zv_hmax(v)        (v)
#define zv_hsum(v)        (v)
#define zv_exp2(v)        exp2f(v)
#define zv_keep_range(x, a, b, fill) ((a) <= 0 && (b) > 0 ? (x) : (fill))

#include "kernels/cpu/attn_cpu_kernel.h"

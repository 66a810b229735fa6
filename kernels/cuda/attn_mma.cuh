/* The warp-level tensor-core and asynchronous-copy instructions the
 * attention kernels use (sm_80 and later), as small device functions:
 * inline PTX under nvcc, calls into the CUDA emulation (tests/cuda_emu)
 * when the host compiler builds the kernels for tests/test_cuda_emu.  The
 * emulation implements each with the register layouts of the PTX ISA, so
 * the kernels' use of those layouts is checked on every CI run.
 *
 *  - zk_mma: mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}, d = a b + c
 *    on a warp's fragments (a: 4 registers of 2 elements, b: 2, c/d: 4 fp32);
 *  - zk_ldmatrix<N, TRANS>: ldmatrix.sync.aligned.m8n8.xN[.trans].b16 from
 *    shared memory: lanes 8i..8i+7 give the 16-byte rows of matrix i;
 *  - zk_cp_async: cp.async.cg of 16 bytes from global into shared memory,
 *    the part past src_bytes zero-filled; zk_cp_async_commit and
 *    zk_cp_async_wait<N> (cp.async.commit_group, cp.async.wait_group N);
 *  - zk_pack: two floats rounded to nearest even into one register of two
 *    16-bit values (the lower index in the low half). */
#ifndef ZC_KERNELS_CUDA_ATTN_MMA_CUH
#define ZC_KERNELS_CUDA_ATTN_MMA_CUH

#include <stdint.h>

#include "kernels/attn_math.h"

#ifdef ZC_CUDA_EMU
/* The call site of each instruction, for the emulation's diagnostics. */
#define ZK_SITE_PARAM , const char *zk_file = __builtin_FILE(), int zk_line = __builtin_LINE()
#else
#define ZK_SITE_PARAM
#endif

/* The 16-bit storage types: bfloat16 and IEEE half. */
struct zk_bf16 {
    static constexpr bool f16 = false;
};
struct zk_f16 {
    static constexpr bool f16 = true;
};

template <typename T>
__device__ __forceinline__ void zk_mma(float d[4], const uint32_t a[4], const uint32_t b[2]
                                       ZK_SITE_PARAM)
{
#ifdef ZC_CUDA_EMU
    zc_emu::mma_m16n8k16(T::f16, d, a, b, d, zk_file, zk_line);
#elif defined(__CUDA_ARCH__)
    if (T::f16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

template <int N, bool TRANS>
__device__ __forceinline__ void zk_ldmatrix(uint32_t r[N], const void *row ZK_SITE_PARAM)
{
    static_assert(N == 1 || N == 2 || N == 4, "ldmatrix takes 1, 2 or 4 matrices");
#ifdef ZC_CUDA_EMU
    zc_emu::ldmatrix(N, TRANS, r, row, zk_file, zk_line);
#elif defined(__CUDA_ARCH__)
    const unsigned at = (unsigned)__cvta_generic_to_shared(row);
    if (N == 4 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
    else if (N == 4)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
    else if (N == 2 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(at));
    else if (N == 2)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(at));
    else if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                     : "=r"(r[0]) : "r"(at));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                     : "=r"(r[0]) : "r"(at));
#endif
}

__device__ __forceinline__ void zk_cp_async(void *dst, const void *src, int src_bytes
                                            ZK_SITE_PARAM)
{
#ifdef ZC_CUDA_EMU
    zc_emu::cp_async(dst, src, src_bytes, zk_file, zk_line);
#elif defined(__CUDA_ARCH__)
    const unsigned at = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(at), "l"(src), "r"(src_bytes) : "memory");
#endif
}

__device__ __forceinline__ void zk_cp_async_commit()
{
#ifdef ZC_CUDA_EMU
    zc_emu::cp_async_commit();
#elif defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int PENDING> __device__ __forceinline__ void zk_cp_async_wait()
{
#ifdef ZC_CUDA_EMU
    zc_emu::cp_async_wait(PENDING);
#elif defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
#endif
}

template <typename T> __device__ __forceinline__ uint32_t zk_pack(float lo, float hi)
{
#ifdef ZC_CUDA_EMU
    if (T::f16)
        return (uint32_t)__float2half_rn(lo).x | (uint32_t)__float2half_rn(hi).x << 16;
    return (uint32_t)zc_float_to_bf16(lo) | (uint32_t)zc_float_to_bf16(hi) << 16;
#else
    uint32_t r = 0;
#ifdef __CUDA_ARCH__
    /* cvt packs its first source into the upper half */
    if (T::f16)
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
#endif
}

#endif

/* Kernels that break the rules on purpose, for test_cuda_emu: the
 * emulation that checks the real kernels must itself catch each of these.
 * They use the dynamic shared array of attn_cuda_emu.cc. */
#include <stdio.h>
#include <string.h>

#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include "emu_selftest.h"
#include "kernels/cuda/attn_mma.cuh"

namespace zc_emu_kernels {
extern float zk_smem[]; /* attn_cuda_emu.cc */
}
using zc_emu_kernels::zk_smem;

/* One launch of a self-test kernel; the launch's error, and none left. */
template <typename T>
static cudaError_t run(void (*kernel)(T *), dim3 grid, unsigned threads, size_t smem, T *out)
{
    cudaLaunchConfig_t cfg = {};

    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, out);
    cudaGetLastError();
    return err;
}

/* Thread 5 leaves before the barrier the others wait at. */
static __global__ void partial_barrier(int *out)
{
    if (threadIdx.x == 5)
        return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

/* Warp 1 waits at another barrier than the rest. */
static __global__ void divergent_barriers(int *out)
{
    if (threadIdx.x / 32 == 1)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = 1;
}

/* Lane 7 skips a full-warp shuffle. */
static __global__ void partial_shuffle(int *out)
{
    int v = (int)threadIdx.x;

    if (threadIdx.x % 32 != 7)
        v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

/* Each thread writes its slot of shared memory and reads its neighbour's,
 * with (safe) or without (racy) a barrier between. */
template <bool Barrier> static __global__ void neighbour(int *out)
{
    float *s = zk_smem;
    const int n = (int)blockDim.x, t = (int)threadIdx.x;

    s[t] = (float)t;
    if (Barrier)
        __syncthreads();
    /* a warp collective lets other threads run here, as on a GPU */
    __syncwarp();
    out[t] = s[(t + 33) % n] == s[(t + 33) % n] ? (int)s[(t + 33) % n] : -1;
}

static __global__ void shuffles(int *out)
{
    const int lane = (int)threadIdx.x % 32;

    out[3 * threadIdx.x] = __shfl_sync(0xffffffffu, lane * 10, (lane + 3) % 32);
    out[3 * threadIdx.x + 1] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
    out[3 * threadIdx.x + 2] = (int)__shfl_sync(0xffffffffu, (float)lane + 0.5f, 31);
}


extern "C" int zc_emu_selftest_partial_barrier(const char **why)
{
    int out[128];

    zc_emu_set_schedule(ZC_EMU_THREAD_ORDER, 1);
    int err = run(partial_barrier, 1, 128, 0, out);
    *why = zc_emu_last_error();
    return err;
}

extern "C" int zc_emu_selftest_divergent_barriers(const char **why)
{
    int out[128];

    zc_emu_set_schedule(ZC_EMU_RANDOM, 2);
    int err = run(divergent_barriers, 1, 128, 0, out);
    *why = zc_emu_last_error();
    return err;
}

extern "C" int zc_emu_selftest_partial_shuffle(const char **why)
{
    int out[128];

    zc_emu_set_schedule(ZC_EMU_THREAD_ORDER, 3);
    int err = run(partial_shuffle, 1, 128, 0, out);
    *why = zc_emu_last_error();
    return err;
}

extern "C" int zc_emu_selftest_race(void)
{
    int a[128], b[128], c[128], d[128];

    zc_emu_set_schedule(ZC_EMU_THREAD_ORDER, 4);
    if (run(neighbour<true>, 1, 128, 512, a) != cudaSuccess)
        return 0;
    zc_emu_set_schedule(ZC_EMU_RANDOM, 4);
    if (run(neighbour<true>, 1, 128, 512, b) != cudaSuccess || memcmp(a, b, sizeof a) != 0)
        return 0; /* the barrier version must agree */
    zc_emu_set_schedule(ZC_EMU_THREAD_ORDER, 4);
    if (run(neighbour<false>, 1, 128, 512, c) != cudaSuccess)
        return 0;
    zc_emu_set_schedule(ZC_EMU_RANDOM, 4);
    if (run(neighbour<false>, 1, 128, 512, d) != cudaSuccess)
        return 0;
    return memcmp(c, d, sizeof c) != 0;
}

extern "C" int zc_emu_selftest_limits(const char **why)
{
    static int out[3 * 1024];

    zc_emu_set_schedule(ZC_EMU_THREAD_ORDER, 5);
    if (run(shuffles, dim3(1, 65536), 32, 0, out) != cudaErrorInvalidConfiguration)
        return *why = "65536 blocks in y ran", 1;
    if (run(shuffles, 1, 1025, 0, out) != cudaErrorInvalidConfiguration)
        return *why = "1025 threads ran", 1;
    if (run(shuffles, 1, 32, 64 << 10, out) != cudaErrorInvalidValue)
        return *why = "64 KiB of dynamic shared memory ran without cudaFuncSetAttribute", 1;
    if (cudaFuncSetAttribute(shuffles, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10) !=
            cudaSuccess ||
        run(shuffles, 1, 32, 64 << 10, out) != cudaSuccess)
        return *why = "64 KiB after cudaFuncSetAttribute was refused", 1;
    *why = "all refused";
    return 0;
}

extern "C" int zc_emu_selftest_shuffles(void)
{
    static int out[3 * 64];

    zc_emu_set_schedule(ZC_EMU_RANDOM, 6);
    if (run(shuffles, 1, 64, 0, out) != cudaSuccess)
        return 1;
    for (int t = 0; t < 64; t++) {
        const int lane = t % 32;
        if (out[3 * t] != (lane + 3) % 32 * 10 || out[3 * t + 1] != (lane ^ 5) * 10 ||
            out[3 * t + 2] != 31)
            return 1;
    }
    return 0;
}

/* ---- tensor-core instructions against the PTX ISA's layouts ---------------------- */

/* The operands of the mma tests: A 16x16, B 16x8 (k x n), C 16x8, small
 * integers and halves, exact in bf16 and fp16, so every product and sum is
 * exact and the result is the one of any summation order. */
static float mma_a[16][16], mma_b[16][8], mma_c[16][8];

static float mma_value(int i, int j, int salt)
{
    return (float)((i * 7 + j * 3 + salt) % 11 - 5) * 0.5f;
}

template <typename T> static uint16_t bits16(float f)
{
    return T::f16 ? __float2half_rn(f).x : zc_float_to_bf16(f);
}

template <typename T> static uint32_t pair(float lo, float hi)
{
    return (uint32_t)bits16<T>(lo) | (uint32_t)bits16<T>(hi) << 16;
}

/* Each lane builds its fragments by the ISA's tables ("Matrix Fragments
 * for mma.m16n8k16 with floating point type"), group g = lane / 4,
 * t = lane % 4, and stores its d[4] at out[4 * lane]. */
template <typename T> static __global__ void mma_fragments(float *out)
{
    const int lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4;
    uint32_t a[4], b[2];
    float d[4];

    a[0] = pair<T>(mma_a[g][2 * t], mma_a[g][2 * t + 1]);
    a[1] = pair<T>(mma_a[g + 8][2 * t], mma_a[g + 8][2 * t + 1]);
    a[2] = pair<T>(mma_a[g][2 * t + 8], mma_a[g][2 * t + 9]);
    a[3] = pair<T>(mma_a[g + 8][2 * t + 8], mma_a[g + 8][2 * t + 9]);
    b[0] = pair<T>(mma_b[2 * t][g], mma_b[2 * t + 1][g]);
    b[1] = pair<T>(mma_b[2 * t + 8][g], mma_b[2 * t + 9][g]);
    d[0] = mma_c[g][2 * t], d[1] = mma_c[g][2 * t + 1];
    d[2] = mma_c[g + 8][2 * t], d[3] = mma_c[g + 8][2 * t + 1];
    zk_mma<T>(d, a, b);
    for (int r = 0; r < 4; r++)
        out[4 * threadIdx.x + r] = d[r];
}

/* The way the kernels feed mma: A row-major in shared memory through
 * ldmatrix.x4, B stored k-major ([k][n], as V is) through ldmatrix.x2.trans. */
template <typename T> static __global__ void mma_from_shared(float *out)
{
    uint16_t *sa = (uint16_t *)zk_smem, *sb = sa + 16 * 16;
    const int lane = (int)threadIdx.x % 32;
    uint32_t a[4], b[2];
    float d[4] = {0, 0, 0, 0};

    for (int e = lane; e < 16 * 16; e += 32)
        sa[e] = bits16<T>(mma_a[e / 16][e % 16]);
    for (int e = lane; e < 16 * 8; e += 32)
        sb[e] = bits16<T>(mma_b[e / 8][e % 8]);
    __syncwarp();
    /* matrices: rows 0-7 / 8-15 of columns 0-7, then of columns 8-15 */
    zk_ldmatrix<4, false>(a, sa + (lane % 16) * 16 + (lane / 16) * 8);
    zk_ldmatrix<2, true>(b, sb + (lane % 16) * 8);
    zk_mma<T>(d, a, b);
    for (int r = 0; r < 4; r++)
        out[4 * lane + r] = d[r];
}

static int check_mma(const float *out, int with_c, const char **why)
{
    for (int lane = 0; lane < 32; lane++)
        for (int r = 0; r < 4; r++) {
            const int i = lane / 4 + 8 * (r / 2), j = 2 * (lane % 4) + r % 2;
            float want = with_c ? mma_c[i][j] : 0.0f;
            for (int k = 0; k < 16; k++)
                want += mma_a[i][k] * mma_b[k][j];
            if (out[4 * lane + r] != want) {
                static char msg[96];
                snprintf(msg, sizeof msg, "lane %d d[%d] = %g, D[%d][%d] = %g", lane, r,
                         (double)out[4 * lane + r], i, j, (double)want);
                *why = msg;
                return 1;
            }
        }
    return 0;
}

extern "C" int zc_emu_selftest_mma(const char **why)
{
    static float out[64 * 4];

    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            mma_a[i][j] = mma_value(i, j, 1);
            if (j < 8)
                mma_b[i][j] = mma_value(j, i, 2), mma_c[i][j] = mma_value(i, j, 3) * 4.0f;
        }
    zc_emu_set_schedule(ZC_EMU_RANDOM, 7);
    *why = "";
    if (run(mma_fragments<zk_bf16>, 1, 64, 0, out) != cudaSuccess)
        return *why = zc_emu_last_error(), 1;
    if (check_mma(out, 1, why) || check_mma(out + 128, 1, why))
        return 1;
    if (run(mma_fragments<zk_f16>, 1, 32, 0, out) != cudaSuccess)
        return *why = zc_emu_last_error(), 1;
    if (check_mma(out, 1, why))
        return 1;
    if (run(mma_from_shared<zk_bf16>, 1, 32, 1024, out) != cudaSuccess)
        return *why = zc_emu_last_error(), 1;
    if (check_mma(out, 0, why))
        return 1;
    if (run(mma_from_shared<zk_f16>, 1, 32, 1024, out) != cudaSuccess)
        return *why = zc_emu_last_error(), 1;
    return check_mma(out, 0, why);
}

/* ldmatrix x1, x2, x4, plain and .trans, from a 32 x 8 block of distinct
 * values v(r, c) = 256 r + c (row r of 16 bytes), row pointers given
 * lane by lane: out[lane][12] = x1, x2 (2), x4 (4), x1.trans, x2.trans,
 * x4.trans ... as 4 + 4 + 4 words (x1 and x2 padded). */
static __global__ void ldmatrix_all(unsigned *out)
{
    uint16_t *s = (uint16_t *)zk_smem;
    const int lane = (int)threadIdx.x % 32;
    uint32_t r[4];

    for (int e = lane; e < 32 * 8; e += 32)
        s[e] = (uint16_t)(256 * (e / 8) + e % 8);
    __syncwarp();
    /* lane l points at row (l * 5) % 32: rows in any order */
    const uint16_t *row = s + ((lane * 5) % 32) * 8;
    zk_ldmatrix<1, false>(r, row), out[24 * lane] = r[0];
    zk_ldmatrix<2, false>(r, row), out[24 * lane + 1] = r[0], out[24 * lane + 2] = r[1];
    zk_ldmatrix<4, false>(r, row);
    for (int m = 0; m < 4; m++)
        out[24 * lane + 3 + m] = r[m];
    zk_ldmatrix<1, true>(r, row), out[24 * lane + 7] = r[0];
    zk_ldmatrix<2, true>(r, row), out[24 * lane + 8] = r[0], out[24 * lane + 9] = r[1];
    zk_ldmatrix<4, true>(r, row);
    for (int m = 0; m < 4; m++)
        out[24 * lane + 10 + m] = r[m];
}

extern "C" int zc_emu_selftest_ldmatrix(const char **why)
{
    static unsigned out[32 * 24];
    static char msg[128];

    zc_emu_set_schedule(ZC_EMU_RANDOM, 8);
    if (run(ldmatrix_all, 1, 32, 512, out) != cudaSuccess)
        return *why = zc_emu_last_error(), 1;
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane / 4, t = lane % 4;
        for (int trans = 0; trans < 2; trans++)
            for (int n = 1; n <= 4; n *= 2)
                for (int m = 0; m < n; m++) {
                    /* matrix m's row r is lane 8m + r's row, (8m + r) * 5 % 32 */
                    const int at = 24 * lane + (trans ? 7 : 0) + (n == 1 ? 0 : n == 2 ? 1 : 3) + m;
                    const int rlo = trans ? 2 * t : g, rhi = trans ? 2 * t + 1 : g;
                    const int clo = trans ? g : 2 * t, chi = trans ? g : 2 * t + 1;
                    const unsigned lo = 256 * ((8 * m + rlo) * 5 % 32) + clo;
                    const unsigned hi = 256 * ((8 * m + rhi) * 5 % 32) + chi;
                    if (out[at] != (lo | hi << 16)) {
                        snprintf(msg, sizeof msg, "x%d%s: lane %d matrix %d holds 0x%08x, the "
                                 "ISA says 0x%08x", n, trans ? ".trans" : "", lane, m, out[at],
                                 lo | hi << 16);
                        *why = msg;
                        return 1;
                    }
                }
    }
    *why = "";
    return 0;
}

/* cp.async: out[0..3] the destination's words before any wait, out[4..7]
 * after waiting for all but the newest group (the first copy), out[8..11]
 * the second copy (8 bytes, zero-filled) still in flight, out[12..15] it
 * after wait_group 0. */
static __global__ void async_copies(unsigned *out)
{
    static const unsigned src[8] __attribute__((aligned(16))) = {1, 2, 3, 4, 5, 6, 7, 8};
    unsigned *s = (unsigned *)zk_smem;

    if (threadIdx.x != 0)
        return;
    zk_cp_async(s, src, 16);
    zk_cp_async_commit();
    for (int i = 0; i < 4; i++)
        out[i] = s[i];
    zk_cp_async(s + 4, src + 4, 8);
    zk_cp_async_commit();
    zk_cp_async_wait<1>();
    for (int i = 0; i < 4; i++)
        out[4 + i] = s[i], out[8 + i] = s[4 + i];
    zk_cp_async_wait<0>();
    for (int i = 0; i < 4; i++)
        out[12 + i] = s[4 + i];
}

extern "C" int zc_emu_selftest_cp_async(void)
{
    static const unsigned want[16] = {~0u, ~0u, ~0u, ~0u, 1, 2, 3, 4,
                                      ~0u, ~0u, ~0u, ~0u, 5, 6, 0, 0};
    unsigned out[16];

    zc_emu_set_schedule(ZC_EMU_THREAD_ORDER, 9);
    if (run(async_copies, 1, 32, 64, out) != cudaSuccess)
        return 1;
    return memcmp(out, want, sizeof want) != 0;
}

/* ldmatrix of 8 rows 128 bytes apart: every row in the same bank slot, 7
 * extra wavefronts per matrix; with the row's chunk XOR-swizzled by the
 * row index, none. */
template <bool Swizzle> static __global__ void strided_rows(unsigned *out)
{
    uint16_t *s = (uint16_t *)zk_smem;
    const int lane = (int)threadIdx.x % 32, r = lane % 8, m = lane / 8;
    uint32_t x[4];

    for (int e = lane; e < 8 * 64; e += 32)
        s[e] = 0;
    __syncwarp();
    zk_ldmatrix<4, false>(x, s + r * 64 + 8 * (Swizzle ? m ^ r : m));
    out[lane] = x[0];
}

extern "C" int zc_emu_selftest_bank_conflicts(uint64_t *plain, uint64_t *swizzled)
{
    unsigned out[32];
    uint64_t mma, ld, c0, c1, c2;

    zc_emu_tensor_counters(&mma, &ld, &c0);
    if (run(strided_rows<false>, 1, 32, 1024, out) != cudaSuccess)
        return 1;
    zc_emu_tensor_counters(&mma, &ld, &c1);
    if (run(strided_rows<true>, 1, 32, 1024, out) != cudaSuccess)
        return 1;
    zc_emu_tensor_counters(&mma, &ld, &c2);
    *plain = c1 - c0;
    *swizzled = c2 - c1;
    return 0;
}

/* Kernels that break the rules on purpose, for test_cuda_emu: the
 * emulation that checks the real kernels must itself catch each of these.
 * They use the dynamic shared array of attn_cuda_emu.cc. */
#include <string.h>

#include "cuda_runtime.h"
#include "emu_selftest.h"

namespace zc_emu_kernels {
extern float zk_smem[]; /* attn_cuda_emu.cc */
}
using zc_emu_kernels::zk_smem;

static cudaError_t run(void (*kernel)(int *), dim3 grid, unsigned threads, size_t smem, int *out)
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

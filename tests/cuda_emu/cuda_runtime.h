/* A host-compiler stand-in for the parts of the CUDA runtime and device API
 * that kernels/cuda/attn_cuda.cu and attn_mma.cu use, so that g++ compiles
 * the kernels and tests/test_cuda_emu runs them on the CPU.  It shadows
 * the real <cuda_runtime.h> only for the targets that put tests/cuda_emu
 * first on the include path.
 *
 * What it models, and what not, is written down in README.md beside this
 * file: blocks one after another, a block's threads as coroutines that
 * switch only at barriers and warp collectives (shuffles, mma.sync,
 * ldmatrix), in thread order or a seeded random order; shared memory and
 * cp.async destinations reading NaN until written; barriers, collectives
 * and launch limits checked; no memory ordering, timing, or the tensor
 * cores' own rounding order.
 *
 * Only the full-warp mask and width 32 are supported for warp collectives
 * (the kernels use nothing else). */
#ifndef ZC_TESTS_CUDA_EMU_CUDA_RUNTIME_H
#define ZC_TESTS_CUDA_EMU_CUDA_RUNTIME_H

#define ZC_CUDA_EMU 1

#ifndef __cplusplus
#error "the CUDA emulation is C++: compile the kernels with the host C++ compiler"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_emu.h"

/* ---- qualifiers ---------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
/* Blocks run one at a time, so one array serves every block: the kernels'
 * `extern __shared__` dynamic array is defined by the file that includes
 * them (tests/cuda_emu/attn_cuda_emu.cc) and poisoned before each block.
 * A static __shared__ array would become a per-thread local here, which
 * the tests would show as wrong results: the kernels keep all their shared
 * memory in the dynamic array. */
#define __shared__

/* ---- vector types and dimensions -------------------------------------------- */

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct alignas(16) uint4 {
    unsigned x, y, z, w;
};

/* ---- runtime types ----------------------------------------------------------- */

typedef struct CUstream_st *cudaStream_t;

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorLaunchFailure = 719,
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct cudaLaunchConfig_t {
    dim3 gridDim;
    dim3 blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    void *attrs;
    unsigned numAttrs;
};

/* ---- the emulator's C++ interface (cuda_emu.cc) ------------------------------ */

namespace zc_emu {

struct thread_t; /* one coroutine */

/* The running thread's indices and its launch's dimensions, set by the
 * scheduler before it resumes a thread. */
extern uint3 thread_idx, block_idx;
extern dim3 block_dim, grid_dim;

enum collective_t { WARP_SYNC, SHFL_IDX, SHFL_XOR, MMA, LDMATRIX };

/* Block barrier and warp collectives, named by their call site. */
void syncthreads(const char *file, int line);
uint64_t warp_collective(collective_t kind, unsigned mask, uint64_t value, int arg,
                         const char *file, int line);

/* The tensor-core instructions (see tests/cuda_emu/README.md), reached
 * through kernels/cuda/attn_mma.cuh.  Both are warp collectives: every lane
 * of the warp must reach them, they complete when the last one does.
 *
 * mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: d = a b
 * + c over the warp, each lane holding the fragments the PTX ISA lays out
 * (a: 4 registers of 2 elements, b: 2, c and d: 4 floats). */
void mma_m16n8k16(bool f16, float d[4], const uint32_t a[4], const uint32_t b[2],
                  const float c[4], const char *file, int line);
/* ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: lanes 8i..8i+7
 * give the 16-byte rows of matrix i, every lane gets one register of each. */
void ldmatrix(int count, bool trans, uint32_t *r, const void *row, const char *file, int line);
/* cp.async.cg.shared.global [dst], [src], 16, src_bytes: the destination
 * reads NaN (all-ones bytes) until a cp.async.wait_group of this thread
 * covers it; then it holds the src_bytes bytes of src and zeros. */
void cp_async(void *dst, const void *src, int src_bytes, const char *file, int line);
void cp_async_commit();
void cp_async_wait(int pending);

cudaError_t launch(const void *kernel, dim3 grid, dim3 block, size_t smem,
                   void (*run)(void *), void *call);
cudaError_t set_max_dynamic_smem(const void *kernel, int bytes);
cudaError_t take_last_error();
const char *error_string(cudaError_t err);

template <typename T> static inline uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of T");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}

template <typename T> static inline T from_bits(uint64_t u)
{
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}

} // namespace zc_emu

static const uint3 &threadIdx = zc_emu::thread_idx;
static const uint3 &blockIdx = zc_emu::block_idx;
static const dim3 &blockDim = zc_emu::block_dim;
static const dim3 &gridDim = zc_emu::grid_dim;
#define warpSize 32

/* ---- device functions --------------------------------------------------------- */

#define __syncthreads() zc_emu::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) \
    ((void)zc_emu::warp_collective(zc_emu::WARP_SYNC, zc_emu_mask_(__VA_ARGS__), 0, 0, \
                                   __FILE__, __LINE__))
#define __shfl_sync(mask, var, lane) \
    zc_emu_shfl_(zc_emu::SHFL_IDX, (mask), (var), (lane), __FILE__, __LINE__)
#define __shfl_xor_sync(mask, var, lane_mask) \
    zc_emu_shfl_(zc_emu::SHFL_XOR, (mask), (var), (lane_mask), __FILE__, __LINE__)

static inline unsigned zc_emu_mask_(unsigned mask = 0xffffffffu)
{
    return mask;
}

template <typename T>
static inline T zc_emu_shfl_(zc_emu::collective_t kind, unsigned mask, T var, int arg,
                             const char *file, int line)
{
    return zc_emu::from_bits<T>(
        zc_emu::warp_collective(kind, mask, zc_emu::to_bits(var), arg, file, line));
}

/* Coroutines switch only at collectives, so a read-modify-write is atomic
 * as it stands. */
static inline float atomicAdd(float *address, float value)
{
    float old = *address;

    *address = old + value;
    return old;
}

/* ---- host API ------------------------------------------------------------------ */

/* Runs the whole grid before returning (there are no streams to order). */
template <typename... ExpTypes, typename... ActTypes>
static inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *config,
                                             void (*kernel)(ExpTypes...), ActTypes &&...args)
{
    struct call_t {
        void (*kernel)(ExpTypes...);
        std::tuple<typename std::decay<ExpTypes>::type...> params;
        /* Every thread gets its own copy of the parameters, as kernel
         * parameters are per-thread values. */
        static void run(void *self)
        {
            call_t *c = static_cast<call_t *>(self);
            std::tuple<typename std::decay<ExpTypes>::type...> mine = c->params;
            std::apply(c->kernel, mine);
        }
    } call{kernel, {std::forward<ActTypes>(args)...}};

    return zc_emu::launch((const void *)kernel, config->gridDim, config->blockDim,
                          config->dynamicSmemBytes, &call_t::run, &call);
}

template <class T>
static inline cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return cudaErrorInvalidValue;
    return zc_emu::set_max_dynamic_smem((const void *)entry, value);
}

static inline cudaError_t cudaGetLastError(void)
{
    return zc_emu::take_last_error();
}

static inline const char *cudaGetErrorString(cudaError_t err)
{
    return zc_emu::error_string(err);
}

#endif

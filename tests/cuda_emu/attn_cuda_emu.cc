/* kernels/cuda/attn_cuda.cu and attn_mma.cu compiled by the host C++ compiler against the
 * CUDA emulation (cuda_runtime.h here shadows CUDA's), for
 * tests/test_cuda_emu.
 *
 * The kernels go into a namespace and their launchers get their own names
 * (attn_cuda_emu.h): a CUDA build's libzcomm_core holds nvcc's objects of
 * the same file, with the same C++ names, and the test links both.  The
 * headers attn_cuda.cu includes come first, outside the namespace; their
 * include guards keep them there. */
#include "config.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attn_cuda_emu.h"
#include "kernels/attn_math.h"
#include "zcomm.h"

namespace zc_emu_kernels {

#include "kernels/cuda/attn_cuda.cu"
#include "kernels/cuda/attn_mma.cu"

/* The kernels' dynamic shared array, as large as the largest block asks
 * for (the scalar backward at head dim 256: zc_attn_cuda_smem). */
alignas(128) float zk_smem[(160 << 10) / sizeof(float)];

static const struct shared_init {
    shared_init() { zc_emu_set_shared(zk_smem, sizeof zk_smem); }
} shared_init_;

} // namespace zc_emu_kernels

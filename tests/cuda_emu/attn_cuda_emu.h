/* The launchers of kernels/cuda/attn_cuda.cu and attn_mma.cu as compiled against the CUDA
 * emulation (attn_cuda_emu.cc), under their own names: a CUDA build's
 * libzcomm_core holds the real ones, and the test links against both. */
#ifndef ZC_TESTS_CUDA_EMU_ATTN_CUDA_EMU_H
#define ZC_TESTS_CUDA_EMU_ATTN_CUDA_EMU_H

#define zc_attn_cuda_smem    zc_emu_attn_cuda_smem
#define zc_attn_cuda_fwd     zc_emu_attn_cuda_fwd
#define zc_attn_cuda_bwd     zc_emu_attn_cuda_bwd
#define zc_attn_cuda_delta   zc_emu_attn_cuda_delta
#define zc_attn_cuda_merge   zc_emu_attn_cuda_merge
#define zc_attn_cuda_convert zc_emu_attn_cuda_convert
#define zc_attn_mma_smem     zc_emu_attn_mma_smem
#define zc_attn_mma_fwd      zc_emu_attn_mma_fwd
#define zc_attn_mma_bwd      zc_emu_attn_mma_bwd
#define zc_cuda_fill_f32     zc_emu_cuda_fill_f32
#define zc_cuda_add_f32      zc_emu_cuda_add_f32
#define zc_cuda_copy_ranges  zc_emu_cuda_copy_ranges

#include "kernels/cuda/attn_cuda.h"

#endif

/* kernels/cuda/attn_rows.cu compiled by the host C++ compiler against the
 * CUDA emulation, for tests/test_attn_rows: its launcher renamed
 * zc_emu_attn_rows_cuda (a CUDA build's libzcomm_core holds the real one),
 * its kernels in a namespace of their own (see attn_cuda_emu.cc). */
#include "config.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/attn_math.h"
#include "kernels/attn_rows.h"
#define zc_attn_rows_cuda zc_emu_attn_rows_cuda
#include "kernels/cuda/attn_rows_cuda.h"
#include "zcomm.h"

namespace zc_emu_rows {

#include "kernels/cuda/attn_rows.cu"

} // namespace zc_emu_rows

/* Elements of the storage types on the device: a load to float and a
 * rounding store (fp32, fp16, bf16), for every CUDA kernel of libzcomm. */
#ifndef ZC_KERNELS_CUDA_ELEM_CUH
#define ZC_KERNELS_CUDA_ELEM_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/attn_math.h"
#include "zcomm.h"

__device__ __forceinline__ float zk_load(const void *p, int dtype, int64_t i)
{
    switch (dtype) {
    case ZC_FLOAT32:
        return ((const float *)p)[i];
    case ZC_FLOAT16:
        return __half2float(((const __half *)p)[i]);
    default:
        return zc_bf16_to_float(((const uint16_t *)p)[i]);
    }
}

__device__ __forceinline__ void zk_store(void *p, int dtype, int64_t i, float x)
{
    switch (dtype) {
    case ZC_FLOAT32:
        ((float *)p)[i] = x;
        break;
    case ZC_FLOAT16:
        ((__half *)p)[i] = __float2half_rn(x);
        break;
    default:
        ((uint16_t *)p)[i] = zc_float_to_bf16(x);
        break;
    }
}

#endif

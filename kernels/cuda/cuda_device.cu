/* What the host code asks of CUDA: how many devices there are, which
 * memory a pointer is, and a pattern fill the GPU tests compare against. */
#include "config.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_device.h"

extern "C" int zc_cuda_device_count(void)
{
    /* With no driver the call fails and may leave count untouched. */
    int count = 0;

    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return count;
}

extern "C" int zc_cuda_pointer_is_device(const void *ptr)
{
    cudaPointerAttributes attr;

    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

__global__ void zc_cuda_fill_pattern_kernel(unsigned char *buf, size_t n, unsigned seed)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;

    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        buf[i] = zc_pattern_byte(i, seed);
}

extern "C" int zc_cuda_fill_pattern(void *buf, size_t n, unsigned seed, void *stream)
{
    if (n == 0)
        return 0;
    unsigned blocks = (unsigned)((n + 255) / 256 > 1024 ? 1024 : (n + 255) / 256);
    zc_cuda_fill_pattern_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>(
        (unsigned char *)buf, n, seed);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

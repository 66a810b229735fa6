/* What the host code asks of CUDA: how many devices there are, which
 * memory a pointer is, and a pattern fill the GPU tests compare against. */
#include "config.h"

#include <stdio.h>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_device.h"

extern "C" int zc_cuda_device_probe(char *why, size_t len)
{
    int count = 0, driver = 0, runtime = 0;
    cudaError_t err = cudaGetDeviceCount(&count);

    if (err == cudaSuccess)
        return count;
    (void)cudaGetLastError();
    /* No device, or no NVIDIA driver at all (the runtime then reports an
     * insufficient driver, but the driver's CUDA version reads 0): a
     * machine without a GPU, nothing to report. */
    if (err == cudaErrorNoDevice)
        return 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (err == cudaErrorInsufficientDriver && driver == 0)
        return 0;
    /* Anything else hides devices that are there: a driver older than the
     * runtime this library was built with, a driver and libcuda that do
     * not match, devices held by another mode.  Say which. */
    snprintf(why, len,
             "cudaGetDeviceCount: %s (%s); the driver supports CUDA %d.%d, libzcomm's runtime is "
             "CUDA %d.%d",
             cudaGetErrorName(err), cudaGetErrorString(err), driver / 1000, driver % 1000 / 10,
             runtime / 1000, runtime % 1000 / 10);
    return -1;
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

/* CUDA runtime calls of the device path with zc_status_t results. */
#include "config.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_mem.h"
#include "src/common/status.h"

zc_status_t zc_cuda_status(int err, const char *what)
{
    cudaError_t e = (cudaError_t)err;
    zc_status_t st;

    if (e == cudaSuccess)
        return ZC_OK;
    (void)cudaGetLastError(); /* the error is reported here, not again later */
    switch (e) {
    case cudaErrorMemoryAllocation:
        st = ZC_ERR_NO_MEMORY;
        break;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
        st = ZC_ERR_INVALID_ARG;
        break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
        st = ZC_ERR_UNSUPPORTED;
        break;
    default:
        st = ZC_ERR_TRANSPORT;
        break;
    }
    return zc_error(st, "cuda: %s failed: %s (%s)", what, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

zc_status_t zc_cuda_alloc_async(size_t bytes, void *stream, void **ptr)
{
    void *p = NULL;

    ZC_CHECK(zc_cuda_status(cudaMallocAsync(&p, bytes ? bytes : 1, (cudaStream_t)stream),
                            "cudaMallocAsync"));
    *ptr = p;
    return ZC_OK;
}

void zc_cuda_free_async(void *ptr, void *stream)
{
    if (ptr)
        (void)zc_cuda_status(cudaFreeAsync(ptr, (cudaStream_t)stream), "cudaFreeAsync");
}

zc_status_t zc_cuda_alloc(size_t bytes, void **ptr)
{
    void *p = NULL;

    ZC_CHECK(zc_cuda_status(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc"));
    *ptr = p;
    return ZC_OK;
}

void zc_cuda_free(void *ptr)
{
    if (ptr)
        (void)zc_cuda_status(cudaFree(ptr), "cudaFree");
}

zc_status_t zc_cuda_host_alloc(size_t bytes, void **ptr)
{
    void *p = NULL;

    ZC_CHECK(zc_cuda_status(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable),
                            "cudaHostAlloc"));
    *ptr = p;
    return ZC_OK;
}

void zc_cuda_host_free(void *ptr)
{
    if (ptr)
        (void)zc_cuda_status(cudaFreeHost(ptr), "cudaFreeHost");
}

zc_status_t zc_cuda_device_get(int *device)
{
    int d = 0;

    ZC_CHECK(zc_cuda_status(cudaGetDevice(&d), "cudaGetDevice"));
    *device = d;
    return ZC_OK;
}

zc_status_t zc_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0)
        return ZC_OK;
    return zc_cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                          (cudaStream_t)stream),
                          "cudaMemcpyAsync");
}

zc_status_t zc_cuda_zero_async(void *dst, size_t bytes, void *stream)
{
    if (bytes == 0)
        return ZC_OK;
    return zc_cuda_status(cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)stream),
                          "cudaMemsetAsync");
}

zc_status_t zc_cuda_stream_query(void *stream)
{
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);

    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return ZC_INPROGRESS;
    }
    return zc_cuda_status(e, "cudaStreamQuery");
}

zc_status_t zc_cuda_stream_sync(void *stream)
{
    return zc_cuda_status(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

zc_status_t zc_cuda_stream_create(void **stream)
{
    cudaStream_t s = NULL;

    ZC_CHECK(zc_cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                            "cudaStreamCreateWithFlags"));
    *stream = s;
    return ZC_OK;
}

void zc_cuda_stream_destroy(void *stream)
{
    if (stream)
        (void)zc_cuda_status(cudaStreamDestroy((cudaStream_t)stream), "cudaStreamDestroy");
}

zc_status_t zc_cuda_event_create(void **event)
{
    cudaEvent_t e = NULL;

    ZC_CHECK(zc_cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                            "cudaEventCreateWithFlags"));
    *event = e;
    return ZC_OK;
}

void zc_cuda_event_destroy(void *event)
{
    if (event)
        (void)zc_cuda_status(cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
}

zc_status_t zc_cuda_event_record(void *event, void *stream)
{
    return zc_cuda_status(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream),
                          "cudaEventRecord");
}

zc_status_t zc_cuda_event_query(void *event)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);

    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return ZC_INPROGRESS;
    }
    return zc_cuda_status(e, "cudaEventQuery");
}

zc_status_t zc_cuda_event_sync(void *event)
{
    return zc_cuda_status(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize");
}

zc_status_t zc_cuda_stream_wait_event(void *stream, void *event)
{
    return zc_cuda_status(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0),
                          "cudaStreamWaitEvent");
}

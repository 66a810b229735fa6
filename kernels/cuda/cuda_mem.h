/* CUDA runtime calls of the device path with zc_status_t results: device
 * and pinned allocation, copies and fills, stream and event queries.  cudaError_t never
 * leaves this file's functions; each failure becomes ZC_ERR_TRANSPORT (or
 * ZC_ERR_NO_MEMORY, ZC_ERR_INVALID_ARG) with the CUDA message and the call
 * that failed.  Built only with --with-cuda. */
#ifndef ZC_KERNELS_CUDA_CUDA_MEM_H
#define ZC_KERNELS_CUDA_CUDA_MEM_H

#include <stddef.h>

#include "zcomm.h"

/* Convert a cudaError_t (passed as int so that callers need no CUDA
 * header) raised by `what`; ZC_OK for cudaSuccess. */
zc_status_t zc_cuda_status(int err, const char *what);

/* Stream-ordered device memory (cudaMallocAsync): usable by work enqueued
 * on `stream` after the call, returned to the pool when the stream reaches
 * zc_cuda_free_async. */
zc_status_t zc_cuda_alloc_async(size_t bytes, void *stream, void **ptr);
void zc_cuda_free_async(void *ptr, void *stream);
/* Device memory that outlives streams (cudaMalloc / cudaFree): usable by
 * every stream of the current device; the free waits for the device. */
zc_status_t zc_cuda_alloc(size_t bytes, void **ptr);
void zc_cuda_free(void *ptr);
/* Pinned host memory (cudaHostAlloc, portable to every device /
 * cudaFreeHost): copies from it are truly asynchronous, so it must not be
 * rewritten before they are done. */
zc_status_t zc_cuda_host_alloc(size_t bytes, void **ptr);
void zc_cuda_host_free(void *ptr);
/* The calling thread's current device (cudaGetDevice). */
zc_status_t zc_cuda_device_get(int *device);
/* Device to device, host to device from pageable memory that may be
 * reused as soon as the call returns, or from pinned memory that may not
 * be until the copy is done. */
zc_status_t zc_cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream);
zc_status_t zc_cuda_zero_async(void *dst, size_t bytes, void *stream);
/* ZC_OK when every operation enqueued on `stream` is done, ZC_INPROGRESS
 * while some run, else the error. */
zc_status_t zc_cuda_stream_query(void *stream);
/* Wait until `stream` is done (cudaStreamSynchronize). */
zc_status_t zc_cuda_stream_sync(void *stream);
/* A non-blocking stream (it does not wait on the legacy default stream),
 * destroyed once its work is done. */
zc_status_t zc_cuda_stream_create(void **stream);
void zc_cuda_stream_destroy(void *stream);
/* Events without timing, to order two streams: `stream` waits until the
 * work enqueued before the latest record of `event` is done. */
zc_status_t zc_cuda_event_create(void **event);
void zc_cuda_event_destroy(void *event);
zc_status_t zc_cuda_event_record(void *event, void *stream);
/* ZC_OK once the work before the event's record is done, ZC_INPROGRESS
 * before, or the runtime's error. */
zc_status_t zc_cuda_event_query(void *event);
/* Wait until the work before the event's record is done
 * (cudaEventSynchronize). */
zc_status_t zc_cuda_event_sync(void *event);
zc_status_t zc_cuda_stream_wait_event(void *stream, void *event);

#endif

/* Device-memory checks built in every configuration (without CUDA they
 * say so): the kernels' stream calls, the device backend and the
 * memory-type checks of the host path ask them. */
#ifndef ZC_CUDA_CHECK_H
#define ZC_CUDA_CHECK_H

#include "zcomm.h"

/* ZC_OK when `buf` is device memory for the stream-ordered path (kernels,
 * NCCL): ZC_ERR_UNSUPPORTED naming the memtype without CUDA or without a
 * device; ZC_ERR_INVALID_ARG for host memory.  NULL is accepted (empty
 * buffers). */
zc_status_t zc_memtype_check_device(const void *buf, const char *arg);

/* ZC_ERR_INVALID_ARG when `buf` is device memory (CUDA can tell), for a
 * caller that declared it host memory; `arg` names it. */
zc_status_t zc_memtype_check_host(const void *buf, const char *arg);

/* Number of CUDA devices (0 without CUDA or a driver), asked once. */
int zc_cuda_devices(void);

/* NULL when zc_cuda_devices() is the truth (devices, none, or no NVIDIA
 * driver installed); else why CUDA cannot count the devices there are,
 * e.g. a driver older than the CUDA runtime libzcomm was built with. */
const char *zc_cuda_unusable(void);

#endif

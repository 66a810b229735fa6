/* Checks that a buffer is the memory its caller says it is. */
#ifndef ZC_MEMTYPE_H
#define ZC_MEMTYPE_H

#include "zcomm.h"

/* ZC_OK when `buf` may be used as `memtype` on the host (UCX) path.
 * Device memory declared as host (or the reverse) is ZC_ERR_INVALID_ARG
 * where CUDA can tell; device memory without a device path built is
 * ZC_ERR_UNSUPPORTED.  `arg` names the buffer in the message. */
zc_status_t zc_memtype_check_host_path(const void *buf, zc_memtype_t memtype, const char *arg);

/* Number of CUDA devices (0 without CUDA or a driver), asked once. */
int zc_cuda_devices(void);

#endif

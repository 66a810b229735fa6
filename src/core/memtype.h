/* Checks that a buffer is the memory its caller says it is, and which
 * backend may move it; that a call's send and receive buffers are apart. */
#ifndef ZC_MEMTYPE_H
#define ZC_MEMTYPE_H

#include <stddef.h>

#include "kernels/cuda/cuda_check.h"
#include "zcomm.h"

/* ZC_OK when `buf` may be used as `memtype` on the host (UCX) path, whose
 * collectives also copy and stage on the host.  Device memory declared as
 * host (or the reverse) is ZC_ERR_INVALID_ARG where CUDA can tell; device
 * memory is ZC_ERR_UNSUPPORTED with a message naming the device path (the
 * stream forms) or the missing CUDA build.  `arg` names the buffer. */
zc_status_t zc_memtype_check_host_path(const void *buf, zc_memtype_t memtype, const char *arg);

/* For point-to-point only (UCX moves the bytes, nobody else touches them):
 * as zc_memtype_check_host_path, but device memory is accepted when the
 * UCX found at run time moves CUDA memory (zc_ucx_moves_cuda). */
zc_status_t zc_memtype_check_p2p(const void *buf, zc_memtype_t memtype, const char *arg);

/* ZC_ERR_INVALID_ARG naming `send_arg` and `recv_arg` when the
 * `send_bytes` at `sendbuf` and the `recv_bytes` at `recvbuf` share a byte:
 * the network reads the one while it writes the other, in no defined order,
 * so an exchange in place would send bytes already overwritten.  Plain
 * address arithmetic, so it holds for device pointers too. */
zc_status_t zc_check_disjoint(const void *sendbuf, size_t send_bytes, const char *send_arg,
                              const void *recvbuf, size_t recv_bytes, const char *recv_arg);

/* Non-zero when the UCX library loaded at run time reports CUDA among its
 * memory types (ucp_context_query), asked once.  Debian's UCX does not. */
int zc_ucx_moves_cuda(void);

#endif

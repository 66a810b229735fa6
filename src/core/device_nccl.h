/* NCCL backend of the device path (src/core/device.h): internals shared with
 * its tests.  Built only with --with-nccl. */
#ifndef ZC_TRANSPORT_NCCL_DEVICE_H
#define ZC_TRANSPORT_NCCL_DEVICE_H

#include "zcomm.h"

/* Convert an ncclResult_t (as int, so that callers need no NCCL header)
 * returned by `what` to a zc_status_t with NCCL's message and last error:
 * ZC_OK, ZC_INPROGRESS, ZC_ERR_PEER_FAILED for a remote error,
 * ZC_ERR_INVALID_ARG for a bad argument or usage, else ZC_ERR_TRANSPORT. */
zc_status_t zc_nccl_status(int result, const char *what);

#endif

/* The device backend of a build without NCCL: every stream-ordered
 * transfer is refused where the backend is first asked for, so the public
 * calls still check their arguments first. */
#include "config.h"

#include "src/core/device.h"
#include "src/common/status.h"

zc_status_t zc_device_create(zc_comm_h comm)
{
    (void)comm;
#ifdef HAVE_CUDA
    return zc_error(ZC_ERR_UNSUPPORTED,
                    "memtype: ZC_MEM_CUDA transfers need NCCL; libzcomm was built without it");
#else
    return zc_error(ZC_ERR_UNSUPPORTED,
                    "memtype: ZC_MEM_CUDA transfers need CUDA and NCCL; libzcomm was built "
                    "without them");
#endif
}

/* The device backend of a build without NCCL: every stream-ordered
 * transfer is refused where the backend is first asked for, so the public
 * calls still check their arguments first. */
#include "config.h"

#include "device.h"
#include "status.h"

static zc_status_t zc_device_none(void)
{
#ifdef HAVE_CUDA
    return zc_error(ZC_ERR_UNSUPPORTED,
                    "memtype: ZC_MEM_CUDA transfers need NCCL; libzcomm was built without it");
#else
    return zc_error(ZC_ERR_UNSUPPORTED,
                    "memtype: ZC_MEM_CUDA transfers need CUDA and NCCL; libzcomm was built "
                    "without them");
#endif
}

zc_status_t zc_device_get(zc_comm_h comm, zc_device_t **device)
{
    (void)comm;
    (void)device;
    return zc_device_none();
}

void zc_device_release(zc_comm_h comm)
{
    (void)comm;
}

zc_status_t zc_device_group(zc_device_t *device, const zc_device_op_t *ops, int nops,
                            void *stream)
{
    (void)device;
    (void)ops;
    (void)nops;
    (void)stream;
    return zc_device_none();
}

zc_status_t zc_device_sync(zc_device_t *device, void *stream)
{
    (void)device;
    (void)stream;
    return zc_device_none();
}

zc_status_t zc_device_alloc(size_t bytes, void *stream, void **ptr)
{
    (void)bytes;
    (void)stream;
    (void)ptr;
    return zc_device_none();
}

void zc_device_free(void *ptr, void *stream)
{
    (void)ptr;
    (void)stream;
}

zc_status_t zc_device_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst;
    (void)src;
    (void)bytes;
    (void)stream;
    return zc_device_none();
}

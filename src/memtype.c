/* Memory-type checks, so that device pointers never reach host copies. */
#include "config.h"

#include <pthread.h>

#include "memtype.h"
#include "status.h"
#ifdef HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

static pthread_once_t zc_cuda_once = PTHREAD_ONCE_INIT;
static int zc_cuda_count;

static void zc_cuda_probe(void)
{
#ifdef HAVE_CUDA
    zc_cuda_count = zc_cuda_device_count();
#endif
}

int zc_cuda_devices(void)
{
    pthread_once(&zc_cuda_once, zc_cuda_probe);
    return zc_cuda_count;
}

zc_status_t zc_memtype_check_host_path(const void *buf, zc_memtype_t memtype, const char *arg)
{
    switch (memtype) {
    case ZC_MEM_HOST:
#ifdef HAVE_CUDA
        if (buf && zc_cuda_devices() > 0 && zc_cuda_pointer_is_device(buf))
            return zc_error(ZC_ERR_INVALID_ARG, "%s: is device memory but memtype is ZC_MEM_HOST",
                            arg);
#endif
        return ZC_OK;
    case ZC_MEM_CUDA:
#ifdef HAVE_CUDA
        if (zc_cuda_devices() == 0)
            return zc_error(ZC_ERR_UNSUPPORTED, "memtype: ZC_MEM_CUDA but no CUDA device is visible");
        if (buf && !zc_cuda_pointer_is_device(buf))
            return zc_error(ZC_ERR_INVALID_ARG, "%s: is host memory but memtype is ZC_MEM_CUDA",
                            arg);
        return zc_error(ZC_ERR_UNSUPPORTED,
                        "memtype: ZC_MEM_CUDA needs the NCCL device path, not in this release");
#else
        return zc_error(ZC_ERR_UNSUPPORTED,
                        "memtype: ZC_MEM_CUDA but libzcomm was built without CUDA");
#endif
    }
    return zc_error(ZC_ERR_INVALID_ARG, "memtype: %d is not a zc_memtype_t", (int)memtype);
}

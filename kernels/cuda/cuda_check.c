/* Whether a buffer is device memory, and how many CUDA devices there are:
 * the CUDA runtime's answers behind checks every layer above may ask
 * (see cuda_check.h).  Built in every configuration. */
#include "config.h"

#include <pthread.h>

#include "kernels/cuda/cuda_check.h"
#include "src/common/status.h"
#ifdef HAVE_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

static pthread_once_t zc_cuda_once = PTHREAD_ONCE_INIT;
static int zc_cuda_count;         /* 0 when the runtime cannot count */
static char zc_cuda_problem[256]; /* why it cannot, when a driver is there */

static void zc_cuda_probe(void)
{
#ifdef HAVE_CUDA
    zc_cuda_count = zc_cuda_device_probe(zc_cuda_problem, sizeof zc_cuda_problem);
    if (zc_cuda_count < 0)
        zc_cuda_count = 0;
#endif
}

int zc_cuda_devices(void)
{
    pthread_once(&zc_cuda_once, zc_cuda_probe);
    return zc_cuda_count;
}

const char *zc_cuda_unusable(void)
{
    pthread_once(&zc_cuda_once, zc_cuda_probe);
    return zc_cuda_problem[0] ? zc_cuda_problem : NULL;
}

/* Device memory (or a device) as the caller says, else the error. */
zc_status_t zc_memtype_check_device(const void *buf, const char *arg)
{
#ifdef HAVE_CUDA
    if (zc_cuda_devices() == 0 && zc_cuda_unusable())
        return zc_error(ZC_ERR_UNSUPPORTED, "memtype: ZC_MEM_CUDA but CUDA cannot be used: %s",
                        zc_cuda_unusable());
    if (zc_cuda_devices() == 0)
        return zc_error(ZC_ERR_UNSUPPORTED, "memtype: ZC_MEM_CUDA but no CUDA device is visible");
    if (buf && !zc_cuda_pointer_is_device(buf))
        return zc_error(ZC_ERR_INVALID_ARG, "%s: is host memory but memtype is ZC_MEM_CUDA", arg);
    return ZC_OK;
#else
    (void)buf;
    (void)arg;
    return zc_error(ZC_ERR_UNSUPPORTED, "memtype: ZC_MEM_CUDA but libzcomm was built without CUDA");
#endif
}

zc_status_t zc_memtype_check_host(const void *buf, const char *arg)
{
#ifdef HAVE_CUDA
    if (buf && zc_cuda_devices() > 0 && zc_cuda_pointer_is_device(buf))
        return zc_error(ZC_ERR_INVALID_ARG, "%s: is device memory but memtype is ZC_MEM_HOST", arg);
#else
    (void)buf;
    (void)arg;
#endif
    return ZC_OK;
}

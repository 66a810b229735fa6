/* What this build of the library is: its version and features. */
#include "config.h"

#include "zcomm.h"

int zc_get_version(void)
{
    return ZC_VERSION;
}

unsigned zc_get_features(void)
{
    unsigned features = 0;
#ifdef HAVE_VERBS
    features |= ZC_FEATURE_VERBS;
#endif
#ifdef HAVE_CUDA
    features |= ZC_FEATURE_CUDA;
#endif
    /* Reported when the backend is built, not when configure merely found
     * the library: src/core/device_nccl.c is built exactly when HAVE_NCCL is set. */
#ifdef HAVE_NCCL
    features |= ZC_FEATURE_NCCL;
#endif
    /* kernels/cudnn/attn_cudnn.c is built exactly when HAVE_CUDNN is set */
#ifdef HAVE_CUDNN
    features |= ZC_FEATURE_CUDNN;
#endif
    return features;
}

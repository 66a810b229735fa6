/* What this build of the library is: version, features, data types. */
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
     * the library: transport/nccl is built exactly when HAVE_NCCL is set;
     * cuDNN SDPA is not written yet, so ZC_FEATURE_CUDNN stays off. */
#ifdef HAVE_NCCL
    features |= ZC_FEATURE_NCCL;
#endif
    return features;
}

static const struct {
    const char *name;
    size_t size;
} zc_datatypes[ZC_DTYPE_COUNT] = {
    [ZC_BYTE] = {"byte", 1},         [ZC_FLOAT32] = {"float32", 4},
    [ZC_FLOAT16] = {"float16", 2},   [ZC_BFLOAT16] = {"bfloat16", 2},
    [ZC_INT32] = {"int32", 4},       [ZC_INT64] = {"int64", 8},
};

size_t zc_datatype_size(zc_datatype_t dtype)
{
    return ((unsigned)dtype < ZC_DTYPE_COUNT) ? zc_datatypes[dtype].size : 0;
}

const char *zc_datatype_name(zc_datatype_t dtype)
{
    return ((unsigned)dtype < ZC_DTYPE_COUNT) ? zc_datatypes[dtype].name : "unknown";
}

/* zc_datatype_t: names and element sizes, which every layer asks. */
#include "config.h"

#include <stddef.h>

#include "zcomm.h"

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

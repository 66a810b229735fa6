/* What every bootstrap implementation provides (see bootstrap.h). */
#ifndef ZC_BOOTSTRAP_IMPL_H
#define ZC_BOOTSTRAP_IMPL_H

#include "src/core/bootstrap.h"

struct zc_bootstrap {
    int size;
    zc_status_t (*allgather)(zc_bootstrap_t *bs, const void *send, void *recv, size_t len);
    void (*destroy)(zc_bootstrap_t *bs);
};

#endif

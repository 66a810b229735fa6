/* Bootstrap front end and the out-of-band (caller's allgather) flavour. */
#include "config.h"

#include <stdlib.h>

#include "src/core/bootstrap_impl.h"
#include "src/common/status.h"

typedef struct {
    zc_bootstrap_t base;
    zc_oob_t oob;
} zc_bs_oob_t;

zc_status_t zc_bootstrap_allgather(zc_bootstrap_t *bs, const void *send, void *recv, size_t len)
{
    if (len > ZC_BOOTSTRAP_MAX_BLOB)
        return zc_error(ZC_ERR_INTERNAL, "bootstrap blob of %zu bytes is over the limit", len);
    return bs->allgather(bs, send, recv, len);
}

void zc_bootstrap_destroy(zc_bootstrap_t *bs)
{
    if (bs)
        bs->destroy(bs);
}

static zc_status_t zc_bs_oob_allgather(zc_bootstrap_t *base, const void *send, void *recv,
                                       size_t len)
{
    zc_bs_oob_t *bs = (zc_bs_oob_t *)base;
    int rc = bs->oob.allgather(send, recv, len, bs->oob.ctx);

    if (rc != 0)
        return zc_error(ZC_ERR_PEER_FAILED, "the out-of-band allgather callback returned %d", rc);
    return ZC_OK;
}

static void zc_bs_oob_destroy(zc_bootstrap_t *bs)
{
    free(bs);
}

zc_status_t zc_bootstrap_oob_create(const zc_oob_t *oob, zc_bootstrap_t **bs_out)
{
    zc_bs_oob_t *bs = calloc(1, sizeof(*bs));

    if (!bs)
        return zc_error(ZC_ERR_NO_MEMORY, "cannot allocate the bootstrap");

    bs->base.size = oob->size;
    bs->base.allgather = zc_bs_oob_allgather;
    bs->base.destroy = zc_bs_oob_destroy;
    bs->oob = *oob;
    *bs_out = &bs->base;
    return ZC_OK;
}

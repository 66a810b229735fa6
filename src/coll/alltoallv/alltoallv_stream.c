/* zc_remap_alltoallv_stream: the remap alltoallv of device memory, one
 * group of NCCL sends and receives enqueued on the caller's CUDA stream
 * (src/core/device.h), after the same count agreement as the host form. */
#include "config.h"

#include <stdlib.h>

#include "src/coll/alltoallv/alltoallv.h"
#include "src/common/status.h"
#include "src/core/device.h"

zc_status_t zc_remap_alltoallv_stream(const void *sendbuf, const int64_t *sendcounts,
                                      const int64_t *sdispls, void *recvbuf,
                                      const int64_t *recvcounts, const int64_t *rdispls,
                                      zc_datatype_t dtype, zc_comm_h comm, void *stream)
{
    size_t elem = zc_datatype_size(dtype);
    zc_group_t g = {0};
    zc_device_t *dev;
    int64_t check;
    int me;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(elem != 0, "dtype: %d is not a zc_datatype_t", (int)dtype);
    ZC_CHECK(zc_alltoallv_check_counts(sendcounts, sdispls, comm->size, elem, sendbuf,
                                       "sendcounts", "sdispls", "sendbuf"));
    ZC_CHECK(zc_alltoallv_check_counts(recvcounts, rdispls, comm->size, elem, recvbuf,
                                       "recvcounts", "rdispls", "recvbuf"));
    check = comm->settings.alltoallv_check;
    ZC_CHECK(zc_stream_begin(comm, sendbuf, "sendbuf", recvbuf, "recvbuf", &dev));
    if (check)
        ZC_CHECK(zc_alltoallv_agree(comm, comm->coll_seq++, sendcounts, recvcounts, elem));
    me = comm->rank;
    ZC_CHECK(zc_device_copy(dev, (char *)recvbuf + rdispls[me] * elem,
                            (const char *)sendbuf + sdispls[me] * elem,
                            (size_t)recvcounts[me] * elem, stream));
    for (int r = 0; r < comm->size; r++) {
        if (r == me)
            continue;
        if (recvcounts[r] > 0)
            zc_group_add(&g, ZC_REQ_RECV, (char *)recvbuf + rdispls[r] * elem,
                         (size_t)recvcounts[r] * elem, r);
        if (sendcounts[r] > 0)
            zc_group_add(&g, ZC_REQ_SEND, (const char *)sendbuf + sdispls[r] * elem,
                         (size_t)sendcounts[r] * elem, r);
    }
    zc_status_t st = zc_group_flush(&g, dev, stream);
    free(g.ops);
    return st;
}

/* Stream-ordered point-to-point transfers of device memory, as groups of
 * NCCL sends and receives enqueued on the caller's CUDA stream
 * (src/core/device.h), and the calls that set up and drain the device
 * backend. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "src/core/comm.h"
#include "src/core/device.h"
#include "src/core/memtype.h"
#ifdef HAVE_CUDA
#include "kernels/cuda/cuda_mem.h"
#endif

zc_status_t zc_comm_cuda_init(zc_comm_h comm)
{
    zc_device_t *dev;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    return zc_stream_begin(comm, NULL, "", NULL, "", &dev);
}

zc_status_t zc_stream_synchronize(zc_comm_h comm, void *stream)
{
    zc_device_t *dev;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    if (!comm->device) {
        /* Nothing was enqueued on comm and zc_comm_cuda_init was not
         * called: there is no NCCL work to watch.  Creating the NCCL
         * communicator here, a collective step, would make a lone
         * synchronize wait for every rank; wait for the stream alone. */
        ZC_CHECK(zc_memtype_check_device(NULL, ""));
#ifdef HAVE_CUDA
        return zc_cuda_stream_sync(stream);
#else
        return zc_error(ZC_ERR_INTERNAL, "unreachable without CUDA");
#endif
    }
    ZC_CHECK(zc_stream_begin(comm, NULL, "", NULL, "", &dev));
    return zc_device_sync(dev, stream);
}

/* One side of a point-to-point call: `buf`, `count` and `peer` are named
 * with `prefix` ("send", "recv" or ""); peer -1 means no side when
 * `optional`. */
static zc_status_t zc_stream_side(const void *buf, int64_t count, size_t elem, int peer,
                                  int optional, zc_comm_h comm, const char *prefix,
                                  const char *peer_name, size_t *bytes)
{
    ZC_ARG_CHECK(count >= 0, "%scount: %lld is negative", prefix, (long long)count);
    ZC_ARG_CHECK((uint64_t)count <= (uint64_t)INT64_MAX / elem,
                 "%scount: %lld elements of %zu bytes overflow", prefix, (long long)count, elem);
    ZC_ARG_CHECK(buf != NULL || count == 0, "%sbuf: is NULL with count %lld", prefix,
                 (long long)count);
    if (optional && peer == -1)
        ZC_ARG_CHECK(count == 0, "%scount: %lld with no %s (-1)", prefix, (long long)count,
                     peer_name);
    else
        ZC_ARG_CHECK(peer >= 0 && peer < comm->size, "%s: %d is out of range 0..%d%s",
                     peer_name, peer, comm->size - 1, optional ? " (or -1: none)" : "");
    *bytes = (size_t)count * elem;
    return ZC_OK;
}

/* Both sides as one group; a side whose peer is ZC_NO_SIDE is not part of
 * the call (zc_send_stream, zc_recv_stream). */
#define ZC_NO_SIDE (-2)

static zc_status_t zc_stream_p2p(const void *sendbuf, int64_t sendcount, int dst, void *recvbuf,
                                 int64_t recvcount, int src, zc_datatype_t dtype, int optional,
                                 zc_comm_h comm, void *stream)
{
    size_t elem = zc_datatype_size(dtype), sbytes = 0, rbytes = 0;
    const char *sp = optional ? "send" : "", *rp = optional ? "recv" : "";
    zc_device_op_t ops[2];
    zc_device_t *dev;
    int n = 0;

    zc_error_clear();
    ZC_CHECK(zc_comm_check(comm));
    ZC_ARG_CHECK(elem != 0, "dtype: %d is not a zc_datatype_t", (int)dtype);
    if (dst != ZC_NO_SIDE)
        ZC_CHECK(zc_stream_side(sendbuf, sendcount, elem, dst, optional, comm, sp,
                                optional ? "dst" : "peer", &sbytes));
    if (src != ZC_NO_SIDE)
        ZC_CHECK(zc_stream_side(recvbuf, recvcount, elem, src, optional, comm, rp,
                                optional ? "src" : "peer", &rbytes));
    /* Only zc_sendrecv_stream has both sides (the others have 0 bytes on
     * one); addresses alone tell, no device needed. */
    ZC_CHECK(zc_check_disjoint(sendbuf, sbytes, "sendbuf", recvbuf, rbytes, "recvbuf"));
    ZC_CHECK(zc_stream_begin(comm, sendbuf, optional ? "sendbuf" : "buf", recvbuf,
                             optional ? "recvbuf" : "buf", &dev));
    if (src >= 0)
        ops[n++] = (zc_device_op_t){ZC_REQ_RECV, recvbuf, rbytes, src};
    if (dst >= 0)
        ops[n++] = (zc_device_op_t){ZC_REQ_SEND, (void *)sendbuf, sbytes, dst};
    return zc_device_group(dev, ops, n, stream);
}

zc_status_t zc_send_stream(const void *buf, int64_t count, zc_datatype_t dtype, int peer,
                           zc_comm_h comm, void *stream)
{
    return zc_stream_p2p(buf, count, peer, NULL, 0, ZC_NO_SIDE, dtype, 0, comm, stream);
}

zc_status_t zc_recv_stream(void *buf, int64_t count, zc_datatype_t dtype, int peer,
                           zc_comm_h comm, void *stream)
{
    return zc_stream_p2p(NULL, 0, ZC_NO_SIDE, buf, count, peer, dtype, 0, comm, stream);
}

zc_status_t zc_sendrecv_stream(const void *sendbuf, int64_t sendcount, int dst, void *recvbuf,
                               int64_t recvcount, int src, zc_datatype_t dtype, zc_comm_h comm,
                               void *stream)
{
    return zc_stream_p2p(sendbuf, sendcount, dst, recvbuf, recvcount, src, dtype, 1, comm,
                         stream);
}

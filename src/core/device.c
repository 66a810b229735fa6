/* The device backend of a communicator: creation on first use, and the
 * calls, each passed to the backend's ops (src/core/device.h). */
#include "config.h"

#include <stdlib.h>

#include "src/core/device.h"
#include "src/core/memtype.h"
#include "src/common/status.h"

zc_status_t zc_device_get(zc_comm_h comm, zc_device_t **device)
{
    if (!comm->device) {
        zc_status_t st = zc_device_create(comm);
        if (st != ZC_OK)
            return st;
    }
    if (comm->device->failed != ZC_OK)
        return zc_error(comm->device->failed, "the %s backend is unusable: %s",
                        comm->device->ops->name, comm->device->why);
    *device = comm->device;
    return ZC_OK;
}

void zc_device_release(zc_comm_h comm)
{
    if (comm->device)
        comm->device->ops->release(comm->device);
    comm->device = NULL;
}

zc_status_t zc_device_install(zc_comm_h comm, zc_device_t *device)
{
    ZC_ARG_CHECK(comm->device == NULL, "comm: already has a %s backend",
                 comm->device ? comm->device->ops->name : "");
    device->comm = comm;
    comm->device = device;
    return ZC_OK;
}

zc_status_t zc_device_check_memory(zc_comm_h comm, const void *buf, const char *arg)
{
    if (comm->device)
        return comm->device->ops->check_memory(buf, arg);
    return zc_memtype_check_device(buf, arg);
}

zc_status_t zc_device_group(zc_device_t *device, const zc_device_op_t *ops, int nops,
                            void *stream)
{
    return nops == 0 ? ZC_OK : device->ops->group(device, ops, nops, stream);
}

zc_status_t zc_device_sync(zc_device_t *device, void *stream)
{
    return device->ops->sync(device, stream);
}

void zc_device_abort(zc_device_t *device, zc_status_t status)
{
    if (device->failed == ZC_OK)
        device->ops->abort(device, status);
}

zc_status_t zc_device_alloc(zc_device_t *device, size_t bytes, void *stream, void **ptr)
{
    return device->ops->alloc(device, bytes, stream, ptr);
}

void zc_device_free(zc_device_t *device, void *ptr, void *stream)
{
    if (ptr)
        device->ops->free(device, ptr, stream);
}

zc_status_t zc_device_copy(zc_device_t *device, void *dst, const void *src, size_t bytes,
                           void *stream)
{
    return bytes == 0 ? ZC_OK : device->ops->copy(device, dst, src, bytes, stream);
}

void zc_group_add(zc_group_t *g, zc_request_kind_t kind, const void *buf, size_t bytes, int peer)
{
    if (g->error != ZC_OK)
        return;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        zc_device_op_t *ops = realloc(g->ops, sizeof(*ops) * (size_t)cap);
        if (!ops) {
            g->error = zc_error(ZC_ERR_NO_MEMORY, "cannot grow a group to %d ops", cap);
            return;
        }
        g->ops = ops;
        g->cap = cap;
    }
    g->ops[g->n++] = (zc_device_op_t){kind, (void *)buf, bytes, peer};
}

/* Enqueue the group and empty it for the next one. */
zc_status_t zc_group_flush(zc_group_t *g, zc_device_t *dev, void *stream)
{
    zc_status_t st = g->error != ZC_OK ? g->error : zc_device_group(dev, g->ops, g->n, stream);

    g->n = 0;
    return st;
}

/* Device buffers (NULL for empty ones), then the communicator's backend;
 * `sname` and `rname` name the buffers in messages. */
zc_status_t zc_stream_begin(zc_comm_h comm, const void *sendbuf, const char *sname,
                            const void *recvbuf, const char *rname, zc_device_t **dev)
{
    ZC_CHECK(zc_device_check_memory(comm, sendbuf, sname));
    ZC_CHECK(zc_device_check_memory(comm, recvbuf, rname));
    return zc_device_get(comm, dev);
}

/* Device copies of a rank's ring attention buffers: see zc_ring_attn_device.h. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "zc_ring_attn_device.h"
#ifdef HAVE_CUDA
#include <cuda_runtime.h>

static zc_status_t rad_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return ZC_OK;
    fprintf(stderr, "# %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? ZC_ERR_NO_MEMORY : ZC_ERR_TRANSPORT;
}

zc_status_t rad_device_select(int index, int *count)
{
    *count = 0;
    if (cudaGetDeviceCount(count) != cudaSuccess || *count == 0) {
        *count = 0;
        return ZC_ERR_UNSUPPORTED;
    }
    return rad_cuda(cudaSetDevice(index % *count), "cudaSetDevice");
}

/* `bytes` of device memory, filled from `host` unless it is NULL. */
static zc_status_t rad_upload(void **dev, const void *host, size_t bytes)
{
    *dev = NULL;
    if (bytes == 0)
        return ZC_OK;
    zc_status_t st = rad_cuda(cudaMalloc(dev, bytes), "cudaMalloc");
    if (st == ZC_OK && host)
        st = rad_cuda(cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    return st;
}

static zc_status_t rad_download(void *host, const void *dev, size_t bytes)
{
    if (bytes == 0)
        return ZC_OK;
    return rad_cuda(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

zc_status_t rad_device_make(const rad_batch_t *b, const rad_local_t *l, rad_device_t *d,
                            zc_ring_attn_args_t *args)
{
    int64_t rows = l->rows + l->pad;
    zc_status_t st = ZC_OK;
    void *lse = NULL;

    memset(d, 0, sizeof(*d));
    d->q_bytes = (size_t)rows * rad_row_bytes(b, 0);
    d->kv_bytes = (size_t)rows * rad_row_bytes(b, 1);
    d->lse_bytes = (size_t)rows * (size_t)b->hq * sizeof(float);
    if ((st = rad_upload(&d->q, l->q, d->q_bytes)) != ZC_OK ||
        (st = rad_upload(&d->k, l->k, d->kv_bytes)) != ZC_OK ||
        (st = rad_upload(&d->v, l->v, d->kv_bytes)) != ZC_OK ||
        (st = rad_upload(&d->dout, l->dout, d->q_bytes)) != ZC_OK ||
        (st = rad_upload(&d->out, NULL, d->q_bytes)) != ZC_OK ||
        (st = rad_upload(&d->dq, NULL, d->q_bytes)) != ZC_OK ||
        (st = rad_upload(&d->dk, NULL, d->kv_bytes)) != ZC_OK ||
        (st = rad_upload(&d->dv, NULL, d->kv_bytes)) != ZC_OK ||
        (st = rad_upload(&lse, NULL, d->lse_bytes)) != ZC_OK) {
        d->lse = lse;
        rad_device_free(d);
        return st;
    }
    d->lse = lse;
    args->memtype = ZC_MEM_CUDA;
    args->q = d->q, args->k = d->k, args->v = d->v, args->dout = d->dout;
    args->out = d->out, args->dq = d->dq, args->dk = d->dk, args->dv = d->dv;
    args->lse = d->lse;
    return ZC_OK;
}

zc_status_t rad_device_download(const rad_device_t *d, rad_local_t *l)
{
    zc_status_t st;

    if ((st = rad_download(l->out, d->out, d->q_bytes)) != ZC_OK ||
        (st = rad_download(l->lse, d->lse, d->lse_bytes)) != ZC_OK ||
        (st = rad_download(l->dq, d->dq, d->q_bytes)) != ZC_OK ||
        (st = rad_download(l->dk, d->dk, d->kv_bytes)) != ZC_OK)
        return st;
    return rad_download(l->dv, d->dv, d->kv_bytes);
}

void rad_device_free(rad_device_t *d)
{
    void *all[] = {d->q, d->k, d->v, d->dout, d->out, d->dq, d->dk, d->dv, d->lse};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i])
            cudaFree(all[i]);
    memset(d, 0, sizeof(*d));
}
#else
zc_status_t rad_device_select(int index, int *count)
{
    (void)index;
    *count = 0;
    return ZC_ERR_UNSUPPORTED;
}

zc_status_t rad_device_make(const rad_batch_t *b, const rad_local_t *l, rad_device_t *d,
                            zc_ring_attn_args_t *args)
{
    (void)b, (void)l, (void)args;
    memset(d, 0, sizeof(*d));
    return ZC_ERR_UNSUPPORTED;
}

zc_status_t rad_device_download(const rad_device_t *d, rad_local_t *l)
{
    (void)d, (void)l;
    return ZC_ERR_UNSUPPORTED;
}

void rad_device_free(rad_device_t *d)
{
    memset(d, 0, sizeof(*d));
}
#endif

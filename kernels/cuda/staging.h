/* Pinned staging for the small host arrays a kernel call sends to the
 * device (cu_seqlens copies, block maps, zigzag ranges): a process-wide
 * pool of slots, each a pinned host buffer, a device buffer of the same
 * capacity and an event.  A call fills a slot's host buffer, stages it
 * (one truly asynchronous copy), enqueues its kernels and releases the
 * slot on its stream; the slot is handed out again only once the event
 * recorded there has completed, so neither buffer is rewritten while the
 * stream may still read it.
 *
 * Built with --with-cuda; it calls only kernels/cuda/cuda_mem.h, so
 * tests/test_cuda_staging runs it on any machine against a fake of that
 * header.  Thread-safe. */
#ifndef ZC_KERNELS_CUDA_STAGING_H
#define ZC_KERNELS_CUDA_STAGING_H

#include <stddef.h>

#include "zcomm.h"

/* Slots in the pool, all devices together.  An acquire that finds every
 * slot busy waits for the oldest released one instead of failing. */
#define ZC_CUDA_STAGING_SLOTS 16
/* Smallest capacity of a slot; capacities are powers of two. */
#define ZC_CUDA_STAGING_MIN_BYTES 4096

typedef struct zc_cuda_staging_slot zc_cuda_staging_slot_t;

/* A slot of the current device with room for `bytes`, held by the caller
 * until zc_cuda_staging_release.  Reuses a slot whose last release has
 * completed, grows one, adds one below the cap, or waits for the oldest
 * release (or, all slots held, for a release).  ZC_ERR_NO_MEMORY and the
 * other CUDA statuses name the call that failed; nothing is leaked. */
zc_status_t zc_cuda_staging_acquire(size_t bytes, zc_cuda_staging_slot_t **slot);

/* The slot's pinned host buffer, for the caller to fill, and the device
 * buffer the stage copies it to (at least the bytes acquired each). */
void *zc_cuda_staging_host(const zc_cuda_staging_slot_t *slot);
void *zc_cuda_staging_dev(const zc_cuda_staging_slot_t *slot);

/* Enqueue the copy of the first `bytes` (at most the bytes acquired) of
 * the host buffer to the device buffer on `stream`.  The host buffer must
 * not be written after this. */
zc_status_t zc_cuda_staging_stage(zc_cuda_staging_slot_t *slot, size_t bytes, void *stream);

/* Give the slot back once everything that reads it is enqueued on
 * `stream` (on error paths too; NULL is a no-op): its event is recorded
 * there, and the slot is reused once that is done.  A slot never staged is
 * free at once.  If the record fails, the stream is synchronized instead
 * (the slot is dropped if that fails too) and the record's error returned. */
zc_status_t zc_cuda_staging_release(zc_cuda_staging_slot_t *slot, void *stream);

/* zc_cuda_staging_release at the end of a call whose status is `st`: `st`,
 * or the release's status if that is the first failure. */
zc_status_t zc_cuda_staging_finish(zc_cuda_staging_slot_t *slot, void *stream, zc_status_t st);

/* Wait for every released slot and free the pool's memory and events; no
 * slot may be held.  Nothing calls it inside the library (there is no
 * CUDA teardown in libzcomm, and CUDA must not be called from atexit
 * handlers): the pool lives until the process exits, when the driver
 * frees it.  Tests and leak checkers call it; the pool may be used again
 * afterwards. */
void zc_cuda_staging_teardown(void);

#endif

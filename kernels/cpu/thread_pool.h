/* A small fork/join pool for the CPU kernels: ZC_NUM_THREADS threads (the
 * caller is thread 0) that sleep between jobs, never spin. */
#ifndef ZC_KERNELS_CPU_THREAD_POOL_H
#define ZC_KERNELS_CPU_THREAD_POOL_H

#include <stdint.h>

/* Threads a job runs on (the caller included); creates the pool on first use. */
int zc_cpu_pool_threads(void);

/* body(ctx, begin, end, thread) over [0, n) in chunks of `chunk` items,
 * handed out dynamically to every pool thread; returns when all are done.
 * Jobs from several caller threads run one after the other. */
typedef void (*zc_cpu_for_fn_t)(void *ctx, int64_t begin, int64_t end, int thread);
void zc_cpu_parallel_for(int64_t n, int64_t chunk, zc_cpu_for_fn_t body, void *ctx);

#endif

/* The test cases of the stream-ordered transfer calls, written once for two
 * kinds of memory: CUDA device memory and NCCL on a GPU machine
 * (tests/test_gpu), and the emulated device backend's host memory here
 * (tests/test_device_emu).  So the cases the GPU machine runs have run
 * here too, against the same library code above NCCL. */
#ifndef ZC_TESTS_STREAM_CASES_H
#define ZC_TESTS_STREAM_CASES_H

#include <stddef.h>

#include "zcomm.h"

typedef struct {
    /* A communicator of `nranks` over two nodes (the first half of the
     * ranks on one), its device backend up, and the stream to use. */
    int (*init)(int rank, int nranks, int timeout_ms, zc_comm_h *comm, void **stream);
    void *(*alloc)(size_t bytes);               /* NULL on failure; 0 bytes allowed */
    int (*upload)(void *dst, const void *host, size_t bytes);   /* 0 on success */
    int (*download)(void *host, const void *src, size_t bytes); /* 0 on success */
    void (*release)(void *buf);
} sc_memory_t;

/* mp_rank_fn cases; `arg` is the sc_memory_t.  Each returns 0 when every
 * check of the rank passed (failures are printed on stderr). */

/* Ring exchange with zc_sendrecv_stream, and zc_send_stream/zc_recv_stream
 * pairs, 0 B to 1 MiB + 3 B, byte-exact. */
int sc_p2p(int rank, int nranks, void *arg);
/* zc_remap_alltoallv_stream equals zc_remap_alltoallv on the host (some
 * blocks empty); then counts that disagree: ZC_ERR_MISMATCH everywhere. */
int sc_alltoallv(int rank, int nranks, void *arg);
/* zc_routed_sendrecv_stream between the two nodes (one transfer empty)
 * equals zc_routed_sendrecv on the host and the senders' data; set
 * ZC_ROUTED_MIN_BYTES and ZC_ROUTED_CHUNK low to split and pipeline.
 * Then a list that differs on one rank: ZC_ERR_MISMATCH everywhere, and
 * the communicator still works. */
int sc_routed(int rank, int nranks, void *arg);
/* zc_remap_alltoallv_layouts_stream equals the host form and the batch's
 * tokens for every move of the plans of tests/move_common.h (2 nodes), with
 * tokens of 12 B (packed) and 4100 B (runs alone); then another plan on one
 * rank: ZC_ERR_MISMATCH everywhere, and the communicator still works. */
int sc_layouts(int rank, int nranks, void *arg);

#endif

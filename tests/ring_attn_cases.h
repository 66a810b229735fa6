/* What the multi-rank ring attention tests share (tests/test_ring_attn,
 * tests/test_ring_attn_table): the modes side by side, ranks on two
 * emulated nodes from 2 ranks on (the modes are tests/ring_attn_modes.h's), and the ways a case or a rank reports a
 * failure.  Header-only. */
#ifndef ZC_TESTS_RING_ATTN_CASES_H
#define ZC_TESTS_RING_ATTN_CASES_H

#include <stdio.h>
#include <string.h>

#include "mp.h"
#include "ring_attn_modes.h"
#include "zcomm.h"

/* Rank `rank` of `nranks`, the upper half on a second emulated node. */
static inline int comm_init(int rank, int nranks, zc_comm_h *comm)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;

    config.node_id = nranks >= 2 && rank >= nranks / 2 ? "ra-node-b" : "ra-node-a";
    return mp_comm_init(rank, nranks, &config, comm) == ZC_OK ? 0 : -1;
}

/* In a case function with a result `r` (failed, why) and a label `out`. */
#define CASE_FAIL(...)                                                        \
    do {                                                                      \
        r->failed = 1;                                                        \
        snprintf(r->why, sizeof(r->why), __VA_ARGS__);                        \
        goto out;                                                             \
    } while (0)

/* In a rank function with `rank`: call returns status, its detail naming word. */
#define EXPECT(call, status, word)                                                         \
    do {                                                                                   \
        zc_status_t st_ = (call);                                                          \
        MP_CHECK(st_ == (status) && strstr(zc_get_last_error(), (word)) != NULL,           \
                 "rank %d: %.50s returned %s (%s), expected %s naming %s", rank, #call,     \
                 zc_strerror(st_), zc_get_last_error(), zc_strerror(status), (word));     \
    } while (0)

#endif

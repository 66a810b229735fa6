/* The zigzag chunk rule, shared by the planner (src/plan/zigzag.c, the
 * attention layout) and the zigzag copy kernels that lay a sequence out in
 * it (kernels/cuda/attn_gpu.c): one definition, so both cut the same. */
#ifndef ZC_ZIGZAG_H
#define ZC_ZIGZAG_H

#include <stdint.h>

/* Chunk c of a sequence of n tokens cut into 2G chunks of an even ring:
 * remainders go one token each to the lowest chunks, so chunks differ by at
 * most one token (no padding). */
static inline void zc_zigzag_chunk(int64_t n, int g, int c, int64_t *begin, int64_t *end)
{
    int64_t nchunks = 2 * (int64_t)g;
    int64_t base = n / nchunks, rem = n % nchunks;

    *begin = c * base + (c < rem ? c : rem);
    *end = *begin + base + (c < rem ? 1 : 0);
}

#endif

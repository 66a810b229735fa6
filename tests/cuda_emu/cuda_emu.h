/* Control of the CUDA emulation (cuda_emu.cc) from the tests, in C. */
#ifndef ZC_TESTS_CUDA_EMU_CUDA_EMU_H
#define ZC_TESTS_CUDA_EMU_CUDA_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The order in which a block's runnable threads take turns: the lowest
 * thread index first (each thread runs until it waits), or a choice drawn
 * from a generator seeded with `seed` at every switch. */
typedef enum { ZC_EMU_THREAD_ORDER, ZC_EMU_RANDOM } zc_emu_schedule_t;
void zc_emu_set_schedule(zc_emu_schedule_t schedule, uint64_t seed);

/* The kernels' dynamic shared array (defined where they are included): the
 * emulation fills it with NaN before every block. */
void zc_emu_set_shared(void *base, size_t bytes);

/* Why the last failed launch failed ("" if none did), e.g. which barrier
 * only part of a block reached. */
const char *zc_emu_last_error(void);

/* Totals since the start: blocks run and thread switches made. */
void zc_emu_counters(uint64_t *blocks, uint64_t *switches);
/* Totals since the start: warp mma.sync and ldmatrix instructions, and the
 * bank conflicts of the ldmatrix reads (extra shared-memory wavefronts:
 * rows of one 8x8 matrix in the same 16-byte slot of a 128-byte line). */
void zc_emu_tensor_counters(uint64_t *mma, uint64_t *ldmatrix, uint64_t *conflicts);

#ifdef __cplusplus
}
#endif

#endif

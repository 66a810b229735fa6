/* Small kernels that break the rules on purpose (emu_selftest.cc): the
 * emulation must refuse each of them, or tell the schedules apart. */
#ifndef ZC_TESTS_CUDA_EMU_EMU_SELFTEST_H
#define ZC_TESTS_CUDA_EMU_EMU_SELFTEST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Each returns the launch's error (non-zero: refused) and sets *why to the
 * emulation's explanation. */
int zc_emu_selftest_partial_barrier(const char **why);
int zc_emu_selftest_divergent_barriers(const char **why);
int zc_emu_selftest_partial_shuffle(const char **why);
/* Non-zero when the thread-order and the random schedule of a kernel that
 * lacks a barrier give different results. */
int zc_emu_selftest_race(void);
/* 0 when every out-of-limits launch is refused and an in-limits one runs;
 * *why names the first one that was not. */
int zc_emu_selftest_limits(const char **why);
/* 0 when shuffles move the values the CUDA documentation says. */
int zc_emu_selftest_shuffles(void);
/* 0 when mma.sync m16n8k16 (bf16 and fp16) gives A B + C for fragments
 * laid out as the PTX ISA says, and for A and B loaded from shared memory
 * with ldmatrix (x4, and x2.trans) as the kernels do; else *why says where. */
int zc_emu_selftest_mma(const char **why);
/* 0 when ldmatrix x1, x2, x4, plain and .trans, gives every lane the
 * elements the PTX ISA says. */
int zc_emu_selftest_ldmatrix(const char **why);
/* 0 when a cp.async destination reads NaN until the wait_group that covers
 * it, then the source bytes, zero-filled past src_bytes. */
int zc_emu_selftest_cp_async(void);
/* Bank conflicts counted for one ldmatrix.x4 of rows 128 bytes apart, plain
 * (*plain, 4 x 7 expected) and XOR-swizzled (*swizzled, 0); non-zero when
 * a launch failed. */
int zc_emu_selftest_bank_conflicts(uint64_t *plain, uint64_t *swizzled);

#ifdef __cplusplus
}
#endif

#endif

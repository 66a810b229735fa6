/* Small kernels that break the rules on purpose (emu_selftest.cc): the
 * emulation must refuse each of them, or tell the schedules apart. */
#ifndef ZC_TESTS_CUDA_EMU_EMU_SELFTEST_H
#define ZC_TESTS_CUDA_EMU_EMU_SELFTEST_H

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

#ifdef __cplusplus
}
#endif

#endif

/* The remap problem (paper Eq. (2), counting each rank's sends and receives)
 * as a generic LP/MIP for GLPK: the reference the exact combinatorial
 * solver is checked and timed against.  Only tests and benchmarks link it. */
#ifndef ZC_PLAN_LP_REFERENCE_H
#define ZC_PLAN_LP_REFERENCE_H

#include <stdint.h>

/* Optimal largest per-rank cost moving `before` to `after`.  integral != 0
 * solves the MIP (small instances only).  Returns 0, or -1 if GLPK fails. */
int zc_lp_remap(int nranks, int ppn, const int64_t *before, const int64_t *after,
                double b_intra, double b_inter, int integral, double *objective);

#endif

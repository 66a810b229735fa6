/* What every nccl-tests-style benchmark of libzcomm shares: the -b -e -f
 * -n -w -c -d flags, communicator setup from the launcher's environment,
 * cross-rank reductions for the timing, and the table's rows. */
#ifndef ZC_TOOLS_PERF_COMMON_H
#define ZC_TOOLS_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "zcomm.h"

typedef struct {
    size_t min_bytes;      /* -b */
    size_t max_bytes;      /* -e */
    double factor;         /* -f: multiply the size by this each row */
    size_t step_bytes;     /* -i: or add this (when non-zero) */
    int iters;             /* -n */
    int warmup;            /* -w */
    int check;             /* -c: check the data (1) or not (0) */
    zc_datatype_t dtype;   /* -d */
} zc_perf_opts_t;

/* Parse the common flags; `extra` lists further option letters that
 * `on_extra(opt, optarg, ctx)` takes (return non-zero on a bad value).
 * Prints usage and exits on error or -h. */
void zc_perf_parse(int argc, char **argv, const char *tool, const char *extra_usage,
                   const char *extra, int (*on_extra)(int opt, const char *arg, void *ctx),
                   void *ctx, zc_perf_opts_t *opts);
/* The same with long options of the tool's: each maps to one of `extra`'s
 * letters (struct option's val), ended by a zeroed entry. */
struct option;
void zc_perf_parse_long(int argc, char **argv, const char *tool, const char *extra_usage,
                        const char *extra, const struct option *extra_long,
                        int (*on_extra)(int opt, const char *arg, void *ctx), void *ctx,
                        zc_perf_opts_t *opts);

/* Communicator from the launcher's environment (mpirun, srun, torchrun or
 * ZC_RANK/ZC_SIZE); exits with a message on failure. */
zc_comm_h zc_perf_init(const char *tool);

/* Rank 0 gets the maximum (sum) over all ranks; others get their own. */
double zc_perf_max(zc_comm_h comm, double value);
int64_t zc_perf_sum(zc_comm_h comm, int64_t value);

/* The table: header, one row per size, and the closing summary; only rank
 * 0 prints.  busbw = algbw * bus_factor (nccl-tests' definitions). */
void zc_perf_print_header(zc_comm_h comm, const char *tool, const zc_perf_opts_t *opts);
void zc_perf_print_row(zc_comm_h comm, size_t bytes, size_t count, zc_datatype_t dtype,
                       double seconds, double bus_factor, int64_t wrong);
/* Returns the process exit status: non-zero if any data was wrong. */
int zc_perf_print_summary(zc_comm_h comm);

/* Monotonic seconds. */
double zc_perf_now(void);
/* Non-zero when `name` is one of the comma-separated names of `list`, or
 * list is "all". */
int zc_perf_listed(const char *list, const char *name);
/* Print "TOOL: WHAT failed: status: detail" and exit 1. */
void zc_perf_die(const char *tool, const char *what, zc_status_t st) __attribute__((noreturn));

/* Next size of the sweep. */
size_t zc_perf_next_size(const zc_perf_opts_t *opts, size_t bytes);

/* Fill / check `bytes` of test data of message `salt` from rank `src`;
 * check returns how many elements of `dtype` are wrong. */
void zc_perf_fill(void *buf, size_t bytes, int src, int salt);
int64_t zc_perf_check(const void *buf, size_t bytes, size_t elem, int src, int salt);

#endif

/* Shared machinery of the nccl-tests-style benchmarks. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "perf_common.h"

static double zc_perf_bw_sum;
static int zc_perf_rows;
static int64_t zc_perf_wrong_total;

static size_t zc_perf_parse_size(const char *str)
{
    char *end;
    double v = strtod(str, &end);

    switch (*end) {
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    case 'M': case 'm': v *= 1024.0 * 1024; break;
    case 'K': case 'k': v *= 1024.0; break;
    case '\0': break;
    default: return (size_t)-1;
    }
    return v < 0 ? (size_t)-1 : (size_t)v;
}

static const struct {
    const char *name;
    zc_datatype_t dtype;
} zc_perf_types[] = {
    {"float", ZC_FLOAT32}, {"float32", ZC_FLOAT32}, {"half", ZC_FLOAT16}, {"float16", ZC_FLOAT16},
    {"bfloat16", ZC_BFLOAT16}, {"int8", ZC_BYTE}, {"uint8", ZC_BYTE}, {"byte", ZC_BYTE},
    {"int32", ZC_INT32}, {"int", ZC_INT32}, {"int64", ZC_INT64},
};

static void zc_perf_usage(const char *tool, const char *extra_usage, int status)
{
    fprintf(status ? stderr : stdout,
            "usage: %s [options]\n"
            "  -b SIZE   smallest message (default 8; K, M, G suffixes)\n"
            "  -e SIZE   largest message (default 64M)\n"
            "  -f FACTOR multiply the size by FACTOR each row (default 2)\n"
            "  -i BYTES  add BYTES each row instead\n"
            "  -n ITERS  timed iterations per size (default 20)\n"
            "  -w ITERS  warm-up iterations per size (default 5)\n"
            "  -c 0|1    check the data (default 1)\n"
            "  -d TYPE   float, half, bfloat16, int8, int32, int64 (default float)\n"
            "%s"
            "Launch with mpirun, srun or torchrun, or set ZC_RANK, ZC_SIZE and ZC_MASTER_PORT.\n",
            tool, extra_usage ? extra_usage : "");
    exit(status);
}

void zc_perf_parse(int argc, char **argv, const char *tool, const char *extra_usage,
                   const char *extra, int (*on_extra)(int opt, const char *arg, void *ctx),
                   void *ctx, zc_perf_opts_t *opts)
{
    zc_perf_parse_long(argc, argv, tool, extra_usage, extra, NULL, on_extra, ctx, opts);
}

void zc_perf_parse_long(int argc, char **argv, const char *tool, const char *extra_usage,
                        const char *extra, const struct option *extra_long,
                        int (*on_extra)(int opt, const char *arg, void *ctx), void *ctx,
                        zc_perf_opts_t *opts)
{
    char optstring[64];
    int opt, nlong = 0;
    struct option longopts[16] = {{"help", no_argument, NULL, 'h'}};

    *opts = (zc_perf_opts_t){.min_bytes = 8, .max_bytes = 64 << 20, .factor = 2.0, .iters = 20,
                             .warmup = 5, .check = 1, .dtype = ZC_FLOAT32};
    snprintf(optstring, sizeof(optstring), "b:e:f:i:n:w:c:d:h%s", extra ? extra : "");
    while (extra_long && extra_long[nlong].name && nlong + 2 < 16) {
        longopts[nlong + 1] = extra_long[nlong];
        nlong++;
    }

    while ((opt = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
        switch (opt) {
        case 'b': opts->min_bytes = zc_perf_parse_size(optarg); break;
        case 'e': opts->max_bytes = zc_perf_parse_size(optarg); break;
        case 'f': opts->factor = atof(optarg); break;
        case 'i': opts->step_bytes = zc_perf_parse_size(optarg); break;
        case 'n': opts->iters = atoi(optarg); break;
        case 'w': opts->warmup = atoi(optarg); break;
        case 'c': opts->check = atoi(optarg); break;
        case 'd': {
            size_t i, n = sizeof(zc_perf_types) / sizeof(zc_perf_types[0]);
            for (i = 0; i < n && strcasecmp(optarg, zc_perf_types[i].name) != 0; i++)
                ;
            if (i == n) {
                fprintf(stderr, "%s: -d %s: unknown data type\n", tool, optarg);
                zc_perf_usage(tool, extra_usage, 2);
            }
            opts->dtype = zc_perf_types[i].dtype;
            break;
        }
        case 'h': zc_perf_usage(tool, extra_usage, 0); break;
        default:
            if (on_extra && strchr(extra ? extra : "", opt) && on_extra(opt, optarg, ctx) == 0)
                break;
            zc_perf_usage(tool, extra_usage, 2);
        }
    }
    if (opts->min_bytes == (size_t)-1 || opts->max_bytes == (size_t)-1 ||
        opts->min_bytes > opts->max_bytes || opts->iters < 1 || opts->warmup < 0 ||
        (opts->step_bytes == 0 && opts->factor <= 1.0) || opts->step_bytes == (size_t)-1) {
        fprintf(stderr, "%s: bad sizes, factor or iteration counts\n", tool);
        zc_perf_usage(tool, extra_usage, 2);
    }
}

zc_comm_h zc_perf_init(const char *tool)
{
    zc_comm_h comm;
    zc_status_t st = zc_comm_init_env(&comm, NULL);

    if (st != ZC_OK) {
        fprintf(stderr, "%s: cannot create the communicator: %s: %s\n", tool, zc_strerror(st),
                zc_get_last_error());
        exit(1);
    }
    return comm;
}

/* Gather one value per rank at rank 0 (the benchmarks' only reduction). */
static void zc_perf_gather(zc_comm_h comm, const void *value, void *all, size_t len)
{
    int rank, size;

    zc_comm_rank(comm, &rank);
    zc_comm_size(comm, &size);
    if (rank != 0) {
        zc_request_h req;
        if (zc_send(value, (int64_t)len, ZC_BYTE, ZC_MEM_HOST, 0, comm, &req) != ZC_OK ||
            zc_wait(&req) != ZC_OK) {
            fprintf(stderr, "rank %d: cannot report to rank 0: %s\n", rank, zc_get_last_error());
            exit(1);
        }
        return;
    }
    memcpy(all, value, len);
    for (int r = 1; r < size; r++) {
        zc_request_h req;
        if (zc_recv((char *)all + len * (size_t)r, (int64_t)len, ZC_BYTE, ZC_MEM_HOST, r, comm,
                    &req) != ZC_OK ||
            zc_wait(&req) != ZC_OK) {
            fprintf(stderr, "rank 0: no report from rank %d: %s\n", r, zc_get_last_error());
            exit(1);
        }
    }
}

double zc_perf_max(zc_comm_h comm, double value)
{
    int size;
    zc_comm_size(comm, &size);
    double *all = calloc((size_t)size, sizeof(double)), max = value;

    zc_perf_gather(comm, &value, all, sizeof(value));
    for (int r = 0; all && r < size; r++)
        max = all[r] > max ? all[r] : max;
    free(all);
    return max;
}

int64_t zc_perf_sum(zc_comm_h comm, int64_t value)
{
    int size, rank;
    zc_comm_size(comm, &size);
    zc_comm_rank(comm, &rank);
    int64_t *all = calloc((size_t)size, sizeof(int64_t)), sum = 0;

    zc_perf_gather(comm, &value, all, sizeof(value));
    for (int r = 0; all && r < size; r++)
        sum += all[r];
    free(all);
    return rank == 0 ? sum : value;
}

static int zc_perf_is_root(zc_comm_h comm)
{
    int rank;
    zc_comm_rank(comm, &rank);
    return rank == 0;
}

void zc_perf_print_header(zc_comm_h comm, const char *tool, const zc_perf_opts_t *opts)
{
    int size, nnodes;

    if (!zc_perf_is_root(comm))
        return;
    zc_comm_size(comm, &size);
    zc_comm_node_count(comm, &nnodes);
    printf("# %s: libzcomm %s, %d ranks on %d nodes\n", tool, ZC_VERSION_STRING, size, nnodes);
    printf("# minBytes %zu maxBytes %zu step: %s%g iters: %d warmup: %d check: %d\n",
           opts->min_bytes, opts->max_bytes, opts->step_bytes ? "+" : "x",
           opts->step_bytes ? (double)opts->step_bytes : opts->factor, opts->iters, opts->warmup,
           opts->check);
    printf("#\n#%12s %12s %9s %11s %12s %12s %8s\n", "size", "count", "type", "time(us)",
           "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    fflush(stdout);
}

void zc_perf_print_row(zc_comm_h comm, size_t bytes, size_t count, zc_datatype_t dtype,
                       double seconds, double bus_factor, int64_t wrong)
{
    double algbw = seconds > 0 ? (double)bytes / seconds / 1e9 : 0;

    if (!zc_perf_is_root(comm))
        return;
    zc_perf_bw_sum += algbw * bus_factor;
    zc_perf_rows++;
    zc_perf_wrong_total += wrong;
    /* Below 10 us a third decimal: a small message's half round trip takes
     * about 0.2 us, where 0.01 us is 5% of a ratio (ucx_perftest prints
     * three too). */
    double us = seconds * 1e6;
    printf(" %12zu %12zu %9s %11.*f %12.3f %12.3f %8lld\n", bytes, count,
           zc_datatype_name(dtype), us < 10 ? 3 : 2, us, algbw, algbw * bus_factor,
           (long long)wrong);
    fflush(stdout);
}

int zc_perf_print_summary(zc_comm_h comm)
{
    if (!zc_perf_is_root(comm))
        return 0;
    printf("# Out of bounds values : %lld %s\n", (long long)zc_perf_wrong_total,
           zc_perf_wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.4f GB/s\n",
           zc_perf_rows ? zc_perf_bw_sum / zc_perf_rows : 0.0);
    fflush(stdout);
    return zc_perf_wrong_total ? 1 : 0;
}

double zc_perf_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void zc_perf_die(const char *tool, const char *what, zc_status_t st)
{
    fprintf(stderr, "%s: %s failed: %s: %s\n", tool, what, zc_strerror(st), zc_get_last_error());
    exit(1);
}

size_t zc_perf_next_size(const zc_perf_opts_t *opts, size_t bytes)
{
    if (opts->step_bytes)
        return bytes + opts->step_bytes;
    size_t next = (size_t)((double)bytes * opts->factor);
    return next > bytes ? next : bytes + 1;
}

static uint8_t zc_perf_byte(size_t i, int src, int salt)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)(unsigned)src << 40) ^
                 ((uint64_t)(unsigned)salt << 20);
    return (uint8_t)(x >> 56 ^ x >> 29 ^ x);
}

void zc_perf_fill(void *buf, size_t bytes, int src, int salt)
{
    for (size_t i = 0; i < bytes; i++)
        ((uint8_t *)buf)[i] = zc_perf_byte(i, src, salt);
}

int64_t zc_perf_check(const void *buf, size_t bytes, size_t elem, int src, int salt)
{
    int64_t wrong = 0;

    for (size_t e = 0; e < bytes / elem; e++) {
        for (size_t b = 0; b < elem; b++) {
            if (((const uint8_t *)buf)[e * elem + b] != zc_perf_byte(e * elem + b, src, salt)) {
                wrong++;
                break;
            }
        }
    }
    return wrong;
}

int zc_perf_listed(const char *list, const char *name)
{
    size_t n = strlen(name);

    if (strcmp(list, "all") == 0)
        return 1;
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

/* Configuration: the typed table of ZC_* variables (integers as strtoll
 * base 0 reads them, ranges and choices refused naming the variable),
 * zc_info -e printing that table, the per-communicator variables parsed
 * once at creation (changing the environment afterwards changes nothing),
 * zc_config_t over the environment, variables that must agree refused on
 * every rank when ranks disagree, and every public call clearing the last
 * error on entry. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mp.h"
#include "src/common/env.h"
#include "src/common/status.h"
#include "src/core/comm.h"
#include "tap.h"
#include "zcomm.h"

#define CASE_TIMEOUT_S 60

static int has(const char *haystack, const char *needle)
{
    return haystack && strstr(haystack, needle) != NULL;
}

/* ---- the table, in this process ------------------------------------------ */

static void table_cases(void)
{
    size_t nspecs, nvars;
    const zc_env_spec_t *specs = zc_env_specs(&nspecs);
    const zc_env_var_t *vars = zc_env_vars(&nvars);
    static const struct {
        zc_env_id_t id;
        const char *name;
        int same;
    } comm_vars[] = {
        {ZC_ENV_TIMEOUT, "ZC_TIMEOUT", 0},
        {ZC_ENV_ROUTED_MIN_BYTES, "ZC_ROUTED_MIN_BYTES", 1},
        {ZC_ENV_ROUTED_CHUNK, "ZC_ROUTED_CHUNK", 1},
        {ZC_ENV_ALLTOALLV_CHECK, "ZC_ALLTOALLV_CHECK", 1},
        {ZC_ENV_ALLTOALLV_SPLIT_BYTES, "ZC_ALLTOALLV_SPLIT_BYTES", 1},
        {ZC_ENV_ALLTOALLV_ROWS_MAX, "ZC_ALLTOALLV_ROWS_MAX", 1},
        {ZC_ENV_ALLTOALLV_WINDOW, "ZC_ALLTOALLV_WINDOW", 0},
        {ZC_ENV_RING_ATTN_CHECK, "ZC_RING_ATTN_CHECK", 1},
        {ZC_ENV_RING_ATTN_SLICE_MFLOP, "ZC_RING_ATTN_SLICE_MFLOP", 0},
        {ZC_ENV_RING_ATTN_BWD_ORDER, "ZC_RING_ATTN_BWD_ORDER", 1},
        {ZC_ENV_WAIT_SPIN_US, "ZC_WAIT_SPIN_US", 0},
        {ZC_ENV_HOST_SPLIT_BYTES, "ZC_HOST_SPLIT_BYTES", 1},
        {ZC_ENV_RAIL_STRIPE, "ZC_RAIL_STRIPE", 1},
        {ZC_ENV_RAIL_STALL_MS, "ZC_RAIL_STALL_MS", 0},
        {ZC_ENV_RAIL_PROBE_MS, "ZC_RAIL_PROBE_MS", 0},
    };
    int ids_ok = 1, defaults_ok = 1, public_ok = nspecs == nvars;
    int64_t v = 0;

    for (size_t i = 0; i < sizeof(comm_vars) / sizeof(comm_vars[0]); i++) {
        const zc_env_spec_t *s = zc_env_spec(comm_vars[i].id);
        if (strcmp(s->name, comm_vars[i].name) != 0 || !(s->flags & ZC_ENV_COMM) ||
            !!(s->flags & ZC_ENV_SAME) != comm_vars[i].same)
            ids_ok = 0;
    }
    ok(ids_ok && ZC_ENV_NCOMM == sizeof(comm_vars) / sizeof(comm_vars[0]),
       "the per-communicator variables: ids, names, the ones that must agree");
    for (size_t i = 0; i < nspecs; i++) {
        const zc_env_spec_t *s = &specs[i];
        if (s->type == ZC_ENV_INT && s->default_value &&
            (zc_env_get_int(s->name, &v) != ZC_OK || v < s->min || v > s->max))
            defaults_ok = 0;
        if (s->type == ZC_ENV_CHOICE && (!s->default_value || !has(s->choices, s->default_value)))
            defaults_ok = 0;
        if (i < nvars && (strcmp(vars[i].name, s->name) != 0 || !has(vars[i].help, s->help) ||
                          (s->type == ZC_ENV_INT && !has(vars[i].help, "range ")) ||
                          (s->type == ZC_ENV_CHOICE && !has(vars[i].help, "one of ")) ||
                          (!!(s->flags & ZC_ENV_SAME) !=
                           has(vars[i].help, "same value on every rank"))))
            public_ok = 0;
    }
    ok(defaults_ok, "every integer default lies in its range, every choice default is a choice");
    ok(public_ok, "zc_env_vars: the typed table, help with range, choices and agreement");

    /* strtoll base 0, as the man pages say */
    setenv("ZC_TIMEOUT", "0x1388", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_OK && v == 5000, "ZC_TIMEOUT=0x1388 is 5000");
    setenv("ZC_TIMEOUT", "010", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_OK && v == 8, "ZC_TIMEOUT=010 is octal 8");
    setenv("ZC_TIMEOUT", "+1234", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_OK && v == 1234, "ZC_TIMEOUT=+1234");
    setenv("ZC_TIMEOUT", "12x", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "ZC_TIMEOUT=12x"),
       "malformed integer refused, naming the variable: %s", zc_get_last_error());
    setenv("ZC_TIMEOUT", "0x0", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "ZC_TIMEOUT") &&
           has(zc_get_last_error(), "1 to 2147483647"),
       "out-of-range integer refused, naming the variable and its range: %s",
       zc_get_last_error());
    setenv("ZC_TIMEOUT", "99999999999999999999", 1);
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_ERR_INVALID_ARG, "overflow refused");
    unsetenv("ZC_TIMEOUT");
    ok(zc_env_get_int("ZC_TIMEOUT", &v) == ZC_OK && v == 60000, "default from the table");

    zc_env_values_t vals;
    setenv("ZC_ALLTOALLV_SPLIT_BYTES", "0x10000", 1);
    setenv("ZC_RING_ATTN_BWD_ORDER", "reverse", 1);
    ok(zc_env_parse(&vals) == ZC_OK && vals.value[ZC_ENV_ALLTOALLV_SPLIT_BYTES] == 65536 &&
           vals.value[ZC_ENV_RING_ATTN_BWD_ORDER] == 1 &&
           vals.value[ZC_ENV_ROUTED_CHUNK] == 1048576,
       "zc_env_parse: hex, a choice's index, defaults");
    setenv("ZC_ROUTED_CHUNK", "0", 1);
    ok(zc_env_parse(&vals) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "ZC_ROUTED_CHUNK") &&
           has(zc_get_last_error(), "1 to 1073741824"),
       "zc_env_parse: ZC_ROUTED_CHUNK=0 refused with its range: %s", zc_get_last_error());
    unsetenv("ZC_ROUTED_CHUNK");
    setenv("ZC_ALLTOALLV_CHECK", "2", 1);
    ok(zc_env_parse(&vals) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "ZC_ALLTOALLV_CHECK") && has(zc_get_last_error(), "0 to 1"),
       "zc_env_parse: ZC_ALLTOALLV_CHECK=2 refused: %s", zc_get_last_error());
    unsetenv("ZC_ALLTOALLV_CHECK");
    setenv("ZC_RING_ATTN_BWD_ORDER", "sideways", 1);
    ok(zc_env_parse(&vals) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "ZC_RING_ATTN_BWD_ORDER=sideways") &&
           has(zc_get_last_error(), "forward|reverse"),
       "zc_env_parse: a word that is no choice refused: %s", zc_get_last_error());
    unsetenv("ZC_RING_ATTN_BWD_ORDER");
    unsetenv("ZC_ALLTOALLV_SPLIT_BYTES");
}

/* zc_info -e prints the table: every name, default and help with range. */
static void zc_info_case(void)
{
    const char *exe = "tools/zc_info";
    size_t nvars, len = 0;
    const zc_env_var_t *vars = zc_env_vars(&nvars);
    static char out[1 << 17];
    char line[512];
    int all = 1;
    FILE *p;

    if (access(exe, X_OK) != 0) {
        tap_skip(1, "no tools/zc_info in the current directory");
        return;
    }
    unsetenv("ZC_ROUTED_CHUNK");
    p = popen("tools/zc_info -e", "r");
    while (p && len < sizeof(out) - 1 && fgets(out + len, (int)(sizeof(out) - len), p))
        len += strlen(out + len);
    int rc = p ? pclose(p) : -1;
    for (size_t i = 0; i < nvars; i++) {
        snprintf(line, sizeof(line), "default: %s", vars[i].default_value ? vars[i].default_value
                                                                          : "(none)");
        if (!has(out, vars[i].name) || !has(out, vars[i].help) || !has(out, line)) {
            diag("zc_info -e lacks %s, its default or its help", vars[i].name);
            all = 0;
        }
    }
    ok(rc == 0 && all && has(out, "range 1 to 1073741824") &&
           has(out, "one of forward, reverse; same value on every rank"),
       "zc_info -e prints every variable of the table with default, range and help");
}

/* ---- communicators ---------------------------------------------------------- */

static int mp_init(int rank, int nranks, zc_config_t *config, zc_comm_h *comm)
{
    return mp_comm_init(rank, nranks, config, comm) == ZC_OK ? 0 : -1;
}

/* 2 ranks, each sending n bytes to each: with or without a mismatch. */
static zc_status_t small_alltoallv(zc_comm_h comm, int rank, int mismatch)
{
    int64_t sc[2] = {4, 4}, sd[2] = {0, 4}, rc[2] = {4, 4}, rd[2] = {0, 4};
    char send[8] = "abcdefgh", recv[8];
    zc_request_h req;

    if (mismatch && rank == 0)
        sc[1] = 3;
    zc_status_t st = zc_remap_alltoallv(send, sc, sd, recv, rc, rd, ZC_BYTE, ZC_MEM_HOST, comm,
                                        &req);
    return st == ZC_OK ? zc_wait(&req) : st;
}

/* The environment is read once: junk set after init changes nothing. */
static int rank_parsed_once(int rank, int nranks, void *arg)
{
    zc_comm_h comm;
    zc_request_h req;
    zc_transfer_t t = {0, 1, 100};
    char sendbuf[100] = {0}, recvbuf[100];
    (void)arg;

    setenv("ZC_ROUTED_CHUNK", "0x2000", 1);
    setenv("ZC_ALLTOALLV_CHECK", "1", 1);
    MP_CHECK(mp_init(rank, nranks, NULL, &comm) == 0, "init");
    MP_CHECK(comm->settings.routed_chunk == 8192, "ZC_ROUTED_CHUNK=0x2000 parsed: %" PRId64,
             comm->settings.routed_chunk);
    setenv("ZC_ROUTED_CHUNK", "junk", 1);
    setenv("ZC_ROUTED_MIN_BYTES", "junk", 1);
    setenv("ZC_ALLTOALLV_SPLIT_BYTES", "-1", 1);
    setenv("ZC_ALLTOALLV_ROWS_MAX", "junk", 1);
    setenv("ZC_RING_ATTN_BWD_ORDER", "sideways", 1);
    if (rank == 1)
        setenv("ZC_ALLTOALLV_CHECK", "0", 1); /* would hang rank 0 if it were read now */
    MP_CHECK(zc_routed_sendrecv(&t, 1, sendbuf, recvbuf, ZC_BYTE, ZC_MEM_HOST, comm, &req) ==
                 ZC_OK && zc_wait(&req) == ZC_OK,
             "routed call after the environment changed");
    MP_CHECK(small_alltoallv(comm, rank, 0) == ZC_OK, "alltoallv after the environment changed");
    MP_CHECK(small_alltoallv(comm, rank, 1) == ZC_ERR_MISMATCH,
             "the agreement still runs on every rank");
    MP_CHECK(comm->settings.routed_chunk == 8192 && comm->settings.alltoallv_check == 1,
             "the communicator's copy is unchanged");
    zc_comm_destroy(comm);
    return 0;
}

/* zc_config_t over the environment; 0 keeps the variable. */
static int rank_config(int rank, int nranks, void *arg)
{
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    zc_comm_h comm;
    (void)arg;

    setenv("ZC_ROUTED_CHUNK", "4096", 1);
    setenv("ZC_ROUTED_MIN_BYTES", "100", 1);
    setenv("ZC_ALLTOALLV_CHECK", "1", 1);
    setenv("ZC_ALLTOALLV_WINDOW", "5", 1);
    setenv("ZC_RING_ATTN_BWD_ORDER", "reverse", 1);
    setenv("ZC_RING_ATTN_SLICE_MFLOP", "7", 1);
    setenv("ZC_TIMEOUT", "0x2710", 1);
    setenv("ZC_HOST_SPLIT_BYTES", "4096", 1);
    config.routed_chunk = 8192;
    config.host_split_bytes = ZC_CONFIG_ZERO;
    config.routed_min_bytes = ZC_CONFIG_ZERO;
    config.alltoallv_check = ZC_CONFIG_ZERO;
    config.ring_attn_bwd_order = ZC_BWD_ORDER_FORWARD;
    config.ring_attn_slice_mflop = 9;
    MP_CHECK(mp_init(rank, nranks, &config, &comm) == 0, "init");
    const zc_comm_settings_t *s = &comm->settings;
    MP_CHECK(s->routed_chunk == 8192 && s->routed_min_bytes == 0 && s->alltoallv_check == 0 &&
                 s->ring_attn_bwd_reverse == 0 && s->ring_attn_slice_mflop == 9 &&
                 s->host_split_bytes == 0,
             "config wins: chunk %" PRId64 " min %" PRId64 " check %d reverse %d mflop %" PRId64,
             s->routed_chunk, s->routed_min_bytes, s->alltoallv_check, s->ring_attn_bwd_reverse,
             s->ring_attn_slice_mflop);
    MP_CHECK(s->alltoallv_window == 5 && s->timeout_ms == 10000 && comm->timeout_ms == 10000 &&
                 s->alltoallv_split_bytes == 65536 && s->ring_attn_check == 1,
             "unset fields keep the environment or the default: window %" PRId64 " timeout %d",
             s->alltoallv_window, s->timeout_ms);
    /* the unchecked alltoallv the config asked for still moves matching counts */
    MP_CHECK(small_alltoallv(comm, rank, 0) == ZC_OK, "alltoallv without the agreement");
    zc_comm_destroy(comm);
    return 0;
}

/* Bad values are refused before any bootstrap, naming the variable or field. */
static int rank_bad_values(int rank, int nranks, void *arg)
{
    static const struct {
        const char *var, *value; /* environment, or NULL */
        int field;               /* 1: routed_chunk -5, 2: bwd order 7, 3: window -7 */
        const char *words[2];
    } cases[] = {
        {NULL, NULL, 1, {"config: routed_chunk -5", "ZC_ROUTED_CHUNK takes 1 to 1073741824"}},
        {NULL, NULL, 2, {"ring_attn_bwd_order 7", "ZC_BWD_ORDER_REVERSE"}},
        {NULL, NULL, 3, {"alltoallv_window -7", "ZC_ALLTOALLV_WINDOW takes 0 to"}},
        {"ZC_ALLTOALLV_WINDOW", "-1", 0, {"ZC_ALLTOALLV_WINDOW=-1", "0 to 2147483647"}},
        {"ZC_TIMEOUT", "0x", 0, {"ZC_TIMEOUT=0x", "not an integer"}},
        {"ZC_TIMEOUT", "0", 0, {"ZC_TIMEOUT=0", "1 to 2147483647"}},
        {"ZC_RING_ATTN_BWD_ORDER", "Reverse", 0, {"ZC_RING_ATTN_BWD_ORDER=Reverse", "forward"}},
        {"ZC_ROUTED_MIN_BYTES", "-0x1", 0, {"ZC_ROUTED_MIN_BYTES=-0x1", "0 to"}},
    };
    zc_unique_id_t id;
    zc_comm_h comm = NULL;
    (void)arg;

    MP_CHECK(mp_case_id(rank, &id, sizeof(id), mp_make_id) == 0, "id");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        zc_config_t config = ZC_CONFIG_INITIALIZER;

        if (cases[i].var)
            setenv(cases[i].var, cases[i].value, 1);
        config.routed_chunk = cases[i].field == 1 ? -5 : 0;
        config.ring_attn_bwd_order = cases[i].field == 2 ? 7 : 0;
        config.alltoallv_window = cases[i].field == 3 ? -7 : 0;
        zc_status_t st = zc_comm_init_rank(&comm, nranks, &id, rank, &config);
        const char *why = zc_get_last_error();
        MP_CHECK(st == ZC_ERR_INVALID_ARG && has(why, cases[i].words[0]) &&
                     has(why, cases[i].words[1]),
                 "case %zu: %s: %s", i, zc_strerror(st), why);
        if (cases[i].var)
            unsetenv(cases[i].var);
    }
    return 0;
}

/* Ranks that disagree on a variable that must agree: ZC_ERR_MISMATCH on
 * every rank, naming it.  arg 0: ZC_ALLTOALLV_SPLIT_BYTES in one rank's
 * environment; 1: ZC_RING_ATTN_BWD_ORDER by one rank's config; 2: the same
 * value by environment on some ranks and by config on the others (agrees). */
static int rank_mismatch(int rank, int nranks, void *arg)
{
    int how = *(int *)arg;
    zc_config_t config = ZC_CONFIG_INITIALIZER;
    zc_comm_h comm = NULL;

    if (how == 0)
        setenv("ZC_ALLTOALLV_SPLIT_BYTES", rank == 2 ? "1" : "65536", 1);
    if (how == 1 && rank == 0)
        config.ring_attn_bwd_order = ZC_BWD_ORDER_REVERSE;
    if (how == 2) {
        if (rank % 2)
            setenv("ZC_ROUTED_CHUNK", "0x10000", 1);
        else
            config.routed_chunk = 65536;
    }
    zc_status_t st = mp_comm_init(rank, nranks, &config, &comm);
    const char *why = zc_get_last_error();
    if (how == 2) {
        MP_CHECK(st == ZC_OK && comm->settings.routed_chunk == 65536,
                 "the same value by environment and config agrees: %s", why);
        zc_comm_destroy(comm);
        return 0;
    }
    const char *var = how == 0 ? "ZC_ALLTOALLV_SPLIT_BYTES" : "ZC_RING_ATTN_BWD_ORDER";
    MP_CHECK(st == ZC_ERR_MISMATCH && has(why, var), "rank %d: %s: %s", rank, zc_strerror(st),
             why);
    MP_CHECK(how != 0 || (has(why, "rank 2 has 1") && has(why, "rank 0 has 65536")),
             "both values named: %s", why);
    MP_CHECK(how != 1 || has(why, "reverse"), "the choice named: %s", why);
    return 0;
}

/* ---- the last error --------------------------------------------------------- */

static char fixtures[4096];

/* A stale error, then `call` succeeds and leaves no detail behind. */
#define CLEARS(call, what)                                                    \
    do {                                                                      \
        zc_error(ZC_ERR_INTERNAL, "a stale error");                           \
        zc_status_t st_ = (call);                                             \
        MP_CHECK(st_ >= 0, "%s: %s", what, zc_strerror(st_));                 \
        MP_CHECK(zc_get_last_error()[0] == '\0', "%s kept the last error: %s", what, \
                 zc_get_last_error());                                        \
    } while (0)

static int rank_clears(int rank, int nranks, void *arg)
{
    static const int64_t lengths[] = {24, 8};
    zc_plan_opts_t opts = ZC_PLAN_OPTS_INITIALIZER;
    zc_unique_id_t id;
    zc_comm_h comm;
    zc_request_h req;
    zc_plan_h plan;
    zc_plan_info_t info = ZC_PLAN_INFO_INITIALIZER;
    zc_plan_rank_t mine;
    zc_plan_seq_t seq;
    zc_transfer_t t = {0, 1, 16};
    char a[64] = {0}, b[64];
    int v, peer = 1 - rank;
    uint64_t sent, received;
    int64_t off, len;
    (void)arg;

    MP_CHECK(mp_case_id(rank, &id, sizeof(id), mp_make_id) == 0, "id");
    CLEARS(zc_comm_init_rank(&comm, nranks, &id, rank, NULL), "zc_comm_init_rank");
    CLEARS(zc_comm_rank(comm, &v), "zc_comm_rank");
    CLEARS(zc_comm_size(comm, &v), "zc_comm_size");
    CLEARS(zc_comm_node_count(comm, &v), "zc_comm_node_count");
    CLEARS(zc_comm_rank_node(comm, peer, &v), "zc_comm_rank_node");
    CLEARS(zc_comm_rail_count(comm, &v), "zc_comm_rail_count");
    CLEARS(zc_comm_rail_bytes(comm, -1, &sent, &received), "zc_comm_rail_bytes");
    CLEARS(zc_barrier(comm), "zc_barrier");
    CLEARS(zc_sendrecv(a, 8, peer, b, 8, peer, ZC_BYTE, ZC_MEM_HOST, comm), "zc_sendrecv");
    if (rank == 0) {
        CLEARS(zc_send(a, 8, ZC_BYTE, ZC_MEM_HOST, peer, comm, &req), "zc_send");
    } else {
        CLEARS(zc_recv(b, 8, ZC_BYTE, ZC_MEM_HOST, peer, comm, &req), "zc_recv");
    }
    CLEARS(zc_test(&req), "zc_test");
    if (req)
        CLEARS(zc_wait(&req), "zc_wait");
    CLEARS(zc_routed_sendrecv(&t, 1, a, b, ZC_BYTE, ZC_MEM_HOST, comm, &req),
           "zc_routed_sendrecv");
    CLEARS(zc_wait(&req), "zc_wait (routed)");
    CLEARS(small_alltoallv(comm, rank, 0), "zc_remap_alltoallv");
    CLEARS(zc_plan_create(1, nranks, 32, lengths, 2, &opts, &plan), "zc_plan_create");
    CLEARS(zc_plan_info(plan, &info), "zc_plan_info");
    CLEARS(zc_plan_rank(plan, rank, &mine), "zc_plan_rank");
    CLEARS(zc_plan_seq(plan, 0, &seq), "zc_plan_seq");
    CLEARS(zc_plan_slice(100, 4, 1, &off, &len), "zc_plan_slice");
    zc_plan_destroy(plan);
    if (fixtures[0]) {
        char path[4200];
        zc_topo_h topo;
        const char *source;

        snprintf(path, sizeof(path), "%s/cluster-a.xml", fixtures);
        CLEARS(zc_topo_load(path, 0, &topo), "zc_topo_load");
        CLEARS(zc_topo_gpu_count(topo, &v), "zc_topo_gpu_count");
        CLEARS(zc_topo_nic_count(topo, &v), "zc_topo_nic_count");
        CLEARS(zc_topo_source(topo, &source), "zc_topo_source");
        zc_topo_destroy(topo);
    }
    zc_comm_destroy(comm);
    return 0;
}

int main(void)
{
    const char *srcdir = getenv("ZC_TEST_SRCDIR");
    int how;

    setenv("ZC_SOCKET_IFNAME", "lo", 0);
    if (srcdir)
        snprintf(fixtures, sizeof(fixtures), "%s/fixtures/topo", srcdir);
    table_cases();
    zc_info_case();
    ok(mp_run(2, CASE_TIMEOUT_S, rank_parsed_once, NULL) == 0,
       "the environment is parsed once, at init: changing it afterwards changes nothing");
    ok(mp_run(2, CASE_TIMEOUT_S, rank_config, NULL) == 0,
       "zc_config_t over the environment; unset fields keep it");
    ok(mp_run(1, CASE_TIMEOUT_S, rank_bad_values, NULL) == 0,
       "bad values of the environment or the config refused at init, named, with the range");
    how = 0;
    ok(mp_run(4, CASE_TIMEOUT_S, rank_mismatch, &how) == 0,
       "ranks disagreeing on ZC_ALLTOALLV_SPLIT_BYTES: ZC_ERR_MISMATCH on every rank");
    how = 1;
    ok(mp_run(4, CASE_TIMEOUT_S, rank_mismatch, &how) == 0,
       "ranks disagreeing on ring_attn_bwd_order (config): ZC_ERR_MISMATCH on every rank");
    how = 2;
    ok(mp_run(4, CASE_TIMEOUT_S, rank_mismatch, &how) == 0,
       "the same ZC_ROUTED_CHUNK by environment on some ranks and config on others agrees");
    ok(mp_run(2, CASE_TIMEOUT_S, rank_clears, NULL) == 0,
       "every public call clears the last error: communicator, point-to-point, routed, "
       "alltoallv, plan and topology calls");
    return tap_done();
}

/* Topology: path classes, assignment properties, the NIC filter, netdev
 * binding, NCCL XML, the verbs fallback and bad arguments.  The exact
 * answers for every XML file are compared by test_topo_files.sh; here are
 * the properties those answers must have and the paths the files miss. */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/common/status.h"
#include "tap.h"
#include "topology/topo.h"

static char fixtures[4096];
static char shared[4096 + 8];

static const char *fixture(const char *name)
{
    static char path[8192];

    snprintf(path, sizeof(path), "%s/%s", fixtures, name);
    return path;
}

static int has(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

/* ---- path classes on a hand-built tree ---- */

static void test_path_classes(void)
{
    /* locality 0: host bridge h0 with root port r0 -> switch s0 -> ds a, b
     *             (a: device A; b: switch s1 -> ds c -> device C), and root
     *             port r1 -> device D; host bridge h1 -> device E.
     * locality 1: host bridge h2 -> device F. */
    zc_topo_t *t;
    int l0, l1, h0, h1, h2, r0, r1, s0, a, b, s1, c, A, C, D, E, F, B2;

    if (zc_topo_alloc("test", 0, &t) != ZC_OK) {
        ok(0, "zc_topo_alloc");
        return;
    }
    zc_topo_add_locality(t, 0, &l0);
    zc_topo_add_locality(t, 1, &l1);
    zc_topo_add_node(t, ZC_TOPO_NODE_HOST_BRIDGE, -1, l0, &h0);
    zc_topo_add_node(t, ZC_TOPO_NODE_BRIDGE, h0, -1, &r0);
    zc_topo_add_node(t, ZC_TOPO_NODE_BRIDGE, r0, -1, &s0);
    zc_topo_add_node(t, ZC_TOPO_NODE_BRIDGE, s0, -1, &a);
    zc_topo_add_node(t, ZC_TOPO_NODE_DEVICE, a, -1, &A);
    zc_topo_add_node(t, ZC_TOPO_NODE_DEVICE, a, -1, &B2); /* second function beside A */
    zc_topo_add_node(t, ZC_TOPO_NODE_BRIDGE, s0, -1, &b);
    zc_topo_add_node(t, ZC_TOPO_NODE_BRIDGE, b, -1, &s1);
    zc_topo_add_node(t, ZC_TOPO_NODE_BRIDGE, s1, -1, &c);
    zc_topo_add_node(t, ZC_TOPO_NODE_DEVICE, c, -1, &C);
    zc_topo_add_node(t, ZC_TOPO_NODE_BRIDGE, h0, -1, &r1);
    zc_topo_add_node(t, ZC_TOPO_NODE_DEVICE, r1, -1, &D);
    zc_topo_add_node(t, ZC_TOPO_NODE_HOST_BRIDGE, -1, l0, &h1);
    zc_topo_add_node(t, ZC_TOPO_NODE_DEVICE, h1, -1, &E);
    zc_topo_add_node(t, ZC_TOPO_NODE_HOST_BRIDGE, -1, l1, &h2);
    zc_topo_add_node(t, ZC_TOPO_NODE_DEVICE, h2, -1, &F);

    ok(zc_topo_node_path(t, A, B2) == ZC_PATH_PIX, "two functions behind one port: PIX");
    ok(zc_topo_node_path(t, A, C) == ZC_PATH_PXB, "one device behind a nested switch: PXB");
    ok(zc_topo_node_path(t, C, A) == ZC_PATH_PXB, "PXB is symmetric");
    ok(zc_topo_node_path(t, A, D) == ZC_PATH_PHB, "two root ports of one host bridge: PHB");
    ok(zc_topo_node_path(t, A, E) == ZC_PATH_NODE, "two host bridges of one NUMA node: NODE");
    ok(zc_topo_node_path(t, A, F) == ZC_PATH_SYS, "two NUMA nodes: SYS");
    ok(zc_topo_node_numa(t, C) == 0 && zc_topo_node_numa(t, F) == 1, "NUMA of a device");
    ok(strcmp(zc_path_name(ZC_PATH_NODE), "NODE") == 0 && strcmp(zc_path_name((zc_path_t)42), "?") == 0,
       "zc_path_name");
    zc_topo_free(t);
}

/* ---- assignment properties ---- */

typedef struct {
    int ngpus, nnics;
    int nic[64];          /* NIC of each GPU */
    int load[64];         /* GPUs of each NIC */
} assign_t;

static zc_status_t load_assign(const char *path, unsigned flags, assign_t *as)
{
    zc_topo_h topo;
    zc_status_t st = zc_topo_load(path, flags, &topo);

    memset(as, 0, sizeof(*as));
    if (st != ZC_OK)
        return st;
    zc_topo_gpu_count(topo, &as->ngpus);
    zc_topo_nic_count(topo, &as->nnics);
    for (int g = 0; g < as->ngpus && g < 64; g++) {
        zc_topo_assignment_t a;
        zc_topo_assignment(topo, g, &a);
        as->nic[g] = a.nic;
        if (a.nic >= 0 && a.nic < 64)
            as->load[a.nic]++;
        if (a.rail != a.nic)
            st = ZC_ERR_INTERNAL;
    }
    zc_topo_destroy(topo);
    return st;
}

static int distinct_nics(const assign_t *as)
{
    for (int n = 0; n < as->nnics; n++)
        if (as->load[n] > 1)
            return 0;
    return as->ngpus > 0;
}

static int shared_pairwise(const assign_t *as)
{
    for (int n = 0; n < as->nnics; n++)
        if (as->load[n] != 0 && as->load[n] != 2)
            return 0;
    return as->ngpus > 0;
}

static int not_collapsed(const assign_t *as)
{
    return as->nnics < 2 || as->ngpus < 2 || as->load[0] < as->ngpus;
}

static void test_shared_assignments(void)
{
    static const struct {
        const char *file;
        unsigned flags;
        int gpus, nics;
        int (*property)(const assign_t *);
        const char *what;
    } cases[] = {
        /* Hardware view (every port): the README's GPU:NIC ratios. */
        {"topo.jrc0386.xml", ZC_TOPO_ALL_PORTS, 4, 4, distinct_nics, "1:1"},
        {"topo.jwb0004.xml", ZC_TOPO_ALL_PORTS, 4, 4, distinct_nics, "1:1"},
        {"topo.jsfc005.xml", ZC_TOPO_ALL_PORTS, 1, 2, distinct_nics, "1:1"},
        {"topo.mel2001.xml", ZC_TOPO_ALL_PORTS, 4, 2, shared_pairwise, "2:1 pairwise"},
        {"topo.jwc09n003.xml", ZC_TOPO_ALL_PORTS, 4, 2, shared_pairwise, "2:1 pairwise"},
        /* Default view: ports that were DOWN when the file was taken are left
         * out (mlx5_0, mlx5_1 of jrc0386), the rest still balances. */
        {"topo.jwb0004.xml", 0, 4, 4, distinct_nics, "1:1"},
        {"topo.jwc09n003.xml", 0, 4, 2, shared_pairwise, "2:1 pairwise"},
        {"topo.jrc0386.xml", 0, 4, 2, shared_pairwise, "2 active NICs for 4 GPUs: pairwise"},
    };
    char path[8192];
    DIR *dir = opendir(shared);

    if (!dir) {
        tap_skip((int)(sizeof(cases) / sizeof(cases[0])) * 2, "no shared topologies folder");
        return;
    }
    closedir(dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assign_t as;
        snprintf(path, sizeof(path), "%s/%s", shared, cases[i].file);
        zc_status_t st = load_assign(path, cases[i].flags, &as);
        ok(st == ZC_OK && as.ngpus == cases[i].gpus && as.nnics == cases[i].nics,
           "%s%s: %d GPUs, %d NICs (got %d, %d: %s)", cases[i].file,
           cases[i].flags ? " all ports" : "", cases[i].gpus, cases[i].nics, as.ngpus, as.nnics,
           zc_get_last_error());
        ok(st == ZC_OK && cases[i].property(&as) && not_collapsed(&as), "%s%s: %s, not all on NIC0",
           cases[i].file, cases[i].flags ? " all ports" : "", cases[i].what);
    }
}

static void test_fixture_assignments(void)
{
    assign_t as;

    ok(load_assign(fixture("cluster-a.xml"), 0, &as) == ZC_OK && as.ngpus == 8 && as.nnics == 4 &&
           shared_pairwise(&as) && as.nic[0] == as.nic[1] && as.nic[2] == as.nic[3] &&
           as.nic[0] != as.nic[2],
       "Cluster A (8 GPUs, 4 NICs): neighbouring GPUs share a NIC, 2 per NIC");
    ok(load_assign(fixture("cluster-c.xml"), 0, &as) == ZC_OK && as.ngpus == 8 && as.nnics == 8 &&
           distinct_nics(&as),
       "Cluster C (8 GPUs, 8 NICs): 1:1");
    ok(load_assign(fixture("ties.xml"), 0, &as) == ZC_OK && as.nic[0] == 1 && as.nic[1] == 0,
       "tie: GPU0 leaves NIC0 to GPU1 (PIX) and takes the equally near free NIC1");
    ok(load_assign(fixture("ties-sys.xml"), 0, &as) == ZC_OK && shared_pairwise(&as) &&
           not_collapsed(&as),
       "all pairs SYS: 2 GPUs per NIC, not all on NIC0");
    ok(load_assign(fixture("pxb-phb.xml"), 0, &as) == ZC_OK && as.load[0] == 2 && as.load[1] == 0,
       "nearest first: both GPUs share the PXB NIC rather than use the free PHB one");
    ok(load_assign(fixture("port-down.xml"), 0, &as) == ZC_OK && as.nnics == 1 && as.load[0] == 2,
       "a DOWN port is left out: both GPUs on the remaining NIC");
    ok(load_assign(fixture("no-nic.xml"), 0, &as) == ZC_OK && as.ngpus == 4 && as.nnics == 0 &&
           as.nic[0] == -1,
       "no NIC: GPUs have no NIC and no rail");
    ok(load_assign(fixture("no-gpu.xml"), 0, &as) == ZC_OK && as.ngpus == 0 && as.nnics == 2,
       "no GPU: NICs are listed");
    for (int k = 1; k <= 8; k++) {
        char name[32];
        int rails_ok = 1;
        snprintf(name, sizeof(name), "emu-node-%d.xml", k);
        zc_status_t st = load_assign(fixture(name), 0, &as);
        for (int g = 0; g < as.ngpus; g++)
            rails_ok &= as.nic[g] == g;
        ok(st == ZC_OK && as.ngpus == k && as.nnics == k && rails_ok,
           "%s: GPU k on NIC k (rail k)", name);
    }
}

/* ---- filter ---- */

static void test_filter(void)
{
    static const struct {
        const char *spec, *name;
        int port, match;
    } cases[] = {
        {"", "mlx5_0", 1, 1},
        {"mlx5", "mlx5_3", 1, 1},
        {"mlx5", "bnxt_re0", 1, 0},
        {"mlx5_1", "mlx5_10", 1, 1},     /* prefix */
        {"=mlx5_1", "mlx5_10", 1, 0},    /* exact */
        {"=mlx5_1", "mlx5_1", 2, 1},
        {"mlx5_0:1,mlx5_1", "mlx5_0", 2, 0},
        {"mlx5_0:1,mlx5_1", "mlx5_0", 1, 1},
        {"mlx5_0:1,mlx5_1", "mlx5_1", 2, 1},
        {"^mlx5_3", "mlx5_3", 1, 0},
        {"^mlx5_3", "mlx5_2", 1, 1},
        {"^=mlx5_1", "mlx5_10", 1, 1},
        {"^=mlx5_1", "mlx5_1", 1, 0},
        {"^mlx5_0:2", "mlx5_0", 1, 1},
        {"^", "mlx5_0", 1, 1},
    };
    static const char *bad[] = {"mlx5_0:", "mlx5_0:x", ":1", "mlx5_0,", "a,,b", "mlx5_0:0"};

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        zc_topo_filter_t f;
        zc_status_t st = zc_topo_filter_parse(cases[i].spec, "ZC_IB_HCA", &f);
        ok(st == ZC_OK && zc_topo_filter_match(&f, cases[i].name, cases[i].port) == cases[i].match,
           "ZC_IB_HCA=\"%s\" %s %s:%d", cases[i].spec, cases[i].match ? "keeps" : "drops",
           cases[i].name, cases[i].port);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        zc_topo_filter_t f;
        zc_status_t st = zc_topo_filter_parse(bad[i], "ZC_IB_HCA", &f);
        ok(st == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "ZC_IB_HCA"),
           "ZC_IB_HCA=\"%s\" is rejected naming the variable (%s)", bad[i], zc_get_last_error());
    }

    /* The variable applies on load. */
    zc_topo_h topo;
    int n = -1;
    setenv("ZC_IB_HCA", "^=mlx5_1", 1);
    zc_status_t st = zc_topo_load(fixture("cluster-c.xml"), 0, &topo);
    if (st == ZC_OK) {
        zc_topo_nic_t nic = ZC_TOPO_NIC_INITIALIZER;
        zc_topo_nic_count(topo, &n);
        zc_topo_nic_info(topo, 1, &nic);
        ok(n == 7 && strcmp(nic.name, "mlx5_2") == 0, "ZC_IB_HCA=^=mlx5_1 leaves 7 NICs");
        zc_topo_destroy(topo);
    } else {
        ok(0, "load with ZC_IB_HCA: %s", zc_get_last_error());
    }
    setenv("ZC_IB_HCA", "mlx5_0:x", 1);
    st = zc_topo_load(fixture("cluster-c.xml"), 0, &topo);
    ok(st == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "ZC_IB_HCA"),
       "a malformed ZC_IB_HCA fails the load naming the variable");
    unsetenv("ZC_IB_HCA");
}

/* ---- netdev binding ---- */

static void test_netdev(void)
{
    zc_topo_h topo;
    zc_topo_nic_t n0 = ZC_TOPO_NIC_INITIALIZER, n1 = ZC_TOPO_NIC_INITIALIZER;

    ok(zc_topo_load(fixture("emu-node-2.xml"), 0, &topo) == ZC_OK &&
           zc_topo_nic_info(topo, 0, &n0) == ZC_OK && zc_topo_nic_info(topo, 1, &n1) == ZC_OK &&
           strcmp(n0.netdev, "veth0") == 0 && strcmp(n1.netdev, "veth1") == 0,
       "netdev from the interface beside the NIC (veth0, veth1)");
    zc_topo_destroy(topo);

    setenv("ZC_NIC_NETDEV", "mlx5_0=eth7,mlx5_1:1=eth8,mlx5_9=eth9", 1);
    ok(zc_topo_load(fixture("emu-node-2.xml"), 0, &topo) == ZC_OK &&
           zc_topo_nic_info(topo, 0, &n0) == ZC_OK && zc_topo_nic_info(topo, 1, &n1) == ZC_OK &&
           strcmp(n0.netdev, "eth7") == 0 && strcmp(n1.netdev, "eth8") == 0,
       "ZC_NIC_NETDEV overrides (name and name:port; unknown NICs ignored)");
    zc_topo_destroy(topo);

    static const char *bad[] = {"mlx5_0", "=veth0", "mlx5_0=", "mlx5_0:z=veth0", ",mlx5_0=veth0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("ZC_NIC_NETDEV", bad[i], 1);
        zc_status_t st = zc_topo_load(fixture("emu-node-2.xml"), 0, &topo);
        ok(st == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "ZC_NIC_NETDEV"),
           "ZC_NIC_NETDEV=\"%s\" is rejected naming the variable", bad[i]);
        if (st == ZC_OK)
            zc_topo_destroy(topo);
    }
    unsetenv("ZC_NIC_NETDEV");
}

/* ---- NCCL XML ---- */

static void test_nccl_xml(void)
{
    zc_topo_h topo;
    const char *source = NULL;
    int g = 0, n = 0;
    zc_path_t p[4] = {ZC_PATH_SYS, ZC_PATH_SYS, ZC_PATH_SYS, ZC_PATH_SYS};
    zc_topo_nic_t nic = ZC_TOPO_NIC_INITIALIZER;

    if (zc_topo_load(fixture("nccl-system.xml"), 0, &topo) != ZC_OK) {
        ok(0, "NCCL XML loads: %s", zc_get_last_error());
        tap_skip(3, "NCCL XML did not load");
        return;
    }
    ok(1, "NCCL XML loads");
    zc_topo_source(topo, &source);
    zc_topo_gpu_count(topo, &g);
    zc_topo_nic_count(topo, &n);
    ok(strcmp(source, "nccl-xml") == 0 && g == 4 && n == 2,
       "NCCL XML: source nccl-xml, 4 GPUs (storage ignored), 2 NICs");
    for (int i = 0; i < 4; i++)
        zc_topo_path(topo, i, 0, &p[i]);
    ok(p[0] == ZC_PATH_PIX && p[1] == ZC_PATH_PXB && p[2] == ZC_PATH_PHB && p[3] == ZC_PATH_SYS,
       "NCCL XML: one switch PIX, nested switch PXB, under the CPU PHB, other CPU SYS");
    zc_topo_nic_info(topo, 0, &nic);
    ok(nic.rate_gbps == 200.0 && nic.state == ZC_PORT_UNKNOWN && nic.numa == 0 &&
           strcmp(nic.link_layer, "InfiniBand") == 0,
       "NCCL XML: NIC speed 200000 Mb/s is 200 Gb/s, state unknown, numa 0");
    zc_topo_destroy(topo);
}

/* ---- verbs fallback and live machine ---- */

static void test_verbs_fallback(void)
{
    zc_topo_t *t;
    zc_topo_h live;

    /* hwloc's view of a file, then verbs on this machine. */
    if (zc_topo_alloc("hwloc-xml", 0, &t) != ZC_OK ||
        zc_topo_discover_hwloc(t, fixture("port-down.xml"), "xml_path") != ZC_OK) {
        ok(0, "discover port-down.xml");
        tap_skip(1, "no topology");
    } else {
        zc_status_t st = zc_topo_verbs_update(t);
        if (st == ZC_ERR_UNSUPPORTED) {
            ok(t->num_nics == 2 && t->nics[1].info.state == ZC_PORT_DOWN &&
                   t->nics[0].info.rate_gbps < 0,
               "verbs unavailable (%s): hwloc's NICs and states kept", zc_get_last_error());
        } else {
            tap_skip(1, "libibverbs lists devices on this machine");
        }
    }
    zc_topo_free(t);
    ok(zc_topo_load(NULL, 0, &live) == ZC_OK, "the live machine loads whatever verbs and CUDA say");
    zc_topo_destroy(live);
}

/* ---- where the topology comes from ---- */

static void test_sources(void)
{
    zc_topo_h topo;
    int g = -1;

    setenv("HWLOC_XMLFILE", fixture("cluster-a.xml"), 1);
    ok(zc_topo_load(NULL, 0, &topo) == ZC_OK && zc_topo_gpu_count(topo, &g) == ZC_OK && g == 8,
       "HWLOC_XMLFILE is read when no path is given");
    zc_topo_destroy(topo);
    setenv("ZC_TOPO_FILE", fixture("ties.xml"), 1);
    ok(zc_topo_load(NULL, 0, &topo) == ZC_OK && zc_topo_gpu_count(topo, &g) == ZC_OK && g == 2,
       "ZC_TOPO_FILE wins over HWLOC_XMLFILE");
    zc_topo_destroy(topo);
    ok(zc_topo_load(fixture("no-nic.xml"), 0, &topo) == ZC_OK &&
           zc_topo_gpu_count(topo, &g) == ZC_OK && g == 4,
       "the argument wins over ZC_TOPO_FILE");
    zc_topo_destroy(topo);
    setenv("ZC_TOPO_FILE", "/nonexistent/topo.xml", 1);
    ok(zc_topo_load(NULL, 0, &topo) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "ZC_TOPO_FILE"),
       "a missing ZC_TOPO_FILE is named in the error");
    unsetenv("ZC_TOPO_FILE");
    unsetenv("HWLOC_XMLFILE");
}

/* ---- bad arguments and bad files ---- */

static void test_bad_arguments(void)
{
    zc_topo_h topo = NULL;
    zc_topo_gpu_t gpu = ZC_TOPO_GPU_INITIALIZER;
    zc_topo_nic_t nic = ZC_TOPO_NIC_INITIALIZER;
    zc_topo_assignment_t a;
    zc_path_t path;
    int count;

    ok(zc_topo_load(NULL, 0, NULL) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "topo"),
       "NULL output: ZC_ERR_INVALID_ARG naming topo");
    ok(zc_topo_load(fixture("ties.xml"), 0x80, &topo) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "flags"),
       "unknown flags: ZC_ERR_INVALID_ARG naming flags");
    ok(zc_topo_load("", 0, &topo) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "xml_path"),
       "empty path: ZC_ERR_INVALID_ARG naming xml_path");
    ok(zc_topo_load(fixture("missing.xml"), 0, &topo) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "xml_path") && has(zc_get_last_error(), "missing.xml"),
       "missing file: ZC_ERR_INVALID_ARG naming xml_path and the file");
    ok(zc_topo_load(fixtures, 0, &topo) == ZC_ERR_INVALID_ARG, "a directory: ZC_ERR_INVALID_ARG");
    static const char *broken[] = {"malformed.xml", "empty.xml", "not-topology.xml"};
    for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++)
        ok(zc_topo_load(fixture(broken[i]), 0, &topo) == ZC_ERR_TOPOLOGY &&
               has(zc_get_last_error(), "xml_path") && has(zc_get_last_error(), broken[i]),
           "%s: ZC_ERR_TOPOLOGY naming xml_path and the file (%s)", broken[i],
           zc_get_last_error());

    if (zc_topo_load(fixture("ties.xml"), 0, &topo) != ZC_OK) {
        tap_skip(9, "ties.xml did not load");
        return;
    }
    ok(zc_topo_gpu_count(NULL, &count) == ZC_ERR_INVALID_ARG, "gpu_count(NULL handle)");
    ok(zc_topo_nic_count(topo, NULL) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "count"),
       "nic_count(NULL count) names count");
    ok(zc_topo_gpu_info(topo, 2, &gpu) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "gpu"),
       "gpu_info(gpu out of range) names gpu");
    ok(zc_topo_nic_info(topo, -1, &nic) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "nic"),
       "nic_info(nic -1) names nic");
    ok(zc_topo_path(topo, 0, 5, &path) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "nic"),
       "path(nic out of range) names nic");
    ok(zc_topo_path(topo, 0, 0, NULL) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "path"),
       "path(NULL output) names path");
    ok(zc_topo_assignment(topo, 5, &a) == ZC_ERR_INVALID_ARG && has(zc_get_last_error(), "gpu"),
       "assignment(gpu out of range) names gpu");
    ok(zc_topo_assignment(topo, 0, NULL) == ZC_ERR_INVALID_ARG &&
           has(zc_get_last_error(), "assignment"),
       "assignment(NULL output) names assignment");
    ok(zc_topo_source(NULL, NULL) == ZC_ERR_INVALID_ARG, "source(NULL handle)");
    zc_topo_destroy(topo);
    zc_topo_destroy(NULL);
}

/* ---- the XML reader on its own ---- */

static void test_xml_reader(void)
{
    static const struct {
        const char *text;
        int valid;
    } cases[] = {
        {"<a x='1' y=\"&lt;&amp;&#65;\"><!-- c --><b/><?pi x?></a>\n", 1},
        {"<?xml version=\"1.0\"?>\n<!DOCTYPE a SYSTEM \"x.dtd\">\n<a>text<![CDATA[<x>]]></a>", 1},
        {"<a><b></a>", 0},
        {"<a x=1/>", 0},
        {"<a x='1'y='2'/>", 0},
        {"<a/><b/>", 0},
        {"<a x='&bogus;'/>", 0},
        {"<a><!-- unterminated </a>", 0},
        {"   ", 0},
    };
    char path[4096];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

    snprintf(path, sizeof(path), "%s/zc_test_topo_%d.xml", tmp, (int)getpid());
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        FILE *f = fopen(path, "w");
        zc_xml_doc_t *doc = NULL;
        if (!f) {
            ok(0, "cannot write %s", path);
            continue;
        }
        fputs(cases[i].text, f);
        fclose(f);
        zc_status_t st = zc_xml_parse_file(path, "xml_path", &doc);
        int good = cases[i].valid ? st == ZC_OK : st == ZC_ERR_TOPOLOGY;
        if (st == ZC_OK && i == 0) {
            const zc_xml_node_t *root = zc_xml_root(doc);
            good = good && strcmp(zc_xml_attr(root, "y"), "<&A") == 0 && root->first_child &&
                   strcmp(root->first_child->name, "b") == 0;
        }
        char shown[64];
        snprintf(shown, sizeof(shown), "%s", cases[i].text);
        for (char *c = shown; *c; c++)
            if (*c == '\n')
                *c = ' ';
        ok(good, "XML %s: %s", cases[i].valid ? "accepted" : "rejected", shown);
        zc_xml_free(doc);
    }
    remove(path);
}

int main(void)
{
    const char *srcdir = getenv("ZC_TEST_SRCDIR");

    snprintf(fixtures, sizeof(fixtures), "%s/fixtures/topo", srcdir ? srcdir : "tests");
    /* Copies of shared/topologies (real node exports), shipped as fixtures. */
    snprintf(shared, sizeof(shared), "%s/real", fixtures);
    unsetenv("ZC_TOPO_FILE");
    unsetenv("HWLOC_XMLFILE");
    unsetenv("ZC_IB_HCA");
    unsetenv("ZC_NIC_NETDEV");

    test_path_classes();
    test_shared_assignments();
    test_fixture_assignments();
    test_filter();
    test_netdev();
    test_nccl_xml();
    test_verbs_fallback();
    test_sources();
    test_bad_arguments();
    test_xml_reader();
    return tap_done();
}

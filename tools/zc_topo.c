/* zc_topo: the GPU x NIC path matrix in the style of `nvidia-smi topo -m`,
 * each GPU's NIC and rail, and the NICs; --json for scripts. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcomm.h"

typedef struct {
    const char *xml;
    int json;
    unsigned flags;
} zc_topo_opts_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zc_topo [-x FILE] [-j] [-a]\n"
            "  -x, --xml FILE    read an hwloc or NCCL topology XML instead of this machine\n"
            "                    (default: ZC_TOPO_FILE, HWLOC_XMLFILE, else the live machine)\n"
            "  -j, --json        machine-readable output\n"
            "  -a, --all-ports   keep NIC ports that are not ACTIVE\n"
            "  -h, --help        this help\n"
            "NICs are filtered by ZC_IB_HCA; ZC_NIC_NETDEV binds NICs to interfaces.\n");
}

/* Everything printed comes from one snapshot of the handle. */
typedef struct {
    const char *source;
    int ngpus, nnics;
    zc_topo_gpu_t *gpus;
    zc_topo_nic_t *nics;
    zc_topo_assignment_t *assign;
    zc_path_t *paths;
} zc_topo_view_t;

static zc_status_t view_load(zc_topo_h topo, zc_topo_view_t *v)
{
    zc_status_t st;

    if ((st = zc_topo_source(topo, &v->source)) < 0 || (st = zc_topo_gpu_count(topo, &v->ngpus)) < 0 ||
        (st = zc_topo_nic_count(topo, &v->nnics)) < 0)
        return st;
    v->gpus = calloc((size_t)v->ngpus + 1, sizeof(*v->gpus));
    v->nics = calloc((size_t)v->nnics + 1, sizeof(*v->nics));
    v->assign = calloc((size_t)v->ngpus + 1, sizeof(*v->assign));
    v->paths = calloc((size_t)v->ngpus * (size_t)v->nnics + 1, sizeof(*v->paths));
    if (!v->gpus || !v->nics || !v->assign || !v->paths)
        return ZC_ERR_NO_MEMORY;
    for (int g = 0; g < v->ngpus; g++) {
        v->gpus[g].size = sizeof(v->gpus[g]);
        if ((st = zc_topo_gpu_info(topo, g, &v->gpus[g])) < 0 ||
            (st = zc_topo_assignment(topo, g, &v->assign[g])) < 0)
            return st;
        for (int n = 0; n < v->nnics; n++)
            if ((st = zc_topo_path(topo, g, n, &v->paths[(size_t)g * v->nnics + n])) < 0)
                return st;
    }
    for (int n = 0; n < v->nnics; n++) {
        v->nics[n].size = sizeof(v->nics[n]);
        if ((st = zc_topo_nic_info(topo, n, &v->nics[n])) < 0)
            return st;
    }
    return ZC_OK;
}

static void view_free(zc_topo_view_t *v)
{
    free(v->gpus);
    free(v->nics);
    free(v->assign);
    free(v->paths);
}

static zc_path_t view_path(const zc_topo_view_t *v, int g, int n)
{
    return v->paths[(size_t)g * v->nnics + n];
}

/* ---- text ---- */

static void print_numa(int numa)
{
    if (numa >= 0)
        printf("%d", numa);
    else
        printf("N/A");
}

static void print_text(const zc_topo_view_t *v)
{
    printf("zc_topo: %s, %d GPU%s, %d NIC%s\n\n", v->source, v->ngpus, v->ngpus == 1 ? "" : "s",
           v->nnics, v->nnics == 1 ? "" : "s");
    if (v->ngpus == 0)
        printf("(no GPU: no matrix)\n");
    else
        printf("%-8s", "");
    for (int n = 0; n < v->nnics && v->ngpus > 0; n++)
        printf("NIC%-5d", n);
    if (v->ngpus > 0)
        printf("NUMA Affinity\n");
    for (int g = 0; g < v->ngpus; g++) {
        printf("GPU%-5d", g);
        for (int n = 0; n < v->nnics; n++)
            printf("%-8s", zc_path_name(view_path(v, g, n)));
        print_numa(v->gpus[g].numa);
        printf("\n");
    }
    printf("\nLegend:\n\n"
           "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
           "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
           "Bridges within a NUMA node\n"
           "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
           "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe "
           "Host Bridge)\n"
           "  PIX  = Connection traversing at most a single PCIe bridge\n");
    if (v->nnics > 0) {
        printf("\nNIC Legend:\n\n");
        for (int n = 0; n < v->nnics; n++)
            printf("  NIC%d: %s\n", n, v->nics[n].name);
    }
    if (v->ngpus > 0) {
        printf("\nGPU assignment:\n\n");
        printf("  %-6s %-13s %-6s %-12s %-5s %-5s %s\n", "GPU", "PCI", "NIC", "Name", "Path",
               "Rail", "Shared");
        for (int g = 0; g < v->ngpus; g++) {
            const zc_topo_assignment_t *a = &v->assign[g];
            char gpu[16], nic[16];
            snprintf(gpu, sizeof(gpu), "GPU%d", g);
            if (a->nic < 0) {
                printf("  %-6s %-13s %s\n", gpu, v->gpus[g].pci, "none");
                continue;
            }
            snprintf(nic, sizeof(nic), "NIC%d", a->nic);
            printf("  %-6s %-13s %-6s %-12s %-5s %-5d ", gpu, v->gpus[g].pci, nic,
                   v->nics[a->nic].name, zc_path_name(a->path), a->rail);
            if (a->nic_gpus > 1)
                printf("yes (%d GPUs)\n", a->nic_gpus);
            else
                printf("no\n");
        }
    }
    if (v->nnics > 0) {
        printf("\nNICs:\n\n");
        printf("  %-6s %-12s %-4s %-13s %-4s %-7s %-10s %-8s %-10s %s\n", "NIC", "Name", "Port",
               "PCI", "NUMA", "State", "Link", "Rate", "Netdev", "PCIe");
        for (int n = 0; n < v->nnics; n++) {
            const zc_topo_nic_t *nic = &v->nics[n];
            char id[16], numa[16], rate[24], pcie[24];
            snprintf(id, sizeof(id), "NIC%d", n);
            snprintf(numa, sizeof(numa), nic->numa >= 0 ? "%d" : "N/A", nic->numa);
            if (nic->rate_gbps >= 0)
                snprintf(rate, sizeof(rate), "%gGb/s", nic->rate_gbps);
            else
                snprintf(rate, sizeof(rate), "-");
            if (nic->link_gbs > 0)
                snprintf(pcie, sizeof(pcie), "%.1fGB/s", nic->link_gbs);
            else
                snprintf(pcie, sizeof(pcie), "-");
            printf("  %-6s %-12s %-4d %-13s %-4s %-7s %-10s %-8s %-10s %s\n", id, nic->name,
                   nic->port, nic->pci[0] ? nic->pci : "-", numa,
                   zc_port_state_name(nic->state), nic->link_layer[0] ? nic->link_layer : "-",
                   rate, nic->netdev[0] ? nic->netdev : "-", pcie);
        }
    }
}

/* ---- JSON ---- */

static void json_string(const char *s)
{
    if (!s || !*s) {
        printf("null");
        return;
    }
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void json_int_or_null(int value)
{
    if (value >= 0)
        printf("%d", value);
    else
        printf("null");
}

static void json_gbs(double value)
{
    if (value > 0)
        printf("%.1f", value);
    else
        printf("null");
}

static void print_json(const zc_topo_view_t *v)
{
    printf("{\n  \"source\": ");
    json_string(v->source);
    printf(",\n  \"gpus\": [");
    for (int g = 0; g < v->ngpus; g++) {
        const zc_topo_assignment_t *a = &v->assign[g];
        printf("%s\n    {\"index\": %d, \"pci\": ", g ? "," : "", g);
        json_string(v->gpus[g].pci);
        printf(", \"numa\": ");
        json_int_or_null(v->gpus[g].numa);
        printf(", \"link_gbs\": ");
        json_gbs(v->gpus[g].link_gbs);
        printf(", \"cuda\": ");
        json_int_or_null(v->gpus[g].cuda_device);
        printf(", \"nic\": ");
        json_string(a->nic >= 0 ? v->nics[a->nic].name : NULL);
        printf(", \"path\": ");
        json_string(a->nic >= 0 ? zc_path_name(a->path) : NULL);
        printf(", \"rail\": ");
        json_int_or_null(a->rail);
        printf(", \"shared\": %s}", a->nic_gpus > 1 ? "true" : "false");
    }
    printf("%s],\n  \"nics\": [", v->ngpus ? "\n  " : "");
    for (int n = 0; n < v->nnics; n++) {
        const zc_topo_nic_t *nic = &v->nics[n];
        int gpus = 0;
        for (int g = 0; g < v->ngpus; g++)
            gpus += v->assign[g].nic == n;
        printf("%s\n    {\"index\": %d, \"name\": ", n ? "," : "", n);
        json_string(nic->name);
        printf(", \"port\": %d, \"pci\": ", nic->port);
        json_string(nic->pci);
        printf(", \"numa\": ");
        json_int_or_null(nic->numa);
        printf(", \"link_gbs\": ");
        json_gbs(nic->link_gbs);
        printf(", \"state\": ");
        json_string(zc_port_state_name(nic->state));
        printf(", \"link_layer\": ");
        json_string(nic->link_layer);
        printf(", \"rate_gbps\": ");
        if (nic->rate_gbps >= 0)
            printf("%g", nic->rate_gbps);
        else
            printf("null");
        printf(", \"netdev\": ");
        json_string(nic->netdev);
        printf(", \"gpus\": %d}", gpus);
    }
    printf("%s],\n  \"matrix\": [", v->nnics ? "\n  " : "");
    for (int g = 0; g < v->ngpus; g++) {
        printf("%s\n    [", g ? "," : "");
        for (int n = 0; n < v->nnics; n++)
            printf("%s\"%s\"", n ? ", " : "", zc_path_name(view_path(v, g, n)));
        printf("]");
    }
    printf("%s]\n}\n", v->ngpus ? "\n  " : "");
}

static int parse_args(int argc, char **argv, zc_topo_opts_t *opts)
{
    static const struct option longopts[] = {
        {"xml", required_argument, NULL, 'x'},
        {"json", no_argument, NULL, 'j'},
        {"all-ports", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    while ((c = getopt_long(argc, argv, "x:jah", longopts, NULL)) != -1) {
        switch (c) {
        case 'x': opts->xml = optarg; break;
        case 'j': opts->json = 1; break;
        case 'a': opts->flags |= ZC_TOPO_ALL_PORTS; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "zc_topo: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    zc_topo_opts_t opts = {NULL, 0, 0};
    zc_topo_view_t view = {0};
    zc_topo_h topo;
    zc_status_t st;

    if (parse_args(argc, argv, &opts) != 0)
        return 2;
    st = zc_topo_load(opts.xml, opts.flags, &topo);
    if (st < 0) {
        fprintf(stderr, "zc_topo: %s: %s\n", zc_strerror(st), zc_get_last_error());
        return 1;
    }
    st = view_load(topo, &view);
    if (st < 0) {
        fprintf(stderr, "zc_topo: %s: %s\n", zc_strerror(st), zc_get_last_error());
    } else if (opts.json) {
        print_json(&view);
    } else {
        print_text(&view);
    }
    view_free(&view);
    zc_topo_destroy(topo);
    return st < 0 ? 1 : 0;
}

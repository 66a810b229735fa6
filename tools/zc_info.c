/* zc_info: what this libzcomm is: version, built-in features, and every
 * environment variable it reads with its default and help (like fi_info -e). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcomm.h"

static void print_version(void)
{
    int v = zc_get_version();
    printf("libzcomm %d.%d.%d (header %s)\n", v / 10000, v / 100 % 100, v % 100,
           ZC_VERSION_STRING);
}

static void print_features(void)
{
    static const struct {
        unsigned bit;
        const char *name;
        const char *what;
    } features[] = {
        {ZC_FEATURE_VERBS, "verbs", "libibverbs NIC port state and rate"},
        {ZC_FEATURE_CUDA, "cuda", "CUDA kernels and device memory checks"},
        {ZC_FEATURE_NCCL, "nccl", "NCCL device-memory backend"},
        {ZC_FEATURE_CUDNN, "cudnn", "cuDNN SDPA attention backend (ZC_ATTN_BACKEND=cudnn)"},
    };
    unsigned have = zc_get_features();

    printf("features:\n  %-8s yes  UCX host-memory transport (shared memory, tcp, every NIC)\n"
           "  %-8s yes  hwloc topology discovery\n", "ucx", "hwloc");
    for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
        printf("  %-8s %-4s %s\n", features[i].name, (have & features[i].bit) ? "yes" : "no",
               features[i].what);
}

static void print_env(void)
{
    size_t n;
    const zc_env_var_t *vars = zc_env_vars(&n);

    printf("environment variables:\n");
    for (size_t i = 0; i < n; i++) {
        const char *value = getenv(vars[i].name);
        printf("  %s\n      default: %s%s%s\n      %s\n", vars[i].name,
               vars[i].default_value ? vars[i].default_value : "(none)",
               value ? "   current: " : "", value ? value : "", vars[i].help);
    }
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: zc_info [-v] [-f] [-e]\n"
            "  -v, --version    the library's and the header's version\n"
            "  -f, --features   build features\n"
            "  -e, --env        environment variables, defaults and help\n"
            "  -h, --help       this help\n"
            "With no option, all three, else the parts asked for, in that order.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"version", no_argument, NULL, 'v'},
        {"features", no_argument, NULL, 'f'},
        {"env", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char parts[64];
    int opt, nparts = 0;

    /* Parse everything first: -h anywhere, or a bad option, prints no part. */
    while ((opt = getopt_long(argc, argv, "vfeh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'v': case 'f': case 'e':
            if (nparts < (int)sizeof(parts))
                parts[nparts++] = (char)opt;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "zc_info: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < nparts; i++) {
        switch (parts[i]) {
        case 'v': print_version(); break;
        case 'f': print_features(); break;
        default: print_env(); break;
        }
    }
    if (nparts == 0) {
        print_version();
        print_features();
        print_env();
    }
    return 0;
}

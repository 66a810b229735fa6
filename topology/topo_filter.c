/* NIC filter in NCCL_IB_HCA syntax, read from ZC_IB_HCA:
 *   mlx5             every port of every device whose name starts with mlx5
 *   mlx5_0:1,mlx5_1  port 1 of mlx5_0*, every port of mlx5_1*
 *   =mlx5_0          exactly mlx5_0 (not mlx5_0x)
 *   ^mlx5_3          everything except mlx5_3* (and ^= for exact names)
 * The '^' and '=' marks apply to the whole list, as in NCCL. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/common/status.h"
#include "topology/topo.h"

static zc_status_t zc_filter_item(const char *item, size_t len, const char *argname,
                                  zc_topo_filter_t *filter)
{
    const char *colon = memchr(item, ':', len);
    size_t name_len = colon ? (size_t)(colon - item) : len;

    if (filter->count == ZC_TOPO_FILTER_MAX)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: more than %d NICs listed", argname,
                        ZC_TOPO_FILTER_MAX);
    if (name_len == 0)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: empty NIC name in \"%.*s\"", argname,
                        (int)len, item);
    if (name_len >= ZC_TOPO_NAME_LEN)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: NIC name \"%.*s\" is too long", argname,
                        (int)name_len, item);
    int port = -1;
    if (colon && (port = zc_topo_parse_port(colon + 1, len - name_len - 1)) < 0)
        return zc_error(ZC_ERR_INVALID_ARG, "%s: bad port in \"%.*s\"", argname, (int)len,
                        item);
    memcpy(filter->items[filter->count].name, item, name_len);
    filter->items[filter->count].name[name_len] = '\0';
    filter->items[filter->count].port = port;
    filter->count++;
    return ZC_OK;
}

zc_status_t zc_topo_filter_parse(const char *spec, const char *argname, zc_topo_filter_t *filter)
{
    zc_topo_filter_t f = {0};

    if (spec && *spec == '^') {
        f.exclude = 1;
        spec++;
    }
    if (spec && *spec == '=') {
        f.exact = 1;
        spec++;
    }
    while (spec && *spec) {
        size_t len = strcspn(spec, ",");
        ZC_CHECK(zc_filter_item(spec, len, argname, &f));
        spec += len;
        if (*spec == ',') {
            spec++;
            if (*spec == '\0')
                return zc_error(ZC_ERR_INVALID_ARG, "%s: trailing ','", argname);
        }
    }
    *filter = f;
    return ZC_OK;
}

int zc_topo_filter_match(const zc_topo_filter_t *filter, const char *name, int port)
{
    int listed = 0;

    if (filter->count == 0)
        return 1;
    for (int i = 0; i < filter->count && !listed; i++) {
        const char *want = filter->items[i].name;
        int name_ok = filter->exact ? strcmp(name, want) == 0
                                    : strncmp(name, want, strlen(want)) == 0;
        listed = name_ok && (filter->items[i].port < 0 || filter->items[i].port == port);
    }
    return filter->exclude ? !listed : listed;
}

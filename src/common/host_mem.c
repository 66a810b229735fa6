/* Host memory for transfers: zc_host_alloc.  Between ranks of one node
 * UCX moves a large message with one process_vm_readv (cma), and the
 * kernel finds and pins the sender's pages one by one: with 4 KiB pages
 * perf put that walk at half the time of the copy itself.  A buffer backed
 * by transparent huge pages has 512 times fewer pages, and moved 1.8x the
 * bytes per second of a malloc'd one between two ranks of the test VM, for
 * ucx_perftest as for libzcomm (BENCHMARKS.md, "Point-to-point",
 * huge-page buffers).  So large buffers are aligned to the huge page size,
 * rounded up to whole huge pages and marked MADV_HUGEPAGE (which the
 * kernel's default THP mode, "madvise", needs); small ones are aligned to
 * a cache line.  Released by zc_host_free (free() today; the API leaves
 * room for a mapping of its own). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "src/common/env.h"
#include "src/common/file.h"
#include "src/common/log.h"
#include "src/common/status.h"

#define ZC_HOST_ALIGN 64
#define ZC_HOST_HUGE_PAGE_DEFAULT ((size_t)2 << 20)

static pthread_once_t zc_host_once = PTHREAD_ONCE_INIT;
static size_t zc_host_huge_page;  /* 0: huge pages off */

/* The PMD huge page size (2 MiB on x86-64; larger on arm64 kernels with
 * 64 KiB pages), unless ZC_HOST_HUGE_PAGES=0. */
static void zc_host_probe(void)
{
    const char *value = zc_env_get("ZC_HOST_HUGE_PAGES");
    int64_t on = 1;
    char *line;

    /* Parsed here, not with zc_env_get_int: a bad value is no error of the
     * call that allocates, and must not replace the caller's last error. */
    if (value && (zc_parse_int64(value, &on) != 0 || on < 0 || on > 1)) {
        zc_log_warn("ZC_HOST_HUGE_PAGES=%s ignored (0 or 1): huge pages stay on", value);
        on = 1;
    }
    if (!on)
        return;
    zc_host_huge_page = ZC_HOST_HUGE_PAGE_DEFAULT;
    if ((line = zc_file_first_line("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"))) {
        int64_t size;
        if (zc_parse_int64(line, &size) == 0 && size >= 4096 && (size & (size - 1)) == 0)
            zc_host_huge_page = (size_t)size;
        free(line);
    }
}

zc_status_t zc_host_alloc(size_t bytes, void **ptr)
{
    size_t align = ZC_HOST_ALIGN, len = bytes;
    void *p;
    int err;

    if (!ptr)
        return zc_error(ZC_ERR_INVALID_ARG, "zc_host_alloc: ptr is NULL");
    *ptr = NULL;
    if (bytes == 0)
        return zc_error(ZC_ERR_INVALID_ARG, "zc_host_alloc: bytes is 0");
    /* As malloc: no object is larger than the largest pointer difference. */
    if (bytes > PTRDIFF_MAX)
        return zc_error(ZC_ERR_NO_MEMORY, "zc_host_alloc: cannot allocate %zu bytes", bytes);
    pthread_once(&zc_host_once, zc_host_probe);
    if (zc_host_huge_page && bytes >= zc_host_huge_page) {
        align = zc_host_huge_page;
        len = (bytes + align - 1) & ~(align - 1);
    }
    if ((err = posix_memalign(&p, align, len)) != 0)
        return zc_error(ZC_ERR_NO_MEMORY, "zc_host_alloc: cannot allocate %zu bytes: %s", bytes,
                        strerror(err));
    /* EINVAL: a kernel without THP.  The memory is good either way. */
    if (align > ZC_HOST_ALIGN && madvise(p, len, MADV_HUGEPAGE) != 0)
        zc_log_debug("zc_host_alloc: madvise(MADV_HUGEPAGE, %zu bytes): %s", len,
                     strerror(errno));
    *ptr = p;
    return ZC_OK;
}

void zc_host_free(void *ptr)
{
    free(ptr);
}

/* zc_host_alloc: its refusals, the alignment of small and large buffers,
 * large ones marked for transparent huge pages (the VmFlags "hg" of their
 * mapping in /proc/self/smaps), and ZC_HOST_HUGE_PAGES. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zcomm.h"
#include "tap.h"

#define MiB ((size_t)1 << 20)

/* Under ASan (configure --enable-sanitizers) an impossible size aborts the
 * test unless the allocator may return failure, as glibc's does. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static size_t huge_page(void)
{
    unsigned long long size = 0;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");

    if (f) {
        if (fscanf(f, "%llu", &size) != 1)
            size = 0;
        fclose(f);
    }
    return size ? (size_t)size : 2 * MiB;
}

/* 1 if the mapping holding `p` has VmFlags "hg" (MADV_HUGEPAGE), 0 if not,
 * -1 if smaps does not say. */
static int marked_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int inside = 0, found = -1;

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Every byte of [p, p + n) written and read back. */
static int writable(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + 1))
            return 0;
    return 1;
}

/* In a child (the variable is read once per process): with
 * ZC_HOST_HUGE_PAGES=value, a 3 MiB buffer is marked huge exactly when
 * `want_huge`, the call returns ZC_OK and leaves no error detail. */
static int child_case(const char *value, int want_huge)
{
    pid_t pid = fork();
    int status;

    if (pid == 0) {
        void *p = NULL;
        setenv("ZC_HOST_HUGE_PAGES", value, 1);
        zc_status_t st = zc_host_alloc(3 * MiB, &p);
        int good = st == ZC_OK && p && strcmp(zc_get_last_error(), "") == 0 &&
                   marked_huge(p) == want_huge && writable(p, 3 * MiB);
        zc_host_free(p);
        _exit(good ? 0 : 1);
    }
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

int main(void)
{
    const size_t hp = huge_page();
    const int thp = access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) == 0;
    void *p = (void *)1;

    unsetenv("ZC_HOST_HUGE_PAGES");
    tap_plan(13);

    /* First, while this process has not read the variable (children
     * inherit what it read). */
    if (thp) {
        ok(child_case("0", 0), "ZC_HOST_HUGE_PAGES=0: 3 MiB not marked, ZC_OK");
        ok(child_case("1", 1), "ZC_HOST_HUGE_PAGES=1: 3 MiB marked, ZC_OK");
        ok(child_case("7", 1), "ZC_HOST_HUGE_PAGES=7 (out of range): warned, huge pages stay "
           "on, ZC_OK and no error detail");
    } else {
        tap_skip(3, "no transparent huge pages in this kernel");
    }

    ok(zc_host_alloc(64, NULL) == ZC_ERR_INVALID_ARG && strstr(zc_get_last_error(), "ptr"),
       "NULL ptr: ZC_ERR_INVALID_ARG naming ptr");
    ok(zc_host_alloc(0, &p) == ZC_ERR_INVALID_ARG && p == NULL &&
       strstr(zc_get_last_error(), "bytes"),
       "0 bytes: ZC_ERR_INVALID_ARG naming bytes, *ptr set to NULL");
    p = (void *)1;
    ok(zc_host_alloc((size_t)1 << 50, &p) == ZC_ERR_NO_MEMORY && p == NULL &&
       strstr(zc_get_last_error(), "zc_host_alloc"),
       "1 PiB (more than a 47-bit address space): ZC_ERR_NO_MEMORY, *ptr set to NULL");

    ok(zc_host_alloc(1000, &p) == ZC_OK && p && (uintptr_t)p % 64 == 0 && writable(p, 1000),
       "1000 bytes: 64-byte aligned, every byte usable");
    zc_host_free(p);

    size_t big = hp + hp / 2 + 1;
    ok(zc_host_alloc(big, &p) == ZC_OK && p && (uintptr_t)p % hp == 0 && writable(p, big),
       "%zu bytes: aligned to the huge page (%zu), every byte usable", big, hp);
    if (thp)
        ok(marked_huge(p) == 1, "%zu bytes: marked MADV_HUGEPAGE", big);
    else
        tap_skip(1, "no transparent huge pages in this kernel");
    zc_host_free(p);

    ok(zc_host_alloc(hp, &p) == ZC_OK && p && (uintptr_t)p % hp == 0 && writable(p, hp) &&
       (!thp || marked_huge(p) == 1),
       "exactly a huge page: aligned to it%s", thp ? " and marked" : "");
    zc_host_free(p);
    p = (void *)1;
    ok(zc_host_alloc(SIZE_MAX, &p) == ZC_ERR_NO_MEMORY && p == NULL,
       "SIZE_MAX bytes: ZC_ERR_NO_MEMORY (no rounding past the top), *ptr set to NULL");
    ok(zc_host_alloc(hp - 1, &p) == ZC_OK && p && (uintptr_t)p % 64 == 0 && writable(p, hp - 1),
       "one byte under a huge page: allocated, 64-byte aligned");
    zc_host_free(p);
    zc_host_free(NULL);
    ok(1, "zc_host_free(NULL) returns");

    return tap_done();
}

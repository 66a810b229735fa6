/* The cores a process's ranks can run on, for the wait's crowded test
 * (idle.c).  Not the process's affinity: a launcher that binds each rank
 * to one core (mpirun) leaves every rank one core of its own, and the
 * ranks together many.  But a container's cpuset confines all of them,
 * and sysconf's online count does not see it: 2 ranks in a cpuset of one
 * CPU counted as uncrowded, spun without yielding, and a ping-pong's half
 * round trip took 119-124 us where yielding takes 7.3-7.8 us
 * (BENCHMARKS.md, "Point-to-point", cgroup cpusets).  So the count is the
 * online cores cut to the cgroup's cpuset, read where container runtimes
 * mount it (/sys/fs/cgroup: cgroup v2, or v1's cpuset hierarchy).
 *
 * A CPU quota (cpu.max, cfs_quota_us) is not a cut: ranks under a quota
 * still run on separate cores, a yield there hands nothing over (nothing
 * else is runnable on the core) and only costs its system call (a 2-rank
 * 8-byte ping-pong under a 1-CPU quota: 0.74 us spinning, 1.8 us
 * yielding). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/core/cpus.h"

#define ZC_CG_PATH_MAX 4096

/* CPUs in a cpuset list ("0-3,8,10-11"); 0 if empty or malformed. */
static long zc_cpu_list_count(const char *list)
{
    long count = 0;
    const char *p = list;

    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0)
            return 0;
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || hi < lo)
                return 0;
        }
        count += hi - lo + 1;
        if (*end == ',')
            end++;
        else if (*end)
            return 0;
        p = end;
    }
    return count;
}

/* The CPUs of the cpuset file `name` in this process's cgroup directory of
 * the hierarchy mounted at `mount`: mount + path when that exists (the
 * host's view), else the mount itself (a container's runtime mounts its
 * own cgroup there); 0 if unreadable or malformed. */
static long zc_cpuset_count(const char *mount, const char *path, const char *name)
{
    char file[ZC_CG_PATH_MAX], line[1024];
    FILE *f;
    long count = 0;

    snprintf(file, sizeof(file), "%s%s/%s", mount, strcmp(path, "/") ? path : "", name);
    if (access(file, R_OK) != 0)
        snprintf(file, sizeof(file), "%s/%s", mount, name);
    if ((f = fopen(file, "r")) != NULL) {
        if (fgets(line, sizeof(line), f)) {
            line[strcspn(line, "\n")] = '\0';
            count = zc_cpu_list_count(line);
        }
        fclose(f);
    }
    return count;
}

long zc_cpus_usable(const char *root)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char file[ZC_CG_PATH_MAX], mount[ZC_CG_PATH_MAX], line[ZC_CG_PATH_MAX];
    FILE *f;

    if (cpus < 1)
        cpus = 1;
    snprintf(file, sizeof(file), "%s/proc/self/cgroup", root);
    if (!(f = fopen(file, "r")))
        return cpus;
    /* Lines "id:controllers:path"; v2's is "0::path". */
    while (fgets(line, sizeof(line), f)) {
        char *controllers = strchr(line, ':'), *path, list[256];
        long count = 0;
        if (!controllers || !(path = strchr(controllers + 1, ':')))
            continue;
        *controllers++ = '\0';
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        if (*path != '/')
            continue;
        snprintf(list, sizeof(list), ",%s,", controllers);
        if (strcmp(line, "0") == 0 && *controllers == '\0') {
            /* Hybrid systems mount v2 at unified/, pure v2 ones at the top;
             * cpuset.cpus.effective already holds the ancestors' cuts. */
            snprintf(mount, sizeof(mount), "%s/sys/fs/cgroup/unified", root);
            if (access(mount, F_OK) != 0)
                snprintf(mount, sizeof(mount), "%s/sys/fs/cgroup", root);
            count = zc_cpuset_count(mount, path, "cpuset.cpus.effective");
        } else if (strstr(list, ",cpuset,")) {
            snprintf(mount, sizeof(mount), "%s/sys/fs/cgroup/cpuset", root);
            if (access(mount, F_OK) != 0)
                snprintf(mount, sizeof(mount), "%s/sys/fs/cgroup/%s", root, controllers);
            count = zc_cpuset_count(mount, path, "cpuset.effective_cpus");
        }
        if (count > 0 && count < cpus)
            cpus = count;
    }
    fclose(f);
    return cpus;
}

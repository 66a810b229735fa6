/* The cores a process's ranks can run on, for the wait's crowded test
 * (idle.c).  Not the process's affinity: a launcher that binds each rank
 * to one core (mpirun) leaves every rank one core of its own, and the
 * ranks together many.  But a container's cpuset confines all of them,
 * and sysconf's online count does not see it: 2 ranks in a cpuset of one
 * CPU counted as uncrowded, spun without yielding, and a ping-pong's half
 * round trip took 112-124 us where yielding takes 5.9-7.8 us
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

#include "src/common/file.h"
#include "src/core/cpus.h"

#define ZC_CG_PATH_MAX 4096
/* Linux's CPU numbers stay below NR_CPUS (8192 at most today). */
#define ZC_CPU_ID_MAX (1L << 20)

long zc_cpu_list_count(const char *list)
{
    long count = 0;
    const char *p = list;

    while (*p) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || !(*p >= '0' && *p <= '9') || lo > ZC_CPU_ID_MAX)
            return 0;
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || !(*p >= '0' && *p <= '9') || hi < lo || hi > ZC_CPU_ID_MAX)
                return 0;
        }
        count += hi - lo + 1;
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            return 0;  /* anything else, or a trailing comma */
        p = end;
    }
    return count;
}

/* The CPUs of the cpuset file `name` for this process's cgroup `path` in
 * the hierarchy mounted at `mount`: in the cgroup's directory, else in the
 * nearest ancestor's that has the file (a v2 cgroup has it only where the
 * cpuset controller reaches; a container's runtime mounts its own cgroup
 * at the top, and the host's path is then not there); 0 if none is
 * readable or the list is malformed. */
static long zc_cpuset_count(const char *mount, const char *path, const char *name)
{
    char dir[ZC_CG_PATH_MAX], file[ZC_CG_PATH_MAX + 64];
    size_t top = strlen(mount);

    snprintf(dir, sizeof(dir), "%s%s", mount, strcmp(path, "/") ? path : "");
    for (;;) {
        char *line, *slash;
        snprintf(file, sizeof(file), "%s/%s", dir, name);
        if ((line = zc_file_first_line(file)) != NULL) {
            long count = zc_cpu_list_count(line);
            free(line);
            return count;
        }
        if (strlen(dir) <= top || !(slash = strrchr(dir, '/')))
            return 0;
        *slash = '\0';
        if (strlen(dir) < top)  /* never above the mount */
            return 0;
    }
}

long zc_cpus_usable(const char *root)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char file[ZC_CG_PATH_MAX], mount[ZC_CG_PATH_MAX], *line = NULL;
    size_t cap = 0;
    FILE *f;

    if (cpus < 1)
        cpus = 1;
    snprintf(file, sizeof(file), "%s/proc/self/cgroup", root);
    if (!(f = fopen(file, "r")))
        return cpus;
    /* Lines "id:controllers:path"; v2's is "0::path". */
    while (getline(&line, &cap, f) >= 0) {
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
            /* Hybrid systems mount v2 at unified/, pure v2 ones at the
             * top; cpuset.cpus.effective holds the ancestors' cuts. */
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
    free(line);
    fclose(f);
    return cpus;
}

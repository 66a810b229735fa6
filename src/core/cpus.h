/* How many cores this process's ranks can run on (cpus.c). */
#ifndef ZC_CPUS_H
#define ZC_CPUS_H

/* The machine's online cores, fewer where this process's cgroup (v2 or
 * v1) confines it to a cpuset of fewer CPUs.  `root` prefixes every path
 * read (/proc/self/cgroup, /sys/fs/cgroup/...): "" on a live system, a
 * directory laid out the same way in tests.  At least 1. */
long zc_cpus_usable(const char *root);

/* CPUs in a cpuset list ("0-3,8,10-11"); 0 if empty or malformed. */
long zc_cpu_list_count(const char *list);

#endif

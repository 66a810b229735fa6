/* zc_cpus_usable (src/core/cpus.c): the machine's online cores cut to a
 * container's cgroup cpuset (a CPU quota is no cut), read from fake /proc
 * and /sys trees laid out as cgroup v2, hybrid and v1 systems and
 * container runtimes lay them out.  Each expectation is min(online cores,
 * the cpuset's CPUs), exact. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/core/cpus.h"
#include "tap.h"

static char base[64];
static int ncase;

/* mkdir -p of every directory of `path` (not the last component). */
static int make_parents(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int bad = mkdir(path, 0755) != 0 && errno != EEXIST;
        *p = '/';
        if (bad)
            return -1;
    }
    return 0;
}

/* A fresh root for one case; its files are "relative/path=content" pairs,
 * NULL-terminated.  A path ending in '/' is a directory. */
static const char *fake_root(const char *const *files)
{
    static char root[128];
    char path[512];

    snprintf(root, sizeof(root), "%s/case%d", base, ++ncase);
    for (; *files; files++) {
        const char *eq = strchr(*files, '=');
        size_t len = eq ? (size_t)(eq - *files) : strlen(*files);
        snprintf(path, sizeof(path), "%s/%.*s", root, (int)len, *files);
        if (make_parents(path) != 0)
            return NULL;
        if (path[strlen(path) - 1] == '/')
            continue;
        FILE *f = fopen(path, "w");
        if (!f)
            return NULL;
        fprintf(f, "%s\n", eq ? eq + 1 : "");
        fclose(f);
    }
    return root;
}

static long min_online(long limit)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return limit < online ? limit : online;
}

/* zc_cpus_usable over the tree equals min(online, want). */
static void check(const char *name, long want, const char *const *files)
{
    const char *root = fake_root(files);
    long got = root ? zc_cpus_usable(root) : -1;

    ok(got == min_online(want), "%s: %ld cores (want %ld)", name, got, min_online(want));
}

#define BIG 1000000L  /* no cut: the online count */

/* Each case: its name, the cpuset's CPUs (BIG: no cut) and the tree's
 * files. */
static const struct {
    const char *name;
    long want;
    const char *files[4];  /* NULL-terminated */
} cases[] = {
    {"no /proc/self/cgroup", BIG,
     {"etc/"}},
    {"v2, no cpuset controller", BIG,
     {"proc/self/cgroup=0::/a", "sys/fs/cgroup/a/cgroup.procs=1"}},
    {"v2, cpuset.cpus.effective of one CPU", 1,
     {"proc/self/cgroup=0::/a/b", "sys/fs/cgroup/a/b/cpuset.cpus.effective=3"}},
    {"v2, cpuset.cpus.effective 0-1,4 counts 3", 3,
     {"proc/self/cgroup=0::/a", "sys/fs/cgroup/a/cpuset.cpus.effective=0-1,4"}},
    {"v2, a wide cpuset is no cut", BIG,
     {"proc/self/cgroup=0::/a", "sys/fs/cgroup/a/cpuset.cpus.effective=0-1023"}},
    {"v2, a CPU quota of half a CPU is not a cut (ranks still run apart)", BIG,
     {"proc/self/cgroup=0::/a", "sys/fs/cgroup/a/cpu.max=50000 100000"}},
    {"v2, the cgroup without cpuset files: its parent's", 1,
     {"proc/self/cgroup=0::/pod/ctr", "sys/fs/cgroup/pod/cpuset.cpus.effective=2",
      "sys/fs/cgroup/pod/ctr/cgroup.procs=1"}},
    {"v2 in a container (cgroup namespace: path /, own cgroup at the mount)", 1,
     {"proc/self/cgroup=0::/", "sys/fs/cgroup/cpuset.cpus.effective=5"}},
    {"v2, the host's path not mounted here: the mount is the cgroup", 1,
     {"proc/self/cgroup=0::/system.slice/docker-1.scope",
      "sys/fs/cgroup/cpuset.cpus.effective=0"}},
    {"hybrid: v2 under unified/", 1,
     {"proc/self/cgroup=0::/a", "sys/fs/cgroup/unified/a/cpuset.cpus.effective=2"}},
    {"v1, cpuset.effective_cpus of one CPU", 1,
     {"proc/self/cgroup=3:cpuset:/x", "sys/fs/cgroup/cpuset/x/cpuset.effective_cpus=1"}},
    {"v1, mount named by its hierarchy (cpuset,cpu)", 1,
     {"proc/self/cgroup=3:cpuset,cpu:/x", "sys/fs/cgroup/cpuset,cpu/x/cpuset.effective_cpus=7"}},
    {"v1, a cfs quota is not a cut", BIG,
     {"proc/self/cgroup=4:cpu,cpuacct:/",
      "sys/fs/cgroup/cpu/cpu.cfs_quota_us=20000",
      "sys/fs/cgroup/cpu/cpu.cfs_period_us=100000"}},
    {"v1 and v2 lines together: the smaller cpuset", 1,
     {"proc/self/cgroup=3:cpuset:/\n0::/",
      "sys/fs/cgroup/cpuset/cpuset.effective_cpus=0-7",
      "sys/fs/cgroup/unified/cpuset.cpus.effective=6"}},
    {"malformed cpuset lists are no cut", BIG,
     {"proc/self/cgroup=0::/a\n3:cpuset:/",
      "sys/fs/cgroup/unified/a/cpuset.cpus.effective=3-1",
      "sys/fs/cgroup/cpuset/cpuset.effective_cpus=1,x"}},
    {"malformed /proc/self/cgroup lines are skipped", BIG,
     {"proc/self/cgroup=garbage\n7:cpuset\n0::relative", "sys/fs/cgroup/cpuset.cpus.effective=1"}},
};

/* cpuset lists and their CPUs, exact (0: malformed). */
static const struct {
    const char *list;
    long cpus;
} lists[] = {
    {"0", 1}, {"0-0", 1}, {"0-3,8,10-11", 7}, {"5-5,7", 2}, {"0-8191", 8192},
    {"", 0}, {"3-1", 0}, {"1,", 0}, {",1", 0}, {"1-", 0}, {"-1", 0}, {"1 ", 0}, {"a", 0},
    {"0-9223372036854775807", 0}, {"99999999999999999999", 0}, {"+1", 0},
};

int main(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN), live;

    snprintf(base, sizeof(base), "%s/zc_test_cpus.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (online < 1 || !mkdtemp(base))
        tap_skip_all("no online core count or no temporary directory");

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check(cases[i].name, cases[i].want, cases[i].files);
    int lists_ok = 1;
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        if (zc_cpu_list_count(lists[i].list) != lists[i].cpus) {
            diag("\"%s\": %ld CPUs, want %ld", lists[i].list, zc_cpu_list_count(lists[i].list),
                 lists[i].cpus);
            lists_ok = 0;
        }
    ok(lists_ok, "%zu cpuset lists counted exactly, the malformed and the overflowing as 0",
       sizeof(lists) / sizeof(lists[0]));

    live = zc_cpus_usable("");
    ok(live >= 1 && live <= online, "this machine: %ld of %ld online cores usable", live, online);

    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    if (system(cmd) != 0)
        diag("could not remove %s", base);
    return tap_done();
}

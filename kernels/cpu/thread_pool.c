/* Fork/join thread pool of the CPU kernels.  Workers sleep on a condition
 * variable between jobs (the machine is shared: no spinning) and take work
 * from an atomic counter, so uneven causal blocks balance themselves. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/cpu/thread_pool.h"
#include "src/common/env.h"
#include "src/common/log.h"

#define ZC_CPU_POOL_MAX 1024

typedef struct {
    zc_cpu_for_fn_t body;
    void *ctx;
    int64_t n;
    int64_t chunk;
    atomic_llong next;
} zc_cpu_job_t;

static struct {
    pthread_mutex_t run_lock;   /* one job at a time */
    pthread_mutex_t lock;       /* guards the fields below */
    pthread_cond_t wake;
    pthread_cond_t done;
    pid_t pid;                  /* process that created the workers */
    int nthreads;               /* caller included; 0: not created */
    uint64_t generation;
    int active;
    zc_cpu_job_t *job;
} zc_cpu_pool = {
    .run_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static void zc_cpu_job_work(zc_cpu_job_t *job, int thread)
{
    for (;;) {
        int64_t begin = atomic_fetch_add(&job->next, job->chunk);
        int64_t end;

        if (begin >= job->n)
            return;
        end = begin + job->chunk < job->n ? begin + job->chunk : job->n;
        job->body(job->ctx, begin, end, thread);
    }
}

static void *zc_cpu_worker(void *arg)
{
    int thread = (int)(intptr_t)arg;
    uint64_t seen = 0;

    pthread_mutex_lock(&zc_cpu_pool.lock);
    for (;;) {
        zc_cpu_job_t *job;

        while (zc_cpu_pool.generation == seen)
            pthread_cond_wait(&zc_cpu_pool.wake, &zc_cpu_pool.lock);
        seen = zc_cpu_pool.generation;
        job = zc_cpu_pool.job;
        pthread_mutex_unlock(&zc_cpu_pool.lock);

        zc_cpu_job_work(job, thread);

        pthread_mutex_lock(&zc_cpu_pool.lock);
        if (--zc_cpu_pool.active == 0)
            pthread_cond_signal(&zc_cpu_pool.done);
    }
    return NULL;
}

static int zc_cpu_pool_wanted(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t value;

    if (zc_env_get("ZC_NUM_THREADS") == NULL)
        return online > 0 ? (int)online : 1;
    if (zc_env_get_int("ZC_NUM_THREADS", &value) != ZC_OK || value < 1) {
        zc_log_warn("ZC_NUM_THREADS=%s is not a positive integer, using %ld",
                    zc_env_get("ZC_NUM_THREADS"), online);
        return online > 0 ? (int)online : 1;
    }
    return value > ZC_CPU_POOL_MAX ? ZC_CPU_POOL_MAX : (int)value;
}

/* Called with run_lock held.  A child of fork() has none of its parent's
 * workers, so the pool is rebuilt in every new process. */
static void zc_cpu_pool_start(void)
{
    pthread_attr_t attr;
    int wanted;

    if (zc_cpu_pool.nthreads > 0 && zc_cpu_pool.pid == getpid())
        return;
    if (zc_cpu_pool.nthreads > 0) {
        /* forked: the parent's waiters are ghosts in these objects */
        pthread_mutex_init(&zc_cpu_pool.lock, NULL);
        pthread_cond_init(&zc_cpu_pool.wake, NULL);
        pthread_cond_init(&zc_cpu_pool.done, NULL);
    }
    wanted = zc_cpu_pool_wanted();
    zc_cpu_pool.pid = getpid();
    zc_cpu_pool.nthreads = 1;
    zc_cpu_pool.generation = 0;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 1; i < wanted; i++) {
        pthread_t tid;

        if (pthread_create(&tid, &attr, zc_cpu_worker, (void *)(intptr_t)i) != 0) {
            zc_log_warn("cpu kernels: could not start thread %d of %d, using %d", i + 1,
                        wanted, i);
            break;
        }
        zc_cpu_pool.nthreads++;
    }
    pthread_attr_destroy(&attr);
    zc_log_debug("cpu kernels: %d threads", zc_cpu_pool.nthreads);
}

int zc_cpu_pool_threads(void)
{
    int n;

    pthread_mutex_lock(&zc_cpu_pool.run_lock);
    zc_cpu_pool_start();
    n = zc_cpu_pool.nthreads;
    pthread_mutex_unlock(&zc_cpu_pool.run_lock);
    return n;
}

void zc_cpu_parallel_for(int64_t n, int64_t chunk, zc_cpu_for_fn_t body, void *ctx)
{
    zc_cpu_job_t job = {.body = body, .ctx = ctx, .n = n, .chunk = chunk > 0 ? chunk : 1};
    int helpers;

    if (n <= 0)
        return;
    atomic_init(&job.next, 0);
    pthread_mutex_lock(&zc_cpu_pool.run_lock);
    zc_cpu_pool_start();
    helpers = zc_cpu_pool.nthreads - 1;
    if (n <= job.chunk)
        helpers = 0; /* one chunk: waking the others costs more than it saves */
    if (helpers > 0) {
        pthread_mutex_lock(&zc_cpu_pool.lock);
        zc_cpu_pool.job = &job;
        zc_cpu_pool.active = zc_cpu_pool.nthreads - 1;
        zc_cpu_pool.generation++;
        pthread_cond_broadcast(&zc_cpu_pool.wake);
        pthread_mutex_unlock(&zc_cpu_pool.lock);
    }
    zc_cpu_job_work(&job, 0);
    if (helpers > 0) {
        pthread_mutex_lock(&zc_cpu_pool.lock);
        while (zc_cpu_pool.active > 0)
            pthread_cond_wait(&zc_cpu_pool.done, &zc_cpu_pool.lock);
        pthread_mutex_unlock(&zc_cpu_pool.lock);
    }
    pthread_mutex_unlock(&zc_cpu_pool.run_lock);
}

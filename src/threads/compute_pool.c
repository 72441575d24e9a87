/* compute_pool.c: syn_compute_pool, the public handle on a thread pool that several engines share
 * (see synapse.h): the pool itself is src/threads/threadpool.c, whose jobs take turns. */
#include <stdlib.h>
#include <unistd.h>

#include "core/error.h"
#include "threads/compute_pool.h"

struct syn_compute_pool {
    syn_threadpool *threads;
};

syn_status syn_compute_pool_new(int32_t n_threads, syn_compute_pool **out) {
    syn_clear_error();
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_compute_pool_new: out is NULL");
    *out = NULL;
    if (n_threads < 0 || n_threads > SYN_MAX_THREADS)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "n_threads %d is outside 0..%d", n_threads,
                        SYN_MAX_THREADS);
    if (n_threads == 0) {
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = online < 1 ? 1 : online > SYN_MAX_THREADS ? SYN_MAX_THREADS : (int32_t)online;
    }
    syn_compute_pool *p = calloc(1, sizeof *p);
    if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "syn_compute_pool_new: out of memory");
    syn_status st = syn_threadpool_new(n_threads, &p->threads);
    if (st != SYN_OK) {
        free(p);
        return st;
    }
    *out = p;
    return SYN_OK;
}

void syn_compute_pool_free(syn_compute_pool *pool) {
    if (!pool) return;
    syn_threadpool_free(pool->threads);
    free(pool);
}

int32_t syn_compute_pool_n_threads(const syn_compute_pool *pool) {
    return pool ? syn_threadpool_n_threads(pool->threads) : 0;
}

syn_threadpool *syn_compute_pool_threads(const syn_compute_pool *pool) { return pool->threads; }

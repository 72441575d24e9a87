/*
 * threadpool.c: the persistent pool. A job is published by bumping `generation` under the mutex
 * (so a worker that checked it under the mutex before sleeping cannot miss it) and broadcasting;
 * spinning workers notice the new generation without the mutex. Chunks are claimed with an atomic
 * fetch-add; the last worker to finish wakes the caller, which also spins briefly before sleeping.
 */
#include "threads/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SYN_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define SYN_CPU_RELAX() __asm__ volatile("yield")
#else
#define SYN_CPU_RELAX() ((void)0)
#endif

enum { SPIN_NS = 20000, MAX_THREADS = 256 }; /* spin ~20 us before sleeping */

typedef struct worker {
    syn_threadpool *pool;
    int index;
    pthread_t thread;
} worker;

struct syn_threadpool {
    int n_threads;
    worker *workers; /* [n_threads - 1]: workers 1..n_threads-1 */

    pthread_mutex_t mutex;
    pthread_cond_t wake;  /* a new generation or stop */
    pthread_cond_t done;  /* pending reached 0 */
    atomic_uint_fast64_t generation;
    atomic_bool stop;

    /* The current job: written before generation is bumped, read after it is seen. */
    syn_chunk_fn fn;
    void *ctx;
    int64_t n_chunks;
    atomic_int_fast64_t next_chunk;
    atomic_int error;   /* first nonzero chunk result */
    atomic_int pending; /* workers that have not finished the current job */
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Claims and runs chunks until none are left or one has failed. */
static void run_chunks(syn_threadpool *pool, int thread_index) {
    for (;;) {
        if (atomic_load_explicit(&pool->error, memory_order_relaxed) != 0) return;
        const int64_t chunk = atomic_fetch_add_explicit(&pool->next_chunk, 1, memory_order_relaxed);
        if (chunk >= pool->n_chunks) return;
        const int rc = pool->fn(pool->ctx, chunk, thread_index);
        if (rc != 0) {
            int expected = 0;
            atomic_compare_exchange_strong(&pool->error, &expected, rc);
            return;
        }
    }
}

/* Spins until *value differs from seen or SPIN_NS pass; true when it changed. */
static bool spin_until_changed(atomic_uint_fast64_t *value, uint64_t seen) {
    const uint64_t start = now_ns();
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(value, memory_order_acquire) != seen) return true;
        SYN_CPU_RELAX();
        if ((i & 63) == 0 && now_ns() - start > SPIN_NS) return false;
    }
}

static void *worker_main(void *arg) {
    worker *self = arg;
    syn_threadpool *pool = self->pool;
    uint64_t seen = 0;
    for (;;) {
        if (!spin_until_changed(&pool->generation, seen)) {
            pthread_mutex_lock(&pool->mutex);
            while (atomic_load_explicit(&pool->generation, memory_order_acquire) == seen) {
                pthread_cond_wait(&pool->wake, &pool->mutex);
            }
            pthread_mutex_unlock(&pool->mutex);
        }
        seen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (atomic_load(&pool->stop)) return NULL;
        run_chunks(pool, self->index);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mutex);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mutex);
        }
    }
}

/* Publishes a new generation (a job, or stop) to every worker. */
static void publish(syn_threadpool *pool) {
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
}

static void stop_workers(syn_threadpool *pool, int n_started) {
    atomic_store(&pool->stop, true);
    publish(pool);
    for (int i = 0; i < n_started; i++) pthread_join(pool->workers[i].thread, NULL);
}

syn_status syn_threadpool_new(int n_threads, syn_threadpool **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_threadpool_new: NULL output pointer");
    *out = NULL;
    if (n_threads < 1 || n_threads > MAX_THREADS) {
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "thread count %d is outside 1..%d", n_threads, MAX_THREADS);
    }
    syn_threadpool *pool = calloc(1, sizeof *pool);
    worker *workers = n_threads > 1 ? calloc((size_t)n_threads - 1, sizeof *workers) : NULL;
    if (!pool || (n_threads > 1 && !workers)) {
        free(pool);
        free(workers);
        return syn_fail(SYN_ERR_NO_MEMORY, "thread pool of %d threads: out of memory", n_threads);
    }
    pool->n_threads = n_threads;
    pool->workers = workers;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->next_chunk, 0);
    atomic_init(&pool->error, 0);
    atomic_init(&pool->pending, 0);
    for (int i = 0; i < n_threads - 1; i++) {
        workers[i].pool = pool;
        workers[i].index = i + 1;
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            stop_workers(pool, i);
            pool->n_threads = 1; /* nothing left to join */
            syn_threadpool_free(pool);
            return syn_fail(SYN_ERR_INTERNAL, "creating worker thread %d of %d failed", i + 1, n_threads);
        }
    }
    *out = pool;
    return SYN_OK;
}

void syn_threadpool_free(syn_threadpool *pool) {
    if (!pool) return;
    if (pool->n_threads > 1) stop_workers(pool, pool->n_threads - 1);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mutex);
    free(pool->workers);
    free(pool);
}

int syn_threadpool_n_threads(const syn_threadpool *pool) { return pool->n_threads; }

int syn_threadpool_run(syn_threadpool *pool, int64_t n_chunks, syn_chunk_fn fn, void *ctx) {
    if (n_chunks <= 0) return 0;
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_chunks = n_chunks;
    atomic_store_explicit(&pool->next_chunk, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->error, 0, memory_order_relaxed);
    if (pool->n_threads == 1 || n_chunks == 1) {
        run_chunks(pool, 0);
        return atomic_load_explicit(&pool->error, memory_order_relaxed);
    }
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    publish(pool);
    run_chunks(pool, 0);

    /* Wait for the workers: spin briefly, then sleep until the last one signals. */
    const uint64_t start = now_ns();
    for (unsigned i = 1; atomic_load_explicit(&pool->pending, memory_order_acquire) != 0; i++) {
        SYN_CPU_RELAX();
        if ((i & 63) == 0 && now_ns() - start > SPIN_NS) {
            pthread_mutex_lock(&pool->mutex);
            while (atomic_load_explicit(&pool->pending, memory_order_acquire) != 0) {
                pthread_cond_wait(&pool->done, &pool->mutex);
            }
            pthread_mutex_unlock(&pool->mutex);
            break;
        }
    }
    return atomic_load_explicit(&pool->error, memory_order_relaxed);
}

/*
 * threadpool.c: the persistent pool. A job is published by bumping `generation` under the mutex
 * (so a worker that checked it under the mutex before sleeping cannot miss it) and broadcasting;
 * spinning workers notice the new generation without the mutex. The last worker to finish wakes
 * the caller, which also spins before sleeping.
 *
 * Chunk claiming: the job's chunk indices are cut into one contiguous range per thread. A thread
 * claims its own range front to back, so consecutive row chunks form one sequential memory stream
 * per thread (the matvec kernels reach memory speed only on long sequential streams, and a shared
 * counter interleaves the threads' chunks, restarting every thread's stream at every chunk). A
 * thread whose range is empty takes chunks one at a time from the back of the others' ranges, so
 * a thread that starts late or is preempted does not hold the job up. A range is (front, back)
 * packed in one 64-bit atomic; owner and thieves claim with compare-and-swap, so each chunk is
 * claimed exactly once. Within a job fronts only grow and backs only shrink, so a stale compare
 * value can never match again (no ABA).
 */
#include "threads/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SYN_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define SYN_CPU_RELAX() __asm__ volatile("yield")
#else
#define SYN_CPU_RELAX() ((void)0)
#endif

enum {
    /* Spin this long before sleeping: longer than the serial gaps between the jobs of a forward
     * pass (and between decode steps), so workers stay awake through a whole generation; a
     * futex wake-up costs tens of microseconds on a virtual machine. */
    SPIN_NS = 200000,
    YIELD_AFTER_NS = 5000,
    MAX_THREADS = 256,
    CACHE_LINE = 64,
};

/* Chunks per part of a job: ranges pack 32-bit indices, so larger jobs run as several parts. */
#define PART_CHUNKS ((int64_t)UINT32_MAX)

typedef struct worker {
    syn_threadpool *pool;
    int index;
    pthread_t thread;
} worker;

/* One thread's unclaimed chunks [front, back) of the current part: front | (uint64_t)back << 32.
 * A cache line each, as the owner updates its slot at every chunk. */
typedef struct range_slot {
    _Alignas(CACHE_LINE) atomic_uint_fast64_t range;
} range_slot;

struct syn_threadpool {
    /* Read by spinning workers: kept apart from the lines the job writes. */
    _Alignas(CACHE_LINE) atomic_uint_fast64_t generation;
    atomic_bool stop;

    _Alignas(CACHE_LINE) int n_threads;
    worker *workers;   /* [n_threads - 1]: workers 1..n_threads-1 */
    range_slot *slots; /* [n_threads] */

    pthread_mutex_t mutex;
    pthread_mutex_t run_lock; /* one job at a time when several owners share the pool */
    pthread_cond_t wake;      /* a new generation or stop */
    pthread_cond_t done;      /* pending reached 0 */

    /* The current part of a job: written before generation is bumped, read after it is seen. */
    syn_chunk_fn fn;
    void *ctx;
    int64_t base;     /* chunk index of the part's chunk 0 */
    atomic_int error; /* first nonzero chunk result */

    _Alignas(CACHE_LINE) atomic_int pending; /* workers that have not finished the current part */
};

static uint64_t pack_range(uint32_t front, uint32_t back) {
    return (uint64_t)front | (uint64_t)back << 32;
}

/* Claims the front chunk of slot's range (own == true) or its back chunk; false when empty. */
static bool claim(range_slot *slot, bool own, uint32_t *chunk) {
    uint64_t r = atomic_load_explicit(&slot->range, memory_order_relaxed);
    for (;;) {
        const uint32_t front = (uint32_t)r, back = (uint32_t)(r >> 32);
        if (front >= back) return false;
        const uint64_t next = own ? pack_range(front + 1, back) : pack_range(front, back - 1);
        if (atomic_compare_exchange_weak_explicit(&slot->range, &r, next, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *chunk = own ? front : back - 1;
            return true;
        }
    }
}

/* Claims and runs chunks until none are left anywhere or one has failed. */
static void run_chunks(syn_threadpool *pool, int thread_index) {
    const int n = pool->n_threads;
    int victim = thread_index; /* the range being drained: our own first */
    for (;;) {
        if (atomic_load_explicit(&pool->error, memory_order_relaxed) != 0) return;
        uint32_t chunk;
        while (!claim(&pool->slots[victim], victim == thread_index, &chunk)) {
            victim = (victim + 1) % n;
            if (victim == thread_index) return; /* every range was empty when looked at */
        }
        const int rc = pool->fn(pool->ctx, pool->base + (int64_t)chunk, thread_index);
        if (rc != 0) {
            int expected = 0;
            atomic_compare_exchange_strong(&pool->error, &expected, rc);
            return;
        }
    }
}

/* One step of a wait that began at start (ns): false once the thread should sleep instead.
 * The first YIELD_AFTER_NS only pause; after that each step also yields, so that on a machine
 * where other processes want the CPU a waiting thread hands over its time slice instead of
 * burning it (a yield with nothing else runnable returns at once). */
static bool keep_spinning(unsigned i, uint64_t start) {
    SYN_CPU_RELAX();
    if ((i & 63) != 0) return true;
    const uint64_t waited = syn_now_ns() - start;
    if (waited > YIELD_AFTER_NS) sched_yield();
    return waited <= SPIN_NS;
}

/* Spins until *value differs from seen or SPIN_NS pass; true when it changed. */
static bool spin_until_changed(atomic_uint_fast64_t *value, uint64_t seen) {
    const uint64_t start = syn_now_ns();
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(value, memory_order_acquire) != seen) return true;
        if (!keep_spinning(i, start)) return false;
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

/* Publishes a new generation (a job part, or stop) to every worker. */
static void publish(syn_threadpool *pool) {
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
}

static void stop_workers(syn_threadpool *pool, int n_started) {
    atomic_store(&pool->stop, true);
    publish(pool);
    for (int i = 0; i < n_started; i++)
        pthread_join(pool->workers[i].thread, NULL);
}

syn_status syn_threadpool_new(int n_threads, syn_threadpool **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_threadpool_new: NULL output pointer");
    *out = NULL;
    if (n_threads < 1 || n_threads > MAX_THREADS) {
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "thread count %d is outside 1..%d", n_threads,
                        MAX_THREADS);
    }
    /* aligned_alloc wants a size that is a multiple of the alignment */
    const size_t pool_bytes = (sizeof(syn_threadpool) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    syn_threadpool *pool = aligned_alloc(CACHE_LINE, pool_bytes);
    range_slot *slots = aligned_alloc(CACHE_LINE, sizeof(range_slot) * (size_t)n_threads);
    worker *workers = n_threads > 1 ? calloc((size_t)n_threads - 1, sizeof *workers) : NULL;
    if (!pool || !slots || (n_threads > 1 && !workers)) {
        free(pool);
        free(slots);
        free(workers);
        return syn_fail(SYN_ERR_NO_MEMORY, "thread pool of %d threads: out of memory", n_threads);
    }
    memset(pool, 0, pool_bytes);
    pool->n_threads = n_threads;
    pool->workers = workers;
    pool->slots = slots;
    for (int i = 0; i < n_threads; i++)
        atomic_init(&slots[i].range, 0);
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_mutex_init(&pool->run_lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->error, 0);
    atomic_init(&pool->pending, 0);
    for (int i = 0; i < n_threads - 1; i++) {
        workers[i].pool = pool;
        workers[i].index = i + 1;
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            stop_workers(pool, i);
            pool->n_threads = 1; /* nothing left to join */
            syn_threadpool_free(pool);
            return syn_fail(SYN_ERR_INTERNAL, "creating worker thread %d of %d failed", i + 1,
                            n_threads);
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
    pthread_mutex_destroy(&pool->run_lock);
    free(pool->workers);
    free(pool->slots);
    free(pool);
}

int syn_threadpool_n_threads(const syn_threadpool *pool) { return pool->n_threads; }

/* Runs chunks [base, base + n) (n <= PART_CHUNKS) on every thread; returns the error so far. */
static int run_part(syn_threadpool *pool, int64_t base, int64_t n) {
    const int nt = pool->n_threads;
    pool->base = base;
    for (int t = 0; t < nt; t++) { /* thread t's share: [t n / nt, (t + 1) n / nt) */
        const uint32_t front = (uint32_t)((uint64_t)n * (uint64_t)t / (uint64_t)nt);
        const uint32_t back = (uint32_t)((uint64_t)n * (uint64_t)(t + 1) / (uint64_t)nt);
        atomic_store_explicit(&pool->slots[t].range, pack_range(front, back), memory_order_relaxed);
    }
    if (nt == 1 || n == 1) {
        run_chunks(pool, 0); /* chunk 0 lies in the caller's range, or in its steal path */
        return atomic_load_explicit(&pool->error, memory_order_relaxed);
    }
    atomic_store_explicit(&pool->pending, nt - 1, memory_order_relaxed);
    publish(pool);
    run_chunks(pool, 0);

    /* Wait for the workers: spin, then sleep until the last one signals. */
    const uint64_t start = syn_now_ns();
    for (unsigned i = 1; atomic_load_explicit(&pool->pending, memory_order_acquire) != 0; i++) {
        if (!keep_spinning(i, start)) {
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

int syn_threadpool_run(syn_threadpool *pool, int64_t n_chunks, syn_chunk_fn fn, void *ctx) {
    if (n_chunks <= 0) return 0;
    pthread_mutex_lock(&pool->run_lock);
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->error, 0, memory_order_relaxed);
    int rc = 0;
    for (int64_t base = 0; rc == 0 && base < n_chunks; base += PART_CHUNKS) {
        rc = run_part(pool, base, n_chunks - base < PART_CHUNKS ? n_chunks - base : PART_CHUNKS);
    }
    pthread_mutex_unlock(&pool->run_lock);
    return rc;
}

/*
 * threadpool.h: a persistent worker pool for the optimized backend.
 *
 * The calling thread is worker 0 and takes part in every job; n_threads - 1 workers are created
 * once. A job is n_chunks calls fn(ctx, chunk, thread_index), chunk in [0, n_chunks). Thread t
 * first runs the chunks of its own contiguous share [t * n_chunks / n_threads, (t + 1) * n_chunks /
 * n_threads) in ascending order, then takes unclaimed chunks from the ends of the other shares.
 * So chunks that cut a matrix into consecutive row ranges give each thread one sequential memory
 * stream, while a late or preempted thread's work is still shared out. Which thread runs a chunk
 * varies between runs: a chunk's result must not depend on thread_index (use it only to pick
 * per-thread scratch space). Between jobs idle workers spin for a while (long enough to bridge
 * the serial steps of a forward pass), then sleep on a condition variable.
 */
#ifndef SYN_THREADPOOL_H
#define SYN_THREADPOOL_H

#include <stdint.h>

#include "synapse.h"

typedef struct syn_threadpool syn_threadpool;

/* A chunk of work: returns 0 on success or a nonzero code (e.g. a negative syn_status) on
 * failure. thread_index is in [0, n_threads). */
typedef int (*syn_chunk_fn)(void *ctx, int64_t chunk, int thread_index);

/* Creates a pool of n_threads (1..256) threads counting the caller; n_threads == 1 creates no
 * threads and runs every job inline. Free with syn_threadpool_free().
 * Errors: SYN_ERR_INVALID_ARGUMENT, SYN_ERR_NO_MEMORY, SYN_ERR_INTERNAL (thread creation failed).
 */
syn_status syn_threadpool_new(int n_threads, syn_threadpool **out);

/* Joins the workers and frees the pool. NULL is a no-op. Not while a job runs. */
void syn_threadpool_free(syn_threadpool *pool);

int syn_threadpool_n_threads(const syn_threadpool *pool);

/* Runs chunks 0..n_chunks-1 of fn and returns when all claimed chunks are done. Returns 0 when
 * every chunk returned 0; otherwise the first nonzero value recorded (chunks not yet claimed at
 * that point are skipped). n_chunks <= 0 returns 0 at once. The pool stays usable after a failure.
 * Jobs run one at a time: callers on several threads (engines sharing a syn_compute_pool) take
 * turns, each joining its own job as thread 0. Never call it from inside a chunk. */
int syn_threadpool_run(syn_threadpool *pool, int64_t n_chunks, syn_chunk_fn fn, void *ctx);

/* Rows [*begin, *end) of chunk `chunk` when n_rows rows are cut into chunks of `rows_per_chunk`
 * (the last one may be short); a helper for row-parallel kernels. */
static inline void syn_chunk_rows(int64_t n_rows, int64_t rows_per_chunk, int64_t chunk,
                                  int64_t *begin, int64_t *end) {
    *begin = chunk * rows_per_chunk;
    *end = *begin + rows_per_chunk < n_rows ? *begin + rows_per_chunk : n_rows;
}

#endif

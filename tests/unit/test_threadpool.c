/* test_threadpool.c: the persistent worker pool: every chunk runs exactly once for any thread and
 * chunk count, errors reach the caller and leave the pool usable, many small jobs do not deadlock,
 * a thread runs its own share in order and a stalled thread's share is taken over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "threads/threadpool.h"

typedef struct count_job {
    atomic_int *runs;      /* [n_chunks]: times each chunk ran */
    atomic_int bad_thread; /* thread_index outside [0, n_threads) seen */
    int n_threads;
    int64_t fail_chunk; /* this chunk returns fail_code; -1: none */
    int fail_code;
} count_job;

static int count_chunk(void *ctx, int64_t chunk, int thread_index) {
    count_job *job = ctx;
    if (thread_index < 0 || thread_index >= job->n_threads) atomic_store(&job->bad_thread, 1);
    atomic_fetch_add(&job->runs[chunk], 1);
    return chunk == job->fail_chunk ? job->fail_code : 0;
}

static void test_every_chunk_runs_once(void **state) {
    (void)state;
    static const int64_t chunk_counts[] = {0, 1, 7, 1000};
    for (int n_threads = 1; n_threads <= 8; n_threads++) {
        syn_threadpool *pool = NULL;
        assert_int_equal(syn_threadpool_new(n_threads, &pool), SYN_OK);
        assert_int_equal(syn_threadpool_n_threads(pool), n_threads);
        for (size_t c = 0; c < sizeof chunk_counts / sizeof chunk_counts[0]; c++) {
            const int64_t n = chunk_counts[c];
            count_job job = {.runs = calloc((size_t)n + 1, sizeof(atomic_int)),
                             .n_threads = n_threads,
                             .fail_chunk = -1};
            assert_non_null(job.runs);
            assert_int_equal(syn_threadpool_run(pool, n, count_chunk, &job), 0);
            for (int64_t i = 0; i < n; i++)
                assert_int_equal(atomic_load(&job.runs[i]), 1);
            assert_int_equal(atomic_load(&job.runs[n]), 0); /* nothing past the end */
            assert_int_equal(atomic_load(&job.bad_thread), 0);
            free(job.runs);
        }
        syn_threadpool_free(pool);
    }
}

static void test_error_reaches_caller_and_pool_recovers(void **state) {
    (void)state;
    for (int n_threads = 1; n_threads <= 4; n_threads++) {
        syn_threadpool *pool = NULL;
        assert_int_equal(syn_threadpool_new(n_threads, &pool), SYN_OK);
        const int64_t n = 500;
        count_job job = {.runs = calloc((size_t)n, sizeof(atomic_int)),
                         .n_threads = n_threads,
                         .fail_chunk = 123,
                         .fail_code = -42};
        assert_non_null(job.runs);
        assert_int_equal(syn_threadpool_run(pool, n, count_chunk, &job), -42);
        assert_int_equal(atomic_load(&job.runs[123]), 1);
        for (int64_t i = 0; i < n; i++)
            assert_true(atomic_load(&job.runs[i]) <= 1); /* skipped or once */

        /* The next job runs completely. */
        for (int64_t i = 0; i < n; i++)
            atomic_store(&job.runs[i], 0);
        job.fail_chunk = -1;
        assert_int_equal(syn_threadpool_run(pool, n, count_chunk, &job), 0);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(atomic_load(&job.runs[i]), 1);
        free(job.runs);
        syn_threadpool_free(pool);
    }
}

/* Every chunk fails: the result is one of the chunks' codes, never 0. */
static int fail_with_chunk_code(void *ctx, int64_t chunk, int thread_index) {
    (void)ctx;
    (void)thread_index;
    return -(int)(chunk + 1);
}

static void test_all_chunks_fail(void **state) {
    (void)state;
    syn_threadpool *pool = NULL;
    assert_int_equal(syn_threadpool_new(3, &pool), SYN_OK);
    const int rc = syn_threadpool_run(pool, 64, fail_with_chunk_code, NULL);
    assert_true(rc <= -1 && rc >= -64);
    syn_threadpool_free(pool);
}

static int add_chunk(void *ctx, int64_t chunk, int thread_index) {
    (void)thread_index;
    atomic_fetch_add((atomic_long *)ctx, (long)chunk + 1);
    return 0;
}

static void test_many_small_jobs(void **state) {
    (void)state;
    for (int n_threads = 2; n_threads <= 3; n_threads++) {
        syn_threadpool *pool = NULL;
        assert_int_equal(syn_threadpool_new(n_threads, &pool), SYN_OK);
        atomic_long total = 0;
        for (int job = 0; job < 10000; job++) {
            assert_int_equal(syn_threadpool_run(pool, 1 + job % 5, add_chunk, &total), 0);
        }
        /* sum over jobs of n(n+1)/2 with n = 1 + job % 5: 2000 * (1 + 3 + 6 + 10 + 15) */
        assert_int_equal(atomic_load(&total), 2000L * 35);
        syn_threadpool_free(pool);
    }
}

/* Chunk log for the claiming-order test: which thread ran each chunk, and thread 0's order. */
typedef struct order_job {
    atomic_int ran_on[100]; /* thread index + 1; 0: not run */
    atomic_int runs[100];
    atomic_int completed;
    int64_t order0[100]; /* chunks thread 0 ran, in the order it ran them */
    int n_order0;
    atomic_int timed_out;
} order_job;

static int order_chunk(void *ctx, int64_t chunk, int thread_index) {
    order_job *job = ctx;
    if (thread_index == 1 && chunk == 50) {
        /* The worker's first chunk (the front of its share [50, 100)) stalls until the caller
         * has finished 60 chunks, which it can only do by taking chunks from the worker's share. */
        const time_t deadline = time(NULL) + 10;
        while (atomic_load(&job->completed) < 60) {
            if (time(NULL) > deadline) {
                atomic_store(&job->timed_out, 1);
                break;
            }
        }
    }
    atomic_store(&job->ran_on[chunk], thread_index + 1);
    atomic_fetch_add(&job->runs[chunk], 1);
    if (thread_index == 0) job->order0[job->n_order0++] = chunk;
    atomic_fetch_add(&job->completed, 1);
    return 0;
}

/* Two threads, 100 chunks: the caller runs its share [0, 50) front to back (one sequential
 * stream), then takes chunks from the back of the stalled worker's share. */
static void test_shares_run_in_order_and_are_shared_out(void **state) {
    (void)state;
    syn_threadpool *pool = NULL;
    assert_int_equal(syn_threadpool_new(2, &pool), SYN_OK);
    for (int rep = 0; rep < 20; rep++) {
        order_job *job = calloc(1, sizeof *job);
        assert_non_null(job);
        assert_int_equal(syn_threadpool_run(pool, 100, order_chunk, job), 0);
        assert_int_equal(atomic_load(&job->timed_out), 0);
        for (int c = 0; c < 100; c++)
            assert_int_equal(atomic_load(&job->runs[c]), 1);
        for (int c = 0; c < 50; c++)
            assert_int_equal(job->order0[c], c);            /* the caller's own share, in order */
        assert_int_equal(atomic_load(&job->ran_on[99]), 1); /* the back of the worker's share */
        assert_true(job->n_order0 >= 60);
        free(job);
    }
    syn_threadpool_free(pool);
}

static void test_invalid_thread_counts(void **state) {
    (void)state;
    syn_threadpool *pool = (syn_threadpool *)&pool;
    assert_int_equal(syn_threadpool_new(0, &pool), SYN_ERR_INVALID_ARGUMENT);
    assert_null(pool);
    assert_int_equal(syn_threadpool_new(-3, &pool), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_threadpool_new(100000, &pool), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_threadpool_new(2, NULL), SYN_ERR_INVALID_ARGUMENT);
    syn_threadpool_free(NULL);
}

static void test_chunk_rows(void **state) {
    (void)state;
    int64_t b, e;
    syn_chunk_rows(10, 4, 0, &b, &e);
    assert_true(b == 0 && e == 4);
    syn_chunk_rows(10, 4, 2, &b, &e);
    assert_true(b == 8 && e == 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_chunk_runs_once),
        cmocka_unit_test(test_error_reaches_caller_and_pool_recovers),
        cmocka_unit_test(test_all_chunks_fail),
        cmocka_unit_test(test_many_small_jobs),
        cmocka_unit_test(test_shares_run_in_order_and_are_shared_out),
        cmocka_unit_test(test_invalid_thread_counts),
        cmocka_unit_test(test_chunk_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* membw.c: memory read bandwidth: threads sum their own slices of a resident buffer. */
#include "membw.h"

#include "common/args.h"
#include "common/text.h"
#include "synapse_internal.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* 16-byte vectors: SSE2 on x86-64, NEON on aarch64, both baseline, so no per-ISA build is needed.
 * One core's read rate is bounded by the misses it keeps in flight, not by the load width (AVX2
 * loads measured the same here). */
typedef uint64_t u64x2 __attribute__((vector_size(16)));

enum { LINE_VECS = 4 }; /* one 64-byte cache line per loop step, four independent sums */

struct membw_buffer {
    u64x2 *data; /* [bytes / 16] */
    size_t bytes;
};

int membw_new(size_t bytes, membw_buffer **out) {
    if (bytes < ((size_t)1 << 20) || bytes % 4096 != 0)
        return fail_runtime(
            "bandwidth buffer of %zu bytes: need a multiple of 4096, at least 1 MiB", bytes);
    membw_buffer *b = malloc(sizeof *b);
    /* In 2 MiB pages where the kernel allows, as the weights are mapped (core/file_map.h): the
     * ceiling is then the best streaming this machine does, not the slower 4 KiB-page figure. */
    const size_t huge = SYN_HUGE_PAGE_BYTES;
    void *data = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (data) (void)madvise(data, bytes, MADV_HUGEPAGE);
    if (!b || !data) {
        free(b);
        free(data);
        return fail_runtime("out of memory for the %zu MiB bandwidth buffer", bytes >> 20);
    }
    /* Writing every page makes it resident: the passes then measure reads, not page faults. */
    memset(data, 1, bytes);
    b->data = data;
    b->bytes = bytes;
    *out = b;
    return EXIT_OK;
}

void membw_free(membw_buffer *b) {
    if (!b) return;
    free(b->data);
    free(b);
}

size_t membw_bytes(const membw_buffer *b) { return b->bytes; }

size_t membw_huge_page_bytes(const membw_buffer *b) {
    return syn_file_map_huge_bytes(b->data, b->bytes);
}

/* Started threads wait at this gate until every thread exists: if one cannot be started, the
 * others are told to leave before any of them has entered the pass barrier (which counts all). */
typedef struct gate {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int state; /* GATE_WAIT, GATE_GO or GATE_CANCEL */
} gate;

enum { GATE_WAIT, GATE_GO, GATE_CANCEL };

typedef struct reader {
    const u64x2 *begin; /* this thread's slice: whole cache lines */
    size_t n_lines;
    int32_t n_passes;
    gate *start;
    pthread_barrier_t *barrier;
    uint64_t sum; /* stored so that the loads cannot be optimised away */
} reader;

static uint64_t read_slice(const u64x2 *p, size_t n_lines) {
    u64x2 s0 = {0, 0}, s1 = {0, 0}, s2 = {0, 0}, s3 = {0, 0};
    for (size_t i = 0; i < n_lines; i++, p += LINE_VECS) {
        s0 += p[0];
        s1 += p[1];
        s2 += p[2];
        s3 += p[3];
    }
    u64x2 s = s0 + s1 + s2 + s3;
    return s[0] + s[1];
}

/* Every pass starts and ends at a barrier shared by all readers; pass_ms (reader 0's, else NULL)
 * receives each pass's time. */
static void run_passes(reader *r, double *pass_ms) {
    for (int32_t pass = 0; pass < r->n_passes; pass++) {
        pthread_barrier_wait(r->barrier);
        double t0 = syn_now_ms();
        r->sum += read_slice(r->begin, r->n_lines);
        pthread_barrier_wait(r->barrier);
        if (pass_ms) pass_ms[pass] = syn_now_ms() - t0;
    }
}

static void gate_set(gate *g, int state) {
    pthread_mutex_lock(&g->mutex);
    g->state = state;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mutex);
}

static void *reader_main(void *arg) {
    reader *r = arg;
    pthread_mutex_lock(&r->start->mutex);
    while (r->start->state == GATE_WAIT)
        pthread_cond_wait(&r->start->cond, &r->start->mutex);
    int state = r->start->state;
    pthread_mutex_unlock(&r->start->mutex);
    if (state == GATE_GO) run_passes(r, NULL);
    return NULL;
}

int membw_measure(membw_buffer *b, int32_t n_threads, int32_t n_passes, double *pass_gb_per_s) {
    if (n_threads < 1 || n_passes < 1)
        return fail_runtime("bandwidth: %d threads, %d passes: need at least one of each",
                            n_threads, n_passes);
    reader *readers = calloc((size_t)n_threads, sizeof *readers);
    pthread_t *threads = calloc((size_t)n_threads, sizeof *threads);
    pthread_barrier_t barrier;
    int err =
        readers && threads ? pthread_barrier_init(&barrier, NULL, (unsigned)n_threads) : ENOMEM;
    if (err != 0) {
        free(readers);
        free(threads);
        return fail_runtime("bandwidth: cannot set up %d threads: %s", n_threads, strerror(err));
    }
    gate start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, GATE_WAIT};
    size_t n_lines = b->bytes / (sizeof(u64x2) * LINE_VECS);
    for (int32_t i = 0; i < n_threads; i++) {
        size_t first = n_lines * (size_t)i / (size_t)n_threads;
        size_t last = n_lines * (size_t)(i + 1) / (size_t)n_threads;
        readers[i] =
            (reader){b->data + first * LINE_VECS, last - first, n_passes, &start, &barrier, 0};
    }
    /* The calling thread is reader 0 and keeps the time. */
    int32_t started = 1;
    for (; started < n_threads && err == 0; started++)
        err = pthread_create(&threads[started], NULL, reader_main, &readers[started]);
    if (err != 0) started--; /* the last attempt made no thread */
    gate_set(&start, err == 0 ? GATE_GO : GATE_CANCEL);
    if (err == 0) run_passes(&readers[0], pass_gb_per_s); /* milliseconds until converted below */
    for (int32_t i = 1; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    pthread_mutex_destroy(&start.mutex);
    pthread_cond_destroy(&start.cond);
    free(readers);
    free(threads);
    if (err != 0)
        return fail_runtime("bandwidth: cannot start thread %d of %d: %s", started + 1, n_threads,
                            strerror(err));
    for (int32_t i = 0; i < n_passes; i++)
        pass_gb_per_s[i] = pass_gb_per_s[i] > 0 ? (double)b->bytes / (pass_gb_per_s[i] * 1e6) : 0.0;
    return EXIT_OK;
}

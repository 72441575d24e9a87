/* membw.c: memory read bandwidth: threads sum their own slices of a resident buffer, in one of
 * several strategies (membw.h). */
#include "membw.h"

#include "common/args.h"
#include "common/text.h"
#include "synapse_internal.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* 16-byte vectors: SSE2 on x86-64, NEON on aarch64, both baseline. */
typedef uint64_t membw_vec __attribute__((vector_size(16)));
#define MEMBW_READ membw_read_16
#include "membw_impl.h"

uint64_t membw_read_32(const void *p, size_t n_lines, int32_t streams, bool prefetch);
uint64_t membw_read_64(const void *p, size_t n_lines, int32_t streams, bool prefetch);

typedef uint64_t (*read_fn)(const void *p, size_t n_lines, int32_t streams, bool prefetch);

static read_fn reader_for(int32_t load_bytes) {
#if defined(__x86_64__)
    if (load_bytes == 32) return membw_read_32;
    if (load_bytes == 64) return membw_read_64;
#endif
    return membw_read_16;
}

/* The wider loads where the kernel tiers that use them run: AVX2 for 32 bytes, the AVX-512 tier
 * (F/BW/VL, the OS saving its state) for 64. */
int32_t membw_strategies(membw_strategy *out) {
    int32_t widths[3] = {16}, n_widths = 1, n = 0;
    syn_isa_tier tier;
    if (syn_isa_tier_resolve(SYN_TIER_AVX2, &tier) == SYN_OK) widths[n_widths++] = 32;
    if (syn_isa_tier_resolve(SYN_TIER_AVX512_VNNI, &tier) == SYN_OK) widths[n_widths++] = 64;
    static const int32_t streams[] = {1, 2, 4};
    for (int32_t w = 0; w < n_widths; w++)
        for (int32_t s = 0; s < 3; s++)
            for (int32_t pf = 0; pf < 2; pf++)
                out[n++] = (membw_strategy){widths[w], streams[s], pf == 1};
    return n;
}

void membw_strategy_name(const membw_strategy *s, char *buf, size_t cap) {
    snprintf(buf, cap, "%dB x%d%s", s->load_bytes, s->streams, s->prefetch ? " +prefetch" : "");
}

struct membw_buffer {
    uint8_t *data; /* [bytes] */
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
    const uint8_t *begin; /* this thread's slice: streams x n_lines whole cache lines */
    size_t n_lines;       /* per stream */
    read_fn read;
    membw_strategy strategy;
    int32_t n_passes;
    gate *start;
    pthread_barrier_t *barrier;
    uint64_t sum; /* stored so that the loads cannot be optimised away */
} reader;

/* Every pass starts and ends at a barrier shared by all readers; pass_ms (reader 0's, else NULL)
 * receives each pass's time. */
static void run_passes(reader *r, double *pass_ms) {
    for (int32_t pass = 0; pass < r->n_passes; pass++) {
        pthread_barrier_wait(r->barrier);
        double t0 = syn_now_ms();
        r->sum += r->read(r->begin, r->n_lines, r->strategy.streams, r->strategy.prefetch);
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

int membw_measure(membw_buffer *b, const membw_strategy *s, size_t bytes, int32_t n_threads,
                  int32_t n_passes, double *pass_gb_per_s) {
    if (n_threads < 1 || n_passes < 1)
        return fail_runtime("bandwidth: %d threads, %d passes: need at least one of each",
                            n_threads, n_passes);
    if (bytes == 0) bytes = b->bytes;
    if (bytes > b->bytes || bytes % 4096 != 0 ||
        (s->streams != 1 && s->streams != 2 && s->streams != 4))
        return fail_runtime("bandwidth: cannot read %zu of the buffer's %zu bytes in %d streams",
                            bytes, b->bytes, s->streams);
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
    /* Each thread's slice in whole lines, a multiple of the streams; the rate counts the lines
     * read, which the rounding leaves a few short of `bytes`. */
    const size_t n_lines = bytes / MEMBW_LINE, streams = (size_t)s->streams;
    size_t lines_read = 0;
    for (int32_t i = 0; i < n_threads; i++) {
        size_t first = n_lines * (size_t)i / (size_t)n_threads;
        size_t last = n_lines * (size_t)(i + 1) / (size_t)n_threads;
        size_t per_stream = (last - first) / streams;
        readers[i] = (reader){b->data + first * MEMBW_LINE,
                              per_stream,
                              reader_for(s->load_bytes),
                              *s,
                              n_passes,
                              &start,
                              &barrier,
                              0};
        lines_read += per_stream * streams;
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
        pass_gb_per_s[i] = pass_gb_per_s[i] > 0
                               ? (double)(lines_read * MEMBW_LINE) / (pass_gb_per_s[i] * 1e6)
                               : 0.0;
    return EXIT_OK;
}

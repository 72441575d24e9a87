/* bench_kernels.c: Q8_0 matvec/matmul throughput per ISA tier and thread count, and the
 * machine's memory read bandwidth, to judge how close decode can get to the bandwidth ceiling.
 * Usage: bench_kernels [seconds per measurement, default 0.5] [substring of "<tier> <case>" to run]
 * The "x N tok" cases of 1-16 tokens are batched decode and short prompts: compare their ms/call
 * with the matvec of the same matrix (a k-token call should cost far less than k matvecs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/file_map.h"
#include "kernels/kernels.h"
#include "threads/threadpool.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct job {
    const syn_kernels *k;
    const unsigned char *w;
    size_t row_bytes;
    int64_t n_rows, n_blocks, n_tokens, rows_per_chunk;
    const block_q8_0 *a;
    float *y;
    const unsigned char *buf; /* bandwidth probe */
    size_t buf_bytes;
    uint64_t *sums; /* per chunk */
} job;

static int matvec_chunk(void *ctx, int64_t chunk, int thread_index) {
    (void)thread_index;
    job *j = ctx;
    int64_t r0, r1;
    syn_chunk_rows(j->n_rows, j->rows_per_chunk, chunk, &r0, &r1);
    if (j->n_tokens == 1) {
        j->k->mat[GGML_TYPE_Q8_0].matvec(j->n_blocks, j->w, j->row_bytes, r0, r1, j->a, j->y);
    } else {
        j->k->mat[GGML_TYPE_Q8_0].matmul(j->n_blocks, j->w, j->row_bytes, r0, r1, j->a, j->n_tokens,
                                         j->y, j->n_rows);
    }
    return 0;
}

/* Reads its share of buf 8 bytes at a time (the compiler vectorises the sum). */
static int read_chunk(void *ctx, int64_t chunk, int thread_index) {
    (void)thread_index;
    job *j = ctx;
    const size_t per = j->buf_bytes / 64;
    const uint64_t *p = (const uint64_t *)(j->buf + (size_t)chunk * per);
    uint64_t s = 0;
    for (size_t i = 0; i < per / 8; i++)
        s += p[i];
    j->sums[chunk] = s;
    return 0;
}

int main(int argc, char **argv) {
    const double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    const char *filter = argc > 2 ? argv[2] : "";
    const int64_t max_blocks = 4864 / QK8_0, max_tokens = 512;
    const int64_t big_rows = 151936;
    /* 600 MB of weights: larger than any cache, about one 0.5B model's worth per pass. */
    const size_t pool_bytes = (size_t)600 << 20;
    /* In 2 MiB pages, as syn_model_load maps the weights (core/file_map.h). */
    unsigned char *wbuf = aligned_alloc(SYN_HUGE_PAGE_BYTES, pool_bytes);
    if (wbuf) (void)madvise(wbuf, pool_bytes, MADV_HUGEPAGE);
    block_q8_0 *a = malloc(sizeof(block_q8_0) * (size_t)(max_blocks * max_tokens));
    float *y = malloc(sizeof(float) *
                      (size_t)(big_rows > 4864 * max_tokens ? big_rows : 4864 * max_tokens));
    uint64_t sums[64];
    if (!wbuf || !a || !y) return 1;
    for (size_t i = 0; i < pool_bytes; i++)
        wbuf[i] = (unsigned char)(i * 2654435761u >> 13);
    for (size_t i = 0; i < pool_bytes; i += sizeof(block_q8_0)) {
        if (i + 2 <= pool_bytes) wbuf[i + 1] = 0x1c; /* keep fp16 scales finite */
    }
    for (int64_t i = 0; i < max_blocks * max_tokens; i++) {
        a[i].d = 0x2000;
        for (int q = 0; q < QK8_0; q++)
            a[i].qs[q] = (int8_t)((i * 31 + q * 7) % 255 - 127);
    }

    for (int n_threads = 1; n_threads <= 2; n_threads++) {
        syn_threadpool *pool;
        if (syn_threadpool_new(n_threads, &pool) != SYN_OK) return 1;
        job bw = {.buf = wbuf, .buf_bytes = pool_bytes, .sums = sums};
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            const double t0 = now_s();
            syn_threadpool_run(pool, 64, read_chunk, &bw);
            const double dt = now_s() - t0;
            best = dt < best ? dt : best;
        }
        printf("threads %d  memory read bandwidth: %.1f GB/s\n", n_threads,
               (double)pool_bytes / best / 1e9);

        for (int isa = SYN_TIER_SCALAR; isa < SYN_TIER_COUNT; isa++) {
            syn_kernels k;
            if (syn_kernels_get((syn_isa_tier)isa, &k) != SYN_OK) continue;
            /* rows x cols: the 0.5B model's ffn up/gate (4864 x 896), ffn down (896 x 4864), logits
             */
            static const struct {
                const char *name;
                int64_t rows, cols, tokens;
                bool cold; /* rotate through the 600 MB pool instead of re-reading one matrix */
            } cases[] = {
                {"matvec 4864x896 hot", 4864, 896, 1, false},
                {"matvec 4864x896 cold", 4864, 896, 1, true},
                {"matvec 896x4864 cold", 896, 4864, 1, true},
                {"matvec 151936x896", 151936, 896, 1, true},
                {"matmul 4864x896 x 2 tok", 4864, 896, 2, true},
                {"matmul 4864x896 x 3 tok", 4864, 896, 3, true},
                {"matmul 4864x896 x 5 tok", 4864, 896, 5, true},
                {"matmul 4864x896 x 8 tok", 4864, 896, 8, true},
                {"matmul 4864x896 x 16 tok", 4864, 896, 16, true},
                {"matmul 4864x896 x 5 tok hot", 4864, 896, 5, false},
                {"matmul 4864x896 x 16 tok hot", 4864, 896, 16, false},
                {"matmul 896x4864 x 2 tok", 896, 4864, 2, true},
                {"matmul 896x4864 x 3 tok", 896, 4864, 3, true},
                {"matmul 896x4864 x 5 tok", 896, 4864, 5, true},
                {"matmul 896x4864 x 8 tok", 896, 4864, 8, true},
                {"matmul 896x4864 x 16 tok", 896, 4864, 16, true},
                {"matmul 4864x896 x 64 tok", 4864, 896, 64, true},
                {"matmul 896x4864 x 64 tok", 896, 4864, 64, true},
                {"matmul 4864x896 x 512 tok", 4864, 896, 512, true},
                /* the logits of 5 and 16 requests' decode step, in the backend's output chunks */
                {"matmul 151936x896 x 5 tok", 151936, 896, 5, true},
                {"matmul 151936x896 x 16 tok", 151936, 896, 16, true},
            };
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                if (isa == SYN_TIER_SCALAR && cases[c].tokens > 1) continue;
                char label[96];
                snprintf(label, sizeof label, "%s %s", syn_isa_tier_name(k.isa), cases[c].name);
                if (!strstr(label, filter)) continue;
                const int64_t n_blocks = cases[c].cols / QK8_0;
                const size_t row_bytes = (size_t)n_blocks * sizeof(block_q8_0);
                const size_t mat_bytes = row_bytes * (size_t)cases[c].rows;
                const size_t n_copies = pool_bytes / mat_bytes;
                /* the row chunks kernels.h recommends and the optimized backend gives: long
                 * sequential streams for matvec; for matmul about 4 chunks per thread, at least 64
                 * rows, in tiles; the output projection (big_rows) 256 rows for any token count */
                const int64_t share = (cases[c].rows + 4 * n_threads - 1) / (4 * n_threads);
                const int64_t rows_per_chunk = cases[c].tokens == 1 || cases[c].rows == big_rows
                                                   ? 256
                                               : share < 64 ? 64
                                                            : (share + 15) / 16 * 16;
                job j = {.k = &k,
                         .row_bytes = row_bytes,
                         .n_rows = cases[c].rows,
                         .n_blocks = n_blocks,
                         .n_tokens = cases[c].tokens,
                         .rows_per_chunk = rows_per_chunk,
                         .a = a,
                         .y = y};
                const int64_t n_chunks = (cases[c].rows + rows_per_chunk - 1) / rows_per_chunk;
                size_t iters = 0, copy = 0;
                const double t0 = now_s();
                double dt;
                do {
                    j.w = wbuf + (cases[c].cold ? copy * mat_bytes : 0);
                    copy = (copy + 1) % n_copies;
                    syn_threadpool_run(pool, n_chunks, matvec_chunk, &j);
                    iters++;
                    dt = now_s() - t0;
                } while (dt < seconds || iters < 3);
                const double gbs = (double)mat_bytes * (double)iters / dt / 1e9;
                const double gmacs = (double)cases[c].rows * (double)cases[c].cols *
                                     (double)cases[c].tokens * (double)iters / dt / 1e9;
                printf(
                    "threads %d  %-12s %-27s %7.2f GB/s of weights  %8.1f GMAC/s  %8.3f ms/call\n",
                    n_threads, syn_isa_tier_name(k.isa), cases[c].name, gbs, gmacs,
                    1e3 * dt / (double)iters);
            }
        }
        syn_threadpool_free(pool);
    }
    free(wbuf);
    free(a);
    free(y);
    return 0;
}

/* bench_attention.c: the optimized backend's attention alone, the shape of qwen2.5-0.5b (24
 * layers, 2 KV heads of head_dim 64, 7 query heads each) over a KV cache of D positions in the
 * backend's block layout (blocks of every layer's K and V, back to back as a context's arena
 * holds them), T threads each attending one KV head per layer with a barrier between layers, as
 * a decode step does. Times each step (thread 0's clock: wall, or with --cpu its own CPU time,
 * which a busy shared machine disturbs less) and prints the minimum and median.
 * Usage: bench_attention [depth 4096] [threads 2] [f16 0|1] [steps 20] [--cpu] [--no-huge-pages]
 * `make bench-attention` builds it with the AVX-512 flavour's flags (SYN_F_MAX_NG 8). */
#ifndef SYN_F_MAX_NG
#define SYN_F_MAX_NG 8
#endif
/* only its attention is timed: the other kernels of the body go unused */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels/floats_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

enum { N_LAYER = 24, N_HEAD_KV = 2, GROUP = 7, HEAD_DIM = 64, MAX_STEPS = 1000 };

static struct {
    int n_threads, f16, n_steps, cpu_clock;
    uint32_t depth;
    size_t kv_k_bytes; /* one layer's K (or V) of a block, all heads */
    void **blocks;
    float *q, *out;
    pthread_barrier_t barrier;
    double step_s[MAX_STEPS];
} B;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(B.cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *worker(void *arg) {
    const int t = (int)(intptr_t)arg;
    float *scratch = malloc(sizeof(float) * syn_attn_scratch_floats(GROUP));
    if (!scratch) abort();
    for (int step = -1; step < B.n_steps; step++) { /* step -1: warm-up */
        const double t0 = now_s();
        for (int l = 0; l < N_LAYER; l++) {
            for (int h = t; h < N_HEAD_KV; h += B.n_threads) {
                const syn_attn_args a = {
                    .head_dim = HEAD_DIM,
                    .n_head_kv = N_HEAD_KV,
                    .kv_head = h,
                    .group = GROUP,
                    .n_keys = B.depth,
                    .f16 = B.f16,
                    .scale = 0.125f,
                    .blocks = (const void *const *)B.blocks,
                    .layer_off = (size_t)l * 2 * B.kv_k_bytes,
                    .q = B.q + (size_t)h * GROUP * HEAD_DIM,
                    .out = B.out + ((size_t)l * N_HEAD_KV + (size_t)h) * GROUP * HEAD_DIM,
                    .scratch = scratch,
                };
                attention(&a);
            }
            if (B.n_threads > 1) pthread_barrier_wait(&B.barrier);
        }
        if (t == 0 && step >= 0) B.step_s[step] = now_s() - t0;
    }
    free(scratch);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    B.depth = 4096;
    B.n_threads = 2;
    B.n_steps = 20;
    int huge = 1, pos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpu") == 0)
            B.cpu_clock = 1;
        else if (strcmp(argv[i], "--no-huge-pages") == 0)
            huge = 0;
        else if (pos == 0 && ++pos)
            B.depth = (uint32_t)atoi(argv[i]);
        else if (pos == 1 && ++pos)
            B.n_threads = atoi(argv[i]);
        else if (pos == 2 && ++pos)
            B.f16 = atoi(argv[i]);
        else if (pos == 3 && ++pos)
            B.n_steps = atoi(argv[i]);
    }
    if (B.depth < 1 || B.n_threads < 1 || B.n_threads > 64 || B.n_steps < 1 ||
        B.n_steps > MAX_STEPS) {
        fprintf(stderr,
                "usage: bench_attention [depth] [threads 1..64] [f16 0|1] [steps 1..%d] [--cpu] "
                "[--no-huge-pages]\n",
                MAX_STEPS);
        return 2;
    }
    const size_t elem = B.f16 ? sizeof(uint16_t) : sizeof(float);
    B.kv_k_bytes = elem * SYN_ATTN_BLOCK * N_HEAD_KV * HEAD_DIM;
    const size_t block_bytes = 2 * B.kv_k_bytes * N_LAYER,
                 n_blocks = (B.depth + SYN_ATTN_BLOCK - 1) / SYN_ATTN_BLOCK;
    char *arena = mmap(NULL, n_blocks * block_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    B.blocks = malloc(sizeof *B.blocks * n_blocks);
    B.q = malloc(sizeof(float) * N_HEAD_KV * GROUP * HEAD_DIM);
    B.out = malloc(sizeof(float) * N_LAYER * N_HEAD_KV * GROUP * HEAD_DIM);
    if (arena == MAP_FAILED || !B.blocks || !B.q || !B.out) return 1;
    if (huge) madvise(arena, n_blocks * block_bytes, MADV_HUGEPAGE);
    uint32_t r = 12345;
#define NEXT_UNIFORM() (r = r * 1664525u + 1013904223u, (float)(r >> 8) / 8388608.0f - 1.0f)
    for (size_t b = 0; b < n_blocks; b++) {
        B.blocks[b] = arena + b * block_bytes;
        for (size_t i = 0; i < block_bytes / elem; i++) {
            const float v = NEXT_UNIFORM();
            if (B.f16)
                ((uint16_t *)B.blocks[b])[i] = syn_k_f32_to_fp16(v);
            else
                ((float *)B.blocks[b])[i] = v;
        }
    }
    for (int i = 0; i < N_HEAD_KV * GROUP * HEAD_DIM; i++)
        B.q[i] = NEXT_UNIFORM();
    pthread_barrier_init(&B.barrier, NULL, (unsigned)B.n_threads);
    pthread_t th[64];
    for (int t = 1; t < B.n_threads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    worker((void *)(intptr_t)0);
    for (int t = 1; t < B.n_threads; t++)
        pthread_join(th[t], NULL);
    qsort(B.step_s, (size_t)B.n_steps, sizeof B.step_s[0], cmp_double);
    const double kv_mb = (double)B.depth * 2 * N_LAYER * N_HEAD_KV * HEAD_DIM * (double)elem / 1e6;
    printf("attention, depth %u, %d thread(s), %s cache (%.1f MB a step), %s: min %.3f ms, median "
           "%.3f ms "
           "(%.1f GB/s at the median)\n",
           B.depth, B.n_threads, B.f16 ? "f16" : "f32", kv_mb,
           B.cpu_clock ? "thread 0 CPU time" : "wall time", B.step_s[0] * 1e3,
           B.step_s[B.n_steps / 2] * 1e3, kv_mb / 1e3 / B.step_s[B.n_steps / 2]);
    return 0;
}

/* int8peak.c: the int8 multiply-add peak: every thread runs its tier's chains for the same number
 * of rounds, started together; the rate is all their multiply-adds over the slowest thread's
 * time. */
#include "int8peak.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "common/args.h"
#include "synapse.h"

/* Rounds per thread and pass: about 20 ms of a Zen 4 or Zen 5 core at 12 chains of 64
 * multiply-adds. */
enum { PEAK_ROUNDS = 4 << 20 };

uint64_t int8peak_chain_avx512(uint64_t iters);
uint64_t int8peak_chain_avxvnni(uint64_t iters);
uint64_t int8peak_chain_avx2(uint64_t iters);

int8peak_chain_fn int8peak_chain(const char *isa) {
#if defined(__x86_64__)
    if (strcmp(isa, "avx512-vnni") == 0) return int8peak_chain_avx512;
    if (strcmp(isa, "avx-vnni") == 0) return int8peak_chain_avxvnni;
    if (strcmp(isa, "avx2") == 0) return int8peak_chain_avx2;
#else
    (void)isa;
#endif
    return NULL;
}

typedef struct peak_thread {
    int8peak_chain_fn chain;
    pthread_barrier_t *start;
    uint64_t macs;
    double seconds;
} peak_thread;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *run_chain(void *arg) {
    peak_thread *t = arg;
    pthread_barrier_wait(t->start);
    const double t0 = now_s();
    t->macs = t->chain(PEAK_ROUNDS);
    t->seconds = now_s() - t0;
    return NULL;
}

int int8peak_measure(int8peak_chain_fn chain, int32_t n_threads, int32_t n_passes, double *gmacs) {
    peak_thread threads[SYN_MAX_THREADS];
    pthread_t ids[SYN_MAX_THREADS];
    if (n_threads < 1 || n_threads > SYN_MAX_THREADS)
        return fail_runtime("int8 peak: %d threads", n_threads);
    *gmacs = 0;
    for (int32_t pass = 0; pass < n_passes; pass++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)n_threads);
        int32_t started = 1; /* the caller is thread 0 */
        for (int32_t i = 0; i < n_threads; i++)
            threads[i] = (peak_thread){.chain = chain, .start = &start};
        for (; started < n_threads; started++)
            if (pthread_create(&ids[started], NULL, run_chain, &threads[started]) != 0) break;
        if (started < n_threads) { /* the barrier would never open: give up cleanly */
            pthread_barrier_destroy(&start);
            return fail_runtime("int8 peak: cannot start %d threads", n_threads);
        }
        run_chain(&threads[0]);
        uint64_t macs = threads[0].macs;
        double slowest = threads[0].seconds;
        for (int32_t i = 1; i < n_threads; i++) {
            pthread_join(ids[i], NULL);
            macs += threads[i].macs;
            if (threads[i].seconds > slowest) slowest = threads[i].seconds;
        }
        pthread_barrier_destroy(&start);
        const double rate = slowest > 0 ? (double)macs / slowest * 1e-9 : 0;
        if (rate > *gmacs) *gmacs = rate;
    }
    return EXIT_OK;
}

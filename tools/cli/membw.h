/*
 * membw.h: the machine's memory read bandwidth, measured the way a decode step reads weights:
 * every thread streams its own contiguous slice of a buffer far larger than the caches, with
 * vector loads, pass after pass. `synapse bench` measures it in the same run as the speeds it
 * compares with it, because the host's other load moves it. Which way of reading reaches the
 * most differs between CPUs (load width, streams in flight, software prefetch), so the probe
 * has several strategies and the bench takes the best this machine shows.
 */
#ifndef SYNAPSE_TOOL_MEMBW_H
#define SYNAPSE_TOOL_MEMBW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct membw_buffer membw_buffer;

/* Allocates and writes (so that every page is resident) a buffer of bytes (a multiple of 4096,
 * at least 1 MiB). Returns the exit code (EXIT_OK, or EXIT_RUNTIME with the error printed). */
int membw_new(size_t bytes, membw_buffer **out);
void membw_free(membw_buffer *b);

size_t membw_bytes(const membw_buffer *b);
/* Bytes of the buffer held in 2 MiB pages (0 where the kernel gave none). */
size_t membw_huge_page_bytes(const membw_buffer *b);

/* A way of reading: the width of each load, how many parts of its slice a thread reads side by
 * side (1, 2 or 4), and whether it prefetches ahead of each. */
typedef struct membw_strategy {
    int32_t load_bytes; /* 16 (baseline), 32 (with AVX2), 64 (with AVX-512) */
    int32_t streams;
    bool prefetch;
} membw_strategy;

enum { MEMBW_MAX_STRATEGIES = 18 };

/* The strategies this CPU can run, into out[0 .. MEMBW_MAX_STRATEGIES); returns their count. */
int32_t membw_strategies(membw_strategy *out);

/* "64B x4 +prefetch" and the like. */
void membw_strategy_name(const membw_strategy *s, char *buf, size_t cap);

/* Reads the first `bytes` of the buffer (0: all of it; else a multiple of 4096 within it)
 * n_passes times the strategy's way with n_threads threads (each its own 1/n_threads slice) and
 * stores each pass's rate in pass_gb_per_s[0 .. n_passes) (1e9 bytes per second). Returns the
 * exit code. */
int membw_measure(membw_buffer *b, const membw_strategy *s, size_t bytes, int32_t n_threads,
                  int32_t n_passes, double *pass_gb_per_s);

#endif

/*
 * membw_impl.h: the read loops of the bandwidth probe (membw.h), included once per load width by
 * membw.c (16-byte vectors, baseline), membw_avx2.c (32) and membw_avx512.c (64): the includer
 * defines membw_vec, a GCC vector of that many bytes, and MEMBW_READ, the name of its entry point.
 * Each build reads 64-byte lines from 1, 2 or 4 streams side by side, with or without a software
 * prefetch ahead of every stream.
 */
#ifndef SYN_TOOL_MEMBW_IMPL_H
#define SYN_TOOL_MEMBW_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "membw.h"

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi" /* vectors pass between always-inline helpers only */
#endif

enum {
    MEMBW_LINE = 64,
    MEMBW_VECS = MEMBW_LINE / (int)sizeof(membw_vec), /* loads per line */
    MEMBW_PREFETCH_AHEAD = 16 * MEMBW_LINE            /* bytes ahead of each stream */
};

/* Sums n_lines lines of each of `streams` consecutive parts of p, one line of every part per
 * step; the constant arguments of the callers below unroll it into registers. */
static inline __attribute__((always_inline)) uint64_t read_streams(const uint8_t *p, size_t n_lines,
                                                                   int streams, bool prefetch) {
    membw_vec acc[4][MEMBW_VECS];
    memset(acc, 0, sizeof acc);
    const size_t stride = n_lines * MEMBW_LINE;
    for (size_t i = 0; i < n_lines; i++, p += MEMBW_LINE)
#pragma GCC unroll 4 /* every sum in a register */
        for (int s = 0; s < streams; s++) {
            const uint8_t *line = p + (size_t)s * stride;
            if (prefetch) __builtin_prefetch(line + MEMBW_PREFETCH_AHEAD);
#pragma GCC unroll 4
            for (int v = 0; v < MEMBW_VECS; v++) {
                membw_vec x;
                memcpy(&x, line + v * (int)sizeof x, sizeof x);
                acc[s][v] += x;
            }
        }
    uint64_t sum = 0;
    for (int s = 0; s < streams; s++)
        for (int v = 0; v < MEMBW_VECS; v++)
            for (size_t k = 0; k < sizeof(membw_vec) / sizeof(uint64_t); k++)
                sum += acc[s][v][k];
    return sum;
}

uint64_t MEMBW_READ(const void *p, size_t n_lines, int32_t streams, bool prefetch);

uint64_t MEMBW_READ(const void *p, size_t n_lines, int32_t streams, bool prefetch) {
    const uint8_t *b = p;
    switch (streams * 2 + prefetch) {
    case 2: return read_streams(b, n_lines, 1, false);
    case 3: return read_streams(b, n_lines, 1, true);
    case 4: return read_streams(b, n_lines, 2, false);
    case 5: return read_streams(b, n_lines, 2, true);
    case 8: return read_streams(b, n_lines, 4, false);
    case 9: return read_streams(b, n_lines, 4, true);
    default: return 0; /* membw.c asks for 1, 2 or 4 streams only */
    }
}

#endif

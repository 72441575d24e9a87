/*
 * block_arena.h: equal-size memory blocks laid out back to back in one reserved address range,
 * made usable in order as they are needed (the KV-cache blocks of a context and of the engine's
 * pool).
 *
 * Why one range: attention at depth reads, for each block in turn, the same layer's slice of it.
 * Blocks at a constant stride let the core's stride prefetcher follow those reads; blocks from
 * separate allocations did not (measured, 1 thread: decode at depth 1024 39.3 -> 43.6 tok/s,
at depth 4096 27.1 -> 30.4; docs/BENCHMARKS.md).
 * The range is reserved without access (PROT_NONE), which costs address space only; growing makes
 * the next blocks readable and writable, and their pages appear, zero-filled, on first touch, so
 * memory use follows the blocks in use as with per-block allocation.
 */
#ifndef SYN_CORE_BLOCK_ARENA_H
#define SYN_CORE_BLOCK_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

typedef struct syn_block_arena {
    uint8_t *base;     /* the reserved range, or NULL */
    size_t stride;     /* block_bytes rounded up to whole pages */
    uint32_t capacity; /* blocks the range holds */
    uint32_t n_usable; /* blocks [0, n_usable) are readable and writable */
} syn_block_arena;

/* Reserves room for capacity blocks of block_bytes (both > 0). Errors: SYN_ERR_NO_MEMORY naming
 * what (e.g. "KV cache") and the size. */
syn_status syn_block_arena_init(syn_block_arena *a, size_t block_bytes, uint32_t capacity,
                                const char *what);

/* Makes blocks [0, n) usable (n <= capacity); new blocks read as zeros. Errors: SYN_ERR_NO_MEMORY.
 */
syn_status syn_block_arena_grow(syn_block_arena *a, uint32_t n, const char *what);

static inline void *syn_block_arena_at(const syn_block_arena *a, uint32_t i) {
    return a->base + (size_t)i * a->stride;
}

/* Returns the range; a zeroed or released arena is a no-op. */
void syn_block_arena_release(syn_block_arena *a);

#endif

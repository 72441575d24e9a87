/*
 * kv_pool.h: the engine's KV-cache blocks: a pool of fixed-size blocks bounded by the memory
 * budget (memory and bookkeeping allocated as blocks come into use, never for the whole budget up
 * front), with reference counts, reservations, and a prefix cache.
 *
 * A block holds SYN_KV_BLOCK consecutive positions of one sequence (backend.h). The blocks' memory
 * is one arena (core/block_arena.h): reserved up front as address space, made usable block by
 * block. A sequence holds one reference on each block of its table. The prefix cache maps a chain
 * of full blocks to their tokens: an entry is (parent block, the block's SYN_KV_BLOCK tokens), so a
 * lookup walks a prompt block by block from position 0; the cache holds one reference on each of
 * its blocks. A cached block that no sequence holds is evictable; eviction takes the least recently
 * used evictable block among those with no cached children, so chains shrink from their ends.
 *
 * Accounting: a sequence reserves, when it is admitted, every block it may still need; allocation
 * draws on a reservation and cannot run out of budget. available() is what a new reservation can
 * get: never-used blocks + free blocks + evictable cached blocks - outstanding reservations.
 *
 * Not thread-safe: the engine's scheduler thread is the only user.
 */
#ifndef SYN_ENGINE_KV_POOL_H
#define SYN_ENGINE_KV_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

typedef struct kv_pool kv_pool;

/* A pool of n_blocks (>= 1) blocks of block_bytes each. Errors: SYN_ERR_NO_MEMORY. */
syn_status kv_pool_new(size_t block_bytes, uint32_t n_blocks, kv_pool **out);
void kv_pool_free(kv_pool *p);

uint32_t kv_pool_capacity(const kv_pool *p);
uint32_t kv_pool_available(const kv_pool *p);
uint32_t kv_pool_used(const kv_pool *p);   /* blocks held by sequences or the cache */
uint32_t kv_pool_cached(const kv_pool *p); /* blocks in the prefix cache */

/* Sets aside n <= available() blocks for later kv_pool_alloc calls; unreserve returns the unused
 * part. */
void kv_pool_reserve(kv_pool *p, uint32_t n);
void kv_pool_unreserve(kv_pool *p, uint32_t n);

/* Takes one reserved block with one reference: a free block, a new one (zeroed memory, the next
 * block of the pool's arena), or the evicted least-recently-used cached block. Errors:
 * SYN_ERR_INTERNAL (no reservation), SYN_ERR_NO_MEMORY. */
syn_status kv_pool_alloc(kv_pool *p, int32_t *id);

/* The block's memory (block_bytes). */
void *kv_pool_data(const kv_pool *p, int32_t id);

/* Drops one reference; a block nobody holds returns to the free list. */
void kv_pool_unref(kv_pool *p, int32_t id);

/* Finds the longest cached chain matching tokens[0 .. max_blocks * SYN_KV_BLOCK): ids[i] receives
 * the block of tokens [i * SYN_KV_BLOCK, (i + 1) * SYN_KV_BLOCK), with a reference taken for the
 * caller, and the chain is marked used. Returns the number of blocks matched. */
uint32_t kv_pool_lookup(kv_pool *p, const int32_t *tokens, uint32_t max_blocks, int32_t *ids);

/* The cached block of tokens [(n_blocks - 1) * SYN_KV_BLOCK, n_blocks * SYN_KV_BLOCK) when the
 * whole chain of n_blocks (>= 1) is cached, else -1; takes no reference, marks nothing used. */
int32_t kv_pool_find(kv_pool *p, const int32_t *tokens, uint32_t n_blocks);

/* Enters block id (full, its keys and values final) into the cache as tokens[SYN_KV_BLOCK] after
 * parent (-1: the first block of a sequence). Returns the cached block holding those tokens after
 * parent: id, or an equal entry cached first, on which a reference is then taken for the caller
 * (both hold bitwise the same keys and values, so the caller may drop id for it); -1, changing
 * nothing, when the parent is not cached or id already is. */
int32_t kv_pool_publish(kv_pool *p, int32_t parent, const int32_t *tokens, int32_t id);

/* Snapshots: a sequence's own memory outside the blocks (a recurrent state, the sliding-window
 * layers' last positions) as it stood right after a cached block, attached to that block, so that
 * another sequence may resume after it. At most max snapshots of bytes each are held (0: none);
 * past that, a new snapshot takes the buffer of the least recently used block's, which stays
 * cached without one. Evicting a block frees its snapshot. */
void kv_pool_set_snapshots(kv_pool *p, size_t bytes, uint32_t max);
uint32_t kv_pool_snapshots(const kv_pool *p); /* snapshots held */

/* Cached block id's snapshot, NULL: none. */
const void *kv_pool_snapshot(const kv_pool *p, int32_t id);

/* A snapshot buffer attached to cached block id, for the caller to fill now; NULL (nothing
 * changed) when the block is not cached or has one, snapshots are off, or memory is short. */
void *kv_pool_snapshot_take(kv_pool *p, int32_t id);

#endif

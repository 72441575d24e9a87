/* kv_pool.c: the engine's budgeted KV block pool and its prefix cache (see kv_pool.h). */
#include "engine/kv_pool.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/block_arena.h"
#include "core/error.h"

typedef struct kv_block {
    void *data;    /* NULL until the block is first used */
    uint32_t refs; /* sequences holding it, plus one while cached */
    bool cached;
    int32_t next; /* free list link, or hash chain link while cached; -1 ends either */
    /* Cache entry (valid while cached). */
    int32_t parent;      /* previous block of the chain, -1 for a sequence's first block */
    uint32_t n_children; /* cached blocks whose parent this is */
    uint64_t hash;
    uint64_t last_use;
    void *snap; /* its snapshot (kv_pool.h), NULL: none */
    int32_t tokens[SYN_KV_BLOCK];
} kv_block;

enum { MIN_DESCRIPTORS = 64, MIN_BUCKETS = 64 };

/* The budget only bounds the pool: memory and bookkeeping grow with the blocks in use, so that a
 * budget far beyond what is used costs nothing (a 1 TiB budget holds 134 million blocks of the
 * tiny model, whose descriptors and hash buckets took 0.5 GB when sized up front). */
struct kv_pool {
    size_t block_bytes;
    syn_block_arena arena; /* the blocks' memory, back to back (core/block_arena.h) */
    uint32_t n_blocks;     /* the budget's capacity */
    kv_block *blocks;      /* [n_described] the descriptors of blocks [0, n_described) */
    uint32_t n_described;  /* >= n_created */
    uint32_t n_created;    /* blocks [0, n_created) have memory */
    int32_t free_head;
    uint32_t n_free;
    uint32_t n_cached;
    uint32_t n_evictable; /* cached blocks whose only reference is the cache's */
    uint32_t reserved;
    int32_t *buckets;   /* [n_buckets] hash chain heads */
    uint32_t n_buckets; /* a power of two, doubled when the cache holds more entries */
    uint64_t tick;      /* LRU clock */
    size_t snap_bytes;  /* bytes of one snapshot */
    uint32_t snap_max;  /* the most snapshots held at once */
    uint32_t n_snaps;
};

syn_status kv_pool_new(size_t block_bytes, uint32_t n_blocks, kv_pool **out) {
    *out = NULL;
    kv_pool *p = calloc(1, sizeof *p);
    if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "KV pool: out of memory");
    p->block_bytes = block_bytes;
    p->n_blocks = n_blocks;
    p->free_head = -1;
    p->n_buckets = MIN_BUCKETS;
    p->buckets = malloc(sizeof *p->buckets * p->n_buckets);
    if (!p->buckets) {
        kv_pool_free(p);
        return syn_fail(SYN_ERR_NO_MEMORY, "KV pool: out of memory");
    }
    for (uint32_t i = 0; i < p->n_buckets; i++)
        p->buckets[i] = -1;
    syn_status st = syn_block_arena_init(&p->arena, block_bytes, n_blocks, "KV pool");
    if (st != SYN_OK) {
        kv_pool_free(p);
        return st;
    }
    *out = p;
    return SYN_OK;
}

void kv_pool_free(kv_pool *p) {
    if (!p) return;
    for (uint32_t i = 0; i < p->n_created; i++)
        free(p->blocks[i].snap);
    syn_block_arena_release(&p->arena);
    free(p->blocks);
    free(p->buckets);
    free(p);
}

uint32_t kv_pool_capacity(const kv_pool *p) { return p->n_blocks; }

uint32_t kv_pool_available(const kv_pool *p) {
    uint64_t have = (uint64_t)(p->n_blocks - p->n_created) + p->n_free + p->n_evictable;
    return have > p->reserved ? (uint32_t)(have - p->reserved) : 0;
}

uint32_t kv_pool_used(const kv_pool *p) { return p->n_created - p->n_free; }

uint32_t kv_pool_cached(const kv_pool *p) { return p->n_cached; }

void kv_pool_reserve(kv_pool *p, uint32_t n) { p->reserved += n; }

void kv_pool_unreserve(kv_pool *p, uint32_t n) { p->reserved -= n < p->reserved ? n : p->reserved; }

void *kv_pool_data(const kv_pool *p, int32_t id) { return p->blocks[id].data; }

/* FNV-1a over the parent id and the tokens. */
static uint64_t entry_hash(int32_t parent, const int32_t *tokens) {
    uint64_t h = 14695981039346656037ull;
    const uint32_t words[1] = {(uint32_t)parent};
    const unsigned char *b = (const unsigned char *)words;
    for (size_t i = 0; i < sizeof words; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    b = (const unsigned char *)tokens;
    for (size_t i = 0; i < sizeof(int32_t) * SYN_KV_BLOCK; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int32_t *bucket_of(kv_pool *p, uint64_t hash) {
    return &p->buckets[hash & (p->n_buckets - 1)];
}

static int32_t find_entry(kv_pool *p, int32_t parent, const int32_t *tokens, uint64_t hash) {
    for (int32_t id = *bucket_of(p, hash); id >= 0; id = p->blocks[id].next) {
        const kv_block *b = &p->blocks[id];
        if (b->hash == hash && b->parent == parent &&
            memcmp(b->tokens, tokens, sizeof b->tokens) == 0)
            return id;
    }
    return -1;
}

/* Removes evictable block id from the cache; it then has no reference. */
static void evict(kv_pool *p, int32_t id) {
    kv_block *b = &p->blocks[id];
    int32_t *link = bucket_of(p, b->hash);
    while (*link != id)
        link = &p->blocks[*link].next;
    *link = b->next;
    if (b->parent >= 0) p->blocks[b->parent].n_children--;
    if (b->snap) p->n_snaps--;
    free(b->snap);
    b->snap = NULL;
    b->cached = false;
    b->refs = 0;
    b->next = -1;
    p->n_cached--;
    p->n_evictable--;
}

/* The least recently used evictable cached block without cached children; -1 when none. */
static int32_t lru_victim(const kv_pool *p) {
    int32_t best = -1;
    for (uint32_t i = 0; i < p->n_created; i++) {
        const kv_block *b = &p->blocks[i];
        if (b->cached && b->refs == 1 && b->n_children == 0 &&
            (best < 0 || b->last_use < p->blocks[best].last_use))
            best = (int32_t)i;
    }
    return best;
}

/* Makes descriptors [0, n) exist (n <= n_blocks), zeroed, growing the array geometrically. */
static syn_status describe_blocks(kv_pool *p, uint32_t n) {
    if (n <= p->n_described) return SYN_OK;
    uint64_t cap = p->n_described ? (uint64_t)p->n_described * 2 : MIN_DESCRIPTORS;
    if (cap > p->n_blocks) cap = p->n_blocks;
    kv_block *b = realloc(p->blocks, sizeof *b * (size_t)cap);
    if (!b)
        return syn_fail(SYN_ERR_NO_MEMORY, "KV pool: out of memory for %llu block descriptors",
                        (unsigned long long)cap);
    memset(b + p->n_described, 0, sizeof *b * (size_t)(cap - p->n_described));
    p->blocks = b;
    p->n_described = (uint32_t)cap;
    return SYN_OK;
}

syn_status kv_pool_alloc(kv_pool *p, int32_t *id) {
    if (p->reserved == 0)
        return syn_fail(SYN_ERR_INTERNAL, "KV pool: block allocated without a reservation");
    int32_t got = -1;
    if (p->free_head >= 0) {
        got = p->free_head;
        p->free_head = p->blocks[got].next;
        p->n_free--;
    } else if (p->n_created < p->n_blocks) {
        syn_status st = describe_blocks(p, p->n_created + 1);
        if (st == SYN_OK) st = syn_block_arena_grow(&p->arena, p->n_created + 1, "KV pool");
        if (st != SYN_OK) return st;
        got = (int32_t)p->n_created++;
        p->blocks[got].data = syn_block_arena_at(&p->arena, (uint32_t)got);
    } else {
        got = lru_victim(p);
        /* An evictable block always exists here: reservations never exceed available(), and the
         * descendants of an evictable block are evictable too (a sequence holds whole chains). */
        if (got < 0)
            return syn_fail(SYN_ERR_INTERNAL, "KV pool: no block to evict with %u reserved",
                            p->reserved);
        evict(p, got);
    }
    kv_block *b = &p->blocks[got];
    b->refs = 1;
    b->next = -1;
    p->reserved--;
    *id = got;
    return SYN_OK;
}

static void ref(kv_pool *p, int32_t id) {
    kv_block *b = &p->blocks[id];
    if (b->cached && b->refs == 1) p->n_evictable--;
    b->refs++;
}

void kv_pool_unref(kv_pool *p, int32_t id) {
    kv_block *b = &p->blocks[id];
    b->refs--;
    if (b->cached && b->refs == 1) p->n_evictable++;
    if (b->refs == 0) {
        b->next = p->free_head;
        p->free_head = id;
        p->n_free++;
    }
}

uint32_t kv_pool_lookup(kv_pool *p, const int32_t *tokens, uint32_t max_blocks, int32_t *ids) {
    uint32_t n = 0;
    int32_t parent = -1;
    for (; n < max_blocks; n++) {
        const int32_t *t = tokens + (size_t)n * SYN_KV_BLOCK;
        int32_t id = find_entry(p, parent, t, entry_hash(parent, t));
        if (id < 0) break;
        ref(p, id);
        ids[n] = id;
        parent = id;
    }
    /* Deepest first, so that a chain's first blocks count as the most recently used. */
    for (uint32_t i = n; i-- > 0;)
        p->blocks[ids[i]].last_use = ++p->tick;
    return n;
}

int32_t kv_pool_find(kv_pool *p, const int32_t *tokens, uint32_t n_blocks) {
    int32_t id = -1;
    for (uint32_t n = 0; n < n_blocks; n++) {
        const int32_t *t = tokens + (size_t)n * SYN_KV_BLOCK;
        if ((id = find_entry(p, id, t, entry_hash(id, t))) < 0) break;
    }
    return id;
}

/* Doubles the hash buckets once the cache holds as many entries, rehashing every entry; a failed
 * allocation keeps the current ones (chains grow longer, lookups stay correct). */
static void grow_buckets(kv_pool *p) {
    if (p->n_cached < p->n_buckets || p->n_buckets >= (1u << 30)) return;
    const uint32_t n = p->n_buckets * 2;
    int32_t *buckets = malloc(sizeof *buckets * n);
    if (!buckets) return;
    for (uint32_t i = 0; i < n; i++)
        buckets[i] = -1;
    for (uint32_t id = 0; id < p->n_created; id++) {
        kv_block *b = &p->blocks[id];
        if (!b->cached) continue;
        int32_t *head = &buckets[b->hash & (n - 1)];
        b->next = *head;
        *head = (int32_t)id;
    }
    free(p->buckets);
    p->buckets = buckets;
    p->n_buckets = n;
}

int32_t kv_pool_publish(kv_pool *p, int32_t parent, const int32_t *tokens, int32_t id) {
    kv_block *b = &p->blocks[id];
    if (b->cached || (parent >= 0 && !p->blocks[parent].cached)) return -1;
    const uint64_t hash = entry_hash(parent, tokens);
    const int32_t equal = find_entry(p, parent, tokens, hash);
    if (equal >= 0) {
        ref(p, equal);
        p->blocks[equal].last_use = ++p->tick;
        return equal;
    }
    grow_buckets(p);
    b->cached = true;
    b->refs++; /* the cache's reference; the publisher holds one, so it is not evictable yet */
    b->parent = parent;
    b->n_children = 0;
    b->hash = hash;
    b->last_use = ++p->tick;
    memcpy(b->tokens, tokens, sizeof b->tokens);
    int32_t *head = bucket_of(p, hash);
    b->next = *head;
    *head = id;
    if (parent >= 0) p->blocks[parent].n_children++;
    p->n_cached++;
    return id;
}

void kv_pool_set_snapshots(kv_pool *p, size_t bytes, uint32_t max) {
    p->snap_bytes = bytes;
    p->snap_max = max;
}

uint32_t kv_pool_snapshots(const kv_pool *p) { return p->n_snaps; }

const void *kv_pool_snapshot(const kv_pool *p, int32_t id) { return p->blocks[id].snap; }

void *kv_pool_snapshot_take(kv_pool *p, int32_t id) {
    kv_block *b = &p->blocks[id];
    if (!b->cached || b->snap || p->snap_max == 0) return NULL;
    if (p->n_snaps == p->snap_max) { /* the least recently used snapshot's buffer moves here */
        int32_t old = -1;
        for (uint32_t i = 0; i < p->n_created; i++)
            if (p->blocks[i].snap && (old < 0 || p->blocks[i].last_use < p->blocks[old].last_use))
                old = (int32_t)i;
        b->snap = p->blocks[old].snap;
        p->blocks[old].snap = NULL;
        return b->snap;
    }
    b->snap = malloc(p->snap_bytes);
    if (b->snap) p->n_snaps++;
    return b->snap;
}

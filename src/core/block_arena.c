/* block_arena.c: blocks back to back in one reserved range (block_arena.h). */
#include "core/block_arena.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"

static size_t page_size(void) {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

syn_status syn_block_arena_init(syn_block_arena *a, size_t block_bytes, uint32_t capacity,
                                const char *what) {
    *a = (syn_block_arena){0};
    const size_t page = page_size();
    if (block_bytes == 0 || capacity == 0 || block_bytes > SIZE_MAX - page)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "%s: %u blocks of %zu bytes", what, capacity,
                        block_bytes);
    const size_t stride = (block_bytes + page - 1) / page * page;
    if (stride > SIZE_MAX / capacity)
        return syn_fail(SYN_ERR_NO_MEMORY, "%s: %u blocks of %zu bytes exceed the address space",
                        what, capacity, block_bytes);
    void *base = mmap(NULL, stride * capacity, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return syn_fail(SYN_ERR_NO_MEMORY, "%s: cannot reserve %zu MiB of address space: %s", what,
                        stride * capacity >> 20, strerror(errno));
    *a = (syn_block_arena){.base = base, .stride = stride, .capacity = capacity};
    return SYN_OK;
}

syn_status syn_block_arena_grow(syn_block_arena *a, uint32_t n, const char *what) {
    if (n <= a->n_usable) return SYN_OK;
    if (n > a->capacity)
        return syn_fail(SYN_ERR_INTERNAL, "%s: %u blocks asked of an arena of %u", what, n,
                        a->capacity);
    uint8_t *from = a->base + (size_t)a->n_usable * a->stride;
    if (mprotect(from, (size_t)(n - a->n_usable) * a->stride, PROT_READ | PROT_WRITE) != 0)
        return syn_fail(SYN_ERR_NO_MEMORY, "%s: %u more blocks of %zu bytes: %s", what,
                        n - a->n_usable, a->stride, strerror(errno));
    a->n_usable = n;
    return SYN_OK;
}

void syn_block_arena_release(syn_block_arena *a) {
    if (a->base) munmap(a->base, a->stride * a->capacity);
    *a = (syn_block_arena){0};
}

/* test_block_arena.c: blocks back to back in one reserved range: layout, growth, zero fill,
 * refusals of impossible sizes, and that reserving does not make memory resident. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/block_arena.h"
#include "synapse.h"

/* Resident memory of this process, in KiB (VmRSS of /proc/self/status). */
static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static void test_blocks_back_to_back_zeroed_and_writable(void **state) {
    (void)state;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    syn_block_arena a;
    assert_int_equal(syn_block_arena_init(&a, 3 * page + 5, 8, "test"), SYN_OK);
    assert_int_equal(a.stride, 4 * page); /* rounded up to whole pages */
    assert_int_equal(a.n_usable, 0);
    assert_int_equal(syn_block_arena_grow(&a, 3, "test"), SYN_OK);
    assert_int_equal(syn_block_arena_grow(&a, 2, "test"), SYN_OK); /* shrinking asks nothing */
    assert_int_equal(a.n_usable, 3);
    for (uint32_t i = 0; i < 3; i++) {
        uint8_t *b = syn_block_arena_at(&a, i);
        assert_ptr_equal(b, a.base + i * 4 * page);
        for (size_t j = 0; j < 3 * page + 5; j += 97)
            assert_int_equal(b[j], 0);
        memset(b, (int)(i + 1), 3 * page + 5);
    }
    assert_int_equal(syn_block_arena_grow(&a, 8, "test"), SYN_OK);
    for (uint32_t i = 0; i < 8; i++) {
        const uint8_t *b = syn_block_arena_at(&a, i);
        assert_int_equal(b[3 * page + 4], i < 3 ? i + 1 : 0); /* old blocks keep their bytes */
    }
    syn_block_arena_release(&a);
    assert_null(a.base);
    syn_block_arena_release(&a); /* released twice: nothing */
}

static void test_refusals(void **state) {
    (void)state;
    syn_block_arena a;
    assert_int_equal(syn_block_arena_init(&a, 4096, 4, "KV test"), SYN_OK);
    assert_int_equal(syn_block_arena_grow(&a, 5, "KV test"), SYN_ERR_INTERNAL);
    assert_non_null(strstr(syn_last_error(), "KV test"));
    assert_int_equal(a.n_usable, 0);
    syn_block_arena_release(&a);

    assert_int_equal(syn_block_arena_init(&a, 0, 4, "KV test"), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_block_arena_init(&a, 4096, 0, "KV test"), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_block_arena_init(&a, SIZE_MAX, 2, "KV test"), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_block_arena_init(&a, (size_t)1 << 40, UINT32_MAX, "KV test"),
                     SYN_ERR_NO_MEMORY);
    assert_non_null(strstr(syn_last_error(), "KV test"));
    assert_null(a.base);
}

/* 1 GiB reserved and 4 MiB grown leave the resident size within a few MiB of where it was:
 * memory follows the blocks written, not the reservation. */
static void test_reserving_is_not_resident(void **state) {
    (void)state;
    const long before = rss_kib();
    syn_block_arena a;
    assert_int_equal(syn_block_arena_init(&a, 1 << 20, 1024, "test"), SYN_OK);
    assert_int_equal(syn_block_arena_grow(&a, 4, "test"), SYN_OK);
    assert_true(rss_kib() - before < 2048);
    memset(syn_block_arena_at(&a, 0), 7, 4 << 20);
    assert_true(rss_kib() - before >= 4096 - 64);
    syn_block_arena_release(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_back_to_back_zeroed_and_writable),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_reserving_is_not_resident),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

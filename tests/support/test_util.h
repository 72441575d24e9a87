/* test_util.h: shared helpers for the cmocka unit tests. Include after <cmocka.h>'s prerequisites
 * (stdarg.h, stddef.h, stdint.h, setjmp.h). */
#ifndef SYN_TEST_UTIL_H
#define SYN_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

/* UNDER_ASAN: built with AddressSanitizer (gcc or clang), which reserves terabytes of address
 * space for its shadow memory and runs code several times slower. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* Path of a file in the test data folder: $SYNAPSE_TEST_DATA or tests/data (tests run from the
 * repository root). Returns a static buffer, overwritten by the next call. */
const char *test_data_path(const char *name);

/* A fresh empty directory under $TMPDIR (or /tmp), removed with everything in it by
 * test_remove_dir(). Returns a malloc'd path. */
char *test_make_temp_dir(void);
void test_remove_dir(const char *path);

/* Loads tests/data/<name> without background prefetch; NULL (with the library's message on
 * stderr) when it cannot. */
syn_model *test_load_model(const char *name);

/* Fills tokens[n] with a deterministic sequence (an LCG from seed) of ordinary Qwen2 token ids
 * below 150000, clear of the special tokens. */
void test_fill_tokens(int32_t *tokens, size_t n, uint32_t seed);

/* Reads a whole file into a malloc'd buffer; NULL on failure. */
void *test_read_file(const char *path, size_t *size);
int test_write_file(const char *path, const void *data, size_t size);

/* Runs fn(arg) in a forked child process, so that a memory bound applies to fn alone and not to
 * the test process's history. Returns fn's return value, or -1 when the child died. *peak_kib
 * receives how far the child's peak RSS rose above its RSS at the start (VmHWM - VmRSS of
 * /proc/self/status, in KiB), the start being after the heap's free memory went back to the
 * system. Call it while the test process runs no other thread. */
int test_run_in_child(int (*fn)(void *arg), void *arg, long *peak_kib);

#endif

/* test_bad_files.c: every file of the corrupted-GGUF corpus (tests/support/bad_gguf.c) is refused
 * with an error naming its cause, without crashing and without allocating beyond a memory cap;
 * every truncation of the small seed model is refused too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../support/bad_gguf.h"
#include "../support/test_util.h"
#include "model/model.h"
#include "synapse.h"

/* Loading a ~180 KB file must never need anything near this. */
enum { LOAD_MEMORY_CAP = 1 << 30 };

static char *corpus_dir;

typedef struct load_result {
    int status;
    char message[1024];
} load_result;

/* Loads path in a forked child under an address-space cap (not under ASan, which reserves
 * terabytes of shadow memory), so that a crash or a runaway allocation fails this one case. */
static void load_in_child(const char *path, load_result *res, int *child_status) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
#ifndef UNDER_ASAN
        struct rlimit lim = {LOAD_MEMORY_CAP, LOAD_MEMORY_CAP};
        setrlimit(RLIMIT_AS, &lim);
#endif
        load_result r;
        memset(&r, 0, sizeof r);
        syn_model_params p = syn_model_default_params();
        syn_model *m = NULL;
        r.status = syn_model_load(path, &p, &m);
        snprintf(r.message, sizeof r.message, "%s", syn_last_error());
        syn_model_free(m);
        ssize_t n = write(fds[1], &r, sizeof r);
        _exit(n == (ssize_t)sizeof r ? 0 : 3);
    }
    close(fds[1]);
    memset(res, 0, sizeof *res);
    ssize_t n = read(fds[0], res, sizeof *res);
    close(fds[0]);
    assert_int_equal(waitpid(pid, child_status, 0), pid);
    if (n != (ssize_t)sizeof *res) res->status = 1; /* the child died before answering */
}

static void test_case(void **state) {
    const bad_gguf_case *c = *state;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", corpus_dir, c->file);
    load_result r;
    int child;
    load_in_child(path, &r, &child);
    if (!WIFEXITED(child) || WEXITSTATUS(child) != 0)
        fail_msg("%s: the loader crashed (wait status 0x%x)", c->file, child);
    if (r.status == SYN_OK)
        fail_msg("%s: loaded, expected an error containing \"%s\"", c->file, c->expect);
    if (!strstr(r.message, c->expect))
        fail_msg("%s: error \"%s\" lacks \"%s\"", c->file, r.message, c->expect);
}

/* The base the cases mutate loads: each case fails for its own mutation only. */
static void test_valid_base_loads(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", corpus_dir, BAD_GGUF_VALID_BASE);
    syn_model *m = NULL;
    syn_status st = syn_model_load(path, NULL, &m);
    if (st != SYN_OK) fail_msg("valid base: %s", syn_last_error());
    syn_model_info info;
    syn_model_get_info(m, &info);
    assert_int_equal(info.n_vocab, 1046); /* 1024 BPE tokens + 22 special tokens */
    assert_int_equal(info.n_layer, 2);
    syn_model_free(m);
}

/* Every prefix of the seed model is refused, and so is each prefix with one byte flipped to 0xff
 * at the cut (a cheap way through many length and type fields). */
static void test_every_truncation_of_seed(void **state) {
    (void)state;
    size_t size = 0;
    uint8_t *bytes = test_read_file(test_data_path("fuzz-seed.gguf"), &size);
    assert_non_null(bytes);
    uint8_t *copy = malloc(size);
    assert_non_null(copy);
    syn_model_params p = syn_model_default_params();
    p.prefetch = false;
    for (size_t len = 0; len < size; len++) {
        memcpy(copy, bytes, len);
        gguf_file *f = NULL;
        syn_status st = gguf_open_memory(copy, len, &f);
        if (st == SYN_OK) {
            syn_model *m = NULL;
            st = syn_model_load_gguf(f, &p, &m);
            syn_model_free(m);
        }
        if (st == SYN_OK) fail_msg("the seed cut to %zu of %zu bytes loaded", len, size);
        assert_true(syn_last_error()[0] != '\0');
    }
    /* The whole file loads, from memory as from disk. */
    memcpy(copy, bytes, size);
    gguf_file *f = NULL;
    assert_int_equal(gguf_open_memory(copy, size, &f), SYN_OK);
    syn_model *m = NULL;
    assert_int_equal(syn_model_load_gguf(f, &p, &m), SYN_OK);
    syn_model_free(m);
    free(copy);
    free(bytes);
}

static int group_setup(void **state) {
    (void)state;
    corpus_dir = test_make_temp_dir();
    if (!corpus_dir) return -1;
    return bad_gguf_write_corpus(test_data_path("qwen2-tiny-synth-q8_0.gguf"), corpus_dir);
}

static int group_teardown(void **state) {
    (void)state;
    test_remove_dir(corpus_dir);
    free(corpus_dir);
    return 0;
}

int main(void) {
    size_t n_cases = bad_gguf_case_count(), n = 0;
    struct CMUnitTest *tests = calloc(n_cases + 2, sizeof *tests);
    if (!tests) return 1;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_valid_base_loads);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_every_truncation_of_seed);
    for (size_t i = 0; i < n_cases; i++) {
        const bad_gguf_case *c = bad_gguf_case_at(i);
        tests[n++] = (struct CMUnitTest){c->file, test_case, NULL, NULL, (void *)c};
    }
    int rc = _cmocka_run_group_tests("bad_files", tests, n, group_setup, group_teardown);
    free(tests);
    return rc;
}

/* test_file_map.c: 2 MiB aligned file mappings, the page-cache re-read that makes them map in
 * huge pages, the smaps count, and the model-level switch (syn_model_params.huge_pages). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "core/file_map.h"
#include "model/model.h"
#include "synapse.h"
#include "synapse_internal.h"

enum { MIB = 1 << 20 };

/* Writes size bytes of a position-dependent pattern in 4 KiB write() calls (which leave the
 * page cache in 4 KiB folios) and returns the path (free it). */
static char *write_pattern_file(const char *dir, size_t size) {
    char *path = malloc(strlen(dir) + 16);
    assert_non_null(path);
    sprintf(path, "%s/pattern.bin", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    uint8_t chunk[4096];
    for (size_t off = 0; off < size; off += sizeof chunk) {
        const size_t n = size - off < sizeof chunk ? size - off : sizeof chunk;
        for (size_t i = 0; i < n; i++)
            chunk[i] = (uint8_t)((off + i) * 2654435761u >> 11);
        assert_int_equal(write(fd, chunk, n), (ssize_t)n);
    }
    assert_int_equal(fsync(fd), 0);
    close(fd);
    return path;
}

/* Whether files in dir can be mapped in 2 MiB pages, per the support README "Huge pages" states:
 * THP not disabled, and the file system XFS, or ext4 on Linux 6.16 or later (large folios).
 * Elsewhere the library falls back to 4 KiB pages and the huge-page checks are skipped. */
static bool huge_file_pages_expected(const char *dir) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char line[128] = "";
    const bool thp = fgets(line, sizeof line, f) && !strstr(line, "[never]");
    fclose(f);
    struct statfs fs;
    struct utsname u;
    if (!thp || statfs(dir, &fs) != 0 || uname(&u) != 0) return false;
    int major = 0, minor = 0;
    if (sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
    const bool ext4_large_folios =
        fs.f_type == 0xEF53 && (major > 6 || (major == 6 && minor >= 16));
    return ext4_large_folios || fs.f_type == 0x58465342; /* XFS */
}

/* 4 KiB pages of [p, p + n) (n <= 8 MiB) in the page cache, as mincore() tells this process. */
static size_t resident_pages(const void *p, size_t n) {
    unsigned char vec[8 * MIB / 4096];
    assert_true(n <= 8 * MIB);
    assert_int_equal(mincore((void *)p, n, vec), 0);
    size_t resident = 0;
    for (size_t i = 0; i < n / 4096; i++)
        resident += vec[i] & 1;
    return resident;
}

static uint8_t sum_pages(const uint8_t *p, size_t n) {
    uint8_t s = 0;
    for (size_t i = 0; i < n; i += 4096)
        s ^= ((const volatile uint8_t *)p)[i];
    return s;
}

/* A fresh temporary folder for a huge-page test, or the test skipped (folder removed) where the
 * file system cannot give a mapping 2 MiB pages, or where it needs root and does not run as root.
 */
static char *huge_test_dir(bool needs_root) {
    char *dir = test_make_temp_dir();
    if ((needs_root && geteuid() != 0) || !huge_file_pages_expected(dir)) {
        test_remove_dir(dir);
        free(dir);
        skip();
    }
    return dir;
}

/* Closes fd and removes the test's file and folder. */
static void remove_test_file(int fd, char *path, char *dir) {
    close(fd);
    free(path);
    test_remove_dir(dir);
    free(dir);
}

static void test_mapping_is_aligned_and_holds_the_file(void **state) {
    (void)state;
    char *dir = test_make_temp_dir();
    const size_t size = 5 * MIB + 123; /* not a page multiple */
    char *path = write_pattern_file(dir, size);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    for (int huge = 0; huge <= 1; huge++) {
        void *base = NULL;
        assert_int_equal(syn_file_map(fd, size, path, huge, &base), SYN_OK);
        assert_int_equal((uintptr_t)base % SYN_HUGE_PAGE_BYTES, 0);
        const uint8_t *b = base;
        for (size_t i = 0; i < size; i += 997)
            assert_int_equal(b[i], (uint8_t)(i * 2654435761u >> 11));
        assert_int_equal(b[size - 1], (uint8_t)((size - 1) * 2654435761u >> 11));
        assert_int_equal(munmap(base, size), 0);
    }
    remove_test_file(fd, path, dir);
}

static void test_map_error_names_the_file(void **state) {
    (void)state;
    void *base = (void *)1;
    assert_int_equal(syn_file_map(-1, 4096, "no-such.gguf", true, &base), SYN_ERR_IO);
    assert_null(base);
    assert_non_null(strstr(syn_last_error(), "no-such.gguf"));
}

/* Writes [off, off + n) of the file back with its own bytes, 4 KiB at a time (small page-cache
 * folios), and syncs it (clean pages, which a drop can take). */
static void rewrite_in_small_folios(int fd, const char *path, size_t off, size_t n) {
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, n, (off_t)off), (ssize_t)n);
    assert_int_equal(posix_fadvise(fd, (off_t)off, (off_t)n, POSIX_FADV_DONTNEED), 0);
    int wfd = open(path, O_WRONLY);
    assert_true(wfd >= 0);
    for (size_t o = 0; o < n; o += 4096)
        assert_int_equal(pwrite(wfd, buf + o, 4096, (off_t)(off + o)), 4096);
    assert_int_equal(fsync(wfd), 0);
    close(wfd);
    free(buf);
}

/* A file cached in 4 KiB folios is dropped once and comes back in 2 MiB pages; a second mapping
 * finds it huge and drops nothing; a 4 KiB-page mapping of the same cache maps no huge page. */
static void test_recache_gives_huge_pages(void **state) {
    (void)state;
    char *dir = huge_test_dir(false);
    const size_t size = 8 * MIB;
    char *path = write_pattern_file(dir, size);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);

    void *base = NULL;
    assert_int_equal(syn_file_map(fd, size, path, true, &base), SYN_OK);
    assert_true(syn_file_map_recache_huge(fd, base, size));
    (void)sum_pages(base, size);
    assert_true(syn_file_map_huge_bytes(base, size) >= 3 * (size_t)SYN_HUGE_PAGE_BYTES);
    assert_int_equal(((const uint8_t *)base)[size - 7], (uint8_t)((size - 7) * 2654435761u >> 11));
    assert_int_equal(munmap(base, size), 0);

    assert_int_equal(syn_file_map(fd, size, path, true, &base), SYN_OK);
    assert_false(syn_file_map_recache_huge(fd, base, size));
    (void)sum_pages(base, size);
    assert_true(syn_file_map_huge_bytes(base, size) >= 3 * (size_t)SYN_HUGE_PAGE_BYTES);
    assert_int_equal(munmap(base, size), 0);

    assert_int_equal(syn_file_map(fd, size, path, false, &base), SYN_OK);
    (void)sum_pages(base, size);
    assert_int_equal(syn_file_map_huge_bytes(base, size), 0);
    assert_int_equal(munmap(base, size), 0);

    /* A mixed cache: the first range written back (small folios), the rest still huge. One probe
     * range would find it huge; every range is looked at, so it is dropped and comes back huge. */
    rewrite_in_small_folios(fd, path, 0, SYN_HUGE_PAGE_BYTES);
    assert_int_equal(syn_file_map(fd, size, path, true, &base), SYN_OK);
    (void)sum_pages(base, size);
    assert_int_equal(syn_file_map_huge_bytes(base, size),
                     size - SYN_HUGE_PAGE_BYTES); /* mixed indeed */
    assert_true(syn_file_map_recache_huge(fd, base, size));
    (void)sum_pages(base, size);
    assert_true(syn_file_map_huge_bytes(base, size) >= size);
    assert_int_equal(((const uint8_t *)base)[7], (uint8_t)(7u * 2654435761u >> 11));
    assert_int_equal(munmap(base, size), 0);

    /* Another mapping (another process, or --no-huge-pages) holds the whole cache in small pages:
     * the probe cannot leave the cache, so nothing is dropped, at this load or the next; once that
     * mapping is gone the cache is dropped and read back huge. */
    rewrite_in_small_folios(fd, path, 0, size);
    void *other = NULL; /* 4 KiB pages: maps the small folios as they are */
    assert_int_equal(syn_file_map(fd, size, path, false, &other), SYN_OK);
    (void)sum_pages(other, size);
    for (int load = 0; load < 2; load++) {
        assert_int_equal(syn_file_map(fd, size, path, true, &base), SYN_OK);
        assert_false(syn_file_map_recache_huge(fd, base, size));
        assert_int_equal(syn_file_map_huge_bytes(base, size), 0);
        assert_int_equal(munmap(base, size), 0);
    }
    assert_int_equal(munmap(other, size), 0);
    assert_int_equal(syn_file_map(fd, size, path, true, &base), SYN_OK);
    assert_true(syn_file_map_recache_huge(fd, base, size));
    (void)sum_pages(base, size);
    assert_true(syn_file_map_huge_bytes(base, size) >= size);
    assert_int_equal(munmap(base, size), 0);

    /* Nothing cached: no range is touched (the mapping reads them in later), nothing is dropped. */
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    assert_int_equal(syn_file_map(fd, size, path, true, &base), SYN_OK);
    assert_false(syn_file_map_recache_huge(fd, base, size));
    assert_int_equal(resident_pages(base, size), 0);
    assert_int_equal(munmap(base, size), 0);
    remove_test_file(fd, path, dir);
}

/* A process that neither owns the file nor may write it sees every page as cached in mincore()
 * (Linux hides the cache from it): the check must then leave the file alone, not read a cold file
 * in by touching "cached" ranges. Needs root, to run the check as another user. */
static void test_recache_leaves_a_hidden_cache_alone(void **state) {
    (void)state;
    char *dir = huge_test_dir(true);
    assert_int_equal(chmod(dir, 0755), 0);
    const size_t size = 8 * MIB;
    char *path = write_pattern_file(dir, size); /* root's, mode 0644 */
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0); /* cold */
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* as nobody: check, and report what the check returned */
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
        const int cfd = open(path, O_RDONLY);
        void *cbase = NULL;
        if (cfd < 0 || syn_file_map(cfd, size, path, true, &cbase) != SYN_OK) _exit(3);
        _exit(syn_file_map_recache_huge(cfd, cbase, size) ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    void *base = NULL; /* as root, mincore tells the truth: nothing was read in */
    assert_int_equal(syn_file_map(fd, size, path, true, &base), SYN_OK);
    assert_int_equal(resident_pages(base, size), 0);
    assert_int_equal(munmap(base, size), 0);
    remove_test_file(fd, path, dir);
}

static void test_small_or_unmapped_ranges_count_nothing(void **state) {
    (void)state;
    int local = 0;
    assert_int_equal(syn_file_map_huge_bytes(&local, sizeof local), 0);
    assert_int_equal(syn_file_map_huge_bytes((void *)4096, 4096), 0); /* nothing mapped there */
    assert_int_equal(syn_model_huge_page_bytes(NULL), 0);
}

/* The model switch: the tiny Q8_0 file (16 MB) maps huge by default and in 4 KiB pages with
 * huge_pages = false, with the same bytes either way. */
static void test_model_huge_page_switch(void **state) {
    (void)state;
    if (!huge_file_pages_expected(test_data_path(""))) skip();
    /* Written back first: a fresh clone's file can still be dirty in the page cache, and dirty
     * pages are not dropped, so they would stay in small folios. */
    const int fd = open(test_data_path("qwen2-tiny-synth-q8_0.gguf"), O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fsync(fd), 0);
    close(fd);
    uint8_t sums[2];
    for (int huge = 0; huge <= 1; huge++) {
        syn_model_params p = syn_model_default_params();
        assert_true(p.huge_pages);
        p.prefetch = false;
        p.huge_pages = huge;
        syn_model *m = NULL;
        assert_int_equal(syn_model_load(test_data_path("qwen2-tiny-synth-q8_0.gguf"), &p, &m),
                         SYN_OK);
        sums[huge] = sum_pages(m->gguf->base, m->gguf->size);
        if (huge)
            assert_true(syn_model_huge_page_bytes(m) >= SYN_HUGE_PAGE_BYTES);
        else
            assert_int_equal(syn_model_huge_page_bytes(m), 0);
        syn_model_free(m);
    }
    assert_int_equal(sums[0], sums[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mapping_is_aligned_and_holds_the_file),
        cmocka_unit_test(test_map_error_names_the_file),
        cmocka_unit_test(test_recache_gives_huge_pages),
        cmocka_unit_test(test_recache_leaves_a_hidden_cache_alone),
        cmocka_unit_test(test_small_or_unmapped_ranges_count_nothing),
        cmocka_unit_test(test_model_huge_page_switch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

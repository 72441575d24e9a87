/* test_util.c: file, path and child-process helpers for the unit tests. */
#include "test_util.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "synapse_internal.h"

const char *test_data_path(const char *name) {
    static char path[4096];
    const char *dir = getenv("SYNAPSE_TEST_DATA");
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "tests/data", name);
    return path;
}

char *test_make_temp_dir(void) {
    const char *tmp = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/synapse-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    char *dir = mkdtemp(tmpl);
    return dir ? strdup(dir) : NULL;
}

void test_remove_dir(const char *path) {
    if (!path) return;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "test_remove_dir: could not remove %s\n", path);
}

void *test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf && size) *size = (size_t)n;
    return buf;
}

int test_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, size, f);
    return fclose(f) == 0 && w == size ? 0 : -1;
}

syn_model *test_load_model(const char *name) {
    syn_model_params mp = syn_model_default_params();
    mp.prefetch = false;
    syn_model *model = NULL;
    if (syn_model_load(test_data_path(name), &mp, &model) != SYN_OK)
        fprintf(stderr, "cannot load %s: %s\n", name, syn_last_error());
    syn_model_wait_background(model); /* the interleaved copies, so every run reads them */
    return model;
}

void test_fill_tokens(int32_t *tokens, size_t n, uint32_t seed) {
    uint32_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        tokens[i] = (int32_t)((x >> 8) % 150000u);
    }
}

/* The value of a "Name:   N kB" line of /proc/self/status; -1 when absent. */
static long status_kib(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    const size_t len = strlen(name);
    while (kib < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, name, len) == 0 && line[len] == ':')
            kib = strtol(line + len + 1, NULL, 10);
    fclose(f);
    return kib;
}

/* Makes the child's peak RSS start from what it holds now: the heap memory the parent had freed
 * goes back to the system (reused unseen, it would hide the child's first allocations), then the
 * peak is reset to the current RSS (Linux 4.0+). */
static void reset_peak_rss(void) {
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

int test_run_in_child(int (*fn)(void *arg), void *arg, long *peak_kib) {
    *peak_kib = -1;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(NULL); /* the child must not write the parent's buffered output again */
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        reset_peak_rss();
        const long start = status_kib("VmRSS");
        long report[2] = {fn(arg), 0};
        report[1] = status_kib("VmHWM") - start;
        const ssize_t n = write(fds[1], report, sizeof report);
        _exit(n == (ssize_t)sizeof report ? 0 : 1);
    }
    close(fds[1]);
    long report[2];
    const ssize_t n = read(fds[0], report, sizeof report);
    close(fds[0]);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        n != (ssize_t)sizeof report)
        return -1;
    *peak_kib = report[1];
    return (int)report[0];
}

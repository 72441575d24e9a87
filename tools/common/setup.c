/* setup.c: model and context set-up with one-line errors, and the SIGBUS guard. */
#include "setup.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "synapse_internal.h"

/* The background prefetch warms weight pages on a core of its own; when the compute threads
 * already take every core it only competes with them (measured: a 5-token prompt's first token
 * 69 ms with it, 54 ms without, at 2 threads on 2 cores; 60 ms with, 96 ms without, at 1). */
bool prefetch_pays(int32_t n_threads) {
    long n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return n_threads > 0 && n_cpus > 0 && n_threads < n_cpus;
}

/* The line a SIGBUS on a mapped model file prints, formatted before the mapping exists: a signal
 * handler may only make async-signal-safe calls (open, read, write, _exit), so no stdio and no
 * formatting. It is the fallback: the handler first looks the faulting address up in
 * /proc/self/maps, which names the right file when a process maps several (serve). */
static char sigbus_line[PATH_MAX + 256];
static size_t sigbus_line_len;
static atomic_flag sigbus_reported = ATOMIC_FLAG_INIT;
static char sigbus_maps[256 * 1024]; /* /proc/self/maps, read by the handler */

static void write_all(const char *s, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t w = write(STDERR_FILENO, s + done, n - done);
        if (w <= 0) return;
        done += (size_t)w;
    }
}

/* Parses hex digits at *p up to a non-hex character. */
static uintptr_t parse_hex(const char **p) {
    uintptr_t v = 0;
    for (;; (*p)++) {
        const char c = **p;
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return v;
        v = v * 16 + (uintptr_t)d;
    }
}

/* The file mapped at addr, from /proc/self/maps ("start-end perms offset dev inode path"): a
 * pointer into sigbus_maps and its length, or NULL. Async-signal-safe. */
static const char *mapped_file_at(uintptr_t addr, size_t *len) {
    const int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0) return NULL;
    size_t n = 0;
    for (ssize_t r;
         n < sizeof sigbus_maps && (r = read(fd, sigbus_maps + n, sizeof sigbus_maps - n)) > 0;)
        n += (size_t)r;
    close(fd);
    for (const char *line = sigbus_maps, *end = sigbus_maps + n; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) return NULL; /* a line cut by the buffer's end */
        const char *p = line;
        const uintptr_t start = parse_hex(&p);
        p++;
        const uintptr_t stop = parse_hex(&p);
        if (addr >= start && addr < stop) {
            for (int field = 0; field < 4 && p < eol;
                 field++) { /* past perms, offset, dev, inode */
                while (p < eol && *p == ' ')
                    p++;
                while (p < eol && *p != ' ')
                    p++;
            }
            while (p < eol && *p == ' ')
                p++;
            *len = (size_t)(eol - p);
            return *p == '/' ? p : NULL;
        }
        line = eol + 1;
    }
    return NULL;
}

static void on_sigbus(int sig, siginfo_t *info, void *ucontext) {
    (void)sig;
    (void)ucontext;
    /* A read of a page past the end of a file that shrank under its mapping is BUS_ADRERR. Any
     * other bus error gets its default action: returning re-runs the access, which faults again. */
    if (info->si_code != BUS_ADRERR) {
        signal(SIGBUS, SIG_DFL);
        return;
    }
    /* Several threads may fault at once (compute workers, the prefetch thread): one line only,
     * and the others wait for its _exit. */
    if (atomic_flag_test_and_set(&sigbus_reported))
        for (;;)
            pause();
    size_t len = 0;
    const char *path = mapped_file_at((uintptr_t)info->si_addr, &len);
    if (path) {
        static const char head[] = "synapse: error: model file '",
                          tail[] = "' changed while mapped (truncated or overwritten in place); "
                                   "replace a model by renaming a new "
                                   "file over it\n";
        write_all(head, sizeof head - 1);
        write_all(path, len);
        write_all(tail, sizeof tail - 1);
    } else {
        write_all(sigbus_line, sigbus_line_len);
    }
    _exit(EXIT_RUNTIME);
}

void guard_mapped_file(const char *path) {
    int n = snprintf(
        sigbus_line, sizeof sigbus_line,
        "synapse: error: model file '%s' changed while mapped (truncated or overwritten in "
        "place); replace a model by renaming a new file over it\n",
        path);
    /* Only a path longer than PATH_MAX is cut, and no such path can be opened and mapped. */
    sigbus_line_len = n < 0                            ? 0
                      : (size_t)n < sizeof sigbus_line ? (size_t)n
                                                       : sizeof sigbus_line - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

int load_model(const char *path, bool prefetch, bool huge_pages, bool interleave, syn_model **out) {
    guard_mapped_file(path);
    syn_model_params params = syn_model_default_params();
    params.prefetch = prefetch;
    params.huge_pages = huge_pages;
    params.interleave = interleave;
    if (syn_model_load(path, &params, out) != SYN_OK) return fail_lib("cannot load '%s'", path);
    return EXIT_OK;
}

int load_tokenizer(const char *path, syn_tokenizer **out) {
    guard_mapped_file(path);
    if (syn_tokenizer_load(path, out) != SYN_OK)
        return fail_lib("cannot load the tokenizer of '%s'", path);
    return EXIT_OK;
}

int new_context(const syn_model *model, const gen_opts *o, uint32_t n_ctx, syn_context **out) {
    syn_context_params params = syn_context_default_params();
    params.n_ctx = n_ctx;
    params.n_threads = o->n_threads;
    params.backend = o->backend;
    params.isa = o->isa;
    params.kv_type = o->kv_type;
    if (syn_context_new(model, &params, out) != SYN_OK)
        return fail_lib("cannot create a context of %u tokens on the %s backend (isa %s, kv %s)",
                        n_ctx, backend_name(o->backend), syn_isa_tier_name(o->isa),
                        o->kv_type == SYN_KV_F16 ? "f16" : "f32");
    return EXIT_OK;
}

int tokenize_text(const syn_tokenizer *tok, const char *text, size_t len, bool add_special,
                  bool parse_special, int32_t **ids, size_t *n) {
    if (syn_tokenize_new(tok, text, len, add_special, parse_special, ids, n) != SYN_OK)
        return fail_lib("cannot tokenize the text");
    return EXIT_OK;
}

int format_chat(const syn_model *model, const char *template_name, const syn_chat_message *msgs,
                size_t n_msgs, char **text, size_t *len) {
    if (syn_chat_format_new(model, template_name, msgs, n_msgs, true, text, len) != SYN_OK)
        return fail_lib("cannot format the chat");
    return EXIT_OK;
}

int check_token_ids(const syn_tokenizer *tok, const int32_t *ids, size_t n) {
    int32_t n_vocab = syn_tokenizer_n_vocab(tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= n_vocab)
            return fail_runtime(
                "--tokens: token id %d (element %zu) is outside the vocabulary of %d", ids[i],
                i + 1, n_vocab);
    return EXIT_OK;
}

/* common.c: option groups, set-up helpers and JSON output shared by the synapse subcommands. */
#include "common.h"

#include "synapse_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void gen_opts_init(gen_opts *o, int32_t n_predict) {
    memset(o, 0, sizeof *o);
    o->n_predict = n_predict;
    syn_context_params defaults = syn_context_default_params();
    o->backend = defaults.backend;
    o->isa = defaults.isa;
    o->kv_type = defaults.kv_type;
    o->huge_pages = syn_model_default_params().huge_pages;
    o->sampling = syn_sampler_default_params();
}

static int parse_backend(const char *opt, const char *s, syn_backend *out) {
    if (strcmp(s, "reference") == 0) *out = SYN_BACKEND_REFERENCE;
    else if (strcmp(s, "optimized") == 0) *out = SYN_BACKEND_OPTIMIZED;
    else return fail_usage("%s: unknown backend '%s' (expected reference or optimized)", opt, s);
    return EXIT_OK;
}

static int parse_isa(const char *opt, const char *s, syn_isa_tier *out) {
    /* Whether this CPU has the tier is the context's to say (a runtime error, exit 1). */
    if (syn_isa_tier_parse(s, out) != SYN_OK)
        return fail_usage("%s: unknown tier '%s' (expected auto, scalar, avx2, avx512-vnni, "
                          "avx-vnni, neon-dot or i8mm)", opt, s);
    return EXIT_OK;
}

static int parse_kv_type(const char *opt, const char *s, syn_kv_type *out) {
    if (strcmp(s, "f32") == 0) *out = SYN_KV_F32;
    else if (strcmp(s, "f16") == 0) *out = SYN_KV_F16;
    else return fail_usage("%s: unknown KV cache type '%s' (expected f32 or f16)", opt, s);
    return EXIT_OK;
}

int parse_gen_opt(arg_iter *it, const char *arg, unsigned groups, gen_opts *o) {
    const char *v = NULL;
    long l = 0;
    int rc;
#define TAKE_VALUE() \
    if ((rc = args_value(it, arg, &v)) != EXIT_OK) return rc
    if ((groups & GEN_MODEL) && (strcmp(arg, "-m") == 0 || strcmp(arg, "--model") == 0)) {
        TAKE_VALUE();
        o->model_path = v;
        return EXIT_OK;
    }
    if ((groups & GEN_THREADS) && (strcmp(arg, "-t") == 0 || strcmp(arg, "--threads") == 0)) {
        TAKE_VALUE();
        if ((rc = parse_long(arg, v, 0, MAX_THREADS, &l)) != EXIT_OK) return rc;
        o->n_threads = (int32_t)l;
        return EXIT_OK;
    }
    if (groups & GEN_BACKEND) {
        if (strcmp(arg, "--backend") == 0) {
            TAKE_VALUE();
            return parse_backend(arg, v, &o->backend);
        }
        if (strcmp(arg, "--isa") == 0) {
            TAKE_VALUE();
            return parse_isa(arg, v, &o->isa);
        }
        if (strcmp(arg, "--kv-type") == 0) {
            TAKE_VALUE();
            return parse_kv_type(arg, v, &o->kv_type);
        }
        if (strcmp(arg, "--no-huge-pages") == 0) {
            o->huge_pages = false;
            return EXIT_OK;
        }
    }
    if ((groups & GEN_CTX) && (strcmp(arg, "-c") == 0 || strcmp(arg, "--ctx-size") == 0)) {
        TAKE_VALUE();
        if ((rc = parse_long(arg, v, 1, INT32_MAX, &l)) != EXIT_OK) return rc;
        o->n_ctx = (uint32_t)l;
        return EXIT_OK;
    }
    if ((groups & GEN_TEMPLATE) && strcmp(arg, "--chat-template") == 0) {
        TAKE_VALUE();
        /* syn_chat_format knows this one name; any other is refused, also without --chat. */
        if (strcmp(v, "chatml") != 0 && strcmp(v, "llama3") != 0)
            return fail_usage("%s: unknown template '%s' (expected chatml or llama3)", arg, v);
        o->chat_template = v;
        return EXIT_OK;
    }
    if (groups & GEN_SAMPLING) {
        syn_sampler_params *sp = &o->sampling;
        if (strcmp(arg, "-n") == 0 || strcmp(arg, "--n-predict") == 0) {
            TAKE_VALUE();
            if ((rc = parse_long(arg, v, 0, INT32_MAX, &l)) != EXIT_OK) return rc;
            o->n_predict = (int32_t)l;
            return EXIT_OK;
        }
        if (strcmp(arg, "--temp") == 0) {
            TAKE_VALUE();
            return parse_float(arg, v, 0.0, false, 1e6, &sp->temperature);
        }
        if (strcmp(arg, "--top-k") == 0) {
            TAKE_VALUE();
            if ((rc = parse_long(arg, v, 0, INT32_MAX, &l)) != EXIT_OK) return rc;
            sp->top_k = (int32_t)l;
            return EXIT_OK;
        }
        if (strcmp(arg, "--top-p") == 0) {
            TAKE_VALUE();
            return parse_float(arg, v, 0.0, true, 1.0, &sp->top_p);
        }
        if (strcmp(arg, "--min-p") == 0) {
            TAKE_VALUE();
            return parse_float(arg, v, 0.0, false, 1.0, &sp->min_p);
        }
        if (strcmp(arg, "--repeat-penalty") == 0) {
            TAKE_VALUE();
            return parse_float(arg, v, 0.0, true, 1e6, &sp->repeat_penalty);
        }
        if (strcmp(arg, "--repeat-last-n") == 0) {
            TAKE_VALUE();
            if ((rc = parse_long(arg, v, 0, INT32_MAX, &l)) != EXIT_OK) return rc;
            sp->repeat_last_n = (int32_t)l;
            return EXIT_OK;
        }
        if (strcmp(arg, "--seed") == 0) {
            TAKE_VALUE();
            return parse_u64(arg, v, &sp->seed);
        }
    }
#undef TAKE_VALUE
    return OPT_NOMATCH;
}

int require_model(const gen_opts *o) {
    return o->model_path ? EXIT_OK : fail_usage("missing -m MODEL");
}

double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

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
    for (ssize_t r; n < sizeof sigbus_maps && (r = read(fd, sigbus_maps + n, sizeof sigbus_maps - n)) > 0;)
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
            for (int field = 0; field < 4 && p < eol; field++) { /* past perms, offset, dev, inode */
                while (p < eol && *p == ' ') p++;
                while (p < eol && *p != ' ') p++;
            }
            while (p < eol && *p == ' ') p++;
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
        for (;;) pause();
    size_t len = 0;
    const char *path = mapped_file_at((uintptr_t)info->si_addr, &len);
    if (path) {
        static const char head[] = "synapse: error: model file '", tail[] =
            "' changed while mapped (truncated or overwritten in place); replace a model by renaming a new "
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
    int n = snprintf(sigbus_line, sizeof sigbus_line,
                     "synapse: error: model file '%s' changed while mapped (truncated or overwritten in "
                     "place); replace a model by renaming a new file over it\n", path);
    /* Only a path longer than PATH_MAX is cut, and no such path can be opened and mapped. */
    sigbus_line_len = n < 0 ? 0 : (size_t)n < sizeof sigbus_line ? (size_t)n : sizeof sigbus_line - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

int load_model(const char *path, bool prefetch, bool huge_pages, syn_model **out) {
    guard_mapped_file(path);
    syn_model_params params = syn_model_default_params();
    params.prefetch = prefetch;
    params.huge_pages = huge_pages;
    if (syn_model_load(path, &params, out) != SYN_OK) return fail_lib("cannot load '%s'", path);
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

const char *backend_name(syn_backend backend) {
    return backend == SYN_BACKEND_OPTIMIZED ? "optimized" : "reference";
}

int read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail_runtime("cannot open '%s': %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break; /* end of file or an error, told apart below */
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return fail_runtime("out of memory reading '%s'", path);
    if (err) {
        free(buf);
        return fail_runtime("cannot read '%s'", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
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
    size_t cap = 4096;
    for (size_t i = 0; i < n_msgs; i++) cap += strlen(msgs[i].content) + 64;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf) return fail_runtime("out of memory formatting the chat");
        size_t need = 0;
        syn_status st = syn_chat_format(model, template_name, msgs, n_msgs, true, buf, cap, &need);
        if (st == SYN_OK) {
            *text = buf;
            *len = need;
            return EXIT_OK;
        }
        free(buf);
        if (st != SYN_ERR_BUFFER_TOO_SMALL || need + 1 <= cap) return fail_lib("cannot format the chat");
        cap = need + 1;
    }
}

int check_token_ids(const syn_model *model, const int32_t *ids, size_t n) {
    int32_t n_vocab = syn_tokenizer_n_vocab(syn_model_tokenizer(model));
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= n_vocab)
            return fail_runtime("--tokens: token id %d (element %zu) is outside the vocabulary of %d",
                                ids[i], i + 1, n_vocab);
    return EXIT_OK;
}

size_t utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, min = 0x10000;
    else return 0;
    if (n > avail) return 0;
    unsigned cp = c & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

size_t utf8_valid_prefix(const char *s, size_t len) {
    size_t i = 0;
    for (size_t n; i < len && (n = utf8_seq_len((const unsigned char *)s + i, len - i)) != 0;) i += n;
    return i;
}

json_t *json_utf8(const char *s, size_t len) {
    /* Each invalid byte becomes the 3-byte U+FFFD. */
    char *clean = malloc(len * 3 + 1);
    if (!clean) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq_len((const unsigned char *)s + i, len - i);
        if (n == 0) {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, s + i, n);
            o += n;
            i += n;
        }
    }
    json_t *j = json_stringn(clean, o);
    free(clean);
    return j;
}

json_t *json_text(const char *s) {
    return json_utf8(s, strlen(s));
}

json_t *json_ids(const int32_t *ids, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        if (json_array_append_new(arr, json_integer(ids[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int print_json(json_t *obj) {
    if (!obj) return fail_runtime("out of memory building the JSON output");
    int rc = json_dumpf(obj, stdout, JSON_DUMP_FLAGS);
    json_decref(obj);
    if (rc != 0) return fail_runtime("cannot write the JSON output");
    fputc('\n', stdout);
    return check_stdout();
}

/* Whether output written to stdout was lost; *err is the failing call's errno, or 0 when an
 * earlier write failed (the stream's error flag). */
static bool stdout_lost(int *err) {
    *err = 0;
    errno = 0;
    if (fflush(stdout) != 0) {
        *err = errno;
        return true;
    }
    return ferror(stdout) != 0;
}

static int fail_stdout(int err) {
    if (err) return fail_runtime("cannot write to stdout: %s", strerror(err));
    return fail_runtime("cannot write to stdout");
}

int check_stdout(void) {
    int err;
    return stdout_lost(&err) ? fail_stdout(err) : EXIT_OK;
}

int close_stdout(int rc) {
    int err;
    bool lost = stdout_lost(&err);
    /* close(2) can report what the flush could not (a deferred write error); EBADF only says that
     * stdout was closed from the start, which loses nothing when nothing was written. */
    if (fclose(stdout) != 0 && !lost && errno != EBADF) {
        lost = true;
        err = errno;
    }
    return lost && rc == EXIT_OK ? fail_stdout(err) : rc;
}

bool model_alias_valid(const char *alias) {
    size_t n = 0;
    for (; alias[n]; n++) {
        const char c = alias[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.' || c == ':'))
            return false;
    }
    return n >= 1 && n <= MODEL_ALIAS_MAX;
}

int text_append(text_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) return fail_runtime("out of memory for %zu bytes of text", b->len + n);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return EXIT_OK;
}

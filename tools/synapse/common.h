/*
 * common.h: what the synapse subcommands share: the options common to several commands, model
 * and context set-up with one-line errors, file reading, tokenizing into a growing buffer,
 * chat formatting and JSON output.
 */
#ifndef SYNAPSE_TOOL_COMMON_H
#define SYNAPSE_TOOL_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "synapse.h"

/* Defaults documented in the usage texts. */
enum { RUN_DEFAULT_N_PREDICT = 128, CHAT_DEFAULT_N_PREDICT = 256, CHAT_DEFAULT_N_CTX = 4096 };

/* The most threads -t may ask for: the library's thread pool refuses more (syn_context_new and
 * syn_engine_new fail), and a usage mistake must be caught as one (exit 2). */
enum { MAX_THREADS = SYN_MAX_THREADS };

/* Options shared by run, chat and eval. */
typedef struct gen_opts {
    const char *model_path;
    int32_t n_predict;       /* -n: tokens to generate at most */
    int32_t n_threads;       /* -t: 0 = one per core */
    uint32_t n_ctx;          /* -c: 0 = the command's default */
    syn_backend backend;     /* --backend */
    syn_isa_tier isa;        /* --isa */
    syn_kv_type kv_type;     /* --kv-type */
    bool huge_pages;         /* false with --no-huge-pages */
    syn_sampler_params sampling;
    const char *chat_template; /* --chat-template: NULL = recognise the GGUF's */
} gen_opts;

/* Option groups a command accepts, for parse_gen_opt(). */
enum {
    GEN_MODEL = 1 << 0,    /* -m */
    GEN_THREADS = 1 << 1,  /* -t */
    GEN_BACKEND = 1 << 2,  /* --backend, --isa, --kv-type, --no-huge-pages */
    GEN_COMPUTE = GEN_THREADS | GEN_BACKEND,
    GEN_CTX = 1 << 3,      /* -c */
    GEN_SAMPLING = 1 << 4, /* -n, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed */
    GEN_TEMPLATE = 1 << 5  /* --chat-template */
};

/* The usage lines of the GEN_BACKEND options, shared by every command that makes a context. */
#define USAGE_BACKEND_OPTS                                                                          \
    "  --backend NAME          reference or optimized (default: the library's default,\n"           \
    "                          syn_context_default_params(): optimized)\n"                         \
    "  --isa TIER              the optimized backend's kernel tier: auto (default: the fastest\n"   \
    "                          this CPU has), scalar, avx2, avx512-vnni, avx-vnni, neon-dot or\n"   \
    "                          i8mm; a tier this CPU lacks is an error (exit 1), never a fallback\n" \
    "  --kv-type TYPE          KV cache element type: f32 (default) or f16 (optimized backend)\n"   \
    "  --no-huge-pages         map the weights in 4 KiB pages and leave the file's page cache as\n" \
    "                          it is (default: 2 MiB pages where the kernel allows; README\n"       \
    "                          \"Huge pages\")\n"


/* parse_gen_opt's answer when arg is none of the accepted options. */
enum { OPT_NOMATCH = -2 };

void gen_opts_init(gen_opts *o, int32_t n_predict);

/* Consumes arg (and its value) when it is one of the options in groups: EXIT_OK, EXIT_USAGE
 * (printed), or OPT_NOMATCH. */
int parse_gen_opt(arg_iter *it, const char *arg, unsigned groups, gen_opts *o);

/* Usage error unless -m was given. */
int require_model(const gen_opts *o);

/* Milliseconds on a monotonic clock. */
double now_ms(void);

/* Whether a background weight prefetch helps a run with n_threads compute threads (0: one per
 * core): only when a core is left for it. */
bool prefetch_pays(int32_t n_threads);
/* Makes a SIGBUS from the mapping of the file at path (the file truncated or overwritten in
 * place while mapped) print one error line naming it and exit 1, instead of killing the process
 * without a word. Call before mapping the file. The handler names the file mapped at the faulting
 * address (from /proc/self/maps); where that cannot be read, the last call's path. */
void guard_mapped_file(const char *path);

/* Loads path under guard_mapped_file (prefetching weights in the background when prefetch;
 * syn_model_params.huge_pages as huge_pages); the error "cannot load 'PATH': <cause>" (exit 1). */
int load_model(const char *path, bool prefetch, bool huge_pages, syn_model **out);

/* The context for o's backend, tier, KV type and threads, holding n_ctx tokens. */
int new_context(const syn_model *model, const gen_opts *o, uint32_t n_ctx, syn_context **out);

/* "reference" or "optimized". */
const char *backend_name(syn_backend backend);

/* The file's exact bytes, NUL-terminated for convenience (*len excludes the NUL). Caller frees. */
int read_file(const char *path, char **data, size_t *len);

/* syn_tokenize into a malloc'd array sized to fit, as an exit code. Caller frees *ids. */
int tokenize_text(const syn_tokenizer *tok, const char *text, size_t len, bool add_special,
                  bool parse_special, int32_t **ids, size_t *n);

/* syn_chat_format into a malloc'd NUL-terminated string. Caller frees *text. */
int format_chat(const syn_model *model, const char *template_name, const syn_chat_message *msgs,
                size_t n_msgs, char **text, size_t *len);

/* Checks every id against the model's vocabulary. An id outside it is a runtime error (exit 1),
 * not a usage error: only the loaded model knows its vocabulary size. */
int check_token_ids(const syn_model *model, const int32_t *ids, size_t n);

/* Length of the valid UTF-8 sequence at s (1 to 4 bytes), or 0 when s[0] does not start one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). avail >= 1. */
size_t utf8_seq_len(const unsigned char *s, size_t avail);

/* The offset of the first byte of s[len] that is not valid UTF-8; len when all of it is. */
size_t utf8_valid_prefix(const char *s, size_t len);

/* A JSON string of len bytes; bytes that are not valid UTF-8 become U+FFFD. NULL: no memory.
 * Text from a file or the command line goes through it: jansson refuses invalid UTF-8. */
json_t *json_utf8(const char *s, size_t len);

/* json_utf8 of a NUL-terminated string. */
json_t *json_text(const char *s);

/* A JSON array of token ids; NULL: no memory. */
json_t *json_ids(const int32_t *ids, size_t n);

/* How every JSON output is written. Nine significant digits round-trip a float32 exactly. */
#define JSON_DUMP_FLAGS JSON_REAL_PRECISION(9)

/* Prints the object on stdout, compact, with a newline, and releases it. NULL: out of memory. */
int print_json(json_t *obj);

/* Flushes stdout: EXIT_OK, or "cannot write to stdout" (exit 1) when any output was lost. Long
 * outputs call it as they go, so that a full disk or a closed pipe stops the work early. */
int check_stdout(void);

/* Flushes and closes stdout once the command is done: rc, or 1 with "cannot write to stdout"
 * when rc was 0 but output was lost (an error already reported keeps its own status). */
int close_stdout(int rc);

/* The longest model alias (--alias, /admin/models, cluster-config). */
enum { MODEL_ALIAS_MAX = 64 };

/* Whether alias can name a served model: 1..MODEL_ALIAS_MAX letters, digits and -_.:, which an
 * HAProxy configuration and a Prometheus label take unquoted and match exactly. */
bool model_alias_valid(const char *alias);

/* Growable byte buffer for decoded text. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

int text_append(text_buf *b, const char *s, size_t n);

#endif

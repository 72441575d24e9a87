/*
 * options.h: the options several commands share (model, threads, backend, context, sampling, chat
 * template), parsed strictly, with their defaults and usage lines.
 */
#ifndef SYNAPSE_TOOL_OPTIONS_H
#define SYNAPSE_TOOL_OPTIONS_H

#include <stdbool.h>
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
    int32_t n_predict;   /* -n: tokens to generate at most */
    int32_t n_threads;   /* -t: 0 = one per core */
    uint32_t n_ctx;      /* -c: 0 = the command's default */
    syn_backend backend; /* --backend */
    syn_isa_tier isa;    /* --isa */
    syn_kv_type kv_type; /* --kv-type */
    bool huge_pages;     /* false with --no-huge-pages */
    bool interleave;     /* false with --no-interleave */
    syn_sampler_params sampling;
    char
        *chat_template; /* --chat-template-file's source (owned: gen_opts_free); NULL: the GGUF's */
} gen_opts;

/* Option groups a command accepts, for parse_gen_opt(). */
enum {
    GEN_MODEL = 1 << 0,   /* -m */
    GEN_THREADS = 1 << 1, /* -t */
    GEN_BACKEND = 1 << 2, /* --backend, --isa, --kv-type, --no-huge-pages, --no-interleave */
    GEN_COMPUTE = GEN_THREADS | GEN_BACKEND,
    GEN_CTX = 1 << 3,      /* -c */
    GEN_SAMPLING = 1 << 4, /* -n, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed */
    GEN_TEMPLATE = 1 << 5  /* --chat-template-file */
};

/* The usage lines of the GEN_BACKEND options, shared by every command that makes a context. */
#define USAGE_BACKEND_OPTS                                                                         \
    "  --backend NAME          reference or optimized (default: the library's default,\n"          \
    "                          syn_context_default_params(): optimized)\n"                         \
    "  --isa TIER              the optimized backend's kernel tier: auto (default: the fastest\n"  \
    "                          this CPU has), scalar, avx2, avx512-vnni, avx-vnni, neon-dot or\n"  \
    "                          i8mm; a tier this CPU lacks is an error (exit 1), never a "         \
    "fallback\n"                                                                                   \
    "  --kv-type TYPE          KV cache element type: f32 (default) or f16 (optimized backend)\n"  \
    "  --no-huge-pages         map the weights in 4 KiB pages and leave the file's page cache "    \
    "as\n"                                                                                         \
    "                          it is (default: 2 MiB pages where the kernel allows; README\n"      \
    "                          \"Huge pages\")\n"                                                  \
    "  --no-interleave         read every matrix as the file lays it out (default: an\n"           \
    "                          interleaved copy of each matrix whose type the kernel tier\n"       \
    "                          reads so; README \"Interleaved weights\")\n"

/* parse_gen_opt's answer when arg is none of the accepted options. */
enum { OPT_NOMATCH = -2 };

void gen_opts_init(gen_opts *o, int32_t n_predict);
void gen_opts_free(gen_opts *o);

/* Consumes arg (and its value) when it is one of the options in groups: EXIT_OK, EXIT_USAGE
 * (printed), or OPT_NOMATCH. */
int parse_gen_opt(arg_iter *it, const char *arg, unsigned groups, gen_opts *o);

/* Usage error unless -m was given. */
int require_model(const gen_opts *o);

/* "reference" or "optimized". */
const char *backend_name(syn_backend backend);

#endif

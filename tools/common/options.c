/* options.c: the option groups run, chat, eval, bench and serve share. */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "text.h"

#include "synapse_internal.h"

void gen_opts_init(gen_opts *o, int32_t n_predict) {
    memset(o, 0, sizeof *o);
    o->n_predict = n_predict;
    syn_context_params defaults = syn_context_default_params();
    o->backend = defaults.backend;
    o->isa = defaults.isa;
    o->kv_type = defaults.kv_type;
    o->huge_pages = syn_model_default_params().huge_pages;
    o->interleave = syn_model_default_params().interleave;
    o->sampling = syn_sampler_default_params();
}

void gen_opts_free(gen_opts *o) {
    free(o->chat_template);
    o->chat_template = NULL;
}

static int parse_backend(const char *opt, const char *s, syn_backend *out) {
    if (strcmp(s, "reference") == 0)
        *out = SYN_BACKEND_REFERENCE;
    else if (strcmp(s, "optimized") == 0)
        *out = SYN_BACKEND_OPTIMIZED;
    else
        return fail_usage("%s: unknown backend '%s' (expected reference or optimized)", opt, s);
    return EXIT_OK;
}

static int parse_isa(const char *opt, const char *s, syn_isa_tier *out) {
    /* Whether this CPU has the tier is the context's to say (a runtime error, exit 1). */
    if (syn_isa_tier_parse(s, out) != SYN_OK)
        return fail_usage("%s: unknown tier '%s' (expected auto, scalar, avx2, avx512-vnni, "
                          "avx-vnni, neon-dot or i8mm)",
                          opt, s);
    return EXIT_OK;
}

static int parse_kv_type(const char *opt, const char *s, syn_kv_type *out) {
    if (strcmp(s, "f32") == 0)
        *out = SYN_KV_F32;
    else if (strcmp(s, "f16") == 0)
        *out = SYN_KV_F16;
    else
        return fail_usage("%s: unknown KV cache type '%s' (expected f32 or f16)", opt, s);
    return EXIT_OK;
}

int parse_gen_opt(arg_iter *it, const char *arg, unsigned groups, gen_opts *o) {
    const char *v = NULL;
    long l = 0;
    int rc;
#define TAKE_VALUE()                                                                               \
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
        if (strcmp(arg, "--no-interleave") == 0) {
            o->interleave = false;
            return EXIT_OK;
        }
    }
    if ((groups & GEN_CTX) && (strcmp(arg, "-c") == 0 || strcmp(arg, "--ctx-size") == 0)) {
        TAKE_VALUE();
        if ((rc = parse_long(arg, v, 1, INT32_MAX, &l)) != EXIT_OK) return rc;
        o->n_ctx = (uint32_t)l;
        return EXIT_OK;
    }
    if ((groups & GEN_TEMPLATE) && strcmp(arg, "--chat-template-file") == 0) {
        TAKE_VALUE();
        /* Read now: a missing file is the user's mistake, caught before the model loads. */
        char *source;
        size_t len;
        if ((rc = read_file(v, &source, &len)) != EXIT_OK) return rc;
        if (strlen(source) != len) {
            free(source);
            return fail_usage("%s: '%s' holds a NUL byte: not a template", arg, v);
        }
        free(o->chat_template);
        o->chat_template = source;
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

const char *backend_name(syn_backend backend) {
    return backend == SYN_BACKEND_OPTIMIZED ? "optimized" : "reference";
}

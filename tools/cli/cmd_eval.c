/* cmd_eval.c: `synapse eval`: teacher-forced next-token logits, the K largest at every position. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/args.h"
#include "common/options.h"
#include "common/output.h"
#include "common/setup.h"

const char usage_eval[] =
    "synapse eval -m MODEL --tokens 1,2,3 [--top K] [-t THREADS] [--backend NAME] [--isa TIER]\n"
    "             [--kv-type TYPE] [--json]\n"
    "  Runs the tokens through the model (teacher forcing) and prints, for every position, the K\n"
    "  largest next-token logits in decreasing order (ties: lower id first). K defaults to 5 and\n"
    "  is capped at the vocabulary size. With --json:\n"
    "  {\"tokens\": [...], \"positions\": [{\"pos\": 0, \"top\": [[id, logit], ...]}, ...]}\n"
    "  otherwise one line per position: \"pos P: id logit, id logit, ...\".\n"
    "  -t, --threads N         worker threads, 0..256 (default 0: one per "
    "core)\n" USAGE_BACKEND_OPTS;

/* Logits are computed this many positions at a time, so memory stays bounded for long inputs. */
enum { EVAL_CHUNK = 64 };

typedef struct eval_opts {
    gen_opts g;
    int32_t *tokens;
    size_t n_tokens;
    int32_t top_k;
    bool json;
} eval_opts;

typedef struct scored {
    int32_t id;
    float logit;
} scored;

/* Orders by logit, largest first, then by id; NaN sorts last. */
static int scored_cmp(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    bool an = isnan(a->logit), bn = isnan(b->logit);
    if (an != bn) return an ? 1 : -1;
    if (!an && a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The k best of logits[n] into top[k], best first (all[n] is scratch for large k). */
static void top_k(const float *logits, int32_t n, int32_t k, scored *all, scored *top) {
    if (k <= 64) {
        /* One pass keeping a sorted list: cheap for the usual handful. */
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++) {
            scored c = {i, logits[i]};
            if (m == k && scored_cmp(&c, &top[m - 1]) >= 0) continue;
            int32_t j = m < k ? m++ : k - 1;
            for (; j > 0 && scored_cmp(&c, &top[j - 1]) < 0; j--)
                top[j] = top[j - 1];
            top[j] = c;
        }
        return;
    }
    for (int32_t i = 0; i < n; i++)
        all[i] = (scored){i, logits[i]};
    qsort(all, (size_t)n, sizeof *all, scored_cmp);
    memcpy(top, all, (size_t)k * sizeof *top);
}

static int parse_args(int argc, char **argv, eval_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg, *v;
    long l = 0;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_eval, stdout);
            return ARGS_HELP;
        }
        rc = parse_gen_opt(&it, arg, GEN_MODEL | GEN_COMPUTE, &o->g);
        if (rc != OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
        } else if (strcmp(arg, "--tokens") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            free(o->tokens);
            o->tokens = NULL;
            if ((rc = parse_token_list(arg, v, &o->tokens, &o->n_tokens)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "--top") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if ((rc = parse_long(arg, v, 1, INT32_MAX, &l)) != EXIT_OK) return rc;
            o->top_k = (int32_t)l;
        } else if (strcmp(arg, "--json") == 0) {
            o->json = true;
        } else {
            return args_unknown(arg);
        }
    }
    if ((rc = require_model(&o->g)) != EXIT_OK) return rc;
    if (!o->tokens) return fail_usage("missing --tokens IDS");
    return EXIT_OK;
}

/* Appends position pos's top list to out (JSON) or prints it (text). */
static int emit_position(const eval_opts *o, size_t pos, const scored *top, int32_t k,
                         json_t *positions) {
    if (!o->json) {
        printf("pos %zu:", pos);
        for (int32_t j = 0; j < k; j++)
            printf("%s %d %.6f", j ? "," : "", top[j].id, top[j].logit);
        putchar('\n');
        return check_stdout();
    }
    json_t *list = json_array();
    for (int32_t j = 0; list && j < k; j++) {
        json_t *pair = json_pack("[i, f]", top[j].id, (double)top[j].logit);
        if (json_array_append_new(list, pair) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    json_t *entry = json_pack("{s:I, s:o}", "pos", (json_int_t)pos, "top", list);
    if (json_array_append_new(positions, entry) != 0)
        return fail_runtime("out of memory building the JSON output");
    return EXIT_OK;
}

static int eval(const eval_opts *o) {
    syn_model *model = NULL;
    syn_context *ctx = NULL;
    float *logits = NULL;
    scored *all = NULL, *top = NULL;
    json_t *positions = NULL;
    int rc = load_model(o->g.model_path, prefetch_pays(o->g.n_threads), o->g.huge_pages,
                        o->g.interleave, &model);
    if (rc != EXIT_OK) return rc;
    if ((rc = check_token_ids(syn_model_tokenizer(model), o->tokens, o->n_tokens)) != EXIT_OK)
        goto done;
    syn_model_info info;
    syn_model_get_info(model, &info);
    if (info.n_ctx_train > 0 && o->n_tokens > (size_t)info.n_ctx_train) {
        rc = fail_runtime("%zu tokens exceed the model's training context of %d", o->n_tokens,
                          info.n_ctx_train);
        goto done;
    }
    if ((rc = new_context(model, &o->g, (uint32_t)o->n_tokens, &ctx)) != EXIT_OK) goto done;

    int32_t n_vocab = info.n_vocab;
    int32_t k = o->top_k < n_vocab ? o->top_k : n_vocab;
    logits = malloc((size_t)EVAL_CHUNK * (size_t)n_vocab * sizeof *logits);
    all = malloc((size_t)n_vocab * sizeof *all);
    top = malloc((size_t)k * sizeof *top);
    positions = o->json ? json_array() : NULL;
    if (!logits || !all || !top || (o->json && !positions)) {
        rc = fail_runtime("out of memory for %d logits per position", n_vocab);
        goto done;
    }
    for (size_t start = 0; start < o->n_tokens; start += EVAL_CHUNK) {
        size_t n = o->n_tokens - start < EVAL_CHUNK ? o->n_tokens - start : EVAL_CHUNK;
        if (syn_context_decode(ctx, o->tokens + start, n, logits) != SYN_OK) {
            rc = fail_lib("cannot evaluate tokens %zu..%zu", start, start + n - 1);
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            top_k(logits + i * (size_t)n_vocab, n_vocab, k, all, top);
            if ((rc = emit_position(o, start + i, top, k, positions)) != EXIT_OK) goto done;
        }
    }
    if (o->json) {
        rc = print_json(json_pack("{s:o, s:o}", "tokens", json_ids(o->tokens, o->n_tokens),
                                  "positions", positions));
        positions = NULL; /* print_json released it with the object */
    }
done:
    json_decref(positions);
    free(top);
    free(all);
    free(logits);
    syn_context_free(ctx);
    syn_model_free(model);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    eval_opts o = {0};
    gen_opts_init(&o.g, 0);
    o.top_k = 5;
    int rc = parse_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = eval(&o);
    free(o.tokens);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}

/*
 * cmd_chat.c: `synapse chat`: an interactive multi-turn conversation in the model's chat format.
 * The KV cache is kept across turns: every turn renders the whole conversation, and only the
 * tokens beyond the longest prefix already cached are decoded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "common/args.h"
#include "common/options.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"
#include "generate.h"

const char usage_chat[] =
    "synapse chat -m MODEL [--system TEXT] [options]\n"
    "  An interactive conversation: each line read from stdin is a user turn; the reply streams "
    "to\n"
    "  stdout followed by a newline. An empty line or end of input ends the conversation. The KV\n"
    "  cache persists across turns (only the new turn's tokens are processed). A line that is not\n"
    "  valid UTF-8 text (or holds a NUL byte) is refused with 'line L: ... at byte B of the line'\n"
    "  (L from 1, B from 0) and skipped; the conversation goes on, and the exit status is then 1.\n"
    "  --system TEXT           the system turn (default: the chat template's own, if any)\n"
    "  --chat-template-file F  render the chat with the Jinja template in file F instead of the\n"
    "                          model's tokenizer.chat_template\n"
    "  -n N                    at most N tokens per reply (default 256)\n"
    "  -c N                    context size in tokens for the whole conversation (default 4096,\n"
    "                          at most the model's training context)\n"
    "  -v, --verbose           after each reply, print on stderr how many prompt tokens came from\n"
    "                          the cache and how many were processed\n"
    "  -t, --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed, "
    "--backend,\n"
    "  --isa, --kv-type, --no-huge-pages, --no-interleave: as for synapse run\n";

typedef struct chat_opts {
    gen_opts g;
    const char *system;
    bool verbose;
} chat_opts;

/* The conversation so far; contents are malloc'd copies. */
typedef struct conversation {
    syn_chat_message *msgs;
    size_t n, cap;
} conversation;

static int conv_add(conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        syn_chat_message *grown = realloc(c->msgs, cap * sizeof *grown);
        if (!grown) return fail_runtime("out of memory holding the conversation");
        c->msgs = grown;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return fail_runtime("out of memory holding the conversation");
    memcpy(copy, content, len);
    copy[len] = '\0';
    c->msgs[c->n++] = (syn_chat_message){role, copy};
    return EXIT_OK;
}

static void conv_free(conversation *c) {
    for (size_t i = 0; i < c->n; i++)
        free((char *)c->msgs[i].content);
    free(c->msgs);
}

static int parse_args(int argc, char **argv, chat_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_chat, stdout);
            return ARGS_HELP;
        }
        rc = parse_gen_opt(&it, arg,
                           GEN_MODEL | GEN_COMPUTE | GEN_CTX | GEN_SAMPLING | GEN_TEMPLATE, &o->g);
        if (rc != OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
        } else if (strcmp(arg, "--system") == 0) {
            if ((rc = args_value(&it, arg, &o->system)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
            o->verbose = true;
        } else {
            return args_unknown(arg);
        }
    }
    return require_model(&o->g);
}

/* Brings the cache in line with the rendered conversation ids[n]: keeps the longest cached
 * prefix (*reused tokens), drops the rest, decodes the new suffix. history mirrors the tokens
 * seen so far. */
static int sync_cache(syn_context *ctx, token_vec *history, const int32_t *ids, size_t n,
                      size_t *reused) {
    if (n == 0) return fail_runtime("the chat format rendered no tokens");
    size_t cached = syn_context_n_past(ctx);
    if (cached > history->n) cached = history->n;
    size_t common = 0;
    while (common < cached && common < n && history->ids[common] == ids[common])
        common++;
    if (common == n) common = n - 1; /* at least one token must run, for fresh logits */
    if (n > syn_context_n_ctx(ctx))
        return fail_runtime(
            "the conversation (%zu tokens) no longer fits in the context of %u tokens (see -c)", n,
            syn_context_n_ctx(ctx));
    if (common < syn_context_n_past(ctx) && syn_context_truncate(ctx, (uint32_t)common) != SYN_OK)
        return fail_lib("cannot truncate the cache to %zu tokens", common);
    if (syn_context_n_past(ctx) < common) common = syn_context_n_past(ctx); /* a window lost */
    history->n = common;
    *reused = common;
    int rc = tokens_append(history, ids + common, n - common);
    if (rc != EXIT_OK) return rc;
    if (syn_context_decode(ctx, ids + common, n - common, NULL) != SYN_OK)
        return fail_lib("cannot process the turn (%zu new tokens)", n - common);
    return EXIT_OK;
}

/* Refuses line L (len bytes) when it cannot be a turn's text: the message names the offending
 * byte within the line itself. */
static int check_line(size_t line_no, const char *line, size_t len) {
    size_t valid = utf8_valid_prefix(line, len);
    if (valid < len)
        return fail_runtime("line %zu: invalid UTF-8 at byte %zu of the line", line_no, valid);
    /* The chat format takes NUL-terminated text: the turn would be cut short without a word. */
    const char *nul = memchr(line, '\0', len);
    if (nul)
        return fail_runtime("line %zu: NUL byte at byte %zu of the line", line_no,
                            (size_t)(nul - line));
    return EXIT_OK;
}

/* One turn: the user's line in, the reply streamed out and added to the conversation. */
static int turn(const chat_opts *o, const syn_model *model, syn_context *ctx, syn_sampler *sampler,
                conversation *conv, token_vec *history, const char *line, size_t len) {
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    char *text = NULL;
    size_t text_len = 0, n_ids = 0, reused = 0;
    int32_t *ids = NULL;
    token_vec prompt = {0};
    gen_result res = {0};
    int rc = conv_add(conv, "user", line, len);
    if (rc == EXIT_OK)
        rc = format_chat(model, o->g.chat_template, conv->msgs, conv->n, &text, &text_len);
    if (rc == EXIT_OK) rc = tokenize_text(tok, text, text_len, true, true, &ids, &n_ids);
    if (rc == EXIT_OK) rc = tokens_append(&prompt, ids, n_ids);
    if (rc == EXIT_OK) rc = sync_cache(ctx, history, prompt.ids, prompt.n, &reused);
    if (rc == EXIT_OK) {
        gen_request req = {ctx, sampler, tok, o->g.n_predict, false, stdout};
        rc = generate(&req, history, &res);
    }
    if (rc == EXIT_OK) {
        fputc('\n', stdout);
        rc = check_stdout();
    }
    if (rc == EXIT_OK) {
        rc = conv_add(conv, "assistant", res.text.data ? res.text.data : "", res.text.len);
    }
    if (rc == EXIT_OK && o->verbose)
        fprintf(stderr,
                "synapse: turn: %zu prompt tokens, %zu from the cache, %zu processed; %zu "
                "generated, stop: %s\n",
                prompt.n, reused, prompt.n - reused, res.n_generated, stop_reason_name(res.stop));
    free(res.text.data);
    free(prompt.ids);
    free(ids);
    free(text);
    return rc;
}

static int chat(const chat_opts *o) {
    syn_model *model = NULL;
    syn_context *ctx = NULL;
    syn_sampler *sampler = NULL;
    conversation conv = {0};
    token_vec history = {0};
    char *line = NULL;
    size_t line_cap = 0;
    int rc = load_model(o->g.model_path, prefetch_pays(o->g.n_threads), o->g.huge_pages,
                        o->g.interleave, &model);
    if (rc != EXIT_OK) return rc;
    syn_model_info info;
    syn_model_get_info(model, &info);
    uint32_t n_ctx = o->g.n_ctx ? o->g.n_ctx : CHAT_DEFAULT_N_CTX;
    if (!o->g.n_ctx && info.n_ctx_train > 0 && n_ctx > (uint32_t)info.n_ctx_train)
        n_ctx = (uint32_t)info.n_ctx_train;
    if ((rc = new_context(model, &o->g, n_ctx, &ctx)) != EXIT_OK) goto done;
    if (syn_sampler_new(&o->g.sampling, &sampler) != SYN_OK) {
        rc = fail_lib("invalid sampling options");
        goto done;
    }
    if (o->system && (rc = conv_add(&conv, "system", o->system, strlen(o->system))) != EXIT_OK)
        goto done;
    bool interactive = isatty(fileno(stdin)), refused = false;
    for (size_t line_no = 1;; line_no++) {
        if (interactive) fputs("> ", stderr);
        ssize_t n = getline(&line, &line_cap, stdin);
        if (n <= 0) break;
        if (line[n - 1] == '\n') line[--n] = '\0';
        if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
        if (n == 0) break;
        /* A line that cannot be a turn is skipped alone, as a mistyped line should be. */
        if (check_line(line_no, line, (size_t)n) != EXIT_OK) {
            refused = true;
            continue;
        }
        if ((rc = turn(o, model, ctx, sampler, &conv, &history, line, (size_t)n)) != EXIT_OK) break;
    }
    if (rc == EXIT_OK && refused) rc = EXIT_RUNTIME;
done:
    free(line);
    free(history.ids);
    conv_free(&conv);
    syn_sampler_free(sampler);
    syn_context_free(ctx);
    syn_model_free(model);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    chat_opts o = {0};
    gen_opts_init(&o.g, CHAT_DEFAULT_N_PREDICT);
    int rc = parse_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = chat(&o);
    gen_opts_free(&o.g);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}

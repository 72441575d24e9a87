/* cmd_tokenize.c: `synapse tokenize` (text -> ids) and `synapse detokenize` (ids -> exact bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/args.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"

const char usage_tokenize[] =
    "synapse tokenize -m MODEL (--text TEXT | -f FILE) [--add-special] [--no-parse-special]\n"
    "                 [--json]\n"
    "  Prints the token ids of the text itself: comma-separated on one line, or\n"
    "  {\"ids\": [...]} with --json. -f reads the file's exact bytes. Special-token text such as\n"
    "  <|im_start|> becomes its id unless --no-parse-special. --add-special applies the model's\n"
    "  prompt policy (a BOS when tokenizer.ggml.add_bos_token asks, as run and serve do).\n"
    "  MODEL may be any GGUF with tokenizer.* keys: a vocabulary-only file, any architecture.\n";

const char usage_detokenize[] =
    "synapse detokenize -m MODEL --tokens 1,2,3\n"
    "  Writes the exact bytes the token ids decode to on stdout (no newline added), as\n"
    "  llama.cpp's llama_detokenize: without a SentencePiece space prefix, and with its clean-up\n"
    "  of spaces where the pre-tokenizer has one (gpt-2, llama-bpe, ...).\n"
    "  Ids outside the model's vocabulary are a runtime error (exit 1).\n";

typedef struct tokenize_opts {
    const char *model_path;
    const char *text;
    const char *file;
    int n_sources;
    bool add_special;
    bool parse_special;
    bool json;
} tokenize_opts;

static int parse_tokenize_args(int argc, char **argv, tokenize_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_tokenize, stdout);
            return ARGS_HELP;
        }
        if (strcmp(arg, "-m") == 0 || strcmp(arg, "--model") == 0) {
            if ((rc = args_value(&it, arg, &o->model_path)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "--text") == 0) {
            if ((rc = args_value(&it, arg, &o->text)) != EXIT_OK) return rc;
            o->n_sources++;
        } else if (strcmp(arg, "-f") == 0 || strcmp(arg, "--file") == 0) {
            if ((rc = args_value(&it, arg, &o->file)) != EXIT_OK) return rc;
            o->n_sources++;
        } else if (strcmp(arg, "--add-special") == 0) {
            o->add_special = true;
        } else if (strcmp(arg, "--no-parse-special") == 0) {
            o->parse_special = false;
        } else if (strcmp(arg, "--json") == 0) {
            o->json = true;
        } else {
            return args_unknown(arg);
        }
    }
    if (!o->model_path) return fail_usage("missing -m MODEL");
    if (o->n_sources != 1) return fail_usage("give exactly one of --text TEXT and -f FILE");
    return EXIT_OK;
}

static int print_ids(const int32_t *ids, size_t n, bool json) {
    if (json) return print_json(json_pack("{s:o}", "ids", json_ids(ids, n)));
    for (size_t i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", ids[i]);
    putchar('\n');
    return check_stdout();
}

static int tokenize(const tokenize_opts *o) {
    char *file_text = NULL;
    size_t len = o->text ? strlen(o->text) : 0;
    int rc = o->file ? read_file(o->file, &file_text, &len) : EXIT_OK;
    if (rc != EXIT_OK) return rc;
    syn_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    rc = load_tokenizer(o->model_path, &tok);
    if (rc == EXIT_OK)
        rc = tokenize_text(tok, o->file ? file_text : o->text, len, o->add_special,
                           o->parse_special, &ids, &n);
    if (rc == EXIT_OK) rc = print_ids(ids, n, o->json);
    free(ids);
    syn_tokenizer_free(tok);
    free(file_text);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_opts o = {0};
    o.parse_special = true;
    int rc = parse_tokenize_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = tokenize(&o);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}

typedef struct detokenize_opts {
    const char *model_path;
    int32_t *tokens;
    size_t n_tokens;
} detokenize_opts;

static int parse_detokenize_args(int argc, char **argv, detokenize_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg, *v;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_detokenize, stdout);
            return ARGS_HELP;
        }
        if (strcmp(arg, "-m") == 0 || strcmp(arg, "--model") == 0) {
            if ((rc = args_value(&it, arg, &o->model_path)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "--tokens") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            free(o->tokens);
            o->tokens = NULL;
            if ((rc = parse_token_list(arg, v, &o->tokens, &o->n_tokens)) != EXIT_OK) return rc;
        } else {
            return args_unknown(arg);
        }
    }
    if (!o->model_path) return fail_usage("missing -m MODEL");
    if (!o->tokens) return fail_usage("missing --tokens IDS");
    return EXIT_OK;
}

static int detokenize(const detokenize_opts *o) {
    syn_tokenizer *tok = NULL;
    int rc = load_tokenizer(o->model_path, &tok);
    if (rc != EXIT_OK) return rc;
    rc = check_token_ids(tok, o->tokens, o->n_tokens);
    size_t cap = o->n_tokens * 16 + 16;
    char *buf = NULL;
    while (rc == EXIT_OK) {
        free(buf);
        buf = malloc(cap);
        if (!buf) {
            rc = fail_runtime("out of memory decoding %zu tokens", o->n_tokens);
            break;
        }
        size_t need = 0;
        syn_status st = syn_detokenize(tok, o->tokens, o->n_tokens, buf, cap, &need);
        if (st == SYN_OK) {
            fwrite(buf, 1, need, stdout);
            rc = check_stdout();
            break;
        }
        if (st != SYN_ERR_BUFFER_TOO_SMALL || need <= cap)
            rc = fail_lib("cannot decode the tokens");
        cap = need;
    }
    free(buf);
    syn_tokenizer_free(tok);
    return rc;
}

int cmd_detokenize(int argc, char **argv) {
    detokenize_opts o = {0};
    int rc = parse_detokenize_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = detokenize(&o);
    free(o.tokens);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}

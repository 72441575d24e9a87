/* infill.c: the token layout of a fill-in-the-middle prompt (syn_tokenize_infill), as
 * llama-server's /infill assembles it, so that code models trained on that layout (Qwen2.5-Coder,
 * CodeLlama, StarCoder, ...) see what they expect. */
#include <stdlib.h>
#include <string.h>

#include "synapse_internal.h"

typedef struct id_list {
    int32_t *ids;
    size_t n, cap;
} id_list;

static syn_status push_id(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 256;
        int32_t *ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids) return syn_fail(SYN_ERR_NO_MEMORY, "infill prompt: out of memory");
        l->ids = ids;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return SYN_OK;
}

/* The tokens of text[0..len), never with BOS or EOS. */
static syn_status push_text(id_list *l, const syn_tokenizer *tok, const char *text, size_t len,
                            bool parse_special) {
    int32_t *ids = NULL;
    size_t n = 0;
    syn_status st = syn_tokenize_new(tok, text, len, false, parse_special, &ids, &n);
    for (size_t i = 0; st == SYN_OK && i < n; i++)
        st = push_id(l, ids[i]);
    free(ids);
    return st;
}

static syn_status push_str(id_list *l, const syn_tokenizer *tok, const char *text) {
    return text ? push_text(l, tok, text, strlen(text), false) : SYN_OK;
}

/* A chunk's header: its file name and a line break, tokenized as one text. */
static syn_status push_file_header(id_list *l, const syn_tokenizer *tok, const char *filename) {
    const size_t len = strlen(filename);
    char *line = malloc(len + 2);
    if (!line) return syn_fail(SYN_ERR_NO_MEMORY, "infill prompt: out of memory");
    memcpy(line, filename, len);
    line[len] = '\n';
    line[len + 1] = '\0';
    syn_status st = push_text(l, tok, line, len + 1, false);
    free(line);
    return st;
}

/* The lines before the prefix: the repository, the extra files, the edited file's name. */
static syn_status assemble_extra(const syn_tokenizer *tok, const syn_infill *in, id_list *l) {
    const int32_t rep = syn_tokenizer_role(tok, SYN_TOKEN_FIM_REP);
    const int32_t sep = syn_tokenizer_role(tok, SYN_TOKEN_FIM_SEP);
    syn_status st = SYN_OK;
    /* the repository's name is llama-server's fixed placeholder */
    if (rep >= 0 && (st = push_id(l, rep)) == SYN_OK) st = push_str(l, tok, "myproject\n");
    for (size_t i = 0; st == SYN_OK && i < in->n_extra; i++) {
        const syn_infill_chunk *c = &in->extra[i];
        if (sep >= 0) {
            st = push_id(l, sep);
            if (st == SYN_OK) st = push_file_header(l, tok, c->filename ? c->filename : "tmp");
        } else {
            st = push_str(l, tok, "\n\n--- snippet ---\n\n");
        }
        if (st == SYN_OK) st = push_str(l, tok, c->text);
    }
    /* the file being edited: llama-server names it "filename" */
    if (st == SYN_OK && sep >= 0 && (st = push_id(l, sep)) == SYN_OK)
        st = push_str(l, tok, "filename\n");
    return st;
}

/* BOS where the tokenizer adds one, then prefix, prompt, suffix and the middle token. */
static syn_status assemble_fim(const syn_tokenizer *tok, const syn_infill *in, id_list *l) {
    syn_status st = SYN_OK;
    if (syn_tokenizer_adds_bos(tok)) st = push_id(l, syn_tokenizer_bos(tok));
    if (st == SYN_OK) st = push_id(l, syn_tokenizer_role(tok, SYN_TOKEN_FIM_PRE));
    if (st == SYN_OK) st = push_str(l, tok, in->prefix);
    if (st == SYN_OK && in->prompt) st = push_text(l, tok, in->prompt, strlen(in->prompt), true);
    if (st == SYN_OK) st = push_id(l, syn_tokenizer_role(tok, SYN_TOKEN_FIM_SUF));
    if (st == SYN_OK) st = push_str(l, tok, in->suffix);
    if (st == SYN_OK) st = push_id(l, syn_tokenizer_role(tok, SYN_TOKEN_FIM_MID));
    return st;
}

syn_status syn_tokenize_infill(const syn_tokenizer *tok, const syn_infill *infill, int32_t *ids,
                               size_t cap, size_t *n_ids) {
    if (!tok || !infill || !n_ids || (cap > 0 && !ids))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenize_infill: %s is NULL",
                        !tok      ? "tok"
                        : !infill ? "infill"
                        : !n_ids  ? "n_ids"
                                  : "ids");
    *n_ids = 0;
    if (infill->n_extra > 0 && !infill->extra)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenize_infill: extra is NULL");
    if (syn_tokenizer_role(tok, SYN_TOKEN_FIM_PRE) < 0 ||
        syn_tokenizer_role(tok, SYN_TOKEN_FIM_SUF) < 0 ||
        syn_tokenizer_role(tok, SYN_TOKEN_FIM_MID) < 0)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "this model has no fill-in-the-middle tokens (tokenizer.ggml.fim_*)");
    id_list extra = {0}, fim = {0};
    syn_status st = assemble_extra(tok, infill, &extra);
    if (st == SYN_OK) st = assemble_fim(tok, infill, &fim);
    /* the extra context's end is kept: the files nearest the prefix */
    size_t skip = 0;
    if (infill->max_tokens > 0 && extra.n + fim.n > infill->max_tokens) {
        const size_t over = extra.n + fim.n - infill->max_tokens;
        skip = over < extra.n ? over : extra.n;
    }
    const size_t n_kept = extra.n - skip;
    if (st == SYN_OK) {
        *n_ids = n_kept + fim.n;
        if (*n_ids > cap) {
            st = syn_fail(SYN_ERR_BUFFER_TOO_SMALL, "infill prompt: %zu ids, room for %zu", *n_ids,
                          cap);
        } else {
            if (n_kept > 0) memcpy(ids, extra.ids + skip, n_kept * sizeof *ids);
            memcpy(ids + n_kept, fim.ids, fim.n * sizeof *ids);
        }
    }
    free(extra.ids);
    free(fim.ids);
    return st;
}

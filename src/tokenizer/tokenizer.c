/* tokenizer.c: loads the vocabulary (byte-level BPE with its merges, or SentencePiece with its
 * scores) from GGUF metadata into hash tables, with llama.cpp's rules for special tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"

enum {
    MESSAGE_TEXT_MAX = 64,       /* file strings quoted in messages are cut to this many bytes */
    MAX_TABLE_ENTRIES = 1 << 28, /* tokens or merges; keeps the table sizes within uint32_t */
};

/* Token texts that end generation, besides the EOS id: llama.cpp's list. Such a token is made a
 * control token whatever its type in the file, as llama.cpp does (Qwen3's and Gemma 3's </s>
 * is then matched as a special token only with parse_special, and decoded verbatim). */
static const char *const eog_token_texts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    NULL,
};

/* ---------------------------------------------------------------------------------------------
 * Hash tables: open addressing with linear probing, at most half full
 * ------------------------------------------------------------------------------------------- */

/* A word-at-a-time string hash (the table is rebuilt at every load, so it only has to spread
 * token texts well, not be stable across builds or byte orders). */
static uint32_t hash_text(const char *s, size_t len) {
    uint64_t h = 0x9E3779B97F4A7C15u ^ len;
    for (; len >= 8; s += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDu;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < len; i++)
        w |= (uint64_t)(uint8_t)s[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53u;
    return (uint32_t)(h ^ (h >> 32));
}

static uint32_t table_capacity(uint64_t n) {
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2; /* n <= MAX_TABLE_ENTRIES, checked by the callers */
    return cap;
}

int32_t tok_find_text(const syn_tokenizer *tok, const char *s, size_t len) {
    uint32_t h = hash_text(s, len);
    for (uint32_t i = h & tok->text_mask;; i = (i + 1) & tok->text_mask) {
        const tok_text_slot *slot = &tok->text_slots[i];
        if (slot->id < 0) return -1;
        if (slot->hash != h) continue;
        const tok_entry *t = &tok->tokens[slot->id];
        if (t->len == len && memcmp(t->text, s, len) == 0) return slot->id;
    }
}

/* Adds token id under its text; a later token with the same text takes it over, as in
 * llama.cpp's text -> id map (filled in id order). */
static void insert_text(syn_tokenizer *tok, int32_t id) {
    const tok_entry *t = &tok->tokens[id];
    uint32_t h = hash_text(t->text, t->len);
    for (uint32_t i = h & tok->text_mask;; i = (i + 1) & tok->text_mask) {
        tok_text_slot *s = &tok->text_slots[i];
        if (s->id < 0) {
            s->hash = h;
            s->id = id;
            return;
        }
        const tok_entry *o = &tok->tokens[s->id];
        if (s->hash == h && o->len == t->len && memcmp(o->text, t->text, t->len) == 0) {
            s->id = id;
            return;
        }
    }
}

static uint32_t merge_hash(uint64_t key) {
    key ^= key >> 31;
    key *= 0x9E3779B97F4A7C15u;
    return (uint32_t)(key >> 32);
}

bool tok_find_merge(const syn_tokenizer *tok, int32_t left, int32_t right, int32_t *rank,
                    int32_t *result) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint32_t i = merge_hash(key) & tok->merge_mask;; i = (i + 1) & tok->merge_mask) {
        const tok_merge_slot *s = &tok->merge_slots[i];
        if (s->key == UINT64_MAX) return false;
        if (s->key == key) {
            *rank = s->rank;
            *result = s->result;
            return true;
        }
    }
}

/* Adds a merge unless the pair already has one (the earlier, lower rank wins). */
static void insert_merge(syn_tokenizer *tok, int32_t left, int32_t right, int32_t rank,
                         int32_t result) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint32_t i = merge_hash(key) & tok->merge_mask;; i = (i + 1) & tok->merge_mask) {
        tok_merge_slot *s = &tok->merge_slots[i];
        if (s->key == key) return;
        if (s->key == UINT64_MAX) {
            *s = (tok_merge_slot){key, rank, result};
            return;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Loading, one GGUF key at a time
 * ------------------------------------------------------------------------------------------- */

static int text_len_for_message(uint64_t len) {
    return len > MESSAGE_TEXT_MAX ? MESSAGE_TEXT_MAX : (int)len;
}

/* tokenizer.ggml.model, and for BPE the pre-tokenizer (SentencePiece has none: llama.cpp
 * ignores tokenizer.ggml.pre there). */
static syn_status check_kind(const gguf_file *f, tok_model *model_out,
                             const pretok_kind **pre_out) {
    gguf_str model;
    syn_status st = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (st != SYN_OK) return st;
    *pre_out = NULL;
    *model_out = TOK_MODEL_SPM;
    if (gguf_str_eq(model, "llama")) return SYN_OK;
    *model_out = TOK_MODEL_BPE;
    if (!gguf_str_eq(model, "gpt2"))
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "tokenizer.ggml.model '%.*s' is not supported (supported: gpt2, llama)",
                        text_len_for_message(model.len), model.data);
    /* The pre-tokenizer regex differs per model family; guessing one would silently produce
     * different ids, so it must be named. */
    if (!gguf_find_kv(f, "tokenizer.ggml.pre"))
        return syn_fail(SYN_ERR_UNSUPPORTED, "tokenizer.ggml.pre is missing: the pre-tokenizer "
                                             "must be named (README lists the supported ones)");
    gguf_str pre;
    st = gguf_get_str(f, "tokenizer.ggml.pre", &pre);
    if (st != SYN_OK) return st;
    *pre_out = pretok_find(pre.data, (size_t)pre.len);
    if (!*pre_out)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "tokenizer.ggml.pre '%.*s' is not supported (README lists the "
                        "supported ones)",
                        text_len_for_message(pre.len), pre.data);
    return SYN_OK;
}

static syn_status load_tokens(syn_tokenizer *tok, const gguf_file *f, int32_t n_vocab_model) {
    gguf_array arr;
    syn_status st = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &arr);
    if (st != SYN_OK) return st;
    if (arr.count == 0) return syn_fail(SYN_ERR_FORMAT, "tokenizer.ggml.tokens is empty");
    if (arr.count > MAX_TABLE_ENTRIES)
        return syn_fail(SYN_ERR_FORMAT,
                        "tokenizer.ggml.tokens has %llu entries (at most %d supported)",
                        (unsigned long long)arr.count, MAX_TABLE_ENTRIES);
    if (arr.count > (uint64_t)n_vocab_model)
        return syn_fail(
            SYN_ERR_FORMAT,
            "tokenizer.ggml.tokens has %llu tokens, more than the model's %d embedding rows",
            (unsigned long long)arr.count, n_vocab_model);
    tok->n_tokens = (int32_t)arr.count;
    tok->tokens = calloc((size_t)arr.count, sizeof *tok->tokens);
    if (!tok->tokens) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer.ggml.tokens: out of memory");
    const uint8_t *cursor = arr.data;
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        gguf_str s = gguf_array_next_str(&cursor);
        if (s.len > UINT32_MAX / 4)
            return syn_fail(SYN_ERR_FORMAT, "tokenizer.ggml.tokens[%d] is %llu bytes long", i,
                            (unsigned long long)s.len);
        tok->tokens[i].text = s.data;
        tok->tokens[i].len = (uint32_t)s.len;
        if (s.len > tok->max_token_bytes) tok->max_token_bytes = (uint32_t)s.len;
    }

    gguf_array types;
    st = gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types);
    if (st != SYN_OK) return st;
    if (types.count != arr.count)
        return syn_fail(SYN_ERR_FORMAT,
                        "tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu",
                        (unsigned long long)types.count, (unsigned long long)arr.count);
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        int64_t type = gguf_array_get_int(&types, (uint64_t)i);
        if (type < TOK_NORMAL || type > TOK_BYTE)
            return syn_fail(SYN_ERR_FORMAT,
                            "tokenizer.ggml.token_type[%d] = %lld is not a token type (1..6)", i,
                            (long long)type);
        tok->tokens[i].attr = (uint8_t)(1u << (type - 1));
    }
    return SYN_OK;
}

/* tokenizer.ggml.scores: optional (all 0 without it, as llama.cpp), one float per token. */
static syn_status load_scores(syn_tokenizer *tok, const gguf_file *f) {
    if (!gguf_find_kv(f, "tokenizer.ggml.scores")) return SYN_OK;
    gguf_array arr;
    syn_status st = gguf_get_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &arr);
    if (st != SYN_OK) return st;
    if (arr.count != (uint64_t)tok->n_tokens)
        return syn_fail(SYN_ERR_FORMAT,
                        "tokenizer.ggml.scores has %llu entries, tokenizer.ggml.tokens %d",
                        (unsigned long long)arr.count, tok->n_tokens);
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        float v;
        memcpy(&v, arr.data + 4 * (size_t)i, sizeof v); /* little-endian, as GGUF */
        if (v != v) return syn_fail(SYN_ERR_FORMAT, "tokenizer.ggml.scores[%d] is nan", i);
        tok->tokens[i].score = v;
    }
    return SYN_OK;
}

static bool token_is(const tok_entry *t, const char *text) {
    return t->len == strlen(text) && memcmp(t->text, text, t->len) == 0;
}

/* Whether the lower-cased general.name contains needle (lower-case). */
static bool name_contains(gguf_str name, const char *needle) {
    size_t n = strlen(needle);
    for (uint64_t i = 0; i + n <= name.len; i++) {
        size_t k = 0;
        while (k < n &&
               (name.data[i + k] >= 'A' && name.data[i + k] <= 'Z' ? name.data[i + k] - 'A' + 'a'
                                                                   : name.data[i + k]) == needle[k])
            k++;
        if (k == n) return true;
    }
    return false;
}

/* Tokens decoded through the byte-level alphabet must consist of its characters only, so that
 * decoding never meets a character it cannot map back to a byte. */
static syn_status check_byte_level_text(const syn_tokenizer *tok) {
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        const tok_entry *t = &tok->tokens[i];
        if (t->attr & TOK_ATTR_VERBATIM) continue;
        const uint8_t *s = (const uint8_t *)t->text;
        for (uint32_t j = 0; j < t->len;) {
            uint32_t cp = s[j];
            int k = cp < 0x80 ? 1 : syn_utf8_next(s + j, t->len - j, &cp);
            if (k <= 0)
                return syn_fail(SYN_ERR_FORMAT,
                                "tokenizer.ggml.tokens[%d]: invalid UTF-8 at byte %u", i, j);
            if (cp >= BYTE_LEVEL_CP_LIMIT || tok->cp_byte[cp] < 0)
                return syn_fail(SYN_ERR_FORMAT,
                                "tokenizer.ggml.tokens[%d]: U+%04X at byte %u is not a byte-level "
                                "BPE character",
                                i, (unsigned)cp, j);
            j += (uint32_t)k;
        }
    }
    return SYN_OK;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* SentencePiece: every byte has its token <0xXX> (the fallback of characters that are no
 * piece), and every byte token is one of those. llama.cpp would fall back to the unknown token
 * where one is missing; such a vocabulary loses text, so it is refused. */
static syn_status index_spm_bytes(syn_tokenizer *tok) {
    for (unsigned b = 0; b < 256; b++) {
        char text[7];
        snprintf(text, sizeof text, "<0x%02X>", b);
        tok->byte_token[b] = tok_find_text(tok, text, 6);
        if (tok->byte_token[b] < 0 || !(tok->tokens[tok->byte_token[b]].attr & TOK_ATTR_BYTE))
            return syn_fail(SYN_ERR_FORMAT,
                            "tokenizer.ggml.tokens has no byte token %s (a SentencePiece "
                            "vocabulary needs all 256 for the characters it has no piece for)",
                            text);
    }
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        const tok_entry *t = &tok->tokens[i];
        if ((t->attr & TOK_ATTR_BYTE) &&
            (t->len != 6 || memcmp(t->text, "<0x", 3) != 0 || t->text[5] != '>' ||
             hex_digit(t->text[3]) < 0 || hex_digit(t->text[4]) < 0))
            return syn_fail(SYN_ERR_FORMAT,
                            "tokenizer.ggml.tokens[%d] '%.*s' is a byte token but not <0xXX>", i,
                            text_len_for_message(t->len), t->text);
    }
    return SYN_OK;
}

static syn_status build_text_index(syn_tokenizer *tok) {
    uint32_t cap = table_capacity((uint64_t)tok->n_tokens);
    tok->text_slots = malloc((size_t)cap * sizeof *tok->text_slots);
    if (!tok->text_slots) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer: out of memory");
    memset(tok->text_slots, 0xFF, (size_t)cap * sizeof *tok->text_slots); /* id -1: empty */
    tok->text_mask = cap - 1;
    for (int32_t i = 0; i < tok->n_tokens; i++)
        insert_text(tok, i);

    if (tok->model == TOK_MODEL_SPM) return index_spm_bytes(tok);
    /* A byte without a token (Falcon's vocabulary has no control bytes) stays -1: such a byte
     * is dropped from the ids, as llama.cpp drops it. */
    for (unsigned b = 0; b < 256; b++) {
        char utf8[4];
        int n = utf8_put(tok->byte_cp[b], utf8);
        tok->byte_token[b] = tok_find_text(tok, utf8, (size_t)n);
    }
    return SYN_OK;
}

static syn_status load_merges(syn_tokenizer *tok, const gguf_file *f) {
    gguf_array arr;
    syn_status st = gguf_get_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &arr);
    if (st != SYN_OK) return st;
    if (arr.count > MAX_TABLE_ENTRIES)
        return syn_fail(SYN_ERR_FORMAT,
                        "tokenizer.ggml.merges has %llu entries (at most %d supported)",
                        (unsigned long long)arr.count, MAX_TABLE_ENTRIES);
    uint32_t cap = table_capacity(arr.count);
    tok->merge_slots = malloc((size_t)cap * sizeof *tok->merge_slots);
    if (!tok->merge_slots)
        return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer.ggml.merges: out of memory");
    memset(tok->merge_slots, 0xFF, (size_t)cap * sizeof *tok->merge_slots); /* key ~0: empty */
    tok->merge_mask = cap - 1;

    /* "A B" is looked up as the text AB, joined here; a longer join than any token is absent. */
    char *joined = malloc((size_t)tok->max_token_bytes + 1);
    if (!joined) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer.ggml.merges: out of memory");
    const uint8_t *cursor = arr.data;
    st = SYN_OK;
    for (uint64_t i = 0; i < arr.count && st == SYN_OK; i++) {
        gguf_str m = gguf_array_next_str(&cursor);
        const char *space = m.len ? memchr(m.data, ' ', m.len) : NULL;
        size_t la = space ? (size_t)(space - m.data) : 0;
        size_t lb = space ? m.len - la - 1 : 0;
        if (!space || la == 0 || lb == 0 || memchr(space + 1, ' ', lb)) {
            st = syn_fail(
                SYN_ERR_FORMAT,
                "tokenizer.ggml.merges[%llu] '%.*s' is not two tokens separated by one space",
                (unsigned long long)i, text_len_for_message(m.len), m.data);
            break;
        }
        int32_t left = tok_find_text(tok, m.data, la);
        int32_t right = tok_find_text(tok, space + 1, lb);
        int32_t merged = -1;
        if (la + lb <= tok->max_token_bytes) {
            memcpy(joined, m.data, la);
            memcpy(joined + la, space + 1, lb);
            merged = tok_find_text(tok, joined, la + lb);
        }
        if (left < 0 || right < 0 || merged < 0)
            st = syn_fail(SYN_ERR_FORMAT,
                          "tokenizer.ggml.merges[%llu] '%.*s': %s is not in the vocabulary",
                          (unsigned long long)i, text_len_for_message(m.len), m.data,
                          left < 0    ? "the left part"
                          : right < 0 ? "the right part"
                                      : "the merged token");
        else
            insert_merge(tok, left, right, (int32_t)i, merged);
    }
    free(joined);
    return st;
}

/* An optional token id key: absent leaves *id at -1; present, it must name a token. */
static syn_status load_optional_id(const syn_tokenizer *tok, const gguf_file *f, const char *key,
                                   int32_t *id) {
    *id = -1;
    if (!gguf_find_kv(f, key)) return SYN_OK;
    uint32_t v;
    syn_status st = gguf_get_u32(f, key, &v);
    if (st != SYN_OK) return st;
    if (v >= (uint32_t)tok->n_tokens)
        return syn_fail(SYN_ERR_FORMAT, "%s = %u is not below the token count %d", key, v,
                        tok->n_tokens);
    *id = (int32_t)v;
    return SYN_OK;
}

static syn_status load_special_ids(syn_tokenizer *tok, const gguf_file *f) {
    syn_status st = load_optional_id(tok, f, "tokenizer.ggml.bos_token_id", &tok->bos);
    if (st == SYN_OK) st = load_optional_id(tok, f, "tokenizer.ggml.eos_token_id", &tok->eos);
    if (st == SYN_OK) st = load_optional_id(tok, f, "tokenizer.ggml.padding_token_id", &tok->pad);
    /* llama.cpp's SentencePiece defaults: Llama 2's <s> = 1 and </s> = 2. */
    if (tok->model == TOK_MODEL_SPM && !gguf_find_kv(f, "tokenizer.ggml.bos_token_id") &&
        tok->n_tokens > 1)
        tok->bos = 1;
    if (tok->model == TOK_MODEL_SPM && !gguf_find_kv(f, "tokenizer.ggml.eos_token_id") &&
        tok->n_tokens > 2)
        tok->eos = 2;
    return st;
}

/* The prompt policy and the chat template: what the tokenizer's metadata says text becomes. */
static syn_status load_prompt_keys(syn_tokenizer *tok, const gguf_file *f) {
    /* A default asks only if it can; llama.cpp's SentencePiece default is a BOS. */
    bool bos_default = tok->model == TOK_MODEL_SPM || tok->pretok_kind->add_bos;
    tok->add_bos = bos_default && tok->bos >= 0;
    tok->add_eos = false;
    tok->add_space_prefix = tok->model == TOK_MODEL_SPM;
    syn_status st = gguf_get_bool_opt(f, "tokenizer.ggml.add_bos_token", &tok->add_bos);
    if (st == SYN_OK && tok->model == TOK_MODEL_SPM)
        st = gguf_get_bool_opt(f, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix);
    if (st == SYN_OK) st = gguf_get_bool_opt(f, "tokenizer.ggml.add_eos_token", &tok->add_eos);
    if (st == SYN_OK && tok->add_bos && tok->bos < 0)
        st = syn_fail(SYN_ERR_FORMAT,
                      "tokenizer.ggml.add_bos_token asks for a BOS but the file names no "
                      "tokenizer.ggml.bos_token_id");
    if (st == SYN_OK && tok->add_eos && tok->eos < 0)
        st = syn_fail(SYN_ERR_FORMAT,
                      "tokenizer.ggml.add_eos_token asks for an EOS but the file names no "
                      "tokenizer.ggml.eos_token_id");
    gguf_str tmpl = {0, NULL};
    if (st == SYN_OK) st = gguf_get_str_opt(f, "tokenizer.chat_template", &tmpl);
    if (st != SYN_OK || !tmpl.data) return st;
    tok->chat_template = malloc((size_t)tmpl.len + 1);
    if (!tok->chat_template) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer: out of memory");
    memcpy(tok->chat_template, tmpl.data, (size_t)tmpl.len);
    tok->chat_template[tmpl.len] = '\0';
    return SYN_OK;
}

/* Token texts llama.cpp takes for a role when the file names no id for it (the key): they
 * become control tokens whatever their type in the file; the end-of-turn, end-of-message and
 * fill-in-the-middle pad, repository and file-separator tokens also end generation. */
static const char *const eot_texts[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "<|end_of_text|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "[EOT]",
                                        "<\xEF\xBD\x9C"
                                        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                        "<end_of_utterance>",
                                        NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {"<|fim_prefix|>",
                                            "<fim-prefix>",
                                            "<fim_prefix>",
                                            "<\xEF\xBD\x9C"
                                            "fim\xE2\x96\x81"
                                            "begin\xEF\xBD\x9C>",
                                            "<PRE>",
                                            "\xE2\x96\x81<PRE>",
                                            "<|code_prefix|>",
                                            "<|prefix|>",
                                            NULL};
static const char *const fim_suf_texts[] = {"<|fim_suffix|>",
                                            "<fim-suffix>",
                                            "<fim_suffix>",
                                            "<\xEF\xBD\x9C"
                                            "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                            "<SUF>",
                                            "\xE2\x96\x81<SUF>",
                                            "<|code_suffix|>",
                                            "<|suffix|>",
                                            NULL};
static const char *const fim_mid_texts[] = {"<|fim_middle|>",
                                            "<fim-middle>",
                                            "<fim_middle>",
                                            "<\xEF\xBD\x9C"
                                            "fim\xE2\x96\x81"
                                            "end\xEF\xBD\x9C>",
                                            "<MID>",
                                            "\xE2\x96\x81<MID>",
                                            "<|code_middle|>",
                                            "<|middle|>",
                                            NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                            "<PAD>",       "[PAD]",     NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>",       "<reponame>",    NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};

static const struct token_role {
    syn_token_role role;
    const char *key;
    const char *const *texts;
    bool eog;
} token_roles[] = {
    {SYN_TOKEN_EOT, "tokenizer.ggml.eot_token_id", eot_texts, true},
    {SYN_TOKEN_EOM, "tokenizer.ggml.eom_token_id", eom_texts, true},
    {SYN_TOKEN_FIM_PRE, "tokenizer.ggml.fim_pre_token_id", fim_pre_texts, false},
    {SYN_TOKEN_FIM_SUF, "tokenizer.ggml.fim_suf_token_id", fim_suf_texts, false},
    {SYN_TOKEN_FIM_MID, "tokenizer.ggml.fim_mid_token_id", fim_mid_texts, false},
    {SYN_TOKEN_FIM_PAD, "tokenizer.ggml.fim_pad_token_id", fim_pad_texts, true},
    {SYN_TOKEN_FIM_REP, "tokenizer.ggml.fim_rep_token_id", fim_rep_texts, true},
    {SYN_TOKEN_FIM_SEP, "tokenizer.ggml.fim_sep_token_id", fim_sep_texts, true},
};

static bool token_is_one_of(const tok_entry *t, const char *const *texts) {
    for (; *texts; texts++)
        if (token_is(t, *texts)) return true;
    return false;
}

/* The token whose text is text, or NULL. */
static tok_entry *token_named(syn_tokenizer *tok, const char *text) {
    int32_t id = tok_find_text(tok, text, strlen(text));
    return id >= 0 ? &tok->tokens[id] : NULL;
}

/* llama.cpp's rules from token texts and the model's name, in its order: the roles above; the
 * end-of-generation texts, made control tokens too; gpt-oss's channel markup, always rendered
 * (user-defined); where <|return|> and <|call|> (or <|calls|> and <|flush|>) end a turn, <|end|>
 * does not (o200k_harmony, solar-open); where <|tool_response> does, </s> is text (Gemma 4); and
 * a model named Phi-3 drops whitespace after its special tokens but <unk>, <s> and
 * <|endoftext|> (Hugging Face's rstrip on those added tokens). */
static syn_status apply_token_rules(syn_tokenizer *tok, const gguf_file *f) {
    for (size_t r = 0; r < SYN_TOKEN_ROLE_COUNT; r++)
        tok->role_ids[r] = -1;
    for (size_t r = 0; r < sizeof token_roles / sizeof token_roles[0]; r++) {
        const struct token_role *role = &token_roles[r];
        int32_t *id = &tok->role_ids[role->role];
        if (gguf_find_kv(f, role->key)) {
            syn_status st = load_optional_id(tok, f, role->key, id);
            if (st != SYN_OK) return st;
            tok->tokens[*id].eog |= role->eog;
            continue;
        }
        for (int32_t i = 0; i < tok->n_tokens; i++) {
            tok_entry *t = &tok->tokens[i];
            if (!token_is_one_of(t, role->texts)) continue;
            t->attr |= TOK_ATTR_CONTROL;
            t->eog |= role->eog;
        }
        /* llama.cpp takes whichever match its hash map yields first; here the first text of the
         * list the vocabulary has (Qwen's EOT: <|im_end|>, not <|endoftext|>) */
        for (const char *const *text = role->texts; *text && *id < 0; text++)
            *id = tok_find_text(tok, *text, strlen(*text));
    }
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        tok_entry *t = &tok->tokens[i];
        if (!token_is_one_of(t, eog_token_texts)) continue;
        t->attr |= TOK_ATTR_CONTROL;
        t->eog = true;
    }
    static const char *const channel_texts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                "<|constrain|>", NULL};
    for (int32_t i = 0; i < tok->n_tokens; i++)
        if (token_is_one_of(&tok->tokens[i], channel_texts))
            tok->tokens[i].attr = TOK_ATTR_USER_DEFINED;
    if (tok->eos >= 0) tok->tokens[tok->eos].eog = true;

    tok_entry *end = token_named(tok, "<|end|>"), *ret = token_named(tok, "<|return|>");
    tok_entry *call = token_named(tok, "<|call|>"), *calls = token_named(tok, "<|calls|>");
    tok_entry *flush = token_named(tok, "<|flush|>");
    bool ends_call = (call && call->eog) || (calls && calls->eog);
    if (end && end->eog && ends_call && ((ret && ret->eog) || (flush && flush->eog))) {
        end->eog = false;
        end->attr = TOK_ATTR_USER_DEFINED;
    }
    tok_entry *tool_response = token_named(tok, "<|tool_response>");
    tok_entry *closing_s = token_named(tok, "</s>");
    if (tool_response && tool_response->eog && closing_s && closing_s->eog) {
        closing_s->eog = false;
        closing_s->attr = TOK_ATTR_NORMAL;
    }

    gguf_str name = {0, ""};
    syn_status st = gguf_get_str_opt(f, "general.name", &name);
    if (st != SYN_OK || !(name_contains(name, "phi3") || name_contains(name, "phi-3"))) return st;
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        tok_entry *t = &tok->tokens[i];
        if ((t->attr & TOK_ATTR_VERBATIM) || token_is(t, "</s>")) t->attr |= TOK_ATTR_RSTRIP;
        if (token_is(t, "<unk>") || token_is(t, "<s>") || token_is(t, "<|endoftext|>"))
            t->attr &= (uint8_t)~TOK_ATTR_RSTRIP;
    }
    return SYN_OK;
}

typedef struct special_order {
    uint32_t len;
    int32_t id;
} special_order;

static int special_before(const void *pa, const void *pb) {
    const special_order *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Collects the tokens matched as units and the end-of-generation ones. */
static syn_status index_specials(syn_tokenizer *tok) {
    int32_t n = 0;
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        const tok_entry *t = &tok->tokens[i];
        if ((t->attr & TOK_ATTR_VERBATIM) && t->len > 0) n++;
    }
    tok->specials = malloc((size_t)(n ? n : 1) * sizeof *tok->specials);
    if (!tok->specials) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer: out of memory");
    for (int32_t i = 0; i < tok->n_tokens; i++) {
        const tok_entry *t = &tok->tokens[i];
        if (!(t->attr & TOK_ATTR_VERBATIM) || t->len == 0) continue;
        tok->specials[tok->n_specials++] = i;
    }
    /* Longest first, as llama.cpp cuts them out of the text (equal lengths by id); Gemma 3 has
     * over 6,000, so a sort rather than insertion. */
    special_order *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer: out of memory");
    for (int32_t i = 0; i < n; i++)
        order[i] = (special_order){tok->tokens[tok->specials[i]].len, tok->specials[i]};
    qsort(order, (size_t)n, sizeof *order, special_before);
    for (int32_t i = 0; i < n; i++)
        tok->specials[i] = order[i].id;
    free(order);
    for (int32_t i = 0; i < tok->n_tokens; i++)
        tok->n_eog += tok->tokens[i].eog;
    tok->eog = malloc((size_t)(tok->n_eog ? tok->n_eog : 1) * sizeof *tok->eog);
    if (!tok->eog) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer: out of memory");
    for (int32_t i = 0, k = 0; i < tok->n_tokens; i++)
        if (tok->tokens[i].eog) tok->eog[k++] = i;
    return SYN_OK;
}

syn_status tokenizer_load(const gguf_file *f, int32_t n_vocab_model, syn_tokenizer **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "tokenizer_load: out is NULL");
    *out = NULL;
    if (!f || n_vocab_model <= 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "tokenizer_load: %s",
                        !f ? "f is NULL" : "n_vocab_model must be positive");
    const pretok_kind *pre = NULL;
    tok_model model;
    syn_status st = check_kind(f, &model, &pre);
    if (st != SYN_OK) return st;

    syn_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return syn_fail(SYN_ERR_NO_MEMORY, "tokenizer: out of memory");
    tok->model = model;
    tok->n_vocab = n_vocab_model;
    tok->pretok_kind = pre;
    byte_level_tables(tok->byte_cp, tok->cp_byte);

    const bool bpe = model == TOK_MODEL_BPE;
    st = load_tokens(tok, f, n_vocab_model);
    if (st == SYN_OK && !bpe) st = load_scores(tok, f);
    if (st == SYN_OK) st = load_special_ids(tok, f);
    if (st == SYN_OK) st = load_prompt_keys(tok, f);
    if (st == SYN_OK) st = build_text_index(tok);
    if (st == SYN_OK) st = apply_token_rules(tok, f);
    if (st == SYN_OK && bpe) st = check_byte_level_text(tok);
    if (st == SYN_OK && bpe) st = load_merges(tok, f);
    if (st == SYN_OK) st = index_specials(tok);
    if (st == SYN_OK && bpe) st = pretok_compile(pre, &tok->pretok);
    if (st != SYN_OK) {
        tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return SYN_OK;
}

void tokenizer_free(syn_tokenizer *tok) {
    if (!tok) return;
    pretok_free(&tok->pretok);
    free(tok->tokens);
    free(tok->text_slots);
    free(tok->merge_slots);
    free(tok->specials);
    free(tok->eog);
    free(tok->chat_template);
    gguf_close(tok->file);
    free(tok);
}

/* The embedding's row count where the file has one (ids past the token list are then valid
 * and decode to nothing, as with the model), else the token count. */
static int32_t vocab_rows(const gguf_file *f, int64_t n_tokens) {
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    if (embd && embd->n_dims == 2 && embd->ne[1] >= (uint64_t)n_tokens && embd->ne[1] <= INT32_MAX)
        return (int32_t)embd->ne[1];
    return n_tokens < 1 ? 1 : n_tokens > INT32_MAX ? INT32_MAX : (int32_t)n_tokens;
}

syn_status syn_tokenizer_load(const char *path, syn_tokenizer **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenizer_load: out is NULL");
    *out = NULL;
    if (!path) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenizer_load: path is NULL");
    gguf_file *f = NULL;
    syn_status st = gguf_open(path, &f);
    if (st != SYN_OK) return st;
    gguf_array tokens;
    st = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens);
    if (st == SYN_OK) st = tokenizer_load(f, vocab_rows(f, (int64_t)tokens.count), out);
    if (st != SYN_OK) {
        gguf_close(f);
        return st;
    }
    (*out)->file = f;
    return SYN_OK;
}

void syn_tokenizer_free(syn_tokenizer *tok) {
    if (tok && tok->file) tokenizer_free(tok); /* a model's tokenizer goes with its model */
}

/* ---------------------------------------------------------------------------------------------
 * Public accessors
 * ------------------------------------------------------------------------------------------- */

int32_t syn_tokenizer_eos(const syn_tokenizer *tok) { return tok ? tok->eos : -1; }

int32_t syn_tokenizer_bos(const syn_tokenizer *tok) { return tok ? tok->bos : -1; }

bool syn_tokenizer_adds_bos(const syn_tokenizer *tok) { return tok && tok->add_bos; }

bool syn_tokenizer_adds_eos(const syn_tokenizer *tok) { return tok && tok->add_eos; }

const char *syn_tokenizer_chat_template(const syn_tokenizer *tok) {
    return tok ? tok->chat_template : NULL;
}

bool syn_tokenizer_is_eog(const syn_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n_tokens && tok->tokens[id].eog;
}

int32_t syn_tokenizer_eog_ids(const syn_tokenizer *tok, const int32_t **ids) {
    if (ids) *ids = tok ? tok->eog : NULL;
    return tok ? tok->n_eog : 0;
}

int32_t syn_tokenizer_n_vocab(const syn_tokenizer *tok) { return tok ? tok->n_vocab : 0; }

int32_t syn_tokenizer_role(const syn_tokenizer *tok, syn_token_role role) {
    if (!tok || (unsigned)role >= SYN_TOKEN_ROLE_COUNT) return -1;
    switch (role) {
    case SYN_TOKEN_BOS: return tok->bos;
    case SYN_TOKEN_EOS: return tok->eos;
    case SYN_TOKEN_PAD: return tok->pad;
    default: return tok->role_ids[role];
    }
}

const char *syn_token_role_name(syn_token_role role) {
    static const char *const names[SYN_TOKEN_ROLE_COUNT] = {
        [SYN_TOKEN_BOS] = "bos",         [SYN_TOKEN_EOS] = "eos",
        [SYN_TOKEN_EOT] = "eot",         [SYN_TOKEN_EOM] = "eom",
        [SYN_TOKEN_PAD] = "pad",         [SYN_TOKEN_FIM_PRE] = "fim_pre",
        [SYN_TOKEN_FIM_SUF] = "fim_suf", [SYN_TOKEN_FIM_MID] = "fim_mid",
        [SYN_TOKEN_FIM_PAD] = "fim_pad", [SYN_TOKEN_FIM_REP] = "fim_rep",
        [SYN_TOKEN_FIM_SEP] = "fim_sep",
    };
    return (unsigned)role < SYN_TOKEN_ROLE_COUNT ? names[role] : NULL;
}

bool tokenizer_is_special(const syn_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_tokens) return false;
    return tok->tokens[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNUSED);
}

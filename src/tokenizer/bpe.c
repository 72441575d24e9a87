/* bpe.c: text to token ids: the special-token split, then per text fragment either the
 * pre-tokenizer and byte-level BPE merges, or SentencePiece (spm.c). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "synapse_internal.h"
#include "tokenizer/tokenizer_internal.h"

/* A candidate merge of the adjacent symbols starting at byte `left` of the word. It is stale, and
 * skipped, when either symbol has changed since it was queued. */
typedef struct bpe_pair {
    int32_t rank;
    int32_t left;    /* position of the left symbol */
    int32_t left_id; /* the ids the two symbols had when queued */
    int32_t right_id;
    int32_t result; /* the merged token */
} bpe_pair;

/* Scratch of one syn_tokenize call. The symbols of a word form a linked list over its byte
 * positions: a merge keeps the left symbol and unlinks the right one. */
typedef struct encoder {
    const syn_tokenizer *tok;
    int32_t *ids; /* the caller's buffer [cap]; ids past cap are counted, not stored */
    size_t cap;
    size_t n;
    int32_t last;     /* the last id emitted, -1 before any */
    int32_t drop_bos; /* the BOS already emitted for add_special: the text's own first token is
                       * dropped when it is that BOS too (a template that writes it), else -1 */

    int32_t *sym_id; /* [work_cap]: token id of the symbol at each position, -1 once merged away
                      * or for a byte the vocabulary has no token for */
    int32_t *prev, *next; /* [work_cap]: neighbouring symbol positions, -1 at the ends */
    bpe_pair *heap;       /* [3 * work_cap]: min-heap by (rank, left) */
    char *word_text;      /* [2 * work_cap]: the word as byte-level token text (ignore_merges) */
    size_t heap_len;
    size_t work_cap;

    pcre2_match_data *md; /* BPE */
    spm_work *spm;        /* SPM */
    bool after_special;   /* SPM: the next fragment starts the text or follows a special token */
} encoder;

static void emit(encoder *e, int32_t id) {
    bool duplicate_bos = id == e->drop_bos && e->n == 1;
    e->drop_bos = -1;
    if (duplicate_bos) return;
    if (e->n < e->cap) e->ids[e->n] = id;
    e->n++;
    e->last = id;
}

static void emit_to_encoder(void *user, int32_t id) { emit(user, id); }

static bool pair_before(const bpe_pair *a, const bpe_pair *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void heap_push(encoder *e, bpe_pair p) {
    size_t i = e->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&p, &e->heap[parent])) break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = p;
}

static bpe_pair heap_pop(encoder *e) {
    bpe_pair top = e->heap[0];
    bpe_pair last = e->heap[--e->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= e->heap_len) break;
        if (c + 1 < e->heap_len && pair_before(&e->heap[c + 1], &e->heap[c])) c++;
        if (!pair_before(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->heap_len > 0) e->heap[i] = last;
    return top;
}

/* Queues the pair starting at position left if its symbols have a merge. */
static void queue_pair(encoder *e, int32_t left) {
    if (left < 0) return;
    int32_t right = e->next[left];
    if (right < 0) return;
    int32_t rank, result;
    if (e->sym_id[left] >= 0 && e->sym_id[right] >= 0 &&
        tok_find_merge(e->tok, e->sym_id[left], e->sym_id[right], &rank, &result))
        heap_push(e, (bpe_pair){rank, left, e->sym_id[left], e->sym_id[right], result});
}

static syn_status reserve_work(encoder *e, size_t n) {
    if (n <= e->work_cap) return SYN_OK;
    if (n > INT32_MAX / 4)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenize: a word of %zu bytes is too long",
                        n);
    size_t cap = e->work_cap ? e->work_cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *sym_id = realloc(e->sym_id, cap * sizeof *sym_id);
    if (sym_id) e->sym_id = sym_id;
    int32_t *prev = realloc(e->prev, cap * sizeof *prev);
    if (prev) e->prev = prev;
    int32_t *next = realloc(e->next, cap * sizeof *next);
    if (next) e->next = next;
    /* each merge queues at most two new pairs on top of the n - 1 initial ones */
    bpe_pair *heap = realloc(e->heap, 3 * cap * sizeof *heap);
    if (heap) e->heap = heap;
    char *word_text = realloc(e->word_text, 2 * cap); /* byte-level code points are < U+0800 */
    if (word_text) e->word_text = word_text;
    if (!sym_id || !prev || !next || !heap || !word_text)
        return syn_fail(SYN_ERR_NO_MEMORY, "syn_tokenize: out of memory");
    e->work_cap = cap;
    return SYN_OK;
}

/* Encodes one pre-token: its bytes become byte-level symbols, then the pair of lowest rank
 * (leftmost among equals) is merged until no pair has a merge. O(n log n) in the word length. */
static syn_status bpe_word(void *user, const char *word, size_t len) {
    encoder *e = user;
    const syn_tokenizer *tok = e->tok;
    if (len == 1) {
        if (tok->byte_token[(uint8_t)word[0]] >= 0) emit(e, tok->byte_token[(uint8_t)word[0]]);
        return SYN_OK;
    }
    syn_status st = reserve_work(e, len);
    if (st != SYN_OK) return st;
    if (tok->pretok_kind->ignore_merges) {
        size_t text_len = 0;
        for (size_t i = 0; i < len; i++)
            text_len += (size_t)utf8_put(tok->byte_cp[(uint8_t)word[i]], e->word_text + text_len);
        int32_t whole = tok_find_text(tok, e->word_text, text_len);
        if (whole >= 0) {
            emit(e, whole);
            return SYN_OK;
        }
    }
    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++) {
        e->sym_id[i] = tok->byte_token[(uint8_t)word[i]];
        e->prev[i] = i - 1;
        e->next[i] = i + 1 < n ? i + 1 : -1;
    }
    e->heap_len = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        queue_pair(e, i);

    while (e->heap_len > 0) {
        bpe_pair p = heap_pop(e);
        int32_t left = p.left, right = e->next[left];
        if (e->sym_id[left] != p.left_id || right < 0 || e->sym_id[right] != p.right_id) continue;
        e->sym_id[left] = p.result;
        e->sym_id[right] = -1;
        e->next[left] = e->next[right];
        if (e->next[right] >= 0) e->prev[e->next[right]] = left;
        queue_pair(e, e->prev[left]);
        queue_pair(e, left);
    }
    for (int32_t i = 0; i >= 0; i = e->next[i])
        if (e->sym_id[i] >= 0) emit(e, e->sym_id[i]); /* a byte without a token is dropped */
    return SYN_OK;
}

/* Encodes text that holds no special token: SentencePiece, or pre-tokenizer words through BPE.
 * As in llama.cpp, byte-level BPE applies no Unicode normalisation (Hugging Face's Qwen2 NFC
 * step is not in the GGUF's metadata). Empty text is no fragment (llama.cpp drops it), so it
 * gets no space prefix either. */
static syn_status encode_plain(encoder *e, const char *text, size_t len) {
    if (len == 0) return SYN_OK;
    if (e->tok->model == TOK_MODEL_SPM) {
        bool prefix = e->tok->add_space_prefix && e->after_special;
        e->after_special = false;
        return spm_encode(e->tok, &e->spm, text, len, prefix, emit_to_encoder, e);
    }
    return pretok_split(&e->tok->pretok, e->md, text, len, bpe_word, e);
}

/* A piece of the text between special tokens (id -1), or a special token. */
typedef struct fragment {
    size_t off, len; /* bytes of the text */
    int32_t id;
} fragment;

typedef struct fragments {
    fragment *items;
    size_t n, cap;
} fragments;

static syn_status push_fragment(fragments *f, size_t off, size_t len, int32_t id) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 16;
        fragment *items = realloc(f->items, cap * sizeof *items);
        if (!items) return syn_fail(SYN_ERR_NO_MEMORY, "syn_tokenize: out of memory");
        f->items = items;
        f->cap = cap;
    }
    f->items[f->n++] = (fragment){off, len, id};
    return SYN_OK;
}

static bool char_start(const char *text, size_t len, size_t pos) {
    return pos == len || ((uint8_t)text[pos] & 0xC0) != 0x80;
}

/* Splits the text piece at[0] of f into special token k's occurrences and the text around them,
 * appended to out. An occurrence counts only where it starts and ends between characters, so
 * every text piece stays valid UTF-8 whatever bytes a token's text holds. */
static syn_status split_piece(const syn_tokenizer *tok, int32_t k, const char *text, size_t len,
                              const fragment *at, fragments *out) {
    const tok_entry *t = &tok->tokens[k];
    size_t off = at->off, end = at->off + at->len;
    for (size_t from = off; from < end;) {
        const char *hit = memmem(text + from, end - from, t->text, t->len);
        if (!hit) break;
        size_t match = (size_t)(hit - text);
        if (!char_start(text, len, match) || !char_start(text, len, match + t->len)) {
            from = match + 1;
            continue;
        }
        syn_status st = match > off ? push_fragment(out, off, match - off, -1) : SYN_OK;
        if (st == SYN_OK) st = push_fragment(out, match, t->len, k);
        if (st != SYN_OK) return st;
        off = match + t->len;
        if (t->attr & TOK_ATTR_RSTRIP) /* C isspace, as llama.cpp */
            while (off < end && (text[off] == ' ' || (text[off] >= '\t' && text[off] <= '\r')))
                off++;
        from = off;
    }
    return off < end ? push_fragment(out, off, end - off, -1) : SYN_OK;
}

/* llama.cpp's tokenizer_st_partition: each special token in turn, longest first, is cut out of
 * every text piece left so far, left to right, so a longer token wins over a shorter one it
 * overlaps wherever they stand. Control and unknown tokens only with parse_special; whitespace
 * after an RSTRIP token goes. Tokens whose first byte the text lacks are skipped unread. */
static syn_status partition(const syn_tokenizer *tok, const char *text, size_t len,
                            bool parse_special, fragments *f) {
    bool present[256] = {false};
    for (size_t i = 0; i < len; i++)
        present[(uint8_t)text[i]] = true;
    fragments next = {0};
    syn_status st = len > 0 ? push_fragment(f, 0, len, -1) : SYN_OK;
    for (int32_t s = 0; s < tok->n_specials && st == SYN_OK; s++) {
        int32_t k = tok->specials[s];
        const tok_entry *t = &tok->tokens[k];
        if ((t->attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)) && !parse_special) continue;
        if (!present[(uint8_t)t->text[0]]) continue;
        next.n = 0;
        for (size_t i = 0; i < f->n && st == SYN_OK; i++)
            st = f->items[i].id >= 0 || f->items[i].len < t->len
                     ? push_fragment(&next, f->items[i].off, f->items[i].len, f->items[i].id)
                     : split_piece(tok, k, text, len, &f->items[i], &next);
        fragments swap = *f;
        *f = next;
        next = swap;
    }
    free(next.items);
    return st;
}

static syn_status encode(encoder *e, const char *text, size_t len, bool parse_special) {
    fragments f = {0};
    syn_status st = partition(e->tok, text, len, parse_special, &f);
    for (size_t i = 0; i < f.n && st == SYN_OK; i++) {
        if (f.items[i].id < 0) {
            st = encode_plain(e, text + f.items[i].off, f.items[i].len);
            continue;
        }
        emit(e, f.items[i].id);
        e->after_special = true;
    }
    free(f.items);
    return st;
}

syn_status syn_tokenize(const syn_tokenizer *tok, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *ids, size_t cap, size_t *n_ids) {
    if (!tok || !n_ids || (!text && len > 0) || (!ids && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenize: %s is NULL",
                        !tok               ? "tok"
                        : !n_ids           ? "n_ids"
                        : !text && len > 0 ? "text"
                                           : "ids");
    *n_ids = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = syn_utf8_next((const uint8_t *)text + i, len - i, &cp);
        if (k <= 0)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "syn_tokenize: invalid UTF-8 at byte offset %zu", i);
        i += (size_t)k;
    }

    encoder e = {
        .tok = tok, .ids = ids, .cap = cap, .last = -1, .drop_bos = -1, .after_special = true};
    if (add_special && tok->add_bos) {
        emit(&e, tok->bos);
        e.drop_bos = tok->bos;
    }
    if (tok->model == TOK_MODEL_BPE) e.md = pcre2_match_data_create(1, NULL);
    syn_status st = e.md || tok->model != TOK_MODEL_BPE
                        ? encode(&e, text, len, parse_special)
                        : syn_fail(SYN_ERR_NO_MEMORY, "syn_tokenize: out of memory");
    if (st == SYN_OK && add_special && tok->add_eos && e.last != tok->eos) emit(&e, tok->eos);
    pcre2_match_data_free(e.md);
    spm_work_free(e.spm);
    free(e.sym_id);
    free(e.prev);
    free(e.next);
    free(e.heap);
    free(e.word_text);
    if (st != SYN_OK) return st;
    *n_ids = e.n;
    if (e.n > cap)
        return syn_fail(SYN_ERR_BUFFER_TOO_SMALL, "syn_tokenize: %zu ids do not fit in cap %zu",
                        e.n, cap);
    return SYN_OK;
}

syn_status syn_tokenize_new(const syn_tokenizer *tok, const char *text, size_t len,
                            bool add_special, bool parse_special, int32_t **ids, size_t *n_ids) {
    if (!ids || !n_ids)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenize_new: %s is NULL",
                        !ids ? "ids" : "n_ids");
    *ids = NULL;
    *n_ids = 0;
    /* Byte-level BPE gives at most one token per byte, add_special at most two more; SentencePiece
     * may give more (a space prefix or a space without a token of its own costs up to three byte
     * tokens), and then a second pass fills a buffer of the exact size. */
    if (len > SIZE_MAX / sizeof **ids - 2)
        return syn_fail(SYN_ERR_NO_MEMORY, "text of %zu bytes: out of memory", len);
    size_t cap = len + 2;
    int32_t *buf = malloc(cap * sizeof *buf);
    if (!buf) return syn_fail(SYN_ERR_NO_MEMORY, "text of %zu bytes: out of memory", len);
    syn_status st = syn_tokenize(tok, text, len, add_special, parse_special, buf, cap, n_ids);
    if (st == SYN_ERR_BUFFER_TOO_SMALL) {
        cap = *n_ids;
        free(buf);
        buf = malloc(cap * sizeof *buf);
        st = buf ? syn_tokenize(tok, text, len, add_special, parse_special, buf, cap, n_ids)
                 : syn_fail(SYN_ERR_NO_MEMORY, "text of %zu bytes: out of memory", len);
    }
    if (st != SYN_OK) {
        free(buf);
        *n_ids = 0;
        return st;
    }
    *ids = buf;
    return SYN_OK;
}

/* spm.c: SentencePiece encoding of one text fragment (tokenizer.ggml.model "llama"), as
 * llama.cpp's llm_tokenizer_spm: characters merged pairwise by the score of their join. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"

static const char space_piece[] = "\xE2\x96\x81"; /* U+2581, SentencePiece's space */

/* A candidate merge of adjacent symbols; stale, and skipped, once either has changed length. */
typedef struct spm_bigram {
    float score;   /* of the joined token */
    int32_t left;  /* byte position of the left symbol */
    int32_t right; /* byte position of the right symbol */
    uint32_t len;  /* bytes of the join when queued */
} spm_bigram;

/* The symbols of the escaped text form a linked list over their byte positions: a merge grows
 * the left symbol and empties the right one. */
struct spm_work {
    char *text;           /* [sym_cap] the fragment with spaces escaped */
    uint32_t *sym_len;    /* [sym_cap] bytes of the symbol starting at each position, 0: merged */
    int32_t *prev, *next; /* [sym_cap] neighbouring symbol positions, -1 at the ends */
    spm_bigram *heap;     /* [3 * sym_cap] max-heap by (score, -left) */
    size_t heap_len;
    size_t sym_cap;
};

void spm_work_free(spm_work *w) {
    if (!w) return;
    free(w->text);
    free(w->sym_len);
    free(w->prev);
    free(w->next);
    free(w->heap);
    free(w);
}

static syn_status reserve(spm_work *w, size_t text_len) {
    if (text_len > INT32_MAX / 4)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "syn_tokenize: a text fragment of %zu bytes is too long", text_len);
    if (text_len <= w->sym_cap) return SYN_OK;
    size_t cap = w->sym_cap ? w->sym_cap : 64;
    while (cap < text_len)
        cap *= 2;
    char *text = realloc(w->text, cap);
    if (text) w->text = text;
    uint32_t *sym_len = realloc(w->sym_len, cap * sizeof *sym_len);
    if (sym_len) w->sym_len = sym_len;
    int32_t *prev = realloc(w->prev, cap * sizeof *prev);
    if (prev) w->prev = prev;
    int32_t *next = realloc(w->next, cap * sizeof *next);
    if (next) w->next = next;
    /* each merge queues at most two new bigrams on top of the initial ones, one per symbol */
    spm_bigram *heap = realloc(w->heap, 3 * cap * sizeof *heap);
    if (heap) w->heap = heap;
    if (!text || !sym_len || !prev || !next || !heap)
        return syn_fail(SYN_ERR_NO_MEMORY, "syn_tokenize: out of memory");
    w->sym_cap = cap;
    return SYN_OK;
}

/* llama.cpp's order: the higher score first, then the leftmost. */
static bool bigram_before(const spm_bigram *a, const spm_bigram *b) {
    return a->score != b->score ? a->score > b->score : a->left < b->left;
}

static void heap_push(spm_work *w, spm_bigram b) {
    size_t i = w->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = b;
}

static spm_bigram heap_pop(spm_work *w) {
    spm_bigram top = w->heap[0];
    spm_bigram last = w->heap[--w->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->heap_len) break;
        if (c + 1 < w->heap_len && bigram_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->heap_len > 0) w->heap[i] = last;
    return top;
}

/* Queues the pair (left, right) when their join is a token. */
static void queue_bigram(const syn_tokenizer *tok, spm_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    uint32_t len = w->sym_len[left] + w->sym_len[right];
    int32_t id = tok_find_text(tok, w->text + left, len);
    if (id >= 0) heap_push(w, (spm_bigram){tok->tokens[id].score, left, right, len});
}

syn_status spm_encode(const syn_tokenizer *tok, spm_work **work, const char *text, size_t len,
                      bool space_prefix, tok_emit_fn emit, void *user) {
    size_t n_spaces = 0;
    for (size_t i = 0; i < len; i++)
        n_spaces += text[i] == ' ';
    /* a 1-byte space becomes 3 bytes, and the prefix adds 3 */
    size_t escaped_len = len + 2 * n_spaces + (space_prefix ? 3 : 0);
    if (!*work && !(*work = calloc(1, sizeof **work)))
        return syn_fail(SYN_ERR_NO_MEMORY, "syn_tokenize: out of memory");
    spm_work *w = *work;
    syn_status st = reserve(w, escaped_len);
    if (st != SYN_OK) return st;

    size_t n = 0;
    if (space_prefix) {
        memcpy(w->text, space_piece, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(w->text + n, space_piece, 3);
            n += 3;
        } else {
            w->text[n++] = text[i];
        }
    }

    /* One symbol per character (the text is valid UTF-8, so lead bytes give the lengths). */
    int32_t last = -1;
    for (size_t pos = 0; pos < n;) {
        uint8_t b = (uint8_t)w->text[pos];
        uint32_t k = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        w->sym_len[pos] = k;
        w->prev[pos] = last;
        w->next[pos] = -1;
        if (last >= 0) w->next[last] = (int32_t)pos;
        last = (int32_t)pos;
        pos += k;
    }
    w->heap_len = 0;
    for (int32_t i = n ? 0 : -1; i >= 0 && w->next[i] >= 0; i = w->next[i])
        queue_bigram(tok, w, i, w->next[i]);

    while (w->heap_len > 0) {
        spm_bigram b = heap_pop(w);
        uint32_t left_len = w->sym_len[b.left], right_len = w->sym_len[b.right];
        if (left_len == 0 || right_len == 0 || left_len + right_len != b.len) continue;
        w->sym_len[b.left] = b.len;
        w->sym_len[b.right] = 0;
        w->next[b.left] = w->next[b.right];
        if (w->next[b.right] >= 0) w->prev[w->next[b.right]] = b.left;
        queue_bigram(tok, w, w->prev[b.left], b.left);
        queue_bigram(tok, w, b.left, w->next[b.left]);
    }

    /* A merged symbol is always a token; a lone character that is none falls back to bytes. */
    for (int32_t i = n ? 0 : -1; i >= 0; i = w->next[i]) {
        int32_t id = tok_find_text(tok, w->text + i, w->sym_len[i]);
        if (id >= 0) {
            emit(user, id);
            continue;
        }
        for (uint32_t j = 0; j < w->sym_len[i]; j++)
            emit(user, tok->byte_token[(uint8_t)w->text[i + j]]);
    }
    return SYN_OK;
}

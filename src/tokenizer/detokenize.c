/* detokenize.c: token ids back to bytes (the inverse byte-level mapping), whole or streamed. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Byte-level alphabet and UTF-8
 * ------------------------------------------------------------------------------------------- */

static bool byte_is_printable(unsigned b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

void byte_level_tables(uint16_t byte_cp[256], int16_t cp_byte[BYTE_LEVEL_CP_LIMIT]) {
    for (int cp = 0; cp < BYTE_LEVEL_CP_LIMIT; cp++)
        cp_byte[cp] = -1;
    unsigned next_extra = 256; /* the next code point handed to a non-printable byte */
    for (unsigned b = 0; b < 256; b++) {
        byte_cp[b] = (uint16_t)(byte_is_printable(b) ? b : next_extra++);
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

int syn_utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    /* Well-formed sequences (Unicode Table 3-7): the lead byte fixes the length and the range of
     * the second byte; later bytes are 80..BF. This excludes overlongs, surrogates and > U+10FFFF.
     */
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    uint32_t v;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        v = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        v = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        v = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return -1;
    }
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) return 0;
        uint8_t b = s[i];
        if (b < lo || b > hi) return -i;
        lo = 0x80;
        hi = 0xBF;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return need + 1;
}

int utf8_put(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---------------------------------------------------------------------------------------------
 * Whole tokens
 * ------------------------------------------------------------------------------------------- */

static int hex_value(uint8_t c) { return c <= '9' ? c - '0' : c - 'A' + 10; }

/* SentencePiece: U+2581 is a space, <0xXX> its byte (checked at load); other tokens (unused
 * ones) decode to nothing, as llama.cpp suppresses them. */
static size_t spm_decode_token(const tok_entry *t, uint8_t *out) {
    const uint8_t *s = (const uint8_t *)t->text;
    if (t->attr & TOK_ATTR_BYTE) {
        out[0] = (uint8_t)(hex_value(s[3]) << 4 | hex_value(s[4]));
        return 1;
    }
    if (!(t->attr & TOK_ATTR_NORMAL)) return 0;
    size_t n = 0;
    for (size_t i = 0; i < t->len;) {
        if (t->len - i >= 3 && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            out[n++] = ' ';
            i += 3;
        } else {
            out[n++] = s[i++];
        }
    }
    return n;
}

size_t tok_decode_token(const syn_tokenizer *tok, int32_t id, uint8_t *out) {
    if (id >= tok->n_tokens) return 0; /* embedding rows without a token: no text */
    const tok_entry *t = &tok->tokens[id];
    const uint8_t *s = (const uint8_t *)t->text;
    if (t->attr & TOK_ATTR_VERBATIM) {
        memcpy(out, s, t->len);
        return t->len;
    }
    if (tok->model == TOK_MODEL_SPM) return spm_decode_token(t, out);
    /* tokenizer_load checked that these tokens are well-formed byte-level text. */
    size_t n = 0;
    for (size_t i = 0; i < t->len;) {
        uint32_t cp = 0;
        int k = syn_utf8_next(s + i, t->len - i, &cp);
        out[n++] = (uint8_t)tok->cp_byte[cp];
        i += (size_t)k;
    }
    return n;
}

static syn_status check_id(const syn_tokenizer *tok, int32_t id, const char *what) {
    if (id < 0 || id >= tok->n_vocab)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "%s: token id %d is out of range [0, %d)", what,
                        id, tok->n_vocab);
    return SYN_OK;
}

syn_status syn_tokenizer_token_bytes(const syn_tokenizer *tok, int32_t id, char *buf, size_t cap,
                                     size_t *n_bytes) {
    if (!tok || !n_bytes || (!buf && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_tokenizer_token_bytes: %s is NULL",
                        !tok       ? "tok"
                        : !n_bytes ? "n_bytes"
                                   : "buf");
    syn_status st = check_id(tok, id, "syn_tokenizer_token_bytes");
    if (st != SYN_OK) return st;
    if (id >= tok->n_tokens) {
        *n_bytes = 0;
        return SYN_OK;
    }
    const tok_entry *t = &tok->tokens[id];
    /* Decoding never lengthens a token, so a buffer as long as the text needs no scratch. */
    if (cap >= t->len) {
        *n_bytes = tok_decode_token(tok, id, (uint8_t *)buf);
        return SYN_OK;
    }
    uint8_t *tmp = malloc(t->len ? t->len : 1);
    if (!tmp) return syn_fail(SYN_ERR_NO_MEMORY, "syn_tokenizer_token_bytes: out of memory");
    size_t n = tok_decode_token(tok, id, tmp);
    *n_bytes = n;
    if (n <= cap) memcpy(buf, tmp, n);
    free(tmp);
    if (n > cap)
        return syn_fail(SYN_ERR_BUFFER_TOO_SMALL,
                        "syn_tokenizer_token_bytes: token %d needs %zu bytes, cap is %zu", id, n,
                        cap);
    return SYN_OK;
}

/* Decodes ids into out, as far as cap allows; returns the full length. tmp: [max_token_bytes]. */
static size_t decode_ids(const syn_tokenizer *tok, const int32_t *ids, size_t n, uint8_t *out,
                         size_t cap, uint8_t *tmp) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = tok_decode_token(tok, ids[i], tmp);
        const uint8_t *piece = tmp;
        /* The space prefix SentencePiece added comes off the first token (llama.cpp). */
        if (i == 0 && tok->add_space_prefix && k > 0 && tmp[0] == ' ') {
            piece++;
            k--;
        }
        if (k > 0 && total + k <= cap) memcpy(out + total, piece, k);
        total += k;
    }
    return total;
}

/* llama.cpp's clean_up_tokenization_spaces, in place, three passes over the bytes: the space
 * before ? ! . , goes; a lone ' between spaces loses both spaces; the space before 's 'm 're 've
 * goes. Each pass reads the previous byte as the pass found it. Returns the new length. */
static size_t clean_spaces(uint8_t *t, size_t n) {
    size_t m = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        if (t[i - 1] == ' ' && (t[i] == '?' || t[i] == '!' || t[i] == '.' || t[i] == ',')) m--;
        t[m++] = t[i];
    }
    n = m;
    m = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        uint8_t x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            m--;
            t[++i] = '\0'; /* the space after is skipped, and is no space before the next byte */
        }
        t[m++] = x;
    }
    n = m;
    m = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        uint8_t x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            uint8_t x1 = t[i + 1];
            bool re_ve = i + 2 < n && (x1 == 'r' || x1 == 'v') && t[i + 2] == 'e';
            if (x1 == 's' || x1 == 'm' || re_ve) m--;
        }
        t[m++] = x;
    }
    return m;
}

syn_status syn_detokenize(const syn_tokenizer *tok, const int32_t *ids, size_t n, char *buf,
                          size_t cap, size_t *n_bytes) {
    if (!tok || !n_bytes || (!ids && n > 0) || (!buf && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_detokenize: %s is NULL",
                        !tok            ? "tok"
                        : !n_bytes      ? "n_bytes"
                        : !ids && n > 0 ? "ids"
                                        : "buf");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tok->n_vocab)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "syn_detokenize: ids[%zu] = %d is out of range [0, %d)", i, ids[i],
                            tok->n_vocab);
    uint8_t *tmp = malloc(tok->max_token_bytes ? tok->max_token_bytes : 1);
    if (!tmp) return syn_fail(SYN_ERR_NO_MEMORY, "syn_detokenize: out of memory");
    size_t total = decode_ids(tok, ids, n, (uint8_t *)buf, cap, tmp);
    if (tok->model == TOK_MODEL_BPE && tok->pretok_kind->clean_spaces && total > 0) {
        /* Cleaning needs the whole text: decode it again where it fits. */
        uint8_t *full = malloc(total);
        if (!full) {
            free(tmp);
            return syn_fail(SYN_ERR_NO_MEMORY, "syn_detokenize: out of memory");
        }
        decode_ids(tok, ids, n, full, total, tmp);
        total = clean_spaces(full, total);
        if (cap > 0) memcpy(buf, full, total <= cap ? total : cap);
        free(full);
    }
    free(tmp);
    *n_bytes = total;
    if (total > cap)
        return syn_fail(SYN_ERR_BUFFER_TOO_SMALL,
                        "syn_detokenize: the text needs %zu bytes, cap is %zu", total, cap);
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Streaming: emit only complete characters, hold back a trailing partial one
 * ------------------------------------------------------------------------------------------- */

enum { UTF8_MAX_HELD = 3 }; /* a truncated well-formed prefix is at most 3 bytes */

struct syn_detok_stream {
    const syn_tokenizer *tok;
    uint8_t held[UTF8_MAX_HELD]; /* the start of a character the next token may complete */
    size_t n_held;
    uint8_t *pending; /* [max_token_bytes + UTF8_MAX_HELD]: held bytes + the new token's */
    char *text;       /* [3 * (max_token_bytes + UTF8_MAX_HELD) + 1]: the output being built */
};

syn_status syn_detok_stream_new(const syn_tokenizer *tok, syn_detok_stream **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_detok_stream_new: out is NULL");
    *out = NULL;
    if (!tok) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_detok_stream_new: tok is NULL");
    syn_detok_stream *s = calloc(1, sizeof *s);
    size_t span = (size_t)tok->max_token_bytes + UTF8_MAX_HELD;
    if (s) {
        s->pending = malloc(span);
        s->text = malloc(3 * span + 1); /* every byte may become a 3-byte U+FFFD */
    }
    if (!s || !s->pending || !s->text) {
        syn_detok_stream_free(s);
        return syn_fail(SYN_ERR_NO_MEMORY, "syn_detok_stream_new: out of memory");
    }
    s->tok = tok;
    *out = s;
    return SYN_OK;
}

void syn_detok_stream_free(syn_detok_stream *s) {
    if (!s) return;
    free(s->pending);
    free(s->text);
    free(s);
}

/* Converts in[0..n) to well-formed UTF-8 in s->text, each ill-formed subpart becoming U+FFFD.
 * With hold_tail, a truncated character at the end is left out and its length returned in
 * *n_tail; otherwise it is replaced too. Returns the text length. */
static size_t stream_render(syn_detok_stream *s, const uint8_t *in, size_t n, bool hold_tail,
                            size_t *n_tail) {
    static const char replacement[] = "\xEF\xBF\xBD";
    size_t out = 0;
    size_t i = 0;
    *n_tail = 0;
    while (i < n) {
        uint32_t cp;
        int k = syn_utf8_next(in + i, n - i, &cp);
        if (k > 0) {
            memcpy(s->text + out, in + i, (size_t)k);
            out += (size_t)k;
            i += (size_t)k;
        } else if (k == 0 && hold_tail) {
            *n_tail = n - i;
            break;
        } else {
            memcpy(s->text + out, replacement, 3);
            out += 3;
            i += k == 0 ? n - i : (size_t)-k;
        }
    }
    s->text[out] = '\0';
    return out;
}

/* Copies the rendered text to buf; on BUFFER_TOO_SMALL nothing is consumed, so the caller may
 * retry the same call with a larger buffer. */
static syn_status stream_emit(syn_detok_stream *s, size_t len, char *buf, size_t cap,
                              size_t *n_bytes, const char *what) {
    *n_bytes = len;
    if (len + 1 > cap)
        return syn_fail(SYN_ERR_BUFFER_TOO_SMALL,
                        "%s: the text needs %zu bytes and a NUL, cap is %zu", what, len, cap);
    memcpy(buf, s->text, len + 1);
    return SYN_OK;
}

syn_status syn_detok_stream_push(syn_detok_stream *s, int32_t id, char *buf, size_t cap,
                                 size_t *n_bytes) {
    if (!s || !n_bytes || (!buf && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_detok_stream_push: %s is NULL",
                        !s         ? "s"
                        : !n_bytes ? "n_bytes"
                                   : "buf");
    syn_status st = check_id(s->tok, id, "syn_detok_stream_push");
    if (st != SYN_OK) return st;
    memcpy(s->pending, s->held, s->n_held);
    size_t n = s->n_held + tok_decode_token(s->tok, id, s->pending + s->n_held);
    size_t n_tail;
    size_t len = stream_render(s, s->pending, n, true, &n_tail);
    st = stream_emit(s, len, buf, cap, n_bytes, "syn_detok_stream_push");
    if (st != SYN_OK) return st;
    memcpy(s->held, s->pending + n - n_tail, n_tail);
    s->n_held = n_tail;
    return SYN_OK;
}

syn_status syn_detok_stream_flush(syn_detok_stream *s, char *buf, size_t cap, size_t *n_bytes) {
    if (!s || !n_bytes || (!buf && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_detok_stream_flush: %s is NULL",
                        !s         ? "s"
                        : !n_bytes ? "n_bytes"
                                   : "buf");
    size_t n_tail;
    size_t len = stream_render(s, s->held, s->n_held, false, &n_tail);
    syn_status st = stream_emit(s, len, buf, cap, n_bytes, "syn_detok_stream_flush");
    if (st != SYN_OK) return st;
    s->n_held = 0;
    return SYN_OK;
}

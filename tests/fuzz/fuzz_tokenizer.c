/* fuzz_tokenizer.c: libFuzzer target: any bytes as text through the Qwen2.5 tokenizer (the one the
 * tiny test model carries; SYNAPSE_FUZZ_MODEL names another file, loaded with
 * syn_tokenizer_load, so a vocabulary-only GGUF will do: one without llama.cpp's space clean-up
 * and, for SentencePiece, without a space prefix, such as
 * tests/data/vocab/npm-gemma3-spm.vocab.gguf; the 1024-byte stream buffer below must hold its
 * longest token three times over).
 * Besides what the sanitizers catch, it checks syn_tokenize's promises, with utf8proc as the judge
 * of UTF-8 validity (syn_tokenize has its own decoder):
 *   - text utf8proc cannot decode is refused with SYN_ERR_INVALID_ARGUMENT, and nothing else is;
 *   - accepted text, with and without special-token parsing, gives ids inside the vocabulary whose
 *     decoding, whole (syn_detokenize) and one id at a time (syn_detok_stream, the same bytes), is
 *     exactly the text: the byte-level BPE normalises nothing and loses nothing;
 *   - the same bytes read as token ids (3 bytes each, modulo the vocabulary: any sequence a model
 *     may generate) stream out as valid UTF-8 only, and exactly as the ids' bytes whenever those
 *     are valid UTF-8 themselves.
 * Built by `make fuzz`; run from the repository root. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "synapse.h"

/* Traps (a crash libFuzzer reports) when a promise is broken. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

static syn_tokenizer *tok;
static bool space_piece; /* the vocabulary decodes U+2581 as a space (SentencePiece) */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = getenv("SYNAPSE_FUZZ_MODEL");
    REQUIRE(syn_tokenizer_load(path ? path : "tests/data/qwen2-tiny-synth-q8_0.gguf", &tok) ==
            SYN_OK);
    int32_t ids[8];
    size_t n = 0, len = 0;
    char text[8];
    REQUIRE(syn_tokenize(tok, "\xE2\x96\x81", 3, false, false, ids, 8, &n) == SYN_OK);
    REQUIRE(syn_detokenize(tok, ids, n, text, sizeof text, &len) == SYN_OK);
    space_piece = len == 1 && text[0] == ' ';
    return 0;
}

/* Whether utf8proc decodes s[0, n) whole. */
static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        const utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

/* syn_detokenize of ids into a new buffer (its length asked first); *n_bytes: the length. */
static uint8_t *detokenize_whole(const int32_t *ids, size_t n_ids, size_t *n_bytes) {
    size_t n = 0;
    const syn_status st = syn_detokenize(tok, ids, n_ids, NULL, 0, &n);
    REQUIRE(st == (n ? SYN_ERR_BUFFER_TOO_SMALL : SYN_OK));
    uint8_t *out = malloc(n + 1);
    REQUIRE(out);
    REQUIRE(syn_detokenize(tok, ids, n_ids, (char *)out, n + 1, n_bytes) == SYN_OK &&
            *n_bytes == n);
    return out;
}

/* ids pushed one at a time through syn_detok_stream, then flushed: every piece NUL-terminated and
 * valid UTF-8, and with want given, the pieces add up to want[0, n_want). */
static void check_stream(const int32_t *ids, size_t n_ids, const uint8_t *want, size_t n_want) {
    syn_detok_stream *s = NULL;
    REQUIRE(syn_detok_stream_new(tok, &s) == SYN_OK);
    char piece[1024];
    size_t at = 0;
    for (size_t i = 0; i <= n_ids; i++) {
        size_t k = 0;
        if (i < n_ids)
            REQUIRE(syn_detok_stream_push(s, ids[i], piece, sizeof piece, &k) == SYN_OK);
        else
            REQUIRE(syn_detok_stream_flush(s, piece, sizeof piece, &k) == SYN_OK);
        REQUIRE(k < sizeof piece && piece[k] == '\0');
        REQUIRE(valid_utf8((const uint8_t *)piece, k));
        if (want) REQUIRE(at + k <= n_want && memcmp(piece, want + at, k) == 0);
        at += k;
    }
    if (want) REQUIRE(at == n_want);
    syn_detok_stream_free(s);
}

/* The input read as token ids (3 bytes each, modulo the vocabulary): the ids' bytes, streamed,
 * exactly when those bytes are valid UTF-8 (else only valid pieces). */
static void check_ids_stream(const uint8_t *data, size_t size) {
    const int32_t n_vocab = syn_tokenizer_n_vocab(tok);
    const size_t n_ids = size / 3;
    int32_t *ids = malloc(sizeof *ids * (n_ids + 1));
    REQUIRE(ids);
    for (size_t i = 0; i < n_ids; i++)
        ids[i] = (int32_t)(((uint32_t)data[3 * i] | (uint32_t)data[3 * i + 1] << 8 |
                            (uint32_t)data[3 * i + 2] << 16) %
                           (uint32_t)n_vocab);
    size_t n_raw = 0;
    uint8_t *raw = detokenize_whole(ids, n_ids, &n_raw);
    check_stream(ids, n_ids, valid_utf8(raw, n_raw) ? raw : NULL, n_raw);
    free(raw);
    free(ids);
}

/* Whether text is the input back: exactly, or for SentencePiece with every U+2581 of the input a
 * space (its pieces cannot tell the text's own U+2581 from an escaped space). */
static bool decodes_to_input(const uint8_t *text, size_t n_text, const uint8_t *in, size_t n_in) {
    if (!space_piece) return n_text == n_in && memcmp(text, in, n_in) == 0;
    size_t t = 0;
    for (size_t i = 0; i < n_in; t++) {
        bool piece = n_in - i >= 3 && memcmp(in + i, "\xE2\x96\x81", 3) == 0;
        if (t >= n_text || text[t] != (piece ? ' ' : in[i])) return false;
        i += piece ? 3 : 1;
    }
    return t == n_text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const bool valid = valid_utf8(data, size);
    const int32_t n_vocab = syn_tokenizer_n_vocab(tok);
    for (int special = 0; special <= 1; special++) {
        size_t n_ids = 0;
        const syn_status st =
            syn_tokenize(tok, (const char *)data, size, false, special, NULL, 0, &n_ids);
        if (!valid) {
            REQUIRE(st == SYN_ERR_INVALID_ARGUMENT);
            continue;
        }
        REQUIRE(st == (n_ids ? SYN_ERR_BUFFER_TOO_SMALL : SYN_OK));
        int32_t *ids = malloc(sizeof *ids * (n_ids + 1));
        REQUIRE(ids);
        size_t n_again = 0;
        REQUIRE(syn_tokenize(tok, (const char *)data, size, false, special, ids, n_ids + 1,
                             &n_again) == SYN_OK);
        REQUIRE(n_again == n_ids);
        for (size_t i = 0; i < n_ids; i++)
            REQUIRE(ids[i] >= 0 && ids[i] < n_vocab);
        size_t n_text = 0;
        uint8_t *text = detokenize_whole(ids, n_ids, &n_text);
        REQUIRE(decodes_to_input(text, n_text, data, size));
        check_stream(ids, n_ids, text, n_text);
        free(text);
        free(ids);
    }
    check_ids_stream(data, size);
    return 0;
}

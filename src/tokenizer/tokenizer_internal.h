/*
 * tokenizer_internal.h: the tokenizer's data structures and the helpers its files share
 * (tokenizer.c loads, pretokenize.c splits, bpe.c encodes byte-level BPE and drives both models,
 * spm.c encodes SentencePiece, detokenize.c decodes).
 *
 * Everything here is immutable after tokenizer_load(), so one syn_tokenizer serves any number of
 * threads; per-call scratch (PCRE2 match data, BPE work arrays) lives on the caller's side.
 */
#ifndef SYN_TOKENIZER_INTERNAL_H
#define SYN_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "synapse_internal.h" /* syn_utf8_next */
#include "tokenizer/tokenizer.h"

/* GGUF tokenizer.ggml.token_type values. */
enum tok_type {
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,
    TOK_USER_DEFINED = 4,
    TOK_UNUSED = 5,
    TOK_BYTE = 6,
};

/* Token attributes as bits (llama.cpp's llama_token_attr): type t gives bit t - 1, and loading
 * adds some, as llama.cpp does: CONTROL to end-of-turn texts such as </s>, RSTRIP to Phi-3's
 * special tokens. */
enum tok_attr {
    TOK_ATTR_NORMAL = 1 << 0,
    TOK_ATTR_UNKNOWN = 1 << 1,
    TOK_ATTR_CONTROL = 1 << 2,
    TOK_ATTR_USER_DEFINED = 1 << 3,
    TOK_ATTR_UNUSED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_RSTRIP = 1 << 6, /* ASCII whitespace after the token in the text is dropped */
    /* Matched in the text as a unit (UNKNOWN and CONTROL only with parse_special) and decoded
     * as its text verbatim. */
    TOK_ATTR_VERBATIM = TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED,
};

/* tokenizer.ggml.model */
typedef enum tok_model {
    TOK_MODEL_BPE, /* "gpt2": byte-level BPE after a pre-tokenizer regex */
    TOK_MODEL_SPM, /* "llama": SentencePiece, pieces merged by score */
} tok_model;

/* GPT-2's byte-level alphabet: every byte maps to one code point below this bound. */
enum { BYTE_LEVEL_CP_LIMIT = 324 };

typedef struct tok_entry {
    const char *text; /* inside the GGUF mapping, not NUL-terminated */
    uint32_t len;     /* bytes of text */
    float score;      /* SentencePiece merge priority, higher first (0 where the file has none) */
    uint8_t attr;     /* enum tok_attr bits */
    bool eog;         /* ends generation */
} tok_entry;

/* Open-addressing slot of the text -> id table; id -1: empty. */
typedef struct tok_text_slot {
    uint32_t hash;
    int32_t id;
} tok_text_slot;

/* Open-addressing slot of the (left, right) -> merge table; key UINT64_MAX: empty. */
typedef struct tok_merge_slot {
    uint64_t key;   /* (uint64_t)left << 32 | right */
    int32_t rank;   /* position in tokenizer.ggml.merges: lower merges first */
    int32_t result; /* id of the merged token */
} tok_merge_slot;

enum { PRETOK_MAX_PATTERNS = 8 };

/* A kind's compiled expressions; read-only after pretok_compile, shared by all calls. */
typedef struct pretok_codes {
    pcre2_code *code[PRETOK_MAX_PATTERNS];
    size_t n;
} pretok_codes;

struct syn_tokenizer {
    tok_model model;
    int32_t n_tokens;  /* entries of tokenizer.ggml.tokens */
    int32_t n_vocab;   /* the model's vocabulary (embedding rows), >= n_tokens */
    tok_entry *tokens; /* [n_tokens] */

    tok_text_slot *text_slots; /* [text_mask + 1]: token text -> id (last id of a duplicate) */
    uint32_t text_mask;
    tok_merge_slot *merge_slots; /* [merge_mask + 1] */
    uint32_t merge_mask;

    int32_t byte_token[256]; /* id of each byte's token: byte-level symbol (BPE), <0xXX> (SPM) */
    uint16_t byte_cp[256];   /* byte -> its byte-level code point */
    int16_t
        cp_byte[BYTE_LEVEL_CP_LIMIT]; /* byte-level code point -> byte, -1: not in the alphabet */

    /* Tokens matched as whole units before BPE or SPM (TOK_ATTR_VERBATIM): control and unknown
     * tokens with parse_special, user-defined ones always (as llama.cpp and Hugging Face do).
     * Longest text first. */
    int32_t *specials; /* [n_specials] ids */
    int32_t n_specials;

    int32_t *eog; /* [n_eog] the end-of-generation ids, ascending */
    int32_t n_eog;

    int32_t bos, eos, pad; /* -1: absent */
    /* The other roles' ids (eot, eom, fill-in-the-middle), by syn_token_role; -1: absent. */
    int32_t role_ids[SYN_TOKEN_ROLE_COUNT];
    /* What text becomes as a prompt (syn_tokenize's add_special): tokenizer.ggml.add_bos_token and
     * add_eos_token, or the pre-tokenizer's default where a key is absent. */
    bool add_bos, add_eos;
    char *chat_template;      /* tokenizer.chat_template, NUL-terminated copy; NULL when absent */
    uint32_t max_token_bytes; /* longest token text; decoded tokens are never longer */

    /* SPM: a space (U+2581) starts the text and every text after a special token
     * (tokenizer.ggml.add_space_prefix, default true), and decoding drops it again. */
    bool add_space_prefix;

    const struct pretok_kind *pretok_kind; /* BPE: tokenizer.ggml.pre's entry of the table */
    pretok_codes pretok;                   /* its expressions, compiled */

    gguf_file *file; /* the mapping the token texts are in when this tokenizer owns it
                      * (syn_tokenizer_load); NULL for a model's tokenizer */
};

/* ---- tokenizer.c ---- */

/* The id of the token whose text is s[0..len), or -1. */
int32_t tok_find_text(const syn_tokenizer *tok, const char *s, size_t len);

/* The merge of the adjacent pair (left, right): true with *rank and *result set, or false. */
bool tok_find_merge(const syn_tokenizer *tok, int32_t left, int32_t right, int32_t *rank,
                    int32_t *result);

/* ---- pretokenize.c ---- */

/* A pre-tokenizer of the table, by its tokenizer.ggml.pre name. */
typedef struct pretok_kind {
    const char *name;            /* "qwen2", "llama-bpe", "gpt-2", ... */
    const char *const *patterns; /* PCRE2 (UTF + UCP), applied in turn; NULL-terminated */
    bool ignore_merges;          /* a word that is a whole token becomes that token without BPE */
    bool add_bos;      /* a prompt starts with BOS unless tokenizer.ggml.add_bos_token says */
    bool clean_spaces; /* decoding drops the space before ?!., and some contractions */
} pretok_kind;

/* The entry named name[0..len), or NULL. */
const pretok_kind *pretok_find(const char *name, size_t len);

/* Compiles kind's expressions (JIT when available). Errors: SYN_ERR_INTERNAL, SYN_ERR_NO_MEMORY;
 * *out is then empty. */
syn_status pretok_compile(const pretok_kind *kind, pretok_codes *out);
void pretok_free(pretok_codes *codes);

/* Called for each pre-token ("word") in order; a non-OK status stops the split. */
typedef syn_status (*pretok_word_fn)(void *user, const char *word, size_t len);

/* Splits valid UTF-8 text[0..len) into words, covering every byte exactly once. md holds at least
 * one ovector pair. Errors: those of fn, SYN_ERR_INTERNAL. */
syn_status pretok_split(const pretok_codes *codes, pcre2_match_data *md, const char *text,
                        size_t len, pretok_word_fn fn, void *user);

/* ---- spm.c ---- */

/* Scratch of SentencePiece encoding, reused across the fragments of one syn_tokenize call. */
typedef struct spm_work spm_work;

typedef void (*tok_emit_fn)(void *user, int32_t id);

/* Encodes one fragment text[0..len) (valid UTF-8, no special token) as llama.cpp's SPM does:
 * spaces become U+2581, with one more in front when space_prefix; each character starts as a
 * symbol, the adjacent pair whose join is the highest-scoring token (leftmost among equals) is
 * merged until none is a token, and each symbol becomes its token or, when it is none, the
 * tokens of its bytes. *work is allocated on first use; free it with spm_work_free. Errors:
 * SYN_ERR_NO_MEMORY, SYN_ERR_INVALID_ARGUMENT (a fragment too long). */
syn_status spm_encode(const syn_tokenizer *tok, spm_work **work, const char *text, size_t len,
                      bool space_prefix, tok_emit_fn emit, void *user);
void spm_work_free(spm_work *work);

/* ---- detokenize.c ---- */

/* Fills byte_cp and cp_byte with GPT-2's bytes_to_unicode mapping: printable Latin-1 bytes
 * ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) map to themselves, the other 68 bytes, in order, to
 * U+0100 upwards. */
void byte_level_tables(uint16_t byte_cp[256], int16_t cp_byte[BYTE_LEVEL_CP_LIMIT]);

/* Writes cp as UTF-8 into out[4]; returns the length. cp must be a Unicode scalar value. */
int utf8_put(uint32_t cp, char out[4]);

/* Bytes of token id (byte-level decoded; special tokens verbatim) into out[max_token_bytes];
 * returns their count. id must be in [0, n_vocab); ids past n_tokens decode to nothing. */
size_t tok_decode_token(const syn_tokenizer *tok, int32_t id, uint8_t *out);

#endif

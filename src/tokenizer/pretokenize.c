/* pretokenize.c: the pre-tokenizer table (tokenizer.ggml.pre -> the regex that cuts text into
 * words before BPE) and the splitting loop. */
#include <string.h>

#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"

/* Unicode White_Space, spelled out: Hugging Face's \s (Oniguruma) is this property, while PCRE2's
 * UCP \s also takes U+180E, which Unicode dropped from White_Space. */
#define WS                                                                                         \
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"  \
    "\\x{205F}\\x{3000}"

/* The Split pattern of Qwen2's tokenizer.json, with \s written as [WS] and \S as [^WS]:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *   |\s*[\r\n]+|\s+(?!\S)|\s+
 * Llama 3's differs only in its digits: runs of up to three (\p{N}{1,3}) instead of one. */
#define SPLIT_PATTERN(digits)                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)"                                                                 \
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"                                                               \
    "|\\p{N}" digits "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"                                          \
    "|[" WS "]*[\\r\\n]+"                                                                          \
    "|[" WS "]+(?![^" WS "])"                                                                      \
    "|[" WS "]+"

/* llama.cpp's qwen35 pattern: Qwen2's with combining marks kept in words ([\p{L}\p{M}]+) and out
 * of the punctuation runs, and its contractions spelled as case pairs:
 *   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+
 *   |\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
#define QWEN35_PATTERN                                                                             \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"                                    \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+"                                                       \
    "|\\p{N}| ?[^" WS "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"                                              \
    "|[" WS "]*[\\r\\n]+"                                                                          \
    "|[" WS "]+(?![^" WS "])"                                                                      \
    "|[" WS "]+"

/* llama-bpe (Llama 3) also takes a word that is itself a token as that token, without merges
 * (Hugging Face's ignore_merges, llama.cpp's LLAMA3 pre-tokenizer type), and its prompts start
 * with BOS when the file does not say (llama.cpp's default for that type; Llama 3 GGUFs often
 * carry no tokenizer.ggml.add_bos_token). */
static const pretok_kind kinds[] = {
    {"qwen2", SPLIT_PATTERN(""), false, false, true},
    {"llama-bpe", SPLIT_PATTERN("{1,3}"), true, true, true},
    {"qwen35", QWEN35_PATTERN, false, false, false}, /* llama.cpp applies no NFC */
};

const pretok_kind *pretok_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strlen(kinds[i].name) == len && memcmp(kinds[i].name, name, len) == 0) return &kinds[i];
    return NULL;
}

syn_status pretok_compile(const pretok_kind *kind, pcre2_code **out) {
    int err;
    PCRE2_SIZE err_offset;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)kind->pattern, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP, &err, &err_offset, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return syn_fail(SYN_ERR_INTERNAL, "pre-tokenizer regex, offset %zu: %s", (size_t)err_offset,
                        (const char *)msg);
    }
    /* JIT is several times faster; without it (no JIT support in this PCRE2 build, or no
     * executable memory) pcre2_match runs the same pattern in the interpreter. */
    int jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    if (jit != 0)
        syn_log(SYN_LOG_DEBUG, "pre-tokenizer: PCRE2 JIT unavailable (%d), interpreting", jit);
    *out = code;
    return SYN_OK;
}

syn_status pretok_split(const pcre2_code *code, pcre2_match_data *md, const char *text, size_t len,
                        pretok_word_fn fn, void *user) {
    size_t pos = 0;
    while (pos < len) {
        int rc = pcre2_match(code, (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        size_t start = len, end = len;
        if (rc >= 0) {
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            start = ov[0];
            end = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return syn_fail(SYN_ERR_INTERNAL, "pre-tokenizer match at byte %zu: %s", pos,
                            (const char *)msg);
        }
        /* The pattern covers every character, but bytes it skipped would still be words. */
        if (start > pos) {
            syn_status st = fn(user, text + pos, start - pos);
            if (st != SYN_OK) return st;
        }
        if (end <= start) { /* no alternative matches empty text; never loop on one */
            if (start == len) break;
            return syn_fail(SYN_ERR_INTERNAL, "pre-tokenizer: empty match at byte %zu", start);
        }
        syn_status st = fn(user, text + start, end - start);
        if (st != SYN_OK) return st;
        pos = end;
    }
    return SYN_OK;
}

/* pretokenize.c: the Qwen2 pre-tokenizer, the regex that cuts text into words before BPE. */
#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"

/* Unicode White_Space, spelled out: Hugging Face's \s (Oniguruma) is this property, while PCRE2's
 * UCP \s also takes U+180E, which Unicode dropped from White_Space. */
#define WS                                                                                         \
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"  \
    "\\x{205F}\\x{3000}"

/* The Split pattern of Qwen2's tokenizer.json, with \s written as [WS] and \S as [^WS]:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *   |\s*[\r\n]+|\s+(?!\S)|\s+ */
static const char qwen2_pattern[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                                    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
                                    "|\\p{N}"
                                    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
                                    "|[" WS "]*[\\r\\n]+"
                                    "|[" WS "]+(?![^" WS "])"
                                    "|[" WS "]+";

syn_status pretok_compile(pcre2_code **out) {
    int err;
    PCRE2_SIZE err_offset;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)qwen2_pattern, PCRE2_ZERO_TERMINATED,
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

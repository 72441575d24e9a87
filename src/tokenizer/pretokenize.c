/* pretokenize.c: the pre-tokenizer table (tokenizer.ggml.pre -> the regexes that cut text into
 * words before BPE, and the flags that go with the name) and the splitting loop.
 *
 * The expressions are llama.cpp's (src/llama-vocab.cpp, llm_tokenizer_bpe), applied as it applies
 * them: each expression in turn splits every piece the one before left, and both its matches and
 * the text between them are pieces. Two spellings differ from the C++ regex llama.cpp runs, and
 * pretok_compile rewrites them: \s and \S are Unicode White_Space exactly (llama.cpp's whitespace
 * table; PCRE2's UCP \s also takes U+180E), and $ is the end of the piece only (ECMAScript's $,
 * PCRE2_DOLLAR_ENDONLY).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/tokenizer_internal.h"

/* Unicode White_Space, as ranges for inside a character class. */
#define WS                                                                                         \
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"  \
    "\\x{205F}\\x{3000}"

/* The contractions as llama.cpp spells them: case pairs, not (?i:), which would also take
 * U+017F for s. */
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define GPT2_WORDS "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_WORDS                                                                               \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"       \
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* o200k (GPT-4o): a word is an optional non-letter, then letters whose case runs upper to lower;
 * llama.cpp writes "a letter not a-z" and "a letter not A-Z" for the case classes. */
#define O200K_LETTERS                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"                         \
    "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"

/* CJK ideographs, U+0800..U+4E00 and Hangul (deepseek-llm's and deepseek-coder's class). */
#define CJK_HANGUL "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

static const char *const default_patterns[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_WORDS, "\\p{N}+",
                                               "[0-9][0-9][0-9]", NULL};
static const char *const gpt2_patterns[] = {GPT2_WORDS, NULL};
static const char *const llama3_patterns[] = {LLAMA3_WORDS, NULL};
static const char *const jais2_patterns[] = {
    CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)"
    "|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const qwen2_patterns[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
/* Qwen2's with combining marks kept in words and out of the punctuation runs. */
static const char *const qwen35_patterns[] = {
    CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
/* Non-ASCII code points written as \x{...}: the class holds U+2126 and U+212A, which an editor's
 * NFC would silently turn into other letters. llama.cpp maps non-ASCII whitespace to U+000B
 * before matching these expressions, so U+3000 in the text never meets the class's U+3000 (left
 * out here) but matches \s. */
static const char *const deepseek_llm_patterns[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-"
    "\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-"
    "\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-"
    "\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-"
    "\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-"
    "\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-"
    "\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-"
    "\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
    "\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}"
    "\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-"
    "\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3001}-\\x{3002}]+",
    "\\s+$",
    CJK_HANGUL,
    "\\p{N}+",
    NULL};
static const char *const deepseek_coder_patterns[] = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                                      CJK_HANGUL, "\\p{N}",      NULL};
/* llama.cpp's ASCII table for \p{S} leaves out ~, so here ~ is no symbol: it may start a word
 * and does not join a punctuation run. */
static const char *const deepseek3_patterns[] = {
    "\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|(?:~|[^\\r\\n\\p{L}\\p{P}\\p{S}])?[\\p{L}\\p{M}]+"
    "| ?(?:(?!~)[\\p{P}\\p{S}])+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const falcon_patterns[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_WORDS,
                                              "[0-9][0-9][0-9]", NULL};
static const char *const starcoder_patterns[] = {"\\p{N}", GPT2_WORDS, NULL};
#define BLOOM_WORDS " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"
static const char *const bloom_patterns[] = {BLOOM_WORDS, NULL};
static const char *const viking_patterns[] = {BLOOM_WORDS, "\\p{N}", NULL};
static const char *const tekken_patterns[] = {
    O200K_LETTERS "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const gpt4o_patterns[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" CONTRACTIONS "?"
    "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" CONTRACTIONS "?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const bailingmoe_patterns[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const seed_coder_patterns[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};

/* Flags beside the expressions, as llama.cpp sets them per name: ignore_merges, add_bos and
 * clean_spaces (which BPE has unless the name turns it off). */
#define KIND(name, patterns, ignore_merges, add_bos, clean_spaces)                                 \
    { name, patterns, ignore_merges, add_bos, clean_spaces }
static const pretok_kind kinds[] = {
    KIND("default", default_patterns, false, false, true),
    KIND("llama3", llama3_patterns, true, true, true),
    KIND("llama-v3", llama3_patterns, true, true, true),
    KIND("llama-bpe", llama3_patterns, true, true, true),
    KIND("falcon3", llama3_patterns, true, true, true),
    KIND("falcon-h1", llama3_patterns, true, true, true),
    KIND("pixtral", llama3_patterns, true, true, true),
    KIND("midm-2.0", llama3_patterns, true, true, true),
    KIND("lfm2", llama3_patterns, true, true, true),
    KIND("jina-v5-nano", llama3_patterns, true, true, true),
    KIND("dbrx", llama3_patterns, false, false, true),
    KIND("smaug-bpe", llama3_patterns, false, false, true),
    KIND("jais-2", jais2_patterns, false, false, true),
    KIND("deepseek-llm", deepseek_llm_patterns, false, false, false),
    KIND("deepseek-coder", deepseek_coder_patterns, false, false, false),
    KIND("deepseek-v3", deepseek3_patterns, false, false, false),
    KIND("hunyuan-dense", deepseek3_patterns, false, false, false),
    KIND("joyai-llm", deepseek3_patterns, false, false, false),
    KIND("falcon", falcon_patterns, false, false, true),
    KIND("gpt-2", gpt2_patterns, false, false, true),
    KIND("phi-2", gpt2_patterns, false, false, true),
    KIND("mpt", gpt2_patterns, false, false, true),
    KIND("olmo", gpt2_patterns, false, false, true),
    KIND("jais", gpt2_patterns, false, false, true),
    KIND("gigachat", gpt2_patterns, false, false, true),
    KIND("a.x-4.0", gpt2_patterns, false, false, true),
    KIND("mellum", gpt2_patterns, false, false, true),
    KIND("exaone4", gpt2_patterns, false, false, true),
    KIND("trillion", gpt2_patterns, false, false, false),
    KIND("granite-docling", gpt2_patterns, false, false, false),
    KIND("starcoder", starcoder_patterns, false, false, true),
    KIND("refact", starcoder_patterns, false, false, true),
    KIND("codeshell", starcoder_patterns, false, false, true),
    KIND("exaone", starcoder_patterns, false, false, true),
    KIND("minerva-7b", starcoder_patterns, false, false, true),
    KIND("mellum2", starcoder_patterns, false, false, true),
    KIND("command-r", starcoder_patterns, false, false, false),
    KIND("smollm", starcoder_patterns, false, false, false),
    KIND("qwen2", qwen2_patterns, false, false, false),
    KIND("deepseek-r1-qwen", qwen2_patterns, false, false, false),
    KIND("kormo", qwen2_patterns, false, false, false),
    KIND("f2llmv2", qwen2_patterns, false, false, false),
    KIND("hunyuan", qwen2_patterns, false, false, false),
    KIND("solar-open", qwen2_patterns, false, false, false),
    KIND("grok-2", qwen2_patterns, false, false, false),
    KIND("stablelm2", qwen2_patterns, false, false, true),
    KIND("megrez", qwen2_patterns, false, false, true),
    KIND("qwen35", qwen35_patterns, false, false, false),
    KIND("poro-chat", bloom_patterns, false, false, false),
    KIND("bloom", bloom_patterns, false, false, true),
    KIND("gpt3-finnish", bloom_patterns, false, false, true),
    KIND("viking", viking_patterns, false, false, false),
    KIND("tekken", tekken_patterns, true, true, false),
    KIND("gpt-4o", gpt4o_patterns, false, false, false),
    KIND("llama4", gpt4o_patterns, false, false, false),
    KIND("kanana2", gpt4o_patterns, false, false, false),
    KIND("talkie", gpt4o_patterns, false, false, false),
    KIND("minimax-m2", gpt4o_patterns, false, false, false),
    KIND("bailingmoe", bailingmoe_patterns, false, false, false),
    KIND("bailingmoe2", bailingmoe_patterns, false, false, false),
    KIND("llada-moe", bailingmoe_patterns, false, false, false),
    KIND("seed-coder", seed_coder_patterns, false, false, false),
};

const pretok_kind *pretok_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strlen(kinds[i].name) == len && memcmp(kinds[i].name, name, len) == 0) return &kinds[i];
    return NULL;
}

/* Copies pattern with \s and \S spelled as White_Space classes; inside a class, \s becomes its
 * ranges (no expression here puts \S inside a class). Caller frees. */
static char *rewrite_whitespace(const char *pattern) {
    size_t n = 0;
    for (const char *p = pattern; *p; p++)
        n += p[0] == '\\' && (p[1] == 's' || p[1] == 'S');
    char *out = malloc(strlen(pattern) + n * (sizeof WS + 4) + 1);
    if (!out) return NULL;
    char *o = out;
    bool in_class = false;
    for (const char *p = pattern; *p; p++) {
        if (p[0] == '\\' && p[1]) {
            if (p[1] == 's' || p[1] == 'S') {
                const char *open = !in_class ? (p[1] == 's' ? "[" : "[^") : "";
                o += strlen(strcpy(o, open));
                o += strlen(strcpy(o, WS));
                if (!in_class) *o++ = ']';
            } else {
                *o++ = p[0];
                *o++ = p[1];
            }
            p++;
            continue;
        }
        if (*p == '[' && !in_class)
            in_class = true;
        else if (*p == ']' && in_class)
            in_class = false;
        *o++ = *p;
    }
    *o = '\0';
    return out;
}

syn_status pretok_compile(const pretok_kind *kind, pretok_codes *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; kind->patterns[i]; i++) {
        if (i == PRETOK_MAX_PATTERNS) {
            pretok_free(out);
            return syn_fail(SYN_ERR_INTERNAL, "pre-tokenizer %s: too many expressions", kind->name);
        }
        char *pattern = rewrite_whitespace(kind->patterns[i]);
        if (!pattern) {
            pretok_free(out);
            return syn_fail(SYN_ERR_NO_MEMORY, "pre-tokenizer: out of memory");
        }
        int err;
        PCRE2_SIZE err_offset;
        pcre2_code *code =
            pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_offset, NULL);
        free(pattern);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            pretok_free(out);
            return syn_fail(SYN_ERR_INTERNAL, "pre-tokenizer %s, expression %zu, offset %zu: %s",
                            kind->name, i, (size_t)err_offset, (const char *)msg);
        }
        /* JIT is several times faster; without it (no JIT support in this PCRE2 build, or no
         * executable memory) pcre2_match runs the same pattern in the interpreter. */
        int jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        if (jit != 0)
            syn_log(SYN_LOG_DEBUG, "pre-tokenizer: PCRE2 JIT unavailable (%d), interpreting", jit);
        out->code[out->n++] = code;
    }
    return SYN_OK;
}

void pretok_free(pretok_codes *codes) {
    for (size_t i = 0; i < codes->n; i++)
        pcre2_code_free(codes->code[i]);
    codes->n = 0;
}

/* Splits piece text[0..len) by expression level, handing each match and each gap between
 * matches to the next level, and the pieces of the last level to fn. */
static syn_status split_level(const pretok_codes *codes, size_t level, pcre2_match_data *md,
                              const char *text, size_t len, pretok_word_fn fn, void *user) {
    if (level == codes->n) return fn(user, text, len);
    size_t pos = 0;
    while (pos < len) {
        int rc = pcre2_match(codes->code[level], (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, md,
                             NULL);
        size_t start = len, end = len;
        if (rc >= 0) { /* rc 0: the match data holds only the whole match, which is all we read */
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            start = ov[0];
            end = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return syn_fail(SYN_ERR_INTERNAL, "pre-tokenizer match at byte %zu: %s", pos,
                            (const char *)msg);
        }
        if (start > pos) {
            syn_status st = split_level(codes, level + 1, md, text + pos, start - pos, fn, user);
            if (st != SYN_OK) return st;
        }
        if (end <= start) { /* no expression of the table matches empty text; never loop on one */
            if (start == len) break;
            return syn_fail(SYN_ERR_INTERNAL, "pre-tokenizer: empty match at byte %zu", start);
        }
        syn_status st = split_level(codes, level + 1, md, text + start, end - start, fn, user);
        if (st != SYN_OK) return st;
        pos = end;
    }
    return SYN_OK;
}

syn_status pretok_split(const pretok_codes *codes, pcre2_match_data *md, const char *text,
                        size_t len, pretok_word_fn fn, void *user) {
    return split_level(codes, 0, md, text, len, fn, user);
}

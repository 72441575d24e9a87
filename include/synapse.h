/*
 * synapse.h: the public C API of Synapse, a CPU inference engine for Qwen2, Qwen3 and Llama 3 GGUF
 * models.
 *
 * Conventions
 *   - Every handle is opaque and comes in a new/free pair. Freeing NULL is a no-op.
 *   - Functions that can fail return syn_status: SYN_OK (0) or a negative error. After an error,
 *     syn_last_error() returns a one-line message naming the cause (the key, tensor, byte offset
 *     or argument at fault). The message is thread-local and valid until the calling thread's
 *     next call into the library.
 *   - Parameters structs are passed by pointer to const and start from *_default_params().
 *   - Library code never prints, exits or aborts. Diagnostics go to the log callback, if any.
 *   - Thread-safety: a syn_model is immutable after loading and may be shared by any number of
 *     threads and contexts. A syn_context and a syn_sampler belong to one thread at a time.
 *     Functions taking only a const syn_model / const syn_tokenizer are safe to call concurrently.
 */
#ifndef SYNAPSE_H
#define SYNAPSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MAJOR is the ABI version: libsynapse.so.MAJOR is the shared library's soname. */
#define SYN_VERSION_MAJOR 1
#define SYN_VERSION_MINOR 0
#define SYN_VERSION_PATCH 0

/* The library is built with hidden visibility: only declarations marked SYN_API are exported from
 * libsynapse.so. */
#if defined(__GNUC__)
#define SYN_API __attribute__((visibility("default")))
#else
#define SYN_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Status codes and errors
 * ------------------------------------------------------------------------------------------- */

typedef enum syn_status {
    SYN_OK = 0,
    SYN_ERR_INVALID_ARGUMENT = -1, /* a caller-supplied value is out of range or NULL */
    SYN_ERR_IO = -2,               /* the file cannot be opened, read or mapped */
    SYN_ERR_FORMAT = -3,           /* the file is malformed (bad GGUF, inconsistent model) */
    SYN_ERR_UNSUPPORTED = -4,      /* well-formed but not supported (architecture, type, ...) */
    SYN_ERR_NO_MEMORY = -5,        /* an allocation failed */
    SYN_ERR_CONTEXT_FULL = -6,     /* the tokens do not fit in the context */
    SYN_ERR_BUFFER_TOO_SMALL = -7, /* the output buffer is too small; the needed size is returned */
    SYN_ERR_UNAVAILABLE = -8,      /* the request needs something this CPU or build lacks */
    SYN_ERR_INTERNAL = -9,         /* a bug in Synapse */
    SYN_ERR_STATE = -10,           /* the call does not fit the object's state (a finished
                                    * request cancelled, a submission to an engine shutting down) */
    SYN_ERR_NOT_FOUND = -11        /* the asked-for item (a metadata key) does not exist */
} syn_status;

/* A static English name for a status ("ok", "format error", ...). Never NULL. */
SYN_API const char *syn_status_name(syn_status status);

/* The message of the calling thread's most recent error ("" when none). Owned by the library. */
SYN_API const char *syn_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------------------------- */

typedef enum syn_log_level { SYN_LOG_DEBUG = 0, SYN_LOG_INFO = 1, SYN_LOG_WARN = 2 } syn_log_level;

/* Called with one line of text (no trailing newline). May be called from any library thread. */
typedef void (*syn_log_fn)(syn_log_level level, const char *message, void *user_data);

/* Installs the process-wide log callback (NULL: silence, the default). Not thread-safe: call it
 * before loading models. */
SYN_API void syn_log_set(syn_log_fn fn, void *user_data);

/* ---------------------------------------------------------------------------------------------
 * Model
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_model syn_model;

typedef struct syn_model_params {
    bool prefetch; /* warm the weight pages in the background after loading (default true) */
    /* Map the weights in 2 MiB pages where the kernel allows (default true): one thread streams
     * them about a third faster. If the file's page cache holds 4 KiB pages (a file just written,
     * or read with read()), that cache is dropped once and the file read back; later loads map it
     * directly. false: 4 KiB pages, the page cache left alone. README "Huge pages" has details. */
    bool huge_pages;
    /* Copy the quantized matrices, in the background after loading, into the interleaved
     * layouts the CPU's fastest kernels stream (default true; only where that tier has such
     * kernels: x86 AVX-512 VNNI). Until a matrix's copy is ready its rows are read as they are,
     * with the same results bit for bit; once it is, the file pages it replaces are released, so
     * the resident memory stays near the file's size. false: the rows only. README "Interleaved
     * weights". */
    bool interleave;
} syn_model_params;

SYN_API syn_model_params syn_model_default_params(void);

/* Memory-maps and validates a GGUF file. On success *out owns the mapping; free it with
 * syn_model_free(). path must name a regular file: a FIFO, a directory, a device or a socket is
 * refused at once (SYN_ERR_IO, saying what it is), never opened to wait on. Errors: SYN_ERR_IO,
 * SYN_ERR_FORMAT, SYN_ERR_UNSUPPORTED, SYN_ERR_NO_MEMORY.
 *
 * The weights are read from the mapping, not copied, for as long as the model lives. Truncating
 * or overwriting the file in place meanwhile (cp over it, a write into it, a download resumed
 * onto it) makes the process receive SIGBUS, or compute with the new bytes, when it next reads
 * the changed pages; the library cannot catch that signal. To replace a model that may be
 * loaded, write the new file beside it and rename it over the old one (mv on one file system):
 * the loaded model keeps the old file's pages until syn_model_free. */
SYN_API syn_status syn_model_load(const char *path, const syn_model_params *params,
                                  syn_model **out);
SYN_API void syn_model_free(syn_model *model);

/* Bytes of the model's file mapping held in 2 MiB pages right now (from /proc/self/smaps; 0 where
 * that cannot be read or for none). Pages map as the weights are first read (prefetch or use). */
SYN_API uint64_t syn_model_huge_page_bytes(const syn_model *model);

typedef struct syn_model_info {
    const char *architecture; /* "qwen2"; owned by the model */
    const char *name;         /* general.name or "" ; owned by the model */
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_ff;
    float rope_freq_base;
    float rms_norm_eps;
    bool tied_output;      /* the output projection is the token embedding */
    uint64_t n_params;     /* number of weights */
    uint64_t weight_bytes; /* bytes of tensor data in the file */
    /* Sliding-window attention (gemma3): layer il attends to the last swa_window positions only
     * when il % swa_pattern < swa_pattern - 1, with RoPE base rope_freq_base_swa; swa_window 0:
     * every layer attends to the whole context. */
    int32_t swa_window;
    int32_t swa_pattern;
    float rope_freq_base_swa;
    float rope_freq_scale; /* linear RoPE scaling of the (global) layers: 1 / rope.scaling.factor */
    /* ARCH.pooling_type as stored (llama.cpp's numbers: 0 none, 1 mean, 2 cls, 3 last, 4 rank);
     * -1 when the file has no such key. Embedding models carry it (Qwen3-Embedding: 3). */
    int32_t pooling_type;
} syn_model_info;

/* Fills *info. The pointers inside live as long as the model. */
SYN_API void syn_model_get_info(const syn_model *model, syn_model_info *info);

/* Writes the GGUF metadata value of key as text into buf (cap bytes, NUL-terminated; arrays are
 * summarised as "[type x count]"); *n_bytes receives the full text's length without the NUL.
 * buf may be NULL with cap 0 to ask for the length only. Errors: SYN_ERR_NOT_FOUND (no such key),
 * SYN_ERR_BUFFER_TOO_SMALL (buf then holds the text cut to cap - 1 bytes),
 * SYN_ERR_INVALID_ARGUMENT. */
SYN_API syn_status syn_model_meta_str(const syn_model *model, const char *key, char *buf,
                                      size_t cap, size_t *n_bytes);

/* ---------------------------------------------------------------------------------------------
 * Tokenizer (owned by the model; immutable, thread-safe)
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_tokenizer syn_tokenizer;

SYN_API const syn_tokenizer *syn_model_tokenizer(const syn_model *model);

/* Loads the tokenizer of a GGUF file alone, from its tokenizer.* keys, whatever its
 * general.architecture and whether or not it has tensors (a vocabulary-only file, as llama.cpp's
 * vocab_only): for tokenizing without a model. Its vocabulary is token_embd.weight's row count
 * where the file has that tensor, else the token count. Free it with syn_tokenizer_free. Errors:
 * those of syn_model_load for the file and the tokenizer keys. */
SYN_API syn_status syn_tokenizer_load(const char *path, syn_tokenizer **out);
/* Frees a tokenizer from syn_tokenizer_load; a model's tokenizer (syn_model_tokenizer) is left
 * alone: it goes with its model. */
SYN_API void syn_tokenizer_free(syn_tokenizer *tok);

SYN_API int32_t syn_tokenizer_n_vocab(const syn_tokenizer *tok);
/* The beginning- and end-of-sequence ids, -1 where the file names none. */
SYN_API int32_t syn_tokenizer_bos(const syn_tokenizer *tok);
SYN_API int32_t syn_tokenizer_eos(const syn_tokenizer *tok);
/* Tokens with a role in a prompt format, as llama.cpp's llama_vocab_* accessors name them. */
typedef enum syn_token_role {
    SYN_TOKEN_BOS, /* tokenizer.ggml.bos_token_id (SentencePiece default: 1) */
    SYN_TOKEN_EOS, /* tokenizer.ggml.eos_token_id (SentencePiece default: 2) */
    SYN_TOKEN_EOT, /* end of turn: tokenizer.ggml.eot_token_id, else <|eot_id|>, <|im_end|>... */
    SYN_TOKEN_EOM, /* end of message: tokenizer.ggml.eom_token_id, else <|eom_id|> */
    SYN_TOKEN_PAD, /* tokenizer.ggml.padding_token_id */
    SYN_TOKEN_FIM_PRE, /* fill in the middle: fim_pre_token_id, else <|fim_prefix|>, <PRE>, ... */
    SYN_TOKEN_FIM_SUF, /* suffix: fim_suf_token_id, else <|fim_suffix|>, <SUF>, ... */
    SYN_TOKEN_FIM_MID, /* middle: fim_mid_token_id, else <|fim_middle|>, <MID>, ... */
    SYN_TOKEN_FIM_PAD, /* fim_pad_token_id, else <|fim_pad|>, ... */
    SYN_TOKEN_FIM_REP, /* repository: fim_rep_token_id, else <|repo_name|>, <|fim_repo|>, ... */
    SYN_TOKEN_FIM_SEP, /* file separator: fim_sep_token_id, else <|file_sep|> */
    SYN_TOKEN_ROLE_COUNT
} syn_token_role;

/* The id of the token with role, -1 where the vocabulary has none (or for an unknown role). The
 * tokenizer.ggml.*_token_id key decides where the file has it (an id past the vocabulary is
 * refused at load); else, as llama.cpp, a token whose text is one of the role's known texts
 * (the first of its list that the vocabulary has). */
SYN_API int32_t syn_tokenizer_role(const syn_tokenizer *tok, syn_token_role role);
/* The role's name as inspect shows it: "bos", "eos", "eot", "eom", "pad", "fim_pre", "fim_suf",
 * "fim_mid", "fim_pad", "fim_rep", "fim_sep"; NULL for an unknown role. */
SYN_API const char *syn_token_role_name(syn_token_role role);

/* Whether a prompt made from text starts with BOS / ends with EOS (syn_tokenize's add_special):
 * tokenizer.ggml.add_bos_token / add_eos_token, or where a key is absent the pre-tokenizer's
 * default (as llama.cpp's: BOS for llama-bpe, none for qwen2; never EOS). */
SYN_API bool syn_tokenizer_adds_bos(const syn_tokenizer *tok);
SYN_API bool syn_tokenizer_adds_eos(const syn_tokenizer *tok);
/* Whether id ends generation (EOS, <|im_end|>, <|eot_id|>, ...). */
SYN_API bool syn_tokenizer_is_eog(const syn_tokenizer *tok, int32_t id);
/* The end-of-generation ids (those syn_tokenizer_is_eog accepts), ascending: returns their count
 * and points *ids at them (the tokenizer's own array, valid while its model is loaded). */
SYN_API int32_t syn_tokenizer_eog_ids(const syn_tokenizer *tok, const int32_t **ids);
/* tokenizer.chat_template (NUL-terminated, owned by the tokenizer), or NULL when the file has
 * none. */
SYN_API const char *syn_tokenizer_chat_template(const syn_tokenizer *tok);

/* Encodes len bytes of UTF-8 text. Special-token text is found in the raw text first: with
 * parse_special every special token (such as "<|im_start|>") becomes its id; without it only the
 * user-defined ones (such as Qwen2.5's "<tool_call>") do, and the rest is split as plain text.
 * Each text between special tokens is encoded on its own, not normalised (as llama.cpp; byte-level
 * BPE gives the text's exact bytes back), and for SentencePiece with a space in front of it when
 * it starts the text or follows a special token (tokenizer.ggml.add_space_prefix, default true). As
 * in llama.cpp, whitespace after a Phi-3 special token (other than <s>, <unk> and
 * <|endoftext|>) is dropped. With add_special the
 * tokenizer's prompt policy applies (as llama.h's add_special): a BOS first when
 * syn_tokenizer_adds_bos (one only: when the text's own first token is that BOS, as a chat
 * template writes it, it is not doubled), an EOS last when syn_tokenizer_adds_eos (unless the
 * text already ends with it). Writes at most cap ids; *n_ids receives the full count. Returns
 * SYN_ERR_BUFFER_TOO_SMALL (with *n_ids set) when cap is too small, SYN_ERR_INVALID_ARGUMENT for
 * invalid UTF-8. */
SYN_API syn_status syn_tokenize(const syn_tokenizer *tok, const char *text, size_t len,
                                bool add_special, bool parse_special, int32_t *ids, size_t cap,
                                size_t *n_ids);

/* One more file given as context to a fill-in-the-middle prompt. */
typedef struct syn_infill_chunk {
    const char *filename; /* NULL: "tmp", as llama-server names an unnamed chunk */
    const char *text;     /* NULL: empty */
} syn_infill_chunk;

/* A fill-in-the-middle request: the model writes what goes between prefix and suffix. */
typedef struct syn_infill {
    const char *prefix; /* the text before the gap (NULL: empty) */
    const char *suffix; /* the text after it (NULL: empty) */
    const char *prompt; /* text the middle starts with, special tokens parsed (NULL: none) */
    const syn_infill_chunk *extra; /* [n_extra] other files of the project, before the prefix */
    size_t n_extra;
    /* A bound on the prompt's length: the extra context's first tokens are dropped to stay
     * within it (as llama-server keeps the end of its extra context); the rest is never cut.
     * 0: no bound. */
    size_t max_tokens;
} syn_infill;

/* The prompt of a fill-in-the-middle request in llama-server's layout (its /infill, the
 * Qwen2.5-Coder repository format):
 *   [FIM_REP] "myproject\n"                    where the vocabulary has FIM_REP
 *   per chunk: [FIM_SEP] filename "\n" text    ("\n\n--- snippet ---\n\n" text without FIM_SEP)
 *   [FIM_SEP] "filename\n"                     where the vocabulary has FIM_SEP
 *   [BOS]                                      when syn_tokenizer_adds_bos
 *   [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]
 * Every text is tokenized on its own without special-token parsing, except the prompt. Only the
 * lines before [BOS] are cut, to max_tokens: a longer prompt is the caller's to refuse. Writes
 * at most cap ids; *n_ids
 * receives the full count. Errors: SYN_ERR_UNSUPPORTED when the vocabulary lacks FIM_PRE, FIM_SUF
 * or FIM_MID (syn_tokenizer_role); SYN_ERR_BUFFER_TOO_SMALL (with *n_ids set);
 * SYN_ERR_INVALID_ARGUMENT for invalid UTF-8 or NULL arguments; SYN_ERR_NO_MEMORY. */
SYN_API syn_status syn_tokenize_infill(const syn_tokenizer *tok, const syn_infill *infill,
                                       int32_t *ids, size_t cap, size_t *n_ids);

/* Writes the bytes of token id (byte-level BPE decoded; may be part of a UTF-8 character) into buf.
 * *n_bytes receives the full length. Errors: SYN_ERR_INVALID_ARGUMENT, SYN_ERR_BUFFER_TOO_SMALL. */
SYN_API syn_status syn_tokenizer_token_bytes(const syn_tokenizer *tok, int32_t id, char *buf,
                                             size_t cap, size_t *n_bytes);

/* Decodes n ids into buf (not NUL-terminated); *n_bytes receives the full length. As llama.cpp's
 * llama_detokenize: for SentencePiece with a space prefix the first token's leading space is
 * dropped, and for the pre-tokenizers that clean up spaces (gpt-2, llama-bpe, falcon, ...) the
 * space before ? ! . , and before 's 'm 're 've goes. */
SYN_API syn_status syn_detokenize(const syn_tokenizer *tok, const int32_t *ids, size_t n, char *buf,
                                  size_t cap, size_t *n_bytes);

/* Streaming decoder: push token ids one at a time and receive only complete UTF-8 characters;
 * an incomplete sequence is held back until the next token completes it. */
typedef struct syn_detok_stream syn_detok_stream;

SYN_API syn_status syn_detok_stream_new(const syn_tokenizer *tok, syn_detok_stream **out);
/* Appends the text now complete to buf (NUL-terminated); *n_bytes receives its length.
 * Held-back invalid bytes come out as U+FFFD, so buf needs at most 3 * (longest token + 3) + 1
 * bytes: 1024 is always enough for Qwen2. SYN_ERR_BUFFER_TOO_SMALL changes nothing (retry). */
SYN_API syn_status syn_detok_stream_push(syn_detok_stream *s, int32_t id, char *buf, size_t cap,
                                         size_t *n_bytes);
/* Emits whatever is held back (an invalid tail comes out as U+FFFD). */
SYN_API syn_status syn_detok_stream_flush(syn_detok_stream *s, char *buf, size_t cap,
                                          size_t *n_bytes);
SYN_API void syn_detok_stream_free(syn_detok_stream *s);

/* ---------------------------------------------------------------------------------------------
 * Chat templates
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ...: the template decides */
    const char *content; /* UTF-8 */
} syn_chat_message;

/* Chat templates are Jinja (tokenizer.chat_template), rendered as Python's Jinja2 renders them
 * under Hugging Face's apply_chat_template: the variables messages, add_generation_prompt, tools
 * (when given), bos_token and eos_token (the tokenizer's BOS and EOS texts, "" where it has
 * none), raise_exception(message) and strftime_now(format). The text is a prompt's text:
 * tokenize it with add_special, which adds the BOS the tokenizer asks for exactly once (a
 * template that writes it itself, as Llama 3's does, is not doubled).
 *
 * Errors of every render: SYN_ERR_UNSUPPORTED (the model has no template and none is given; a
 * bound of the template engine: 1 MiB of source, nesting 256, 1,000,000 loop passes, 5,000,000
 * evaluation steps, macro recursion 64, 64 MiB of memory, 4 MiB of output), SYN_ERR_FORMAT (a
 * template syntax error, with its line), SYN_ERR_INVALID_ARGUMENT ("template: MESSAGE" when the
 * template itself refuses the conversation with raise_exception(MESSAGE); a type error in the
 * template, with its line; bad JSON in the parameters). */

/* Renders messages with template_source (NULL: the model's own template), ending with an open
 * assistant turn when add_assistant_prompt. Output is UTF-8 in buf (NUL-terminated); *n_bytes
 * receives the full length without the NUL (SYN_ERR_BUFFER_TOO_SMALL when cap is short). */
SYN_API syn_status syn_chat_format(const syn_model *model, const char *template_source,
                                   const syn_chat_message *messages, size_t n_messages,
                                   bool add_assistant_prompt, char *buf, size_t cap,
                                   size_t *n_bytes);

/* The general render: the conversation as JSON, as OpenAI-style clients send it. */
typedef struct syn_chat_params {
    const char *template_source; /* NULL: the model's tokenizer.chat_template */
    /* A JSON array of message objects: role, content, and whatever else the template reads
     * (tool_calls with function.arguments as objects, tool_call_id, reasoning_content, ...). */
    const char *messages_json;
    const char *tools_json;     /* NULL, or a JSON array of tools ({"type": "function", ...}) */
    const char *variables_json; /* NULL, or a JSON object of more variables for the template
                                 * (chat_template_kwargs such as {"enable_thinking": false});
                                 * they do not replace messages, tools or add_generation_prompt */
    bool add_generation_prompt;
    int64_t now_unix; /* the instant strftime_now formats (seconds, UTC); < 0: now, local time */
} syn_chat_params;

SYN_API syn_chat_params syn_chat_default_params(void);

/* Renders params into *text (malloc'd and NUL-terminated: the caller free()s it), *n_bytes
 * bytes long. Thread-safe. */
SYN_API syn_status syn_chat_render(const syn_model *model, const syn_chat_params *params,
                                   char **text, size_t *n_bytes);

/* Renders any Jinja template (n bytes of source) with the variables of the JSON object
 * variables_json (NULL: none), as syn_chat_render does; *text as there. */
SYN_API syn_status syn_template_render_json(const char *source, size_t n,
                                            const char *variables_json, int64_t now_unix,
                                            char **text, size_t *n_bytes);

/* ---------------------------------------------------------------------------------------------
 * Contexts: one sequence's KV cache and the backend that computes it
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_context syn_context;

typedef enum syn_backend {
    SYN_BACKEND_REFERENCE = 0, /* scalar float32: the oracle */
    SYN_BACKEND_OPTIMIZED = 1  /* Q8_0 activations, SIMD kernels, thread pool */
} syn_backend;

/* The optimized backend's kernel tier (instruction set). Asking for a tier this CPU or build
 * lacks makes syn_context_new fail with SYN_ERR_UNAVAILABLE; there is never a silent fallback.
 * Every tier computes bitwise-identical logits. */
typedef enum syn_isa_tier {
    SYN_TIER_AUTO = 0,        /* the fastest tier available (default) */
    SYN_TIER_SCALAR = 1,      /* portable C */
    SYN_TIER_AVX2 = 2,        /* x86-64 AVX2 + FMA + F16C */
    SYN_TIER_AVX512_VNNI = 3, /* x86-64 AVX-512 F/BW/VL + VNNI */
    SYN_TIER_AVX_VNNI = 4,    /* x86-64 AVX-VNNI */
    SYN_TIER_NEON_DOT = 5,    /* aarch64 dot product */
    SYN_TIER_I8MM = 6         /* aarch64 dot product + int8 matrix multiply */
} syn_isa_tier;

/* "auto", "scalar", "avx2", "avx512-vnni", "avx-vnni", "neon-dot", "i8mm" ("?" when invalid). */
SYN_API const char *syn_isa_tier_name(syn_isa_tier tier);

/* Parses one of the names above. SYN_ERR_INVALID_ARGUMENT (naming the text) when unknown. Does
 * not check that this CPU has the tier: syn_context_new does. */
SYN_API syn_status syn_isa_tier_parse(const char *name, syn_isa_tier *out);

/* Element type of the KV cache. */
typedef enum syn_kv_type {
    SYN_KV_F32 = 0, /* float32 (default): agrees with the float32 oracles */
    SYN_KV_F16 = 1  /* IEEE half: half the memory, as llama.cpp keeps it (optimized backend only) */
} syn_kv_type;

typedef struct syn_context_params {
    uint32_t n_ctx;      /* tokens the KV cache holds; default 4096; 0: the model's training
                          * context */
    int32_t n_threads;   /* worker threads; 0: one per online CPU */
    syn_backend backend; /* default SYN_BACKEND_OPTIMIZED */
    syn_isa_tier isa;    /* kernel tier of the optimized backend; default SYN_TIER_AUTO */
    syn_kv_type kv_type; /* default SYN_KV_F32; the reference backend supports only that */
} syn_context_params;

SYN_API syn_context_params syn_context_default_params(void);

/* Creates a context whose KV cache (K and V for n_ctx positions of every layer) grows on demand
 * as tokens arrive. The model must outlive the context. Errors: SYN_ERR_INVALID_ARGUMENT (n_ctx
 * above the model's training context, an unknown backend, tier or kv_type), SYN_ERR_NO_MEMORY,
 * SYN_ERR_UNAVAILABLE (the isa tier is not available on this CPU or build),
 * SYN_ERR_UNSUPPORTED (the model or kv_type is not supported by the backend). */
SYN_API syn_status syn_context_new(const syn_model *model, const syn_context_params *params,
                                   syn_context **out);
SYN_API void syn_context_free(syn_context *ctx);

/* Runs n_tokens through the model at positions n_past .. n_past + n_tokens - 1, appending them to
 * the KV cache. all_logits, if not NULL, receives [n_tokens][n_vocab] floats; the last token's
 * logits are always available afterwards from syn_context_logits(). Errors:
 * SYN_ERR_CONTEXT_FULL (nothing is appended), SYN_ERR_INVALID_ARGUMENT (token id out of range). */
SYN_API syn_status syn_context_decode(syn_context *ctx, const int32_t *tokens, size_t n_tokens,
                                      float *all_logits);

/* The logits ([n_vocab]) after the last decoded token, or NULL before any decode. Owned by ctx. */
SYN_API const float *syn_context_logits(const syn_context *ctx);

/* The kernel tier ctx runs, resolved from SYN_TIER_AUTO ("avx512-vnni", ...; "none" for the
 * reference backend, which uses no kernels). A static string; never NULL. */
SYN_API const char *syn_context_isa_name(const syn_context *ctx);

SYN_API uint32_t syn_context_n_past(const syn_context *ctx);
SYN_API uint32_t syn_context_n_ctx(const syn_context *ctx);

/* Forgets cached tokens from position n_keep on (0: clear). n_keep must be <= n_past. A model
 * with sliding-window layers (gemma3) keeps only the window's last positions in those layers: when
 * they no longer hold what position n_keep attends to, every token is forgotten (n_past becomes 0;
 * callers resuming at n_keep read syn_context_n_past first). A model with recurrent layers
 * (qwen35) keeps no earlier state at all: any n_keep below n_past forgets every token. */
SYN_API syn_status syn_context_truncate(syn_context *ctx, uint32_t n_keep);

/* ---------------------------------------------------------------------------------------------
 * Sampling
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_sampler syn_sampler;

typedef struct syn_sampler_params {
    float temperature;     /* <= 0: greedy (first index of the maximum). Default 0.8 */
    int32_t top_k;         /* keep the k most likely; <= 0: off. Default 40 */
    float top_p;           /* nucleus mass in (0, 1]; 1: off. Default 0.95 */
    float min_p;           /* drop tokens below min_p * p(max); 0: off. Default 0.05 */
    float repeat_penalty;  /* >1 discourages recent tokens; 1: off. Default 1.0 */
    int32_t repeat_last_n; /* how many recent tokens the penalty looks at. Default 64 */
    /* OpenAI's penalties, in [-2, 2] (0: off, the default): before top-k, after the repetition
     * penalty, every token's logit is lowered by frequency_penalty * count + presence_penalty *
     * (count > 0), count being how often syn_sampler_accept recorded it, i.e. over the tokens
     * this sequence generated (never the prompt). Negative values encourage repetition. */
    float frequency_penalty;
    float presence_penalty;
    uint64_t seed; /* the same seed gives the same choices. Default 0 */
} syn_sampler_params;

SYN_API syn_sampler_params syn_sampler_default_params(void);

/* Errors: SYN_ERR_INVALID_ARGUMENT for an out-of-range or NaN parameter (named in the message);
 * the sampler is then not created (*out NULL). */
SYN_API syn_status syn_sampler_new(const syn_sampler_params *params, syn_sampler **out);
SYN_API void syn_sampler_free(syn_sampler *s);

/* Records token as generated by this sequence: call it once for every sampled token the sequence
 * keeps, never for prompt tokens. The frequency and presence penalties count what was recorded;
 * with both 0 nothing is kept. The sampler owns the record (4 bytes a token, freed with it).
 * Errors: SYN_ERR_INVALID_ARGUMENT (s NULL, token < 0; ids >= n_vocab are ignored when
 * sampling), SYN_ERR_NO_MEMORY (nothing recorded). */
SYN_API syn_status syn_sampler_accept(syn_sampler *s, int32_t token);

/* Picks the next token from logits[n_vocab] (not modified). history: the tokens so far (for the
 * repetition penalty; the frequency and presence penalties read syn_sampler_accept's record). A
 * logit of -inf marks a token that cannot be drawn. Errors: SYN_ERR_INVALID_ARGUMENT for a NULL
 * argument or n_vocab <= 0, and for a NaN anywhere in the logits, in every mode (a numerical fault
 * upstream: the message names the first NaN's index); *token is then unchanged. */
SYN_API syn_status syn_sampler_sample(syn_sampler *s, const float *logits, int32_t n_vocab,
                                      const int32_t *history, size_t n_history, int32_t *token);

/* syn_sampler_sample as if the logits of banned[0..n_banned) were -inf, a NaN among them included
 * (e.g. the end-of-generation tokens, for --ignore-eos); logits are still not modified. A greedy
 * sampler reads the logits as they are and masks only when its choice is banned (the masked
 * choice is then the same: masking only lowers banned tokens); otherwise the sampler masks a copy
 * it keeps ([n_vocab] floats, allocated on first use, freed with the sampler).
 * Errors: those of syn_sampler_sample; SYN_ERR_INVALID_ARGUMENT for banned NULL with n_banned > 0
 * or a banned id outside [0, n_vocab); SYN_ERR_NO_MEMORY. */
SYN_API syn_status syn_sampler_sample_banned(syn_sampler *s, const float *logits, int32_t n_vocab,
                                             const int32_t *history, size_t n_history,
                                             const int32_t *banned, size_t n_banned,
                                             int32_t *token);

/* ---------------------------------------------------------------------------------------------
 * Engine: many concurrent requests over one model
 *
 * An engine serves any number of independent generation requests with one loaded model. Up to
 * n_parallel of them are active at once, each in a KV-cache slot whose memory grows in blocks of
 * 16 positions from a pool bounded by kv_budget_mib; the others wait in a FIFO queue. Every
 * engine step is one batched forward pass: one token of every decoding request first, then prompt
 * tokens of prefilling requests in arrival order up to max_step_tokens (a long prompt is split
 * across steps, so decoding requests advance exactly one token per step while it is read).
 * Finished sequences leave their full KV blocks in a prefix cache: a later prompt that starts with
 * the same tokens (a chat's previous turn, a shared system prompt) reuses them instead of
 * recomputing them; least-recently-used cached blocks are evicted when the budget needs room.
 *
 * KV memory on demand: a request is admitted once blocks for its prompt and first generated token
 * can be set aside; later blocks are taken as it grows. When the pool runs dry, the most recently
 * submitted active request is preempted: its blocks are released (its full blocks stay in the
 * prefix cache while they last), it goes back to the front of the queue, and when readmitted its
 * prompt and the tokens it had generated are recomputed. Its sampler and streamed text continue
 * where they were, so its tokens are bitwise the same as without preemption. A request alone in an
 * engine whose whole budget it fills finishes with SYN_FINISH_LENGTH.
 *
 * Determinism: a request's tokens and logits are bitwise the same whether it runs alone (or
 * through a syn_context with the same isa and kv_type) or among any other requests, in any
 * arrival order, with any thread count, step capacity, or prefix reuse.
 *
 * Threading model:
 *   - syn_engine_new starts one scheduler thread that owns the KV cache and runs the model (with
 *     n_threads - 1 more workers during a step). Nothing else ever computes.
 *   - syn_engine_submit, syn_request_cancel, syn_request_wait, syn_request_is_done,
 *     syn_request_free and syn_engine_get_stats may be called from any thread at any time, also
 *     from inside a callback.
 *   - Callbacks (on_token) run on the scheduler thread, between steps: a slow callback delays
 *     every request. They must not call syn_request_wait or syn_engine_free.
 *   - syn_engine_free cancels what is unfinished, joins the scheduler and frees the engine;
 *     request handles stay valid (finished) until syn_request_free.
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_engine syn_engine;
typedef struct syn_request syn_request;

/* Compute threads that several engines share (a server with several models): their steps take
 * turns, job by job, on the same threads, instead of each engine's own threads competing for the
 * cores. An engine's scheduler thread joins its own jobs as one of the n_threads. */
typedef struct syn_compute_pool syn_compute_pool;

#define SYN_MAX_THREADS 256 /* most compute threads of a context, an engine or a pool */

/* n_threads: 1..SYN_MAX_THREADS, or 0 for one per online CPU. Errors: SYN_ERR_INVALID_ARGUMENT,
 * SYN_ERR_NO_MEMORY, SYN_ERR_INTERNAL (thread creation). */
SYN_API syn_status syn_compute_pool_new(int32_t n_threads, syn_compute_pool **out);
/* Free it after every engine using it. NULL is a no-op. */
SYN_API void syn_compute_pool_free(syn_compute_pool *pool);
SYN_API int32_t syn_compute_pool_n_threads(const syn_compute_pool *pool); /* 0 for NULL */

#define SYN_ENGINE_MAX_PARALLEL 256 /* most slots an engine may have */
#define SYN_MAX_STOP_STRINGS 16
#define SYN_MAX_STOP_BYTES 1024
#define SYN_ENGINE_MAX_STEP_TOKENS 8192

typedef struct syn_engine_params {
    int32_t n_threads;   /* worker threads counting the scheduler; 0: one per CPU. Default 0 */
    syn_isa_tier isa;    /* kernel tier (optimized backend); default SYN_TIER_AUTO */
    syn_kv_type kv_type; /* default SYN_KV_F32 */
    int32_t n_parallel;  /* slots: requests active at once, 1..SYN_ENGINE_MAX_PARALLEL. Default 4 */
    uint32_t n_ctx;      /* most positions one request may use (prompt + generated);
                          * 0: the model's training context. Default 0 */
    uint32_t kv_budget_mib; /* KV memory of all slots and the prefix cache, >= 1: a bound, only
                             * the blocks in use take memory. Default 1024 */
    int32_t
        max_step_tokens; /* tokens per step, n_parallel..SYN_ENGINE_MAX_STEP_TOKENS. Default 512 */
    bool prefix_cache;   /* reuse cached KV blocks of earlier prompts (gemma3, qwen35: up to the
                          * last matched block carrying a snapshot of the sequence's own memory,
                          * syn_engine_stats.kv_snapshots). Default true */
    syn_compute_pool *pool; /* NULL (default): the engine's own n_threads threads; else these
                             * shared threads (n_threads must then be 0 or the pool's count) */
} syn_engine_params;

SYN_API syn_engine_params syn_engine_default_params(void);

/* Creates an engine over model (which must outlive it) and starts its scheduler thread. Errors:
 * SYN_ERR_INVALID_ARGUMENT (n_parallel, n_ctx, kv_budget_mib, max_step_tokens, n_threads, isa or
 * kv_type out of range; the message names the field and its limits), SYN_ERR_UNAVAILABLE (isa),
 * SYN_ERR_UNSUPPORTED (model), SYN_ERR_NO_MEMORY, SYN_ERR_INTERNAL (thread creation). */
SYN_API syn_status syn_engine_new(const syn_model *model, const syn_engine_params *params,
                                  syn_engine **out);

/* Cancels queued and active requests (their finish reason becomes SYN_FINISH_CANCELLED), joins
 * the scheduler and frees the engine. Request handles remain valid until syn_request_free. */
SYN_API void syn_engine_free(syn_engine *engine);

typedef enum syn_finish_reason {
    SYN_FINISH_NONE = 0,   /* not finished yet */
    SYN_FINISH_EOG = 1,    /* an end-of-generation token was sampled (not part of the output) */
    SYN_FINISH_STOP = 2,   /* a stop token was sampled (not part of the output), or the text
                            * reached a stop string (the token that completed it is) */
    SYN_FINISH_LENGTH = 3, /* max_tokens were generated, or the context or the KV budget is full */
    SYN_FINISH_CANCELLED = 4, /* syn_request_cancel, on_token returned false, or engine freed */
    SYN_FINISH_ERROR = 5      /* a step or the sampling failed: status and error say why */
} syn_finish_reason;

/* "none", "eog", "stop", "length", "cancelled", "error" ("?" when invalid). */
SYN_API const char *syn_finish_reason_name(syn_finish_reason reason);

/* One generated token, passed to on_token. Pointers are valid during the call only. */
typedef struct syn_token_event {
    int32_t token;     /* the token id; -1 for the final event */
    const char *piece; /* UTF-8 text completed by this token (NUL-terminated, may be ""): text
                        * that could still turn out to be a stop string is held back */
    size_t piece_len;
    uint32_t index;      /* 0-based index of the token among the request's generated tokens */
    uint64_t step;       /* the engine step (syn_engine_stats.n_steps count) that produced it */
    const float *logits; /* [n_vocab] the logits it was sampled from (NULL for token -1) */
    int32_t n_vocab;
    syn_finish_reason finish; /* SYN_FINISH_NONE, except in the final event: how it finished */
} syn_token_event;

/* Called on the scheduler thread for every generated token, in order, then once more with the
 * final event (token -1, the text held back until then, and the finish reason) when the request
 * finishes: every request that reached a slot gets it, however it finished; one cancelled while
 * queued does not. Return false to stop the request (it finishes as SYN_FINISH_CANCELLED). */
typedef bool (*syn_token_fn)(const syn_token_event *event, void *user_data);

/* A change to one token's logit before sampling: bias is added (OpenAI's logit_bias, usually in
 * -100..100); -INFINITY bans the token. */
typedef struct syn_logit_bias {
    int32_t token;
    float bias;
} syn_logit_bias;

/* Pooling of an embedding request's per-token hidden states ("Embeddings" below); the numbers
 * are llama.cpp's LLAMA_POOLING_TYPE_*. */
typedef enum syn_pooling {
    /* the model's ARCH.pooling_type; a file without the key: SYN_POOLING_LAST (a causal LM's last
     * token is the only one that has seen the whole input; llama.cpp would take "none" there and
     * its OpenAI endpoint refuses that). A file that says none (0) or rank (4) is
     * SYN_ERR_UNSUPPORTED: those give no one vector per input */
    SYN_POOLING_MODEL = -1,
    SYN_POOLING_MEAN = 1, /* the average over the tokens */
    SYN_POOLING_CLS = 2,  /* the first token's (a decoder LM's BOS: the same for every input) */
    SYN_POOLING_LAST = 3  /* the last token's */
} syn_pooling;

/* The prompt is exactly one of: prompt_tokens (taken as given: nothing is added), prompt_text
 * (tokenized with special tokens parsed and the tokenizer's prompt policy, syn_tokenize's
 * add_special) or a conversation: messages, or messages_json with tools_json and
 * chat_variables_json (rendered by syn_chat_render with chat_template, NULL for the model's own,
 * and an open assistant turn), then tokenized as prompt_text is. */
typedef struct syn_request_params {
    const int32_t *prompt_tokens; /* [n_prompt_tokens] */
    size_t n_prompt_tokens;
    const char *prompt_text;          /* NUL-terminated UTF-8 */
    const syn_chat_message *messages; /* [n_messages], n_messages >= 1 */
    size_t n_messages;
    const char *messages_json;       /* a JSON array of messages (see syn_chat_params) */
    const char *tools_json;          /* for messages_json: NULL or a JSON array of tools */
    const char *chat_variables_json; /* for messages_json: NULL or a JSON object */
    const char *chat_template;       /* Jinja source; NULL: the model's tokenizer.chat_template */
    syn_sampler_params sampling;     /* the request's own sampler and seed; the engine records
                                      * each token it samples (syn_sampler_accept), so the
                                      * frequency and presence penalties count its output */
    int32_t max_tokens; /* tokens to generate, >= 1; prompt + max_tokens <= n_ctx. 0: until the
                         * context is full (or, alone, the KV budget). Default 128 */
    bool ignore_eos;    /* never stop at end-of-generation (such tokens are masked out) */
    const int32_t *stop_tokens; /* [n_stop_tokens] extra ids that end generation */
    size_t n_stop_tokens;
    /* [n_stop_strings] non-empty UTF-8 texts that end generation when the output contains one,
     * also across token boundaries (at most SYN_MAX_STOP_STRINGS of at most SYN_MAX_STOP_BYTES
     * bytes). The streamed text ends right before the match and never carries any part of it:
     * text that could be the start of a match is held back until it cannot. */
    const char *const *stop_strings;
    size_t n_stop_strings;
    /* NULL, or a GBNF grammar (llama.cpp's format: `root ::= ...`, rule references, "literals",
     * [classes], [^negated], ., ( ), * + ? {m,n}, # comments) the output must follow: at each
     * step the tokens whose bytes cannot continue it are masked out before sampling, and
     * end-of-generation is allowed only where the grammar can end; control and user-defined
     * tokens (<|im_start|>, <tool_call>) only where the grammar spells their text out literally,
     * never through a [class] or `.`. A syntax error, an undefined
     * rule or a passed bound (left recursion, more than 4096 parser stacks, depth 512) is
     * SYN_ERR_INVALID_ARGUMENT or SYN_ERR_UNSUPPORTED at submission or the request's error. */
    const char *grammar;
    /* NULL, or a JSON Schema (JSON text, at most 1 MiB) the output must be an instance of,
     * compiled into such a grammar (not with grammar too). Enforced: type (and unions),
     * properties, required, additionalProperties (absent or true: any extra key; a schema: its
     * values; false: none), enum, const, items, prefixItems, minItems/maxItems (<= 100),
     * minLength/maxLength (<= 1000), integer minimum/maximum/exclusiveMinimum/exclusiveMaximum,
     * anyOf, oneOf (where no two branches can match together: different types, const/enum
     * values or a required const discriminator), local $ref/$defs, format date, date-time
     * (month, day and time ranges), uuid; blanks between tokens at most 4 in a row. Any other
     * keyword, or one that cannot be enforced where it stands, is SYN_ERR_UNSUPPORTED naming it. */
    const char *json_schema;
    /* NULL, or a text (1..256 bytes) that holds the grammar or schema back until the output
     * contains it (a lazy grammar: the model writes freely until it opens a tool call, say
     * "<tool_call>"); from its first occurrence on, the trigger itself and everything after it
     * must follow the grammar, which therefore begins with it. Should the text from the trigger
     * on not fit the grammar, the grammar is dropped and the output stays free. */
    const char *grammar_trigger;
    /* [n_logit_bias] biases added to the logits at every step, before the grammar's mask (a token
     * given twice gets both); a token outside the vocabulary or a NaN bias is
     * SYN_ERR_INVALID_ARGUMENT at submission. */
    const syn_logit_bias *logit_bias;
    size_t n_logit_bias;
    /* true: an embedding request (see "Embeddings" below): the prompt is computed, pooled with
     * `pooling` and the request finishes without generating (SYN_FINISH_LENGTH, 0 tokens); the
     * generation fields (max_tokens, sampling, stops, on_token) are not used, and grammar,
     * json_schema or logit_bias with it are SYN_ERR_INVALID_ARGUMENT. The prompt may fill the
     * whole context (n_ctx positions). Default false */
    bool embed;
    syn_pooling pooling;   /* for embed; default SYN_POOLING_MODEL */
    syn_token_fn on_token; /* NULL: no streaming */
    void *user_data;
} syn_request_params;

SYN_API syn_request_params syn_request_default_params(void);

/* Validates params, tokenizes the prompt and queues the request; *out receives a handle to free
 * with syn_request_free. Thread-safe. Errors: SYN_ERR_INVALID_ARGUMENT (no or several prompts,
 * empty prompt, messages with n_messages 0 or n_messages without messages, token out of the
 * vocabulary, max_tokens < 0, a bad stop string or sampling parameter),
 * SYN_ERR_CONTEXT_FULL (prompt + max_tokens above the engine's n_ctx, or more KV blocks than
 * the whole budget holds: the message gives both figures), SYN_ERR_UNSUPPORTED (chat template),
 * SYN_ERR_NO_MEMORY, SYN_ERR_STATE (the engine is shutting down). */
SYN_API syn_status syn_engine_submit(syn_engine *engine, const syn_request_params *params,
                                     syn_request **out);

/* Asks the request to stop: a queued request finishes at once, an active one before the next
 * step; its finish reason becomes SYN_FINISH_CANCELLED unless it finished first. Errors:
 * SYN_ERR_STATE when the request has already finished (the message names how). */
SYN_API syn_status syn_request_cancel(syn_request *req);

typedef struct syn_request_result {
    syn_finish_reason finish;
    syn_status status;     /* SYN_OK unless finish is SYN_FINISH_ERROR (then e.g. the sampler's
                            * SYN_ERR_INVALID_ARGUMENT for NaN logits) */
    const char *error;     /* the failure's message, "" when none */
    const int32_t *tokens; /* [n_tokens] generated ids (the stopping EOG/stop token excluded) */
    size_t n_tokens;
    size_t n_prompt_tokens;
    size_t n_cached_tokens; /* prompt tokens whose KV came from the prefix cache */
    double queue_ms;        /* submit -> a slot was assigned */
    double ttft_ms;         /* submit -> first generated token (0 when none) */
    double total_ms;        /* submit -> finished */
    /* An embedding request's vector [n_embd] (unit length), NULL for any other request or when it
     * did not finish normally. Owned by the handle. */
    const float *embedding;
    int32_t n_embd;
} syn_request_result;

/* Blocks until the request has finished and fills *out; the pointers inside stay valid until
 * syn_request_free. Must not be called from a callback. Errors: SYN_ERR_INVALID_ARGUMENT (NULL).
 *
 * What a finished handle holds: the moment a request finishes (any reason: eog, stop, length,
 * cancelled or error), the engine frees everything its generation used (its sampler with its
 * [n_vocab] buffer, its detokenizer, its prompt ids, stop tokens and KV block tables; its KV
 * blocks go back to the pool or the prefix cache). The handle then keeps only its result: the
 * generated ids (4 bytes each) and under 1 KB of counts, timings and error message, so that
 * thousands of finished handles cost little until syn_request_free. */
SYN_API syn_status syn_request_wait(syn_request *req, syn_request_result *out);

SYN_API bool syn_request_is_done(const syn_request *req);

/* Releases the handle; an unfinished request is cancelled first. NULL is a no-op. */
SYN_API void syn_request_free(syn_request *req);

typedef struct syn_engine_stats {
    uint64_t n_steps;         /* forward passes run */
    uint64_t n_prompt_tokens; /* prompt tokens computed (reused ones excluded) */
    uint64_t n_cached_tokens; /* prompt tokens reused from the prefix cache */
    uint64_t n_decode_tokens; /* generated tokens fed back (one per decoding request per step) */
    uint64_t n_generated;     /* tokens sampled */
    uint64_t n_decode_steps;  /* steps that carried decode tokens and no prompt tokens */
    double decode_steps_ms;   /* their wall time (forward + sampling + callbacks) */
    uint64_t decode_steps_tokens; /* their tokens */
    uint32_t kv_blocks_total;     /* blocks the budget holds */
    uint32_t kv_blocks_used;      /* blocks held by active requests or the prefix cache */
    uint32_t kv_blocks_cached;    /* of those, blocks in the prefix cache */
    size_t kv_block_bytes;
    uint32_t n_active;    /* requests in slots */
    uint32_t n_queued;    /* requests waiting for a slot */
    uint64_t n_preempted; /* times a request gave up its KV blocks to let older ones grow */
    /* A model with sliding-window layers (gemma3) keeps them out of the blocks, in a ring of
     * kv_ring_bytes per slot (outside kv_budget_mib) however long the sequence; 0: none. */
    size_t kv_ring_bytes;
    uint32_t kv_rings; /* rings allocated (at most n_parallel: one per slot, on first use) */
    /* A model with per-sequence memory outside the blocks (qwen35's recurrent state, gemma3's
     * ring) resumes a cached prefix only after a block that carries a snapshot of that memory:
     * kv_snapshot_bytes each (outside kv_budget_mib; 0: none, or no prefix cache), at most
     * n_parallel at once, kv_snapshots now. */
    size_t kv_snapshot_bytes;
    uint32_t kv_snapshots;
} syn_engine_stats;

/* Fills *out with the engine's counters (all zero for a NULL engine); a NULL out is a no-op. */
SYN_API void syn_engine_get_stats(syn_engine *engine, syn_engine_stats *out);

/* Aggregate figures of syn_engine_run. */
typedef struct syn_run_stats {
    double wall_ms;           /* first submission -> last completion */
    uint64_t n_prompt_tokens; /* over every request */
    uint64_t n_generated;     /* tokens generated, over every request */
    double tok_per_s;         /* n_generated / wall time */
    double decode_tok_per_s;  /* decode-only steps: tokens / their time (0 when there were none) */
    uint64_t n_steps;
} syn_run_stats;

/* Runs n requests through the engine, n_parallel at a time (the rest queue in order), and waits
 * for all. The n enter the queue together: the scheduler admits as many as slots and KV blocks
 * allow in the same step (with syn_engine_submit called n times, the first may start alone).
 * requests[n] receives the handles (read each with syn_request_wait, then free it); stats, if not
 * NULL, the aggregate figures (meaningful when nothing else uses the engine meanwhile). When a
 * request is refused, none is submitted, every requests[i] is NULL, and the error names the
 * failing index. */
SYN_API syn_status syn_engine_run(syn_engine *engine, const syn_request_params *params, size_t n,
                                  syn_request **requests, syn_run_stats *stats);

/* ---------------------------------------------------------------------------------------------
 * Embeddings
 *
 * An embedding is the model's final hidden state after the output norm (the LM head is not
 * computed), pooled over the input's tokens and scaled to unit L2 length, as llama.cpp's
 * embeddings are. On an embedding model (Qwen3-Embedding: a qwen3 file with pooling_type 3) the
 * vectors are what the model was trained to produce; on a chat LM they are just its hidden
 * states. Every input is one engine request that prefills its tokens and finishes: the inputs of
 * one call run as many sequences in the same steps, and a vector is bitwise the same alone or in
 * any batch (the engine's determinism above).
 * ------------------------------------------------------------------------------------------- */

/* "model", "mean", "cls", "last" ("?" when invalid). */
SYN_API const char *syn_pooling_name(syn_pooling pooling);

/* The pooling `pooling` resolves to for model (SYN_POOLING_MODEL: as above), into *out. Errors:
 * SYN_ERR_UNSUPPORTED (the file's pooling_type is none, rank or unknown),
 * SYN_ERR_INVALID_ARGUMENT (not a syn_pooling). */
SYN_API syn_status syn_pooling_resolve(const syn_model *model, syn_pooling pooling,
                                       syn_pooling *out);

/* One input of syn_embed: exactly one of text (NUL-terminated UTF-8, tokenized as prompt_text:
 * specials parsed, the tokenizer's BOS/EOS policy) and tokens (taken as given). */
typedef struct syn_embed_input {
    const char *text;
    const int32_t *tokens; /* [n_tokens] */
    size_t n_tokens;
} syn_embed_input;

typedef struct syn_embed_params {
    syn_pooling pooling; /* default SYN_POOLING_MODEL */
    /* values per vector: 0 (default) for n_embd, else 1..n_embd: the first `dimensions` values,
     * scaled again to unit length (OpenAI's `dimensions`; meaningful for models trained for it,
     * Matryoshka-style) */
    int32_t dimensions;
} syn_embed_params;

SYN_API syn_embed_params syn_embed_default_params(void);

/* Embeds inputs[n] through engine (one request each, submitted together and waited for) into
 * out[n][d] (d: params->dimensions, or n_embd when 0), each row at unit length. Thread-safe as
 * syn_engine_submit is; it blocks until all are done, so not from a callback. n_tokens_out, if
 * not NULL, receives the prompt tokens of all inputs. Errors (the message names the input's
 * index): SYN_ERR_INVALID_ARGUMENT (n 0, a NULL argument, dimensions out of range, an input with
 * no or two sources, an empty one, a token outside the vocabulary), SYN_ERR_CONTEXT_FULL (an
 * input longer than the engine's n_ctx or its KV budget), SYN_ERR_UNSUPPORTED (pooling), the
 * status of a request that failed (SYN_ERR_INVALID_ARGUMENT for a non-finite hidden state), or
 * SYN_ERR_STATE (the engine is shutting down). On error nothing in out is meaningful and no
 * request is left running. */
SYN_API syn_status syn_embed(syn_engine *engine, const syn_embed_params *params,
                             const syn_embed_input *inputs, size_t n, float *out,
                             size_t *n_tokens_out);

/* Scales the first d values of v to unit L2 length in place (summed in double); a zero vector
 * stays zero. What syn_embed does to each vector, for callers that truncate vectors themselves. */
SYN_API void syn_embed_normalize(float *v, size_t d);

#ifdef __cplusplus
}
#endif

#endif /* SYNAPSE_H */

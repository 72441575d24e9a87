/*
 * synapse.h: the public C API of Synapse, a CPU inference engine for Qwen2-family GGUF models.
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

#define SYN_VERSION_MAJOR 0
#define SYN_VERSION_MINOR 1

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
    SYN_ERR_INTERNAL = -9          /* a bug in Synapse */
} syn_status;

/* A static English name for a status ("ok", "format error", ...). Never NULL. */
const char *syn_status_str(syn_status status);

/* The message of the calling thread's most recent error ("" when none). Owned by the library. */
const char *syn_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------------------------- */

typedef enum syn_log_level { SYN_LOG_DEBUG = 0, SYN_LOG_INFO = 1, SYN_LOG_WARN = 2 } syn_log_level;

/* Called with one line of text (no trailing newline). May be called from any library thread. */
typedef void (*syn_log_fn)(syn_log_level level, const char *message, void *user_data);

/* Installs the process-wide log callback (NULL: silence, the default). Not thread-safe: call it
 * before loading models. */
void syn_log_set(syn_log_fn fn, void *user_data);

/* ---------------------------------------------------------------------------------------------
 * Model
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_model syn_model;

typedef struct syn_model_params {
    bool prefetch; /* warm the weight pages in the background after loading (default true) */
} syn_model_params;

syn_model_params syn_model_default_params(void);

/* Memory-maps and validates a GGUF file. On success *out owns the mapping; free it with
 * syn_model_free(). Errors: SYN_ERR_IO, SYN_ERR_FORMAT, SYN_ERR_UNSUPPORTED, SYN_ERR_NO_MEMORY. */
syn_status syn_model_load(const char *path, const syn_model_params *params, syn_model **out);
void syn_model_free(syn_model *model);

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
    bool tied_output;          /* the output projection is the token embedding */
    uint64_t n_params;         /* number of weights */
    uint64_t weight_bytes;     /* bytes of tensor data in the file */
} syn_model_info;

/* Fills *info. The pointers inside live as long as the model. */
void syn_model_get_info(const syn_model *model, syn_model_info *info);

/* Writes the GGUF metadata value of key as text into buf (cap bytes, NUL-terminated, truncated
 * to fit; arrays are summarised as "[type x count]"). Returns the length of the full text, or -1
 * when the key is absent. */
int64_t syn_model_meta_str(const syn_model *model, const char *key, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * Tokenizer (owned by the model; immutable, thread-safe)
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_tokenizer syn_tokenizer;

const syn_tokenizer *syn_model_tokenizer(const syn_model *model);

int32_t syn_token_eos(const syn_tokenizer *tok);    /* end-of-sequence id, -1 if none */
int32_t syn_token_bos(const syn_tokenizer *tok);    /* beginning-of-sequence id, -1 if none */
bool syn_token_is_eog(const syn_tokenizer *tok, int32_t id); /* ends generation (EOS, <|im_end|>, ...) */
int32_t syn_tokenizer_n_vocab(const syn_tokenizer *tok);

/* Encodes len bytes of UTF-8 text (NFC-normalised first). With parse_special, special-token text
 * such as "<|im_start|>" becomes its id; otherwise it is split as plain text. No BOS is added.
 * Writes at most cap ids; *n_ids receives the full count. Returns SYN_ERR_BUFFER_TOO_SMALL (with
 * *n_ids set) when cap is too small, SYN_ERR_INVALID_ARGUMENT for invalid UTF-8. */
syn_status syn_tokenize(const syn_tokenizer *tok, const char *text, size_t len, bool parse_special,
                        int32_t *ids, size_t cap, size_t *n_ids);

/* Writes the bytes of token id (byte-level BPE decoded; may be part of a UTF-8 character) into buf.
 * *n_bytes receives the full length. Errors: SYN_ERR_INVALID_ARGUMENT, SYN_ERR_BUFFER_TOO_SMALL. */
syn_status syn_token_to_bytes(const syn_tokenizer *tok, int32_t id, char *buf, size_t cap,
                              size_t *n_bytes);

/* Decodes n ids into buf (not NUL-terminated); *n_bytes receives the full length. */
syn_status syn_detokenize(const syn_tokenizer *tok, const int32_t *ids, size_t n, char *buf,
                          size_t cap, size_t *n_bytes);

/* Streaming decoder: push token ids one at a time and receive only complete UTF-8 characters;
 * an incomplete sequence is held back until the next token completes it. */
typedef struct syn_detok_stream syn_detok_stream;

syn_status syn_detok_stream_new(const syn_tokenizer *tok, syn_detok_stream **out);
/* Appends the text now complete to buf (NUL-terminated); *n_bytes receives its length.
 * buf needs at most 2 * (longest token + 4) bytes: 1024 is always enough for Qwen2. */
syn_status syn_detok_stream_push(syn_detok_stream *s, int32_t id, char *buf, size_t cap,
                                 size_t *n_bytes);
/* Emits whatever is held back (an invalid tail comes out as U+FFFD). */
syn_status syn_detok_stream_flush(syn_detok_stream *s, char *buf, size_t cap, size_t *n_bytes);
void syn_detok_stream_free(syn_detok_stream *s);

/* ---------------------------------------------------------------------------------------------
 * Chat templates
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8 */
} syn_chat_message;

/* Renders messages in the model's chat format, ending with an open assistant turn when
 * add_assistant_prompt. template_name NULL: recognise the GGUF's tokenizer.chat_template
 * (SYN_ERR_UNSUPPORTED when it is not recognised); "chatml": force ChatML. Output is UTF-8 in buf
 * (NUL-terminated); *n_bytes receives the full length without the NUL. Qwen2.5's template adds
 * the default system prompt when the first message is not a system message. */
syn_status syn_chat_format(const syn_model *model, const char *template_name,
                           const syn_chat_message *messages, size_t n_messages,
                           bool add_assistant_prompt, char *buf, size_t cap, size_t *n_bytes);

/* ---------------------------------------------------------------------------------------------
 * Contexts: one sequence's KV cache and the backend that computes it
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_context syn_context;

typedef enum syn_backend {
    SYN_BACKEND_REFERENCE = 0, /* scalar float32: the oracle */
    SYN_BACKEND_OPTIMIZED = 1  /* Q8_0 activations, SIMD kernels, thread pool */
} syn_backend;

typedef struct syn_context_params {
    uint32_t n_ctx;      /* tokens the KV cache holds; 0: the model's training context */
    int32_t n_threads;   /* worker threads; 0: one per available core */
    syn_backend backend; /* default SYN_BACKEND_REFERENCE until the optimized backend lands */
} syn_context_params;

syn_context_params syn_context_default_params(void);

/* Allocates the KV cache ([n_layer][n_ctx][n_head_kv * head_dim] for K and for V). The model
 * must outlive the context. Errors: SYN_ERR_INVALID_ARGUMENT (n_ctx above the model's training
 * context), SYN_ERR_NO_MEMORY, SYN_ERR_UNAVAILABLE (backend not built). */
syn_status syn_context_new(const syn_model *model, const syn_context_params *params,
                           syn_context **out);
void syn_context_free(syn_context *ctx);

/* Runs n_tokens through the model at positions n_past .. n_past + n_tokens - 1, appending them to
 * the KV cache. all_logits, if not NULL, receives [n_tokens][n_vocab] floats; the last token's
 * logits are always available afterwards from syn_context_logits(). Errors:
 * SYN_ERR_CONTEXT_FULL (nothing is appended), SYN_ERR_INVALID_ARGUMENT (token id out of range). */
syn_status syn_context_decode(syn_context *ctx, const int32_t *tokens, size_t n_tokens,
                              float *all_logits);

/* The logits ([n_vocab]) after the last decoded token, or NULL before any decode. Owned by ctx. */
const float *syn_context_logits(const syn_context *ctx);

uint32_t syn_context_n_past(const syn_context *ctx);
uint32_t syn_context_n_ctx(const syn_context *ctx);

/* Forgets cached tokens from position n_keep on (0: clear). n_keep must be <= n_past. */
syn_status syn_context_truncate(syn_context *ctx, uint32_t n_keep);

/* ---------------------------------------------------------------------------------------------
 * Sampling
 * ------------------------------------------------------------------------------------------- */

typedef struct syn_sampler syn_sampler;

typedef struct syn_sampler_params {
    float temperature;    /* <= 0: greedy (first index of the maximum). Default 0.8 */
    int32_t top_k;        /* keep the k most likely; <= 0: off. Default 40 */
    float top_p;          /* nucleus mass in (0, 1]; 1: off. Default 0.95 */
    float min_p;          /* drop tokens below min_p * p(max); 0: off. Default 0.05 */
    float repeat_penalty; /* >1 discourages recent tokens; 1: off. Default 1.0 */
    int32_t repeat_last_n; /* how many recent tokens the penalty looks at. Default 64 */
    uint64_t seed;        /* the same seed gives the same choices. Default 0 */
} syn_sampler_params;

syn_sampler_params syn_sampler_default_params(void);

/* Errors: SYN_ERR_INVALID_ARGUMENT for an out-of-range parameter (named in the message). */
syn_status syn_sampler_new(const syn_sampler_params *params, syn_sampler **out);
void syn_sampler_free(syn_sampler *s);

/* Picks the next token from logits[n_vocab] (not modified). history: the tokens so far (for the
 * repetition penalty). */
syn_status syn_sampler_sample(syn_sampler *s, const float *logits, int32_t n_vocab,
                              const int32_t *history, size_t n_history, int32_t *token);

#ifdef __cplusplus
}
#endif

#endif /* SYNAPSE_H */

/*
 * synapse_internal.h: the library's internal API, the one header of src/ that tools/ may include.
 *
 * What the synapse tool legitimately needs beyond include/synapse.h: the GGUF reader and writer
 * (gen-model, inspect), the weight quantizers (gen-model), the reader of a model's output
 * (serve: reasoning and tool calls), the CPU description and the kernel
 * tiers (bench), the model's tensor table (inspect, bench), and the small helpers the library
 * and the tools would otherwise each write (the clock, UTF-8 decoding, tokenizing into a new
 * array). Nothing here is exported from libsynapse.so (hidden visibility): the tools link the
 * static library. Everything here may change with the library.
 */
#ifndef SYNAPSE_INTERNAL_H
#define SYNAPSE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/chat_output.h"  /* a model's text read back as reasoning, content, tool calls */
#include "chat/tool_grammar.h" /* the grammar of forced tool calls in a template's syntax */
#include "gguf/gguf.h"         /* the GGUF reader and writer, the ggml type table */
#include "synapse.h"

/* ---- Errors ---- */

/* Records a formatted one-line message as the calling thread's last error (syn_last_error) and
 * returns status, so that failure paths read `return syn_fail(SYN_ERR_FORMAT, "tensor '%s': ...",
 * name);`. The tools use it in the callbacks they hand the library (the GGUF writer's fill). */
syn_status syn_fail(syn_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Models ---- */

/* The parsed GGUF file behind model: its metadata and tensor table (inspect). */
const gguf_file *syn_model_gguf(const syn_model *model);

/* What one token costs a model, for the benchmark's ceilings. */
typedef struct syn_model_work {
    uint64_t token_embd_bytes;       /* the token embedding matrix */
    uint64_t kv_values_per_position; /* K and V values of one position, all layers */
    uint64_t kv_values_local;        /* of those, the sliding-window layers' (they attend to */
    uint32_t swa_window;             /* the last swa_window positions only; 0: none) */
    uint64_t macs_per_token;         /* multiply-adds of the block matrices */
    uint32_t block_matrix_type;      /* ggml type of the first block's query matrix */
} syn_model_work;
void syn_model_get_work(const syn_model *model, syn_model_work *out);

/* Waits until the model's background thread (page warm-up, interleaved copies) has finished:
 * what the benchmark and the tests measure or check is then the steady state. */
void syn_model_wait_background(syn_model *model);

/* Bytes of the model's interleaved copies (syn_model_params.interleave); 0: none. */
size_t syn_model_interleaved_bytes(const syn_model *model);

/* Writes x[n] as ggml_type into dst (ggml_row_size(ggml_type, n) bytes); n is a multiple of the
 * type's block size. Types: F32, Q8_0 (ggml's own rule, bit for bit), Q4_0, Q4_1, Q5_0, Q5_1,
 * Q4_K, Q5_K, Q6_K; false (nothing written) for any other. Deterministic: the same floats give
 * the same bytes. Simple quantizers, not llama-quantize's search (gen-model's random weights). */
bool syn_quantize_weight_row(uint32_t ggml_type, const float *x, int64_t n, void *dst);

/* ---- The CPU ---- */

/* Names this CPU in buf (at most n bytes, NUL-terminated), for benchmark reports: on x86-64 the
 * CPUID brand string and the family and model numbers, on aarch64 /proc/cpuinfo's implementer
 * and part codes; "unknown CPU" where neither is readable. */
void syn_cpu_describe(char *buf, size_t n);

/* The concrete tier a context asking for tier runs (SYN_TIER_AUTO: this CPU's fastest).
 * SYN_ERR_INVALID_ARGUMENT for a value outside the enum, SYN_ERR_UNAVAILABLE (naming what is
 * missing) for a tier this CPU or build lacks: never a silent fallback. */
syn_status syn_isa_tier_resolve(syn_isa_tier tier, syn_isa_tier *out);

/* The huge page size the mappings align to (2 MiB, x86-64's and arm64's with 4 KiB pages). */
enum { SYN_HUGE_PAGE_BYTES = 2 << 20 };

/* Bytes of [base, base + size) currently mapped with huge pages (FilePmdMapped and
 * AnonHugePages of /proc/self/smaps); 0 where that file cannot be read. */
size_t syn_file_map_huge_bytes(const void *base, size_t size);

/* ---- Step times (synapse bench --profile) ---- */

/* One named step of the optimized backend's forward pass (one thread-pool job: "qkv",
 * "attention", "ffn", ...): its wall time summed over its runs, and the int8 multiply-adds of the
 * quantized matrices it multiplies by (0 where it multiplies by none). */
typedef struct syn_step_time {
    const char *step;
    uint64_t ns, runs, macs;
} syn_step_time;

enum { SYN_MAX_STEPS = 24 };

typedef struct syn_step_times {
    bool on;  /* the forward passes time their steps while true */
    size_t n; /* steps seen, in the order of their first run; set 0 to start over */
    syn_step_time steps[SYN_MAX_STEPS];
    uint64_t other_ns; /* steps past the SYN_MAX_STEPS-th name (none today), together */
} syn_step_times;

/* ctx's step times, all off and empty at creation; NULL for a backend that keeps none (the
 * reference backend). A step's time is the wall time of its thread-pool job, so on a pool shared
 * by several engines it includes the wait for the others' jobs. */
syn_step_times *syn_context_step_times(syn_context *ctx);

/* ---- Time ---- */

/* Milliseconds on CLOCK_MONOTONIC, from an arbitrary origin: only differences mean anything. The
 * library's durations (request and step times) and the tools' timings alike. */
double syn_now_ms(void);
/* The same clock in nanoseconds (the thread pool's spin budget). */
uint64_t syn_now_ns(void);

/* ---- Text ---- */

/* Examines the UTF-8 sequence at s[0..n) (n >= 1). Returns its length (1..4) when it is a
 * complete, well-formed character (*cp receives it); 0 when s is a well-formed but truncated
 * start of one; otherwise -k, where k >= 1 is the length of the maximal ill-formed subpart (the
 * bytes one U+FFFD replaces, as Unicode recommends). */
int syn_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);

/* ---- Chat templates ---- */

/* syn_chat_format into a new malloc'd NUL-terminated *text (the caller frees it). */
syn_status syn_chat_format_new(const syn_model *model, const char *template_source,
                               const syn_chat_message *messages, size_t n_messages,
                               bool add_assistant_prompt, char **text, size_t *n_bytes);

/* ---- Tokenizing ---- */

/* syn_tokenize into a new malloc'd array sized to fit (*ids; the caller frees it). */
syn_status syn_tokenize_new(const syn_tokenizer *tok, const char *text, size_t len,
                            bool add_special, bool parse_special, int32_t **ids, size_t *n_ids);

#endif

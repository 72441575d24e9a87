/*
 * model.h: a loaded model of one of the architectures of the table in arch.h: hyperparameters
 * read from GGUF metadata and views of the memory-mapped weight tensors, each checked against
 * those hyperparameters.
 *
 * Tensor shapes follow GGUF order, innermost first: a weight W with ne = {n_in, n_out} is n_out
 * rows of n_in contiguous values and computes y[n_out] = W x[n_in]. A tensor an architecture
 * lacks (or an optional one the file omits) has data NULL.
 */
#ifndef SYN_MODEL_H
#define SYN_MODEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "synapse.h"

typedef struct syn_tensor {
    const char *name;   /* NUL-terminated copy owned by the model */
    uint32_t type;      /* enum ggml_type, one of the weight-type table (wtype.h) */
    int64_t ne[2];      /* ne[0]: row length; ne[1]: rows (1 for vectors) */
    uint64_t row_bytes; /* bytes of one row */
    const void *data;   /* inside the mapping; NULL: the tensor is absent */
    /* The x16 copy of a matrix's whole groups of 16 rows (kernels.h's layout of its type, where
     * the best tier reads one): its codes, its scales right after them (those of every whole
     * group). The model's background thread writes it group range by group range and publishes
     * the rows written so far in x16_rows (release; read it with acquire before x16): rows below
     * x16_rows read the copy, the others the rows at data (which stay valid, though the file
     * pages under the copied ones are released). */
    const uint8_t *x16;
    _Atomic int64_t x16_rows;
} syn_tensor;

typedef struct syn_hparams {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd; /* model width */
    int32_t n_layer;
    int32_t n_head;    /* query heads */
    int32_t n_head_kv; /* key/value heads (grouped-query attention) */
    int32_t head_dim;  /* ARCH.attention.key_length, else n_embd / n_head */
    int32_t q_dim;     /* n_head * head_dim: the query width (differs from n_embd in qwen3) */
    int32_t kv_dim;    /* n_head_kv * head_dim */
    int32_t n_ff;      /* feed-forward width */
    float rope_freq_base;
    float rms_norm_eps;
    syn_rope_layout rope_layout;
    /* Linear RoPE scaling (rope.scaling.factor): angles times rope_freq_scale = 1 / factor, on the
     * global layers only when the model has local ones; 1 without scaling. */
    float rope_freq_scale;
    float attn_scale;          /* query scale: 1 / sqrt(head_dim) (gemma3 27B: see model_load.c) */
    float embd_scale;          /* the embedding row's factor: sqrt(n_embd) (gemma), else 1 */
    float final_logit_softcap; /* logits = cap * tanh(logits / cap) when > 0 (Gemma 2's key) */
    syn_ffn_act ffn_act;
    /* Sliding-window attention (gemma3): layer il is local iff il % swa_pattern < swa_pattern - 1;
     * a local layer's query at position p sees keys p - swa_window + 1 .. p, rotated with base
     * rope_freq_base_swa and no scaling. swa_window 0: every layer is global. */
    int32_t swa_window;
    int32_t swa_pattern;
    float rope_freq_base_swa;
    int32_t n_rot;          /* dims RoPE rotates per head: ARCH.rope.dimension_count, even, at
                             * most head_dim (phi3: partial rotary); the rest pass unchanged */
    float rope_attn_factor; /* multiplies RoPE's cos and sin: phi3's rope.scaling.attn_factor;
                             * 1 elsewhere */
    int32_t n_ctx_orig;     /* rope.scaling.original_context_length (phi3; else n_ctx_train): a
                             * context longer than this takes rope_factors_long */
    bool q_gate;            /* the arch entry's q_gate */
    int32_t pooling_type;   /* ARCH.pooling_type as stored (0..4, llama.cpp's), -1: absent */
    /* Hybrids (qwen35): layer il is a gated delta net iff syn_layer_recurrent; 0: none is. */
    int32_t full_attn_interval;
    int32_t n_attn_layers;   /* layers with attention (and a KV cache) */
    int32_t ssm_conv_kernel; /* ARCH.ssm.conv_kernel: taps; the state keeps the last kernel - 1 */
    int32_t ssm_head_k;      /* ARCH.ssm.state_size: one Q/K head's width */
    int32_t ssm_n_k_heads;   /* ARCH.ssm.group_count: Q/K heads */
    int32_t ssm_n_v_heads;   /* ARCH.ssm.time_step_rank: V heads; V head h reads Q/K head
                              * h % ssm_n_k_heads (llama.cpp's converter tiles them) */
    int32_t ssm_inner;       /* ARCH.ssm.inner_size: ssm_n_v_heads * ssm_head_v */
    int32_t ssm_head_v;      /* one V head's width */
    int32_t ssm_conv_dim;    /* 2 * ssm_n_k_heads * ssm_head_k + ssm_inner: q | k | v channels */
} syn_hparams;

/* Whether layer il attends within the sliding window only. */
static inline bool syn_layer_is_local(const syn_hparams *hp, int32_t il) {
    return hp->swa_window > 0 && il % hp->swa_pattern < hp->swa_pattern - 1;
}

/* Layers that are recurrent (gated delta net) rather than attention layers. */
static inline int32_t syn_recurrent_layers(const syn_hparams *hp) {
    return hp->n_layer - hp->n_attn_layers;
}

/* Whether layer il is a recurrent (gated delta net) layer rather than an attention layer. */
static inline bool syn_layer_recurrent(const syn_hparams *hp, int32_t il) {
    return hp->full_attn_interval > 0 && (il + 1) % hp->full_attn_interval != 0;
}

typedef struct syn_layer {
    syn_tensor attn_norm;      /* [n_embd] */
    syn_tensor wq, wk, wv;     /* {n_embd, q_dim}, {n_embd, kv_dim}, {n_embd, kv_dim}; wq is
                                * {n_embd, 2 * q_dim} with q_gate: per head, the query rows then
                                * the gate rows */
    syn_tensor bq, bk, bv;     /* [q_dim], [kv_dim], [kv_dim]; absent in qwen3 and llama */
    syn_tensor q_norm, k_norm; /* [head_dim] per-head RMS norm of Q and K before RoPE (qwen3) */
    syn_tensor wo;             /* {q_dim, n_embd} */
    syn_tensor ffn_norm;       /* [n_embd] (qwen35's post_attention_norm) */
    syn_tensor w_gate, w_up;   /* {n_embd, n_ff} */
    syn_tensor w_down;         /* {n_ff, n_embd} */
    syn_tensor post_attn_norm; /* [n_embd] RMS norm of the attention output (gemma3) */
    syn_tensor post_ffn_norm;  /* [n_embd] RMS norm of the FFN output (gemma3) */
    /* Fused matrices as the file holds them (phi3); wq, wk, wv and w_gate, w_up are views of
     * their rows (whole rows, so any weight type splits), and the backends read only the views. */
    syn_tensor wqkv;      /* {n_embd, q_dim + 2 * kv_dim}: q rows, then k, then v */
    syn_tensor w_gate_up; /* {n_embd, 2 * n_ff}: gate rows, then up */
    /* A recurrent (gated delta net) layer's mixer, in place of wq .. wo (qwen35). */
    syn_tensor ssm_qkv;     /* attn_qkv {n_embd, ssm_conv_dim}: q [n_k_heads][head_k] |
                             * k [n_k_heads][head_k] | v [n_v_heads][head_v] */
    syn_tensor ssm_z;       /* attn_gate {n_embd, ssm_inner}: the output gate z */
    syn_tensor ssm_conv;    /* ssm_conv1d {conv_kernel, ssm_conv_dim}: per channel, the tap of
                             * the oldest token first, the current token's last */
    syn_tensor ssm_dt_bias; /* [n_v_heads] */
    syn_tensor ssm_a;       /* [n_v_heads] -exp(A_log): the decay rate, negative */
    syn_tensor ssm_beta;    /* {n_embd, n_v_heads} */
    syn_tensor ssm_alpha;   /* {n_embd, n_v_heads} */
    syn_tensor ssm_norm;    /* [head_v] */
    syn_tensor ssm_out;     /* {ssm_inner, n_embd} */
} syn_layer;

struct syn_model {
    gguf_file *gguf;
    const syn_arch *arch;
    syn_hparams hp;
    syn_tensor tok_embd;    /* {n_embd, n_vocab} */
    syn_tensor output_norm; /* [n_embd] */
    syn_tensor output;      /* {n_embd, n_vocab}; the same view as tok_embd when tied */
    bool tied_output;
    syn_tensor rope_freqs; /* [n_rot / 2] divisors of the RoPE pair frequencies (llama 3.1+) */
    /* [n_rot / 2] LongRoPE divisors (phi3), both or neither: short for a context of at most
     * n_ctx_orig positions, long beyond (syn_model_rope_factors). */
    syn_tensor rope_factors_short, rope_factors_long;
    syn_layer *layers; /* [n_layer] */
    struct syn_tokenizer *tokenizer;
    char *name;            /* general.name, "" when absent */
    uint64_t n_params;     /* elements of the bound tensors (tied output counted once) */
    uint64_t weight_bytes; /* bytes of the bound tensors */
    char *tensor_names;    /* the pool behind every syn_tensor.name */
    /* Background thread: page warm-up (syn_model_params.prefetch) and the x16 copies
     * (syn_model_params.interleave); syn_model_free stops and joins it. */
    pthread_t prefetch_thread;
    bool prefetch_started;
    bool prefetch_warm, prefetch_interleave; /* what it does */
    atomic_bool prefetch_stop;
    /* Its wait before the copies, which syn_model_free cuts short (CLOCK_MONOTONIC timeouts). */
    pthread_mutex_t prefetch_lock;
    pthread_cond_t prefetch_wake;
    void *x16_arena; /* the x16 copies, x16_bytes of anonymous memory; NULL: none */
    size_t x16_bytes;
};

/* Blocks per row of t (a quantized or float matrix: ne[0] / the type's block size). */
int64_t syn_tensor_blocks(const syn_tensor *t);

/* The x16 copy of t as the kernels take it: codes at t->x16, scales after the codes of every
 * whole group. Call only once x16_rows (acquire) is above 0. */
syn_x16 syn_tensor_x16(const syn_tensor *t);

/* The matrices of layer L that the backends multiply by (absent ones have data NULL), in forward
 * order; SYN_LAYER_MATRICES of them. */
enum { SYN_LAYER_MATRICES = 12 };
void syn_layer_matrices(const syn_layer *L, const syn_tensor *out[SYN_LAYER_MATRICES]);

/* syn_model_load on an already parsed file (what syn_model_load runs after opening the file; tests
 * and the fuzzer call it on files built in memory). Takes ownership of f: on error it is closed, on
 * success the model closes it. */
syn_status syn_model_load_gguf(gguf_file *f, const syn_model_params *params, syn_model **out);

/* The divisors of the RoPE pair frequencies [n_rot / 2] a context of n_ctx positions uses:
 * rope_freqs, or for LongRoPE the short or the long factors (long when n_ctx > n_ctx_orig, the
 * choice llama.cpp makes by the context's per-sequence size). Never NULL; data NULL: none. */
const syn_tensor *syn_model_rope_factors(const syn_model *m, uint32_t n_ctx);

/* One row of a tensor, dequantized into dst[ne[0]] by its type's entry in the weight-type table
 * (wtype.h). */
void syn_tensor_row(const syn_tensor *t, int64_t row, float *dst);

#endif

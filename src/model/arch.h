/*
 * arch.h: the architecture table. One entry per model architecture Synapse runs: the metadata key
 * prefix (the general.architecture value), the RoPE layout, and every tensor with its shape rule
 * and whether it may be absent. Norms follow from the tensors: a layer with attn_q_norm /
 * attn_k_norm normalises each query and key head before RoPE (qwen3); one with post_attention_norm
 * / post_ffw_norm RMS-norms the attention / FFN output before the residual add (gemma3); a fused
 * matrix (phi3's attn_qkv, ffn_up) is split into views of the separate ones at load.
 * Hyperparameters are read the same way for every entry (model_load.c): the head size is
 * ARCH.attention.key_length when present, else n_embd / n_head. The pre-tokenizer and chat format
 * are named by the tokenizer's own metadata (tokenizer.ggml.pre, tokenizer.chat_template) and have
 * their own tables (tokenizer/pretokenize.c, tokenizer/chat.c). Adding an architecture: one entry
 * in arch.c, plus backend code only for a computation no entry has yet.
 */
#ifndef SYN_MODEL_ARCH_H
#define SYN_MODEL_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which elements of a head RoPE rotates together, at angle pos * base^(-2i/n_rot) / factor[i]
 * for pair i < n_rot / 2 (n_rot: the rotated dims, head_dim unless ARCH.rope.dimension_count
 * says fewer; the dims from n_rot on pass unchanged). */
typedef enum syn_rope_layout {
    SYN_ROPE_NEOX,     /* (i, i + n_rot/2): qwen2, qwen3, phi3 (ggml's NEOX mode) */
    SYN_ROPE_ADJACENT, /* (2i, 2i + 1): llama (ggml's normal mode) */
} syn_rope_layout;

/* The hyperparameter a tensor dimension must equal. */
typedef enum syn_dim {
    SYN_DIM_NONE,       /* as ne1: the tensor is a vector */
    SYN_DIM_EMBD,       /* n_embd */
    SYN_DIM_Q,          /* n_head * head_dim */
    SYN_DIM_KV,         /* n_head_kv * head_dim */
    SYN_DIM_FF,         /* n_ff */
    SYN_DIM_HEAD,       /* head_dim */
    SYN_DIM_ROPE_PAIRS, /* n_rot / 2 */
    SYN_DIM_VOCAB,      /* rows of token_embd.weight */
    SYN_DIM_QKV,        /* q_dim + 2 * kv_dim: a fused q | k | v matrix (phi3) */
    SYN_DIM_FF2,        /* 2 * n_ff: a fused gate | up matrix (phi3) */
    SYN_DIM_Q_GATED,    /* 2 * q_dim: per head, head_dim query rows then head_dim gate rows */
    SYN_DIM_SSM_KERNEL, /* ssm_conv_kernel: taps of the delta net's causal convolution */
    SYN_DIM_SSM_CONV,   /* ssm_conv_dim: channels of the convolution (q | k | v) */
    SYN_DIM_SSM_INNER,  /* ssm_inner: the delta net's value width, all V heads */
    SYN_DIM_SSM_HEADS,  /* ssm_n_v_heads */
    SYN_DIM_SSM_HEAD_V, /* ssm_head_v: one V head's width */
} syn_dim;

/* The activation of the gated FFN: act(gate) * up. */
typedef enum syn_ffn_act {
    SYN_FFN_SILU,      /* silu: qwen2, qwen3, llama */
    SYN_FFN_GELU_TANH, /* gelu's tanh approximation, as ggml computes it (backend/gelu.h): gemma3 */
} syn_ffn_act;

typedef struct syn_tensor_rule {
    const char *name; /* the GGUF name; a layer tensor's follows "blk.N." */
    size_t slot;      /* offset of its syn_tensor in struct syn_model (or in syn_layer) */
    syn_dim ne0, ne1; /* shape {ne0, ne1}, innermost first */
    bool optional;    /* may be absent: its view's data stays NULL */
} syn_tensor_rule;

typedef struct syn_arch {
    const char *name; /* general.architecture, and the prefix of its keys ("qwen3.block_count") */
    syn_rope_layout rope;
    const syn_tensor_rule *model_tensors; /* outside the blocks; token_embd first */
    size_t n_model_tensors;
    const syn_tensor_rule *layer_tensors; /* in every block (every attention block of a hybrid) */
    size_t n_layer_tensors;
    syn_ffn_act ffn_act;
    bool embd_scale; /* the embedding row is scaled by sqrt(n_embd) (gemma) */
    bool swa;        /* reads ARCH.attention.sliding_window and its keys (model.h: swa_window) */
    /* phi3: rope.scaling.original_context_length and rope.scaling.attn_factor are read, and
     * rope_factors_short / rope_factors_long divide the pair frequencies (LongRoPE). */
    bool longrope;
    /* phi3: ARCH.attention.sliding_window is ignored, as llama.cpp does for Phi-3 (it warns and
     * disables it); elsewhere the key is refused. */
    bool ignores_sliding_window;
    /* Hybrids (qwen35): the tensors of the recurrent (gated delta net) blocks, those il with
     * (il + 1) % ARCH.full_attention_interval != 0; NULL, 0 for the others. */
    const syn_tensor_rule *recurrent_tensors;
    size_t n_recurrent_tensors;
    bool q_gate; /* attn_q also yields a sigmoid gate on each head's attention output (qwen35) */
} syn_arch;

/* The entry named name[0..len), or NULL. */
const syn_arch *syn_arch_find(const char *name, size_t len);

/* "qwen2, qwen3, llama, gemma3, phi3": the supported names, for messages. */
const char *syn_arch_names(void);

#endif

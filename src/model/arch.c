/* arch.c: the architecture table (arch.h): qwen2, qwen3, llama, gemma3, phi3 and qwen35 as
 * llama.cpp loads them. */
#include "model/arch.h"

#include <stddef.h>
#include <string.h>

#include "model/model.h"

#define MODEL_SLOT(field) offsetof(struct syn_model, field)
#define LAYER_SLOT(field) offsetof(syn_layer, field)

/* Outside the blocks. A missing output.weight means the output projection is token_embd. */
#define MODEL_TENSORS                                                                              \
    {"token_embd.weight", MODEL_SLOT(tok_embd), SYN_DIM_EMBD, SYN_DIM_VOCAB, false},               \
        {"output_norm.weight", MODEL_SLOT(output_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false}, {      \
        "output.weight", MODEL_SLOT(output), SYN_DIM_EMBD, SYN_DIM_VOCAB, true                     \
    }

/* In every block of every entry. */
#define BLOCK_TENSORS                                                                              \
    {"attn_norm.weight", LAYER_SLOT(attn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},                \
        {"attn_q.weight", LAYER_SLOT(wq), SYN_DIM_EMBD, SYN_DIM_Q, false},                         \
        {"attn_k.weight", LAYER_SLOT(wk), SYN_DIM_EMBD, SYN_DIM_KV, false},                        \
        {"attn_v.weight", LAYER_SLOT(wv), SYN_DIM_EMBD, SYN_DIM_KV, false},                        \
        {"attn_output.weight", LAYER_SLOT(wo), SYN_DIM_Q, SYN_DIM_EMBD, false},                    \
        {"ffn_norm.weight", LAYER_SLOT(ffn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},              \
        {"ffn_gate.weight", LAYER_SLOT(w_gate), SYN_DIM_EMBD, SYN_DIM_FF, false},                  \
        {"ffn_up.weight", LAYER_SLOT(w_up), SYN_DIM_EMBD, SYN_DIM_FF, false}, {                    \
        "ffn_down.weight", LAYER_SLOT(w_down), SYN_DIM_FF, SYN_DIM_EMBD, false                     \
    }

#define QKV_BIASES(optional)                                                                       \
    {"attn_q.bias", LAYER_SLOT(bq), SYN_DIM_Q, SYN_DIM_NONE, optional},                            \
        {"attn_k.bias", LAYER_SLOT(bk), SYN_DIM_KV, SYN_DIM_NONE, optional}, {                     \
        "attn_v.bias", LAYER_SLOT(bv), SYN_DIM_KV, SYN_DIM_NONE, optional                          \
    }

static const syn_tensor_rule qwen_model_rules[] = {MODEL_TENSORS};

/* Llama 3.1+ divides each RoPE pair's frequency by a factor. */
static const syn_tensor_rule llama_model_rules[] = {
    MODEL_TENSORS,
    {"rope_freqs.weight", MODEL_SLOT(rope_freqs), SYN_DIM_ROPE_PAIRS, SYN_DIM_NONE, true},
};

/* Qwen2: Q/K/V biases required. */
static const syn_tensor_rule syn_layer_rules[] = {BLOCK_TENSORS, QKV_BIASES(false)};

/* Qwen3: no biases; each query and key head RMS-normed before RoPE. */
static const syn_tensor_rule qwen3_layer_rules[] = {
    BLOCK_TENSORS,
    {"attn_q_norm.weight", LAYER_SLOT(q_norm), SYN_DIM_HEAD, SYN_DIM_NONE, false},
    {"attn_k_norm.weight", LAYER_SLOT(k_norm), SYN_DIM_HEAD, SYN_DIM_NONE, false},
};

/* Llama: biases optional (absent in Llama 2 and 3 files). */
static const syn_tensor_rule llama_layer_rules[] = {BLOCK_TENSORS, QKV_BIASES(true)};

/* Gemma 3: Q/K head norms, and a norm after attention and after the FFN. Its norm weights are
 * stored with Gemma's "+1" already added (llama.cpp's converter), so they are plain multipliers. */
static const syn_tensor_rule gemma3_layer_rules[] = {
    BLOCK_TENSORS,
    {"attn_q_norm.weight", LAYER_SLOT(q_norm), SYN_DIM_HEAD, SYN_DIM_NONE, false},
    {"attn_k_norm.weight", LAYER_SLOT(k_norm), SYN_DIM_HEAD, SYN_DIM_NONE, false},
    {"post_attention_norm.weight", LAYER_SLOT(post_attn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},
    {"post_ffw_norm.weight", LAYER_SLOT(post_ffn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},
};

/* Phi-3 / Phi-3.5 / Phi-4-mini: the output may be tied (Phi-4-mini); one set of LongRoPE factors
 * for all blocks, both present or both absent (Phi-3-mini-4k has none). */
static const syn_tensor_rule phi3_model_rules[] = {
    MODEL_TENSORS,
    {"rope_factors_short.weight", MODEL_SLOT(rope_factors_short), SYN_DIM_ROPE_PAIRS, SYN_DIM_NONE,
     true},
    {"rope_factors_long.weight", MODEL_SLOT(rope_factors_long), SYN_DIM_ROPE_PAIRS, SYN_DIM_NONE,
     true},
};

/* Phi-3: q | k | v fused in one matrix and gate | up in another; the loader splits both into the
 * wq, wk, wv, w_gate, w_up views of their rows (model_phi3.c). No biases. */
static const syn_tensor_rule phi3_layer_rules[] = {
    {"attn_norm.weight", LAYER_SLOT(attn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},
    {"attn_qkv.weight", LAYER_SLOT(wqkv), SYN_DIM_EMBD, SYN_DIM_QKV, false},
    {"attn_output.weight", LAYER_SLOT(wo), SYN_DIM_Q, SYN_DIM_EMBD, false},
    {"ffn_norm.weight", LAYER_SLOT(ffn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},
    {"ffn_up.weight", LAYER_SLOT(w_gate_up), SYN_DIM_EMBD, SYN_DIM_FF2, false},
    {"ffn_down.weight", LAYER_SLOT(w_down), SYN_DIM_FF, SYN_DIM_EMBD, false},
};

/* Qwen3.5: both kinds of block norm their input with attn_norm and the FFN's with
 * post_attention_norm, which is what other entries call ffn_norm. */
#define QWEN35_NORMS_AND_FFN                                                                       \
    {"attn_norm.weight", LAYER_SLOT(attn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},                \
        {"post_attention_norm.weight", LAYER_SLOT(ffn_norm), SYN_DIM_EMBD, SYN_DIM_NONE, false},   \
        {"ffn_gate.weight", LAYER_SLOT(w_gate), SYN_DIM_EMBD, SYN_DIM_FF, false},                  \
        {"ffn_up.weight", LAYER_SLOT(w_up), SYN_DIM_EMBD, SYN_DIM_FF, false}, {                    \
        "ffn_down.weight", LAYER_SLOT(w_down), SYN_DIM_FF, SYN_DIM_EMBD, false                     \
    }

/* Qwen3.5's full-attention blocks: Q/K head norms, and attn_q also yields a sigmoid gate per
 * head on the attention output. */
static const syn_tensor_rule qwen35_layer_rules[] = {
    QWEN35_NORMS_AND_FFN,
    {"attn_q.weight", LAYER_SLOT(wq), SYN_DIM_EMBD, SYN_DIM_Q_GATED, false},
    {"attn_k.weight", LAYER_SLOT(wk), SYN_DIM_EMBD, SYN_DIM_KV, false},
    {"attn_v.weight", LAYER_SLOT(wv), SYN_DIM_EMBD, SYN_DIM_KV, false},
    {"attn_output.weight", LAYER_SLOT(wo), SYN_DIM_Q, SYN_DIM_EMBD, false},
    {"attn_q_norm.weight", LAYER_SLOT(q_norm), SYN_DIM_HEAD, SYN_DIM_NONE, false},
    {"attn_k_norm.weight", LAYER_SLOT(k_norm), SYN_DIM_HEAD, SYN_DIM_NONE, false},
};

/* Qwen3.5's gated delta net blocks. ssm_a has no ".weight" suffix in llama.cpp's files. The MTP
 * blocks real files end with (the last qwen35.nextn_predict_layers of block_count) are not run and
 * their tensors are left unbound (model_load.c). */
static const syn_tensor_rule qwen35_recurrent_rules[] = {
    QWEN35_NORMS_AND_FFN,
    {"attn_qkv.weight", LAYER_SLOT(ssm_qkv), SYN_DIM_EMBD, SYN_DIM_SSM_CONV, false},
    {"attn_gate.weight", LAYER_SLOT(ssm_z), SYN_DIM_EMBD, SYN_DIM_SSM_INNER, false},
    {"ssm_conv1d.weight", LAYER_SLOT(ssm_conv), SYN_DIM_SSM_KERNEL, SYN_DIM_SSM_CONV, false},
    {"ssm_dt.bias", LAYER_SLOT(ssm_dt_bias), SYN_DIM_SSM_HEADS, SYN_DIM_NONE, false},
    {"ssm_a", LAYER_SLOT(ssm_a), SYN_DIM_SSM_HEADS, SYN_DIM_NONE, false},
    {"ssm_beta.weight", LAYER_SLOT(ssm_beta), SYN_DIM_EMBD, SYN_DIM_SSM_HEADS, false},
    {"ssm_alpha.weight", LAYER_SLOT(ssm_alpha), SYN_DIM_EMBD, SYN_DIM_SSM_HEADS, false},
    {"ssm_norm.weight", LAYER_SLOT(ssm_norm), SYN_DIM_SSM_HEAD_V, SYN_DIM_NONE, false},
    {"ssm_out.weight", LAYER_SLOT(ssm_out), SYN_DIM_SSM_INNER, SYN_DIM_EMBD, false},
};

#define RULES(a) a, sizeof a / sizeof a[0]

static const syn_arch archs[] = {
    {"qwen2", SYN_ROPE_NEOX, RULES(qwen_model_rules), RULES(syn_layer_rules),
     .ffn_act = SYN_FFN_SILU},
    {"qwen3", SYN_ROPE_NEOX, RULES(qwen_model_rules), RULES(qwen3_layer_rules),
     .ffn_act = SYN_FFN_SILU},
    {"llama", SYN_ROPE_ADJACENT, RULES(llama_model_rules), RULES(llama_layer_rules),
     .ffn_act = SYN_FFN_SILU},
    {"gemma3", SYN_ROPE_NEOX, RULES(qwen_model_rules), RULES(gemma3_layer_rules),
     .ffn_act = SYN_FFN_GELU_TANH, .embd_scale = true, .swa = true},
    {"phi3", SYN_ROPE_NEOX, RULES(phi3_model_rules), RULES(phi3_layer_rules),
     .ffn_act = SYN_FFN_SILU, .longrope = true, .ignores_sliding_window = true},
    {"qwen35", SYN_ROPE_NEOX, RULES(qwen_model_rules), RULES(qwen35_layer_rules),
     .ffn_act = SYN_FFN_SILU, .recurrent_tensors = qwen35_recurrent_rules,
     .n_recurrent_tensors = sizeof qwen35_recurrent_rules / sizeof qwen35_recurrent_rules[0],
     .q_gate = true},
};

const syn_arch *syn_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strlen(archs[i].name) == len && memcmp(archs[i].name, name, len) == 0) return &archs[i];
    return NULL;
}

const char *syn_arch_names(void) { return "qwen2, qwen3, llama, gemma3, phi3, qwen35"; }

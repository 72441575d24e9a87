/* arch.c: the architecture table (arch.h): qwen2, qwen3, llama, gemma3 and phi3 as llama.cpp
 * loads them. */
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

#define RULES(a) a, sizeof a / sizeof a[0]

static const syn_arch archs[] = {
    {"qwen2", SYN_ROPE_NEOX, RULES(qwen_model_rules), RULES(syn_layer_rules), SYN_FFN_SILU, false,
     false, false, false},
    {"qwen3", SYN_ROPE_NEOX, RULES(qwen_model_rules), RULES(qwen3_layer_rules), SYN_FFN_SILU, false,
     false, false, false},
    {"llama", SYN_ROPE_ADJACENT, RULES(llama_model_rules), RULES(llama_layer_rules), SYN_FFN_SILU,
     false, false, false, false},
    {"gemma3", SYN_ROPE_NEOX, RULES(qwen_model_rules), RULES(gemma3_layer_rules), SYN_FFN_GELU_TANH,
     true, true, false, false},
    {"phi3", SYN_ROPE_NEOX, RULES(phi3_model_rules), RULES(phi3_layer_rules), SYN_FFN_SILU, false,
     false, true, true},
};

const syn_arch *syn_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strlen(archs[i].name) == len && memcmp(archs[i].name, name, len) == 0) return &archs[i];
    return NULL;
}

const char *syn_arch_names(void) { return "qwen2, qwen3, llama, gemma3, phi3"; }

/*
 * model.h: a loaded Qwen2-architecture model: hyperparameters read from GGUF metadata and views of
 * the memory-mapped weight tensors, each checked against those hyperparameters.
 *
 * Tensor shapes follow GGUF order, innermost first: a weight W with ne = {n_in, n_out} is n_out
 * rows of n_in contiguous values and computes y[n_out] = W x[n_in].
 */
#ifndef SYN_MODEL_H
#define SYN_MODEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "synapse.h"

typedef struct syn_tensor {
    const char *name;   /* NUL-terminated copy owned by the model */
    uint32_t type;      /* enum ggml_type: F32, F16, BF16 or Q8_0 */
    int64_t ne[2];      /* ne[0]: row length; ne[1]: rows (1 for vectors) */
    uint64_t row_bytes; /* bytes of one row */
    const void *data;   /* inside the mapping */
} syn_tensor;

typedef struct qwen2_hparams {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd; /* model width */
    int32_t n_layer;
    int32_t n_head;    /* query heads */
    int32_t n_head_kv; /* key/value heads (grouped-query attention) */
    int32_t head_dim;  /* n_embd / n_head */
    int32_t n_ff;      /* feed-forward width */
    float rope_freq_base;
    float rms_norm_eps;
} qwen2_hparams;

typedef struct qwen2_layer {
    syn_tensor attn_norm;    /* [n_embd] */
    syn_tensor wq, wk, wv;   /* {n_embd, n_embd}, {n_embd, kv_dim}, {n_embd, kv_dim} */
    syn_tensor bq, bk, bv;   /* [n_embd], [kv_dim], [kv_dim] */
    syn_tensor wo;           /* {n_embd, n_embd} */
    syn_tensor ffn_norm;     /* [n_embd] */
    syn_tensor w_gate, w_up; /* {n_embd, n_ff} */
    syn_tensor w_down;       /* {n_ff, n_embd} */
} qwen2_layer;

struct syn_model {
    gguf_file *gguf;
    qwen2_hparams hp;
    syn_tensor tok_embd;    /* {n_embd, n_vocab} */
    syn_tensor output_norm; /* [n_embd] */
    syn_tensor output;      /* {n_embd, n_vocab}; the same view as tok_embd when tied */
    bool tied_output;
    qwen2_layer *layers; /* [n_layer] */
    struct syn_tokenizer *tokenizer;
    char *name;            /* general.name, "" when absent */
    char *chat_template;   /* tokenizer.chat_template, NULL when absent */
    uint64_t n_params;     /* elements of the bound tensors (tied output counted once) */
    uint64_t weight_bytes; /* bytes of the bound tensors */
    char *tensor_names;    /* the pool behind every syn_tensor.name */
    /* Background page warm-up (syn_model_params.prefetch); syn_model_free stops and joins it. */
    pthread_t prefetch_thread;
    bool prefetch_started;
    atomic_bool prefetch_stop;
};

/* syn_model_load on an already parsed file (tests, the fuzzer). Takes ownership of f: on error
 * it is closed, on success the model closes it. */
syn_status syn_model_load_gguf(gguf_file *f, const syn_model_params *params, syn_model **out);

/* Dequantizes n values of row data of a tensor type (F32, F16, BF16, Q8_0) into dst[n]. */
void syn_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* One row of a tensor, dequantized into dst[ne[0]]. */
void syn_tensor_row(const syn_tensor *t, int64_t row, float *dst);

float syn_fp16_to_f32(uint16_t h);
uint16_t syn_f32_to_fp16(float f); /* round to nearest even */
float syn_bf16_to_f32(uint16_t h);

/* A Q8_0 block: 32 int8 codes sharing one fp16 scale; value = d * q. */
enum { QK8_0 = 32 };
typedef struct block_q8_0 {
    uint16_t d; /* fp16 scale */
    int8_t qs[QK8_0];
} block_q8_0;
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 must match ggml's 34-byte layout");

#endif

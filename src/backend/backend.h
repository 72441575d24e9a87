/*
 * backend.h: the interface every compute backend implements. A backend state holds scratch
 * buffers for one model; syn_context (src/api/context.c) owns one per context, the engine
 * (src/engine/) one per engine.
 */
#ifndef SYN_BACKEND_H
#define SYN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu_features.h"
#include "model/model.h"
#include "synapse.h"

/* Positions per KV-cache block of the multi-sequence path: a block holds the keys and values of
 * SYN_KV_BLOCK consecutive positions of one sequence for every layer but the sliding-window ones
 * (those are in the sequence's ring, syn_batch.rings), in one allocation of kv_block_bytes(state)
 * bytes (a multiple of 8 positions: the attention reads keys 8 at a time). */
enum { SYN_KV_BLOCK = 16 };

/* What a backend state is created for, validated by syn_context_new / syn_engine_new. */
typedef struct syn_backend_config {
    uint32_t n_ctx;      /* positions a sequence may reach (memory grows on demand) */
    int32_t n_threads;   /* >= 0; 0: one per online CPU */
    syn_isa_tier isa;    /* a tier this CPU runs (syn_isa_tier_check passed) */
    syn_kv_type kv_type; /* SYN_KV_F32 or SYN_KV_F16 */
    struct syn_threadpool *shared_pool; /* NULL: the state's own n_threads; else these threads,
                                         * borrowed (they outlive the state) and taken in turns */
} syn_backend_config;

/*
 * A batch of tokens from any number of sequences for forward_batch. The tokens of one sequence
 * appear in increasing, consecutive positions; every earlier position of a token's sequence is
 * either already stored in its blocks or carried by an earlier token of the batch. The blocks
 * covering every position of the batch are allocated by the caller.
 */
typedef struct syn_batch {
    size_t n;                   /* tokens */
    const int32_t *tokens;      /* [n] ids inside the vocabulary (checked by the caller) */
    const uint32_t *pos;        /* [n] each token's position in its sequence (< n_ctx) */
    void *const *const *blocks; /* [n] each token's sequence block table: position p is stored
                                 * in blocks[i][p / SYN_KV_BLOCK] */
    const bool *want_logits;    /* [n] tokens whose logits are computed */
    float *logits;              /* [number of want_logits][n_vocab], in token order */
    /* [n] tokens whose final hidden state (after the output norm, before the LM head: what an
     * embedding pools) is written to hidden; NULL: none */
    const bool *want_hidden;
    float *hidden; /* [number of want_hidden][n_embd], in token order */
    /* [n] each token's sequence recurrent state (recurrent_state_bytes, float-aligned): models
     * with recurrent layers (qwen35) only, else NULL. A token at position 0 starts it afresh;
     * otherwise it must hold the state after the sequence's previous position. */
    float *const *rstates;
    /* [n] each token's sequence ring table for the sliding-window layers (models with such layers
     * only, else NULL): position p of those layers is stored in rings[i][p / SYN_KV_BLOCK], a
     * table of the n_ctx positions' blocks whose entry b points to ring block b % ring_blocks
     * (ring_blocks(state, k), k >= the tokens the batch carries of that sequence). */
    void *const *const *rings;
} syn_batch;

typedef struct syn_backend_ops {
    const char *name; /* "reference", "optimized" */

    /* Creates a state for cfg. A backend that cannot honour cfg (e.g. kv_type) fails with
     * SYN_ERR_UNSUPPORTED naming the setting. */
    syn_status (*create)(const struct syn_model *model, const syn_backend_config *cfg,
                         void **state);
    void (*destroy)(void *state);

    /* One sequence held by the state itself: runs tokens[n] at positions pos0 .. pos0 + n - 1
     * (pos0 + n <= n_ctx, checked by the caller), storing their keys and values. logits
     * receives [n][n_vocab] when all_logits, else only the last token's [n_vocab]. Entries at
     * positions >= pos0 are overwritten, which is how a truncated context is rewound. */
    syn_status (*forward)(void *state, const int32_t *tokens, size_t n, uint32_t pos0,
                          float *logits, bool all_logits);

    /* As forward, but hidden receives [n][n_embd]: each token's final hidden state after the
     * output norm; the LM head is not computed. The oracle of embeddings. */
    syn_status (*forward_hidden)(void *state, const int32_t *tokens, size_t n, uint32_t pos0,
                                 float *hidden);

    /* Whether forward may run next at pos <= the positions stored: false when a sliding-window
     * layer's cache, which keeps only the last positions, no longer holds some position a token
     * at pos attends to (syn_context_truncate then starts over). */
    bool (*can_resume)(const void *state, uint32_t pos);

    /* Bytes of forward's KV cache held now for layer (a local layer's stay near its window). */
    size_t (*kv_layer_bytes)(const void *state, int32_t layer);

    /* Multi-sequence path (NULL when the backend has none): the bytes of one KV block, and one
     * forward pass over a batch whose KV blocks the caller owns. Each token's logits are
     * bitwise the same whatever else shares its batch. */
    size_t (*kv_block_bytes)(const void *state);
    /* The bytes of one sequence's recurrent state (syn_batch.rstates); 0: the model has none. */
    size_t (*recurrent_state_bytes)(const void *state);
    /* The blocks of one sequence's ring for the sliding-window layers (syn_batch.rings) when a
     * batch carries at most seq_tokens of its tokens, each of *block_bytes; 0: the model has no
     * such layer. */
    uint32_t (*ring_blocks)(const void *state, uint32_t seq_tokens, size_t *block_bytes);
    syn_status (*forward_batch)(void *state, const syn_batch *batch);

    /* The state's step times (synapse_internal.h), NULL when the backend keeps none. */
    struct syn_step_times *(*step_times)(void *state);
} syn_backend_ops;

extern const syn_backend_ops syn_reference_backend;
extern const syn_backend_ops syn_optimized_backend;

#endif

/*
 * backend.h: the interface every compute backend implements. A backend state holds one
 * sequence's KV cache and scratch buffers for one model; syn_context (src/api/context.c) owns it.
 */
#ifndef SYN_BACKEND_H
#define SYN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "synapse.h"

typedef struct syn_backend_ops {
    const char *name; /* "reference", "optimized" */

    /* Creates a state able to hold n_ctx positions (memory may grow on demand up to that). */
    syn_status (*create)(const struct syn_model *model, uint32_t n_ctx, int32_t n_threads,
                         void **state);
    void (*destroy)(void *state);

    /* Runs tokens[n] at positions pos0 .. pos0 + n - 1 (pos0 + n <= n_ctx, checked by the
     * caller), storing their keys and values. logits receives [n][n_vocab] when all_logits, else
     * only the last token's [n_vocab]. Entries at positions >= pos0 are overwritten, which is how
     * a truncated context is rewound. */
    syn_status (*forward)(void *state, const int32_t *tokens, size_t n, uint32_t pos0,
                          float *logits, bool all_logits);
} syn_backend_ops;

extern const syn_backend_ops syn_reference_backend;

#endif

/* context.c: syn_context, one sequence's position and logits over a backend's KV cache. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "kernels/cpu_features.h"
#include "synapse_internal.h"

struct syn_context {
    const struct syn_model *model;
    const syn_backend_ops *backend;
    const char *isa_name; /* the kernel tier in use; "none" for the reference backend */
    void *backend_state;
    uint32_t n_ctx;
    uint32_t n_past;
    bool has_logits;
    float *logits; /* [n_vocab] after the last decoded token */
};

syn_context_params syn_context_default_params(void) {
    syn_context_params p = {
        .n_ctx = 4096,
        .n_threads = 0,
        .backend = SYN_BACKEND_OPTIMIZED,
        .isa = SYN_TIER_AUTO,
        .kv_type = SYN_KV_F32,
    };
    return p;
}

static const syn_backend_ops *backend_ops(syn_backend b) {
    switch (b) {
    case SYN_BACKEND_REFERENCE: return &syn_reference_backend;
    case SYN_BACKEND_OPTIMIZED: return &syn_optimized_backend;
    }
    return NULL;
}

syn_status syn_context_new(const syn_model *model, const syn_context_params *params,
                           syn_context **out) {
    syn_clear_error();
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_context_new: out is NULL");
    *out = NULL;
    if (!model || !params)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_context_new: model or params is NULL");
    uint32_t n_ctx_train = (uint32_t)model->hp.n_ctx_train;
    uint32_t n_ctx = params->n_ctx ? params->n_ctx : n_ctx_train;
    if (n_ctx > n_ctx_train)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "context size %u exceeds the model's training context %u", n_ctx,
                        n_ctx_train);
    if (params->n_threads < 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "thread count %d is negative", params->n_threads);
    const syn_backend_ops *ops = backend_ops(params->backend);
    if (!ops) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "unknown backend %d", (int)params->backend);
    if (params->kv_type != SYN_KV_F32 && params->kv_type != SYN_KV_F16)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "unknown kv_type %d", (int)params->kv_type);
    syn_backend_config cfg = {
        .n_ctx = n_ctx, .n_threads = params->n_threads, .kv_type = params->kv_type};
    /* Checked for every backend: an unavailable tier is an error, whatever runs. */
    syn_status st = syn_isa_tier_resolve(params->isa, &cfg.isa);
    if (st != SYN_OK) return st;

    syn_context *ctx = calloc(1, sizeof *ctx);
    float *logits = malloc(sizeof(float) * (size_t)model->hp.n_vocab);
    if (!ctx || !logits) {
        free(ctx);
        free(logits);
        return syn_fail(SYN_ERR_NO_MEMORY, "syn_context_new: out of memory");
    }
    ctx->model = model;
    ctx->backend = ops;
    ctx->isa_name = ops == &syn_reference_backend ? "none" : syn_isa_tier_name(cfg.isa);
    ctx->n_ctx = n_ctx;
    ctx->logits = logits;
    st = ops->create(model, &cfg, &ctx->backend_state);
    if (st != SYN_OK) {
        free(logits);
        free(ctx);
        return st;
    }
    *out = ctx;
    return SYN_OK;
}

void syn_context_free(syn_context *ctx) {
    if (!ctx) return;
    ctx->backend->destroy(ctx->backend_state);
    free(ctx->logits);
    free(ctx);
}

syn_status syn_context_decode(syn_context *ctx, const int32_t *tokens, size_t n_tokens,
                              float *all_logits) {
    syn_clear_error();
    if (!ctx || (!tokens && n_tokens))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_context_decode: NULL argument");
    if (n_tokens == 0) return SYN_OK;
    if (n_tokens > ctx->n_ctx - ctx->n_past)
        return syn_fail(SYN_ERR_CONTEXT_FULL,
                        "%zu tokens do not fit: %u of the context's %u positions are used",
                        n_tokens, ctx->n_past, ctx->n_ctx);
    int32_t n_vocab = ctx->model->hp.n_vocab;
    for (size_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "token %d at index %zu is outside the vocabulary [0, %d)", tokens[i], i,
                            n_vocab);

    float *dst = all_logits ? all_logits : ctx->logits;
    syn_status st = ctx->backend->forward(ctx->backend_state, tokens, n_tokens, ctx->n_past, dst,
                                          all_logits != NULL);
    if (st != SYN_OK) return st;
    if (all_logits)
        memcpy(ctx->logits, all_logits + (n_tokens - 1) * (size_t)n_vocab,
               sizeof(float) * (size_t)n_vocab);
    ctx->n_past += (uint32_t)n_tokens;
    ctx->has_logits = true;
    return SYN_OK;
}

const float *syn_context_logits(const syn_context *ctx) {
    return ctx && ctx->has_logits ? ctx->logits : NULL;
}

const char *syn_context_isa_name(const syn_context *ctx) { return ctx ? ctx->isa_name : "none"; }

syn_step_times *syn_context_step_times(syn_context *ctx) {
    if (!ctx || !ctx->backend->step_times) return NULL;
    return ctx->backend->step_times(ctx->backend_state);
}

uint32_t syn_context_n_past(const syn_context *ctx) { return ctx ? ctx->n_past : 0; }
uint32_t syn_context_n_ctx(const syn_context *ctx) { return ctx ? ctx->n_ctx : 0; }

syn_status syn_context_truncate(syn_context *ctx, uint32_t n_keep) {
    syn_clear_error();
    if (!ctx) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_context_truncate: ctx is NULL");
    if (n_keep > ctx->n_past)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "cannot keep %u tokens: only %u are cached",
                        n_keep, ctx->n_past);
    if (n_keep < ctx->n_past) ctx->has_logits = false; /* they belonged to a dropped token */
    /* A cache that no longer holds what position n_keep attends to (a sliding window's) or a
     * recurrent state past it starts over. */
    if (n_keep < ctx->n_past && !ctx->backend->can_resume(ctx->backend_state, n_keep)) n_keep = 0;
    ctx->n_past = n_keep;
    return SYN_OK;
}

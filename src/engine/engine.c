/*
 * engine.c: syn_engine's public functions: parameters, creation and shutdown, submission (the
 * prompt and its checks), cancellation, waiting and results, stats, syn_engine_run. The work
 * itself is done by the scheduler thread (scheduler.c); see the engine section of synapse.h for
 * the contract and threading model, scheduler.h for ownership.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/text_stream.h"
#include "kernels/cpu_features.h"
#include "model/model.h"
#include "synapse_internal.h"
#include "threads/compute_pool.h"

const char *syn_finish_reason_name(syn_finish_reason reason) {
    switch (reason) {
    case SYN_FINISH_NONE: return "none";
    case SYN_FINISH_EOG: return "eog";
    case SYN_FINISH_STOP: return "stop";
    case SYN_FINISH_LENGTH: return "length";
    case SYN_FINISH_CANCELLED: return "cancelled";
    case SYN_FINISH_ERROR: return "error";
    }
    return "?";
}

syn_engine_params syn_engine_default_params(void) {
    syn_engine_params p = {
        .n_threads = 0,
        .isa = SYN_TIER_AUTO,
        .kv_type = SYN_KV_F32,
        .n_parallel = 4,
        .n_ctx = 0,
        .kv_budget_mib = 1024,
        .max_step_tokens = 512,
        .prefix_cache = true,
    };
    return p;
}

syn_request_params syn_request_default_params(void) {
    syn_request_params p;
    memset(&p, 0, sizeof p);
    p.sampling = syn_sampler_default_params();
    p.max_tokens = 128;
    p.pooling = SYN_POOLING_MODEL;
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * Creation and shutdown
 * ------------------------------------------------------------------------------------------- */

/* The engine struct itself, once nothing refers to it. */
static void engine_destroy(syn_engine *e) {
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->done);
    pthread_mutex_destroy(&e->mutex);
    syn_grammar_vocab_free(e->grammar_vocab);
    free(e);
}

static syn_status check_params(const struct syn_model *model, const syn_engine_params *p,
                               uint32_t *n_ctx) {
    if (p->n_parallel < 1 || p->n_parallel > SYN_ENGINE_MAX_PARALLEL)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "n_parallel %d is outside 1..%d (concurrent requests)", p->n_parallel,
                        SYN_ENGINE_MAX_PARALLEL);
    if (p->max_step_tokens < p->n_parallel || p->max_step_tokens > SYN_ENGINE_MAX_STEP_TOKENS)
        return syn_fail(
            SYN_ERR_INVALID_ARGUMENT,
            "max_step_tokens %d is outside n_parallel..%d (%d..%d): every active request "
            "needs one token per step",
            p->max_step_tokens, SYN_ENGINE_MAX_STEP_TOKENS, p->n_parallel,
            SYN_ENGINE_MAX_STEP_TOKENS);
    if (p->n_threads < 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "n_threads %d is negative", p->n_threads);
    if (p->pool && p->n_threads != 0 && p->n_threads != syn_compute_pool_n_threads(p->pool))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "n_threads %d differs from the shared pool's %d threads (give 0)",
                        p->n_threads, syn_compute_pool_n_threads(p->pool));
    if (p->kv_budget_mib < 1)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "kv_budget_mib is 0: it must be at least 1");
    if (p->kv_type != SYN_KV_F32 && p->kv_type != SYN_KV_F16)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "unknown kv_type %d", (int)p->kv_type);
    const uint32_t n_ctx_train = (uint32_t)model->hp.n_ctx_train;
    *n_ctx = p->n_ctx ? p->n_ctx : n_ctx_train;
    if (*n_ctx > n_ctx_train)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "n_ctx %u exceeds the model's training context %u", *n_ctx, n_ctx_train);
    return SYN_OK;
}

syn_status syn_engine_new(const syn_model *model, const syn_engine_params *params,
                          syn_engine **out) {
    syn_clear_error();
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_new: out is NULL");
    *out = NULL;
    if (!model || !params)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_new: model or params is NULL");
    uint32_t n_ctx = 0;
    syn_status st = check_params(model, params, &n_ctx);
    syn_backend_config cfg = {.n_ctx = n_ctx,
                              .n_threads = params->n_threads,
                              .kv_type = params->kv_type,
                              .shared_pool =
                                  params->pool ? syn_compute_pool_threads(params->pool) : NULL};
    if (st == SYN_OK) st = syn_isa_tier_resolve(params->isa, &cfg.isa);
    if (st != SYN_OK) return st;

    syn_engine *e = calloc(1, sizeof *e);
    if (!e) return syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_new: out of memory");
    e->model = model;
    e->params = *params;
    e->n_ctx = n_ctx;
    e->n_vocab = model->hp.n_vocab;
    e->refs = 1;
    pthread_mutex_init(&e->mutex, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->done, NULL);

    st = scheduler_start(e, &cfg);
    if (st != SYN_OK) {
        engine_destroy(e);
        return st;
    }
    *out = e;
    return SYN_OK;
}

void syn_engine_free(syn_engine *e) {
    if (!e) return;
    scheduler_stop(e);
    pthread_mutex_lock(&e->mutex);
    const bool last = --e->refs == 0;
    pthread_mutex_unlock(&e->mutex);
    if (last) engine_destroy(e);
}

void syn_engine_fail_next_step(syn_engine *e) {
    pthread_mutex_lock(&e->mutex);
    e->fail_next_step = true;
    pthread_mutex_unlock(&e->mutex);
}

void syn_engine_get_stats(syn_engine *e, syn_engine_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!e) return;
    pthread_mutex_lock(&e->mutex);
    *out = e->stats;
    out->n_queued = e->n_queued;
    pthread_mutex_unlock(&e->mutex);
}

/* ---------------------------------------------------------------------------------------------
 * Submission
 * ------------------------------------------------------------------------------------------- */

/* A text prompt into a malloc'd *ids, with the tokenizer's prompt policy (BOS) and specials. */
static syn_status tokenize_text(const syn_tokenizer *tok, const char *text, size_t len,
                                int32_t **ids, size_t *n) {
    syn_status st = syn_tokenize_new(tok, text, len, true, true, ids, n);
    return st == SYN_OK ? st : syn_fail_context(st, "prompt text");
}

/* The request's prompt as a malloc'd id array, from whichever source params name. */
static syn_status build_prompt(const syn_engine *e, const syn_request_params *p, int32_t **ids,
                               size_t *n) {
    const bool has_tokens = p->prompt_tokens || p->n_prompt_tokens;
    const bool has_text = p->prompt_text != NULL;
    const bool has_chat = p->messages || p->n_messages;
    const bool has_json_chat = p->messages_json != NULL;
    if (has_tokens + has_text + has_chat + has_json_chat != 1)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "a request needs exactly one prompt (prompt_tokens, prompt_text, messages "
                        "or messages_json); got %d",
                        has_tokens + has_text + has_chat + has_json_chat);
    if ((p->tools_json || p->chat_variables_json) && !has_json_chat)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "tools_json and chat_variables_json go with messages_json");
    const syn_tokenizer *tok = syn_model_tokenizer(e->model);
    if (has_tokens) {
        if (!p->prompt_tokens)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "prompt_tokens is NULL with n_prompt_tokens %zu", p->n_prompt_tokens);
        *ids = malloc(sizeof **ids * (p->n_prompt_tokens ? p->n_prompt_tokens : 1));
        if (!*ids)
            return syn_fail(SYN_ERR_NO_MEMORY, "prompt of %zu tokens: out of memory",
                            p->n_prompt_tokens);
        memcpy(*ids, p->prompt_tokens, sizeof **ids * p->n_prompt_tokens);
        *n = p->n_prompt_tokens;
        return SYN_OK;
    }
    if (has_text) return tokenize_text(tok, p->prompt_text, strlen(p->prompt_text), ids, n);
    char *text = NULL;
    size_t len = 0;
    syn_status st;
    if (has_json_chat) {
        syn_chat_params chat = syn_chat_default_params();
        chat.template_source = p->chat_template;
        chat.messages_json = p->messages_json;
        chat.tools_json = p->tools_json;
        chat.variables_json = p->chat_variables_json;
        st = syn_chat_render(e->model, &chat, &text, &len);
        if (st == SYN_OK) st = tokenize_text(tok, text, len, ids, n);
        free(text);
        return st;
    }
    if (!p->messages)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "messages is NULL with n_messages %zu",
                        p->n_messages);
    if (p->n_messages == 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "messages is given with n_messages 0: a chat prompt needs a message");
    st = syn_chat_format_new(e->model, p->chat_template, p->messages, p->n_messages, true, &text,
                             &len);
    if (st == SYN_OK) st = tokenize_text(tok, text, len, ids, n);
    free(text);
    return st;
}

/* An embedding request's limits: its prompt alone fills at most the context and the budget; it
 * takes none of the generation constraints. */
static syn_status check_embedding(const syn_engine *e, const syn_request_params *p, size_t n) {
    if (p->grammar || p->json_schema || p->n_logit_bias)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "an embedding request takes no grammar, json_schema or logit_bias");
    if (n > e->n_ctx)
        return syn_fail(SYN_ERR_CONTEXT_FULL,
                        "the input's %zu tokens exceed the engine's context of %u positions", n,
                        e->n_ctx);
    const uint32_t need = blocks_for(n);
    if (need > e->stats.kv_blocks_total)
        return syn_fail(SYN_ERR_CONTEXT_FULL,
                        "the input's %zu tokens need %u KV blocks of %d positions but "
                        "kv_budget_mib %u holds %u",
                        n, need, SYN_KV_BLOCK, e->params.kv_budget_mib, e->stats.kv_blocks_total);
    return SYN_OK; /* the pooling is resolved as the request is built */
}

/* Checks the prompt and limits; the context and budget checks make admission always possible. */
static syn_status check_request(const syn_engine *e, const syn_request_params *p,
                                const int32_t *ids, size_t n) {
    if (n == 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "the prompt is empty: there is nothing to continue from");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= e->n_vocab)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "prompt token %d at index %zu is outside the vocabulary [0, %d)",
                            ids[i], i, e->n_vocab);
    if (p->max_tokens < 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "max_tokens %d is negative (0: until the context is full)", p->max_tokens);
    if (p->n_stop_strings > SYN_MAX_STOP_STRINGS)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "%zu stop strings: at most %d", p->n_stop_strings,
                        SYN_MAX_STOP_STRINGS);
    if (p->n_stop_strings && !p->stop_strings)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "stop_strings is NULL with n_stop_strings %zu",
                        p->n_stop_strings);
    for (size_t i = 0; i < p->n_stop_strings; i++) {
        const size_t len = p->stop_strings[i] ? strlen(p->stop_strings[i]) : 0;
        if (len == 0 || len > SYN_MAX_STOP_BYTES)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "stop string %zu is %s: it must hold 1..%d bytes", i,
                            p->stop_strings[i] ? "too long" : "NULL", SYN_MAX_STOP_BYTES);
    }
    /* checked before the max_tokens 0 case returns early */
    if (p->grammar_trigger && !p->grammar && !p->json_schema)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "grammar_trigger without a grammar or json_schema");
    if (p->grammar_trigger && (!*p->grammar_trigger || strlen(p->grammar_trigger) > 256))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar_trigger must hold 1..256 bytes");
    if (p->n_stop_tokens && !p->stop_tokens)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "stop_tokens is NULL with n_stop_tokens %zu",
                        p->n_stop_tokens);
    if (p->n_logit_bias && !p->logit_bias)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "n_logit_bias is %zu but logit_bias is NULL",
                        p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= e->n_vocab)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "logit_bias[%zu]: token %d is outside the vocabulary [0, %d)", i,
                            p->logit_bias[i].token, e->n_vocab);
        if (isnan(p->logit_bias[i].bias))
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "logit_bias[%zu]: the bias is NaN", i);
    }
    for (size_t i = 0; i < p->n_stop_tokens; i++)
        if (p->stop_tokens[i] < 0 || p->stop_tokens[i] >= e->n_vocab)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                            "stop token %d at index %zu is outside the vocabulary [0, %d)",
                            p->stop_tokens[i], i, e->n_vocab);
    if (p->embed) return check_embedding(e, p, n);
    if (n >= e->n_ctx)
        return syn_fail(
            SYN_ERR_CONTEXT_FULL,
            "the prompt's %zu tokens leave no room in the engine's context of %u positions", n,
            e->n_ctx);
    if (p->max_tokens == 0) {
        /* As long as the context allows: the prompt and one token must fit the budget. */
        const uint32_t need = blocks_for((uint64_t)n + 1);
        if (need > e->stats.kv_blocks_total)
            return syn_fail(SYN_ERR_CONTEXT_FULL,
                            "the prompt's %zu tokens need %u KV blocks of %d positions but "
                            "kv_budget_mib %u holds %u",
                            n, need, SYN_KV_BLOCK, e->params.kv_budget_mib,
                            e->stats.kv_blocks_total);
        return SYN_OK;
    }
    const uint64_t total = (uint64_t)n + (uint64_t)p->max_tokens;
    if (total > e->n_ctx)
        return syn_fail(SYN_ERR_CONTEXT_FULL,
                        "the prompt's %zu tokens + max_tokens %d = %llu exceed the engine's "
                        "context of %u positions",
                        n, p->max_tokens, (unsigned long long)total, e->n_ctx);
    const uint32_t need = blocks_for(total - 1); /* the last generated token is never decoded */
    if (need > e->stats.kv_blocks_total)
        return syn_fail(
            SYN_ERR_CONTEXT_FULL,
            "the prompt's %zu tokens + max_tokens %d need %u KV blocks of %d positions (%.1f MiB) "
            "but kv_budget_mib %u holds %u",
            n, p->max_tokens, need, SYN_KV_BLOCK,
            (double)need * (double)e->stats.kv_block_bytes / 1048576.0, e->params.kv_budget_mib,
            e->stats.kv_blocks_total);
    return SYN_OK;
}

/* Parses r's grammar, builds the engine's vocabulary trie on first use, and starts r's matcher. */
static syn_status grammar_init(syn_engine *e, const syn_request_params *p, syn_request *r) {
    if (p->grammar && p->json_schema)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "grammar and json_schema are mutually exclusive");
    syn_status st = p->grammar ? syn_grammar_parse_gbnf(p->grammar, &r->grammar)
                               : syn_grammar_from_json_schema(p->json_schema, &r->grammar);
    if (st != SYN_OK) return st == SYN_ERR_FORMAT ? SYN_ERR_INVALID_ARGUMENT : st;
    pthread_mutex_lock(&e->mutex);
    if (!e->grammar_vocab)
        st = syn_grammar_vocab_new(syn_model_tokenizer(e->model), &e->grammar_vocab);
    pthread_mutex_unlock(&e->mutex);
    if (st == SYN_OK) st = syn_grammar_matcher_new(r->grammar, &r->matcher);
    if (st != SYN_OK) return st;
    r->allowed = malloc(sizeof *r->allowed * (((size_t)e->n_vocab + 63) / 64));
    r->banned = malloc(sizeof *r->banned * e->n_vocab);
    if (!r->allowed || !r->banned) return syn_fail(SYN_ERR_NO_MEMORY, "grammar: out of memory");
    return SYN_OK;
}

/* Validates p and builds its request, not yet queued, into *out. */
static syn_status request_new(syn_engine *e, const syn_request_params *p, syn_request **out) {
    int32_t *prompt = NULL;
    size_t n = 0;
    syn_status st = build_prompt(e, p, &prompt, &n);
    if (st == SYN_OK) st = check_request(e, p, prompt, n);
    syn_request *r = st == SYN_OK ? calloc(1, sizeof *r) : NULL;
    if (st == SYN_OK && !r) st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_submit: out of memory");
    if (st != SYN_OK) {
        free(prompt);
        return st;
    }
    r->engine = e;
    r->slot = -1;
    r->n_prompt = n;
    r->n_fill = (uint32_t)n;
    /* an embedding generates nothing: its blocks hold the prompt */
    r->max_tokens = p->embed ? 0 : p->max_tokens ? p->max_tokens : (int32_t)(e->n_ctx - n);
    r->max_blocks =
        p->embed ? blocks_for(n) : blocks_for((uint64_t)n + (uint64_t)r->max_tokens - 1);
    r->ignore_eos = p->ignore_eos;
    r->n_stop = p->n_stop_tokens;
    r->on_token = p->embed ? NULL : p->on_token; /* an embedding streams nothing */
    r->user_data = p->user_data;
    r->ids = realloc(prompt, sizeof *r->ids * (n + (size_t)r->max_tokens));
    r->stop = malloc(sizeof *r->stop * (r->n_stop ? r->n_stop : 1));
    r->block_ids = malloc(sizeof *r->block_ids * r->max_blocks);
    r->block_data = malloc(sizeof *r->block_data * r->max_blocks);
    if (!r->ids) free(prompt);
    const bool ok = r->ids && r->stop && r->block_ids && r->block_data;
    if (!ok)
        st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_submit: out of memory for %zu + %d tokens", n,
                      r->max_tokens);
    if (st == SYN_OK && p->embed) {
        /* no sampler or text stream: 2,048 inputs of one call would hold 2,048 of them */
        const size_t n_embd = (size_t)e->model->hp.n_embd;
        r->embed = true;
        r->pool_sum = calloc(n_embd, sizeof *r->pool_sum);
        r->embedding = malloc(sizeof *r->embedding * n_embd);
        if (!r->pool_sum || !r->embedding)
            st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_submit: out of memory for an embedding");
        else
            st = syn_pooling_resolve(e->model, p->pooling, &r->pooling);
    } else if (st == SYN_OK) {
        if (r->n_stop) memcpy(r->stop, p->stop_tokens, sizeof *r->stop * r->n_stop);
        st = syn_sampler_new(&p->sampling, &r->sampler);
        if (st == SYN_OK)
            st = text_stream_init(&r->text, syn_model_tokenizer(e->model), p->stop_strings,
                                  p->n_stop_strings);
    }
    if (st == SYN_OK && (p->grammar || p->json_schema)) st = grammar_init(e, p, r);
    if (st == SYN_OK && p->grammar_trigger) {
        r->trigger_len = strlen(p->grammar_trigger);
        r->trigger = strdup(p->grammar_trigger);
        r->tail = malloc(2 * r->trigger_len + SYN_TRIGGER_TOKEN_BYTES);
        r->trigger_pending = true;
        if (!r->trigger || !r->tail)
            st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_submit: out of memory for the trigger");
    }
    if (st == SYN_OK && p->n_logit_bias) {
        r->bias = malloc(sizeof *r->bias * p->n_logit_bias);
        r->biased = malloc(sizeof *r->biased * (size_t)e->n_vocab);
        if (!r->bias || !r->biased) {
            st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_submit: out of memory for logit_bias");
        } else {
            memcpy(r->bias, p->logit_bias, sizeof *r->bias * p->n_logit_bias);
            r->n_bias = p->n_logit_bias;
        }
    }
    if (st != SYN_OK) {
        request_destroy(r);
        return st;
    }
    r->refs = 2; /* the handle and the engine */
    *out = r;
    return SYN_OK;
}

/* Builds the requests of params[n] into reqs[n] and queues them in one critical section, so the
 * scheduler admits them in the same pass (as slots and blocks allow), never the first alone
 * while the others are still being built. On error none is queued, every reqs[i] is NULL and,
 * with an item name ("request", "input"), the message names the failing one. */
static syn_status submit_together(syn_engine *e, const syn_request_params *params, size_t n,
                                  const char *item, syn_request **reqs) {
    for (size_t i = 0; i < n; i++)
        reqs[i] = NULL;
    syn_status st = SYN_OK;
    for (size_t i = 0; st == SYN_OK && i < n; i++) {
        st = request_new(e, &params[i], &reqs[i]);
        if (st != SYN_OK && item) syn_fail_context(st, "%s %zu of %zu", item, i, n);
    }
    pthread_mutex_lock(&e->mutex);
    if (st == SYN_OK && e->stopping)
        st = syn_fail(SYN_ERR_STATE, "syn_engine_submit: the engine is shutting down");
    if (st == SYN_OK) {
        const double now = syn_now_ms();
        for (size_t i = 0; i < n; i++) {
            e->refs++;
            reqs[i]->t_submit = now;
            reqs[i]->seq = e->next_seq++;
            queue_push_back_locked(e, reqs[i]);
        }
        pthread_cond_broadcast(&e->work);
    }
    pthread_mutex_unlock(&e->mutex);
    if (st != SYN_OK)
        for (size_t i = 0; i < n; i++) {
            if (reqs[i]) request_destroy(reqs[i]);
            reqs[i] = NULL;
        }
    return st;
}

syn_status syn_engine_submit(syn_engine *e, const syn_request_params *p, syn_request **out) {
    syn_clear_error();
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_submit: out is NULL");
    *out = NULL;
    if (!e || !p)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_submit: engine or params is NULL");
    return submit_together(e, p, 1, NULL, out);
}

/* ---------------------------------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------------------------------- */

syn_status syn_request_cancel(syn_request *r) {
    syn_clear_error();
    if (!r) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_request_cancel: request is NULL");
    syn_engine *e = r->engine;
    syn_status st = SYN_OK;
    pthread_mutex_lock(&e->mutex);
    if (r->done) {
        st = syn_fail(SYN_ERR_STATE, "cannot cancel: the request has already finished (%s)",
                      syn_finish_reason_name(r->finish));
    } else if (r->queued) {
        dequeue_locked(e, r);
        finish_locked(r, SYN_FINISH_CANCELLED, SYN_OK, NULL);
    } else {
        r->cancel = true;
        pthread_cond_broadcast(&e->work);
    }
    pthread_mutex_unlock(&e->mutex);
    return st;
}

static void fill_result(const syn_request *r, syn_request_result *out) {
    *out = (syn_request_result){
        .finish = r->finish,
        .status = r->status,
        .error = r->error,
        .tokens = r->ids, /* the generated tokens only, once finished */
        .n_tokens = r->n_out,
        .n_prompt_tokens = r->n_prompt,
        .n_cached_tokens = r->n_cached,
        .queue_ms = r->t_admit > 0 ? r->t_admit - r->t_submit : 0,
        .ttft_ms = r->t_first > 0 ? r->t_first - r->t_submit : 0,
        .total_ms = r->t_end - r->t_submit,
        .embedding = r->embed && r->finish == SYN_FINISH_LENGTH ? r->embedding : NULL,
        .n_embd = r->embed ? r->engine->model->hp.n_embd : 0,
    };
}

syn_status syn_request_wait(syn_request *r, syn_request_result *out) {
    syn_clear_error();
    if (!r || !out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_request_wait: NULL argument");
    syn_engine *e = r->engine;
    pthread_mutex_lock(&e->mutex);
    while (!r->done)
        pthread_cond_wait(&e->done, &e->mutex);
    fill_result(r, out);
    pthread_mutex_unlock(&e->mutex);
    return SYN_OK;
}

bool syn_request_is_done(const syn_request *r) {
    if (!r) return false;
    syn_engine *e = r->engine;
    pthread_mutex_lock(&e->mutex);
    const bool done = r->done;
    pthread_mutex_unlock(&e->mutex);
    return done;
}

void syn_request_free(syn_request *r) {
    if (!r) return;
    syn_engine *e = r->engine;
    pthread_mutex_lock(&e->mutex);
    if (!r->done) {
        if (r->queued) {
            dequeue_locked(e, r);
            finish_locked(r, SYN_FINISH_CANCELLED, SYN_OK, NULL);
        } else {
            r->cancel = true;
            pthread_cond_broadcast(&e->work);
        }
    }
    const bool last = request_unref_locked(r);
    pthread_mutex_unlock(&e->mutex);
    if (last) engine_destroy(e);
}

syn_status syn_engine_run(syn_engine *e, const syn_request_params *params, size_t n,
                          syn_request **requests, syn_run_stats *stats) {
    syn_clear_error();
    if (!e || (n && (!params || !requests)))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_run: NULL argument");
    syn_engine_stats before, after;
    syn_engine_get_stats(e, &before);
    const double t0 = syn_now_ms();
    syn_status st = n ? submit_together(e, params, n, "request", requests) : SYN_OK;
    if (st != SYN_OK) return st;
    syn_run_stats s = {0};
    for (size_t i = 0; i < n; i++) {
        syn_request_result res;
        syn_request_wait(requests[i], &res);
        s.n_prompt_tokens += res.n_prompt_tokens;
        s.n_generated += res.n_tokens;
    }
    s.wall_ms = syn_now_ms() - t0;
    syn_engine_get_stats(e, &after);
    s.tok_per_s = s.wall_ms > 0 ? (double)s.n_generated * 1e3 / s.wall_ms : 0;
    const double decode_ms = after.decode_steps_ms - before.decode_steps_ms;
    const uint64_t decode_tokens = after.decode_steps_tokens - before.decode_steps_tokens;
    s.decode_tok_per_s = decode_ms > 0 ? (double)decode_tokens * 1e3 / decode_ms : 0;
    s.n_steps = after.n_steps - before.n_steps;
    if (stats) *stats = s;
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Embeddings
 * ------------------------------------------------------------------------------------------- */

syn_embed_params syn_embed_default_params(void) {
    syn_embed_params p = {.pooling = SYN_POOLING_MODEL, .dimensions = 0};
    return p;
}

/* Input k as an embedding request of params. */
static syn_status embed_request(const syn_embed_input *in, size_t k, syn_pooling pooling,
                                syn_request_params *p) {
    *p = syn_request_default_params();
    p->embed = true;
    p->pooling = pooling;
    const bool has_text = in->text != NULL, has_tokens = in->tokens || in->n_tokens;
    if (has_text == has_tokens)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "input %zu needs exactly one of text and tokens",
                        k);
    p->prompt_text = in->text;
    p->prompt_tokens = in->tokens;
    p->n_prompt_tokens = in->n_tokens;
    return SYN_OK;
}

syn_status syn_embed(syn_engine *e, const syn_embed_params *params, const syn_embed_input *inputs,
                     size_t n, float *out, size_t *n_tokens_out) {
    syn_clear_error();
    if (!e || !params || !inputs || !out || n == 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_embed: a NULL argument or no inputs (n %zu)",
                        n);
    const int32_t n_embd = e->model->hp.n_embd;
    if (params->dimensions < 0 || params->dimensions > n_embd)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "dimensions %d is outside 1..%d (0: all)",
                        params->dimensions, n_embd);
    const size_t d = params->dimensions ? (size_t)params->dimensions : (size_t)n_embd;
    syn_request **reqs = calloc(n, sizeof *reqs);
    syn_request_params *reqp = malloc(sizeof *reqp * n);
    if (!reqs || !reqp) {
        free(reqs);
        free(reqp);
        return syn_fail(SYN_ERR_NO_MEMORY, "syn_embed: out of memory for %zu inputs", n);
    }
    syn_status st = SYN_OK;
    for (size_t k = 0; st == SYN_OK && k < n; k++)
        st = embed_request(&inputs[k], k, params->pooling, &reqp[k]);
    if (st == SYN_OK) st = submit_together(e, reqp, n, "input", reqs);
    free(reqp);
    size_t n_tokens = 0;
    for (size_t k = 0; st == SYN_OK && k < n; k++) {
        syn_request_result res;
        syn_request_wait(reqs[k], &res);
        if (!res.embedding) {
            st = syn_fail(res.status != SYN_OK ? res.status : SYN_ERR_STATE,
                          "input %zu: the request finished as %s: %s", k,
                          syn_finish_reason_name(res.finish), res.error);
            break;
        }
        memcpy(out + k * d, res.embedding, sizeof *out * d);
        if (d < (size_t)n_embd) syn_embed_normalize(out + k * d, d);
        n_tokens += res.n_prompt_tokens;
    }
    for (size_t k = 0; k < n; k++)
        syn_request_free(reqs[k]); /* cancels what a failure left running */
    free(reqs);
    if (st == SYN_OK && n_tokens_out) *n_tokens_out = n_tokens;
    return st;
}

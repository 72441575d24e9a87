/*
 * engine.c: syn_engine: the request queue, the scheduler thread and its batched steps (see the
 * engine section of synapse.h for the contract and threading model).
 *
 * Ownership: fields under "mutex" are read and written with engine->mutex held; fields under
 * "scheduler" belong to the scheduler thread (and to submission before the request is queued).
 * A request struct lives while its handle is held or the engine still works on it (refs); the
 * engine struct lives while its owner or any request struct holds it (refs), so that handles stay
 * usable after syn_engine_free.
 *
 * A step: every decoding request first gets a KV block for its next position (preempting the
 * most recently submitted requests when the pool is dry), then contributes its last sampled
 * token; prefilling requests contribute prompt tokens in submission order up to max_step_tokens;
 * only the last prompt token and decode tokens want logits. After the pass, each request with
 * logits samples with its own sampler, streams (holding back text that may be a stop string), and
 * finishes on EOG / stop token / stop string / length / callback refusal; the full blocks of
 * every request are entered into the prefix cache; finished requests get their final event and
 * release their blocks and slots.
 *
 * A preempted request keeps its tokens, sampler and text state and goes back to the queue's
 * front; readmitted, it "prefills" its prompt plus all but the last generated token (n_fill)
 * without wanting logits, then decodes on from that last token.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/clock.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/kv_pool.h"
#include "engine/text_stream.h"
#include "kernels/cpu_features.h"
#include "threads/compute_pool.h"

typedef enum req_phase { PHASE_PREFILL, PHASE_DECODE, PHASE_FINISHED } req_phase;

struct syn_request {
    struct syn_engine *engine;

    /* Set at submission, read-only afterwards (until finish_locked releases them). */
    int32_t *ids;      /* [n_prompt + max_tokens]: the prompt, then the generated tokens; once
                        * finished, [n_out]: the generated tokens only (release_work_state) */
    size_t n_prompt;
    int32_t max_tokens;  /* > 0: what the caller's 0 meant resolved against the context */
    uint32_t max_blocks; /* blocks for positions [0, n_prompt + max_tokens - 1) */
    bool ignore_eos;
    int32_t *stop;       /* [n_stop] */
    size_t n_stop;
    uint64_t seq;        /* submission order: preemption takes the largest */
    syn_token_fn on_token;
    void *user_data;
    double t_submit;

    /* Scheduler. */
    syn_sampler *sampler;
    text_stream text;    /* the streamed text: detokenizer, stop strings, held-back text */
    int32_t *block_ids;  /* [max_blocks] pool ids of the sequence's blocks */
    void **block_data;   /* [max_blocks] their memory: the table the backend reads */
    uint32_t n_blocks;
    uint32_t reserved;   /* blocks still to draw from the pool's reservation */
    uint32_t n_published; /* leading blocks entered into the prefix cache */
    bool publish_blocked; /* an equal chain was cached by another sequence first */
    uint32_t n_past;     /* positions whose keys and values are stored */
    uint32_t n_fill;     /* positions to compute before decoding (re)starts: n_prompt, or after a
                          * preemption the prompt and all but the last generated token */
    size_t n_out;        /* generated tokens, in ids after the prompt */
    size_t n_cached;     /* prompt positions reused from the prefix cache */
    req_phase phase;
    uint32_t step_tokens; /* tokens in the current step */
    bool step_logits;     /* the current step computes its logits ... */
    uint32_t logits_row;  /* ... in this row of the step's logits (rows follow batch order) */
    syn_finish_reason finish_now; /* decided during a step, applied after it */
    syn_status finish_status;
    char finish_msg[256];
    double t_admit, t_first;

    /* Mutex. */
    syn_request *next; /* queue link */
    bool queued;
    bool cancel;
    bool done;
    int refs;          /* the handle + the engine until done */
    syn_finish_reason finish;
    syn_status status;
    char error[256];
    double t_end;
};

struct syn_engine {
    const struct syn_model *model;
    syn_engine_params params;
    uint32_t n_ctx;
    int32_t n_vocab;
    const syn_backend_ops *ops;

    /* Scheduler (after creation). */
    void *backend;
    kv_pool *pool;
    syn_request **active; /* [n_parallel] in admission order */
    uint32_t n_active;
    int32_t *b_tokens;    /* [max_step_tokens] the step's batch */
    uint32_t *b_pos;
    void *const **b_blocks;
    bool *b_want;
    float *logits;        /* [logits_rows][n_vocab] */
    uint32_t logits_rows;
    const int32_t *eog_ids; /* [n_eog] the vocabulary's end-of-generation tokens (the tokenizer's) */
    size_t n_eog;

    /* Mutex. */
    pthread_mutex_t mutex;
    pthread_cond_t work;  /* a submission, a cancellation or shutdown */
    pthread_cond_t done;  /* a request finished */
    syn_request *q_head, *q_tail;
    uint32_t n_queued;
    uint64_t next_seq;
    bool stopping;
    bool fail_next_step;
    int refs;
    syn_engine_stats stats;

    pthread_t thread;
    bool thread_started;
};

static uint32_t blocks_for(uint64_t positions) {
    return (uint32_t)((positions + SYN_KV_BLOCK - 1) / SYN_KV_BLOCK);
}

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
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * Lifetimes
 * ------------------------------------------------------------------------------------------- */

/* The engine struct itself, once nothing refers to it. */
static void engine_destroy(syn_engine *e) {
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->done);
    pthread_mutex_destroy(&e->mutex);
    free(e);
}

/* Frees (and forgets) what only the work on r needs: the sampler (whose candidate buffer can be
 * 12 bytes per vocabulary entry, 1.8 MB for Qwen2), the text stream, the stop tokens and the block
 * tables. */
static void free_work_buffers(syn_request *r) {
    syn_sampler_free(r->sampler);
    text_stream_free(&r->text);
    free(r->stop);
    free(r->block_ids);
    free(r->block_data);
    r->sampler = NULL;
    r->stop = NULL;
    r->block_ids = NULL;
    r->block_data = NULL;
}

static void request_destroy(syn_request *r) {
    free_work_buffers(r);
    free(r->ids);
    free(r);
}

/* Drops one reference to r (mutex held), freeing it on the last one, which also drops r's
 * reference to the engine. Returns true when that was the engine's last reference: the caller
 * then destroys the engine after unlocking its mutex. */
static bool request_unref_locked(syn_request *r) {
    if (--r->refs > 0) return false;
    syn_engine *e = r->engine;
    request_destroy(r);
    return --e->refs == 0;
}

/* The moment r finishes, keeps only what its result needs: the work buffers go, and the generated
 * ids move to the front of ids, which shrinks to them. The engine no longer touches r: it is out
 * of the queue and of the active list. */
static void release_work_state(syn_request *r) {
    free_work_buffers(r);
    memmove(r->ids, r->ids + r->n_prompt, sizeof *r->ids * r->n_out);
    int32_t *generated = realloc(r->ids, sizeof *r->ids * (r->n_out ? r->n_out : 1));
    if (generated) r->ids = generated; /* a failed shrink keeps the larger array */
}

/* Records r's outcome, releases its work state and wakes its waiters (mutex held); drops the
 * engine's reference. */
static void finish_locked(syn_request *r, syn_finish_reason why, syn_status status, const char *msg) {
    syn_engine *e = r->engine;
    release_work_state(r);
    r->done = true;
    r->finish = why;
    r->status = status;
    snprintf(r->error, sizeof r->error, "%s", msg ? msg : "");
    r->t_end = syn_now_ms();
    pthread_cond_broadcast(&e->done);
    /* The engine outlives this call: its owner reference is held while the scheduler runs. */
    (void)request_unref_locked(r);
}

/* ---------------------------------------------------------------------------------------------
 * Creation and shutdown
 * ------------------------------------------------------------------------------------------- */

static void *scheduler_main(void *arg);

static syn_status check_params(const struct syn_model *model, const syn_engine_params *p, uint32_t *n_ctx) {
    if (p->n_parallel < 1 || p->n_parallel > SYN_ENGINE_MAX_PARALLEL)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "n_parallel %d is outside 1..%d (concurrent requests)",
                        p->n_parallel, SYN_ENGINE_MAX_PARALLEL);
    if (p->max_step_tokens < p->n_parallel || p->max_step_tokens > SYN_ENGINE_MAX_STEP_TOKENS)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "max_step_tokens %d is outside n_parallel..%d (%d..%d): every active request "
                        "needs one token per step",
                        p->max_step_tokens, SYN_ENGINE_MAX_STEP_TOKENS, p->n_parallel, SYN_ENGINE_MAX_STEP_TOKENS);
    if (p->n_threads < 0) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "n_threads %d is negative", p->n_threads);
    if (p->pool && p->n_threads != 0 && p->n_threads != syn_compute_pool_n_threads(p->pool))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "n_threads %d differs from the shared pool's %d threads (give 0)",
                        p->n_threads, syn_compute_pool_n_threads(p->pool));
    if (p->kv_budget_mib < 1) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "kv_budget_mib is 0: it must be at least 1");
    if (p->kv_type != SYN_KV_F32 && p->kv_type != SYN_KV_F16)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "unknown kv_type %d", (int)p->kv_type);
    const uint32_t n_ctx_train = (uint32_t)model->hp.n_ctx_train;
    *n_ctx = p->n_ctx ? p->n_ctx : n_ctx_train;
    if (*n_ctx > n_ctx_train)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "n_ctx %u exceeds the model's training context %u", *n_ctx,
                        n_ctx_train);
    return SYN_OK;
}

/* Everything the scheduler owns; e->backend and e->pool may be NULL. */
static void free_scheduler_state(syn_engine *e) {
    if (e->backend) e->ops->destroy(e->backend);
    kv_pool_free(e->pool);
    free(e->active);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_blocks);
    free(e->b_want);
    free(e->logits);
    e->backend = NULL;
    e->pool = NULL;
}

syn_status syn_engine_new(const syn_model *model, const syn_engine_params *params, syn_engine **out) {
    syn_clear_error();
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_new: out is NULL");
    *out = NULL;
    if (!model || !params) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_new: model or params is NULL");
    uint32_t n_ctx = 0;
    syn_status st = check_params(model, params, &n_ctx);
    syn_backend_config cfg = {.n_ctx = n_ctx, .n_threads = params->n_threads, .kv_type = params->kv_type,
                              .shared_pool = params->pool ? syn_compute_pool_threads(params->pool) : NULL};
    if (st == SYN_OK) st = syn_resolve_tier(params->isa, &cfg.isa);
    if (st != SYN_OK) return st;

    syn_engine *e = calloc(1, sizeof *e);
    if (!e) return syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_new: out of memory");
    e->model = model;
    e->params = *params;
    e->n_ctx = n_ctx;
    e->n_vocab = model->hp.n_vocab;
    e->ops = &syn_optimized_backend;
    e->refs = 1;
    pthread_mutex_init(&e->mutex, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->done, NULL);

    st = e->ops->create(model, &cfg, &e->backend);
    if (st == SYN_OK) {
        const size_t block_bytes = e->ops->kv_block_bytes(e->backend);
        const uint64_t n_blocks = ((uint64_t)params->kv_budget_mib << 20) / block_bytes;
        if (n_blocks == 0)
            st = syn_fail(SYN_ERR_INVALID_ARGUMENT, "kv_budget_mib %u holds no KV block of %zu bytes",
                          params->kv_budget_mib, block_bytes);
        else
            st = kv_pool_new(block_bytes, n_blocks > INT32_MAX ? INT32_MAX : (uint32_t)n_blocks, &e->pool);
    }
    if (st == SYN_OK) {
        const size_t n_step = (size_t)params->max_step_tokens;
        e->active = calloc((size_t)params->n_parallel, sizeof *e->active);
        e->b_tokens = malloc(sizeof *e->b_tokens * n_step);
        e->b_pos = malloc(sizeof *e->b_pos * n_step);
        e->b_blocks = malloc(sizeof *e->b_blocks * n_step);
        e->b_want = malloc(sizeof *e->b_want * n_step);
        if (!e->active || !e->b_tokens || !e->b_pos || !e->b_blocks || !e->b_want)
            st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_new: out of memory for %d-token steps", params->max_step_tokens);
    }
    if (st == SYN_OK) e->n_eog = (size_t)syn_tokenizer_eog_ids(syn_model_tokenizer(model), &e->eog_ids);
    if (st == SYN_OK) {
        e->stats.kv_blocks_total = kv_pool_capacity(e->pool);
        e->stats.kv_block_bytes = e->ops->kv_block_bytes(e->backend);
        if (pthread_create(&e->thread, NULL, scheduler_main, e) != 0)
            st = syn_fail(SYN_ERR_INTERNAL, "syn_engine_new: cannot start the scheduler thread");
        else
            e->thread_started = true;
    }
    if (st != SYN_OK) {
        free_scheduler_state(e);
        engine_destroy(e);
        return st;
    }
    *out = e;
    return SYN_OK;
}

void syn_engine_free(syn_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mutex);
    e->stopping = true;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mutex);
    if (e->thread_started) pthread_join(e->thread, NULL);
    free_scheduler_state(e);
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

/* Tokenizes text (parse_special) into a malloc'd *ids. */
static syn_status tokenize_text(const syn_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n) {
    /* Byte-level BPE gives at most one token per byte. */
    int32_t *buf = malloc(sizeof *buf * (len + 1));
    if (!buf) return syn_fail(SYN_ERR_NO_MEMORY, "prompt of %zu bytes: out of memory", len);
    syn_status st = syn_tokenize(tok, text, len, true, buf, len + 1, n);
    if (st != SYN_OK) {
        free(buf);
        return syn_fail_context(st, "prompt text");
    }
    *ids = buf;
    return SYN_OK;
}

/* The request's prompt as a malloc'd id array, from whichever source params name. */
static syn_status build_prompt(const syn_engine *e, const syn_request_params *p, int32_t **ids, size_t *n) {
    const bool has_tokens = p->prompt_tokens || p->n_prompt_tokens;
    const bool has_text = p->prompt_text != NULL;
    const bool has_chat = p->messages || p->n_messages;
    if (has_tokens + has_text + has_chat != 1)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "a request needs exactly one prompt (prompt_tokens, prompt_text or messages); got %d",
                        has_tokens + has_text + has_chat);
    const syn_tokenizer *tok = syn_model_tokenizer(e->model);
    if (has_tokens) {
        if (!p->prompt_tokens) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "prompt_tokens is NULL with n_prompt_tokens %zu", p->n_prompt_tokens);
        *ids = malloc(sizeof **ids * (p->n_prompt_tokens ? p->n_prompt_tokens : 1));
        if (!*ids) return syn_fail(SYN_ERR_NO_MEMORY, "prompt of %zu tokens: out of memory", p->n_prompt_tokens);
        memcpy(*ids, p->prompt_tokens, sizeof **ids * p->n_prompt_tokens);
        *n = p->n_prompt_tokens;
        return SYN_OK;
    }
    if (has_text) return tokenize_text(tok, p->prompt_text, strlen(p->prompt_text), ids, n);
    if (!p->messages) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "messages is NULL with n_messages %zu", p->n_messages);
    if (p->n_messages == 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "messages is given with n_messages 0: a chat prompt needs a message");
    size_t len = 0;
    syn_status st = syn_chat_format(e->model, p->chat_template, p->messages, p->n_messages, true, NULL, 0, &len);
    if (st != SYN_OK && st != SYN_ERR_BUFFER_TOO_SMALL) return st;
    char *text = malloc(len + 1);
    if (!text) return syn_fail(SYN_ERR_NO_MEMORY, "chat prompt of %zu bytes: out of memory", len);
    st = syn_chat_format(e->model, p->chat_template, p->messages, p->n_messages, true, text, len + 1, &len);
    if (st == SYN_OK) st = tokenize_text(tok, text, len, ids, n);
    free(text);
    return st;
}

/* Checks the prompt and limits; the context and budget checks make admission always possible. */
static syn_status check_request(const syn_engine *e, const syn_request_params *p, const int32_t *ids, size_t n) {
    if (n == 0) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "the prompt is empty: there is nothing to continue from");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= e->n_vocab)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "prompt token %d at index %zu is outside the vocabulary [0, %d)",
                            ids[i], i, e->n_vocab);
    if (p->max_tokens < 0)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "max_tokens %d is negative (0: until the context is full)", p->max_tokens);
    if (p->n_stop_strings > SYN_MAX_STOP_STRINGS)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "%zu stop strings: at most %d", p->n_stop_strings, SYN_MAX_STOP_STRINGS);
    if (p->n_stop_strings && !p->stop_strings)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "stop_strings is NULL with n_stop_strings %zu", p->n_stop_strings);
    for (size_t i = 0; i < p->n_stop_strings; i++) {
        const size_t len = p->stop_strings[i] ? strlen(p->stop_strings[i]) : 0;
        if (len == 0 || len > SYN_MAX_STOP_BYTES)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "stop string %zu is %s: it must hold 1..%d bytes", i,
                            p->stop_strings[i] ? "too long" : "NULL", SYN_MAX_STOP_BYTES);
    }
    if (n >= e->n_ctx)
        return syn_fail(SYN_ERR_CONTEXT_FULL, "the prompt's %zu tokens leave no room in the engine's context of %u positions",
                        n, e->n_ctx);
    if (p->max_tokens == 0) { /* as long as the context allows: the prompt and one token must fit the budget */
        const uint32_t need = blocks_for((uint64_t)n + 1);
        if (need > e->stats.kv_blocks_total)
            return syn_fail(SYN_ERR_CONTEXT_FULL,
                            "the prompt's %zu tokens need %u KV blocks of %d positions but kv_budget_mib %u holds %u", n,
                            need, SYN_KV_BLOCK, e->params.kv_budget_mib, e->stats.kv_blocks_total);
        return SYN_OK;
    }
    if (p->n_stop_tokens && !p->stop_tokens)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "stop_tokens is NULL with n_stop_tokens %zu", p->n_stop_tokens);
    for (size_t i = 0; i < p->n_stop_tokens; i++)
        if (p->stop_tokens[i] < 0 || p->stop_tokens[i] >= e->n_vocab)
            return syn_fail(SYN_ERR_INVALID_ARGUMENT, "stop token %d at index %zu is outside the vocabulary [0, %d)",
                            p->stop_tokens[i], i, e->n_vocab);
    const uint64_t total = (uint64_t)n + (uint64_t)p->max_tokens;
    if (total > e->n_ctx)
        return syn_fail(SYN_ERR_CONTEXT_FULL,
                        "the prompt's %zu tokens + max_tokens %d = %llu exceed the engine's context of %u positions",
                        n, p->max_tokens, (unsigned long long)total, e->n_ctx);
    const uint32_t need = blocks_for(total - 1); /* the last generated token is never decoded */
    if (need > e->stats.kv_blocks_total)
        return syn_fail(SYN_ERR_CONTEXT_FULL,
                        "the prompt's %zu tokens + max_tokens %d need %u KV blocks of %d positions (%.1f MiB) "
                        "but kv_budget_mib %u holds %u",
                        n, p->max_tokens, need, SYN_KV_BLOCK,
                        (double)need * (double)e->stats.kv_block_bytes / 1048576.0, e->params.kv_budget_mib,
                        e->stats.kv_blocks_total);
    return SYN_OK;
}

syn_status syn_engine_submit(syn_engine *e, const syn_request_params *p, syn_request **out) {
    syn_clear_error();
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_submit: out is NULL");
    *out = NULL;
    if (!e || !p) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_submit: engine or params is NULL");
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
    r->n_prompt = n;
    r->n_fill = (uint32_t)n;
    r->max_tokens = p->max_tokens ? p->max_tokens : (int32_t)(e->n_ctx - n);
    r->max_blocks = blocks_for((uint64_t)n + (uint64_t)r->max_tokens - 1);
    r->ignore_eos = p->ignore_eos;
    r->n_stop = p->n_stop_tokens;
    r->on_token = p->on_token;
    r->user_data = p->user_data;
    r->ids = realloc(prompt, sizeof *r->ids * (n + (size_t)r->max_tokens));
    r->stop = malloc(sizeof *r->stop * (r->n_stop ? r->n_stop : 1));
    r->block_ids = malloc(sizeof *r->block_ids * r->max_blocks);
    r->block_data = malloc(sizeof *r->block_data * r->max_blocks);
    if (!r->ids) free(prompt);
    const bool ok = r->ids && r->stop && r->block_ids && r->block_data;
    if (!ok) st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_submit: out of memory for %zu + %d tokens", n, r->max_tokens);
    if (st == SYN_OK) {
        if (r->n_stop) memcpy(r->stop, p->stop_tokens, sizeof *r->stop * r->n_stop);
        st = syn_sampler_new(&p->sampling, &r->sampler);
    }
    if (st == SYN_OK)
        st = text_stream_init(&r->text, syn_model_tokenizer(e->model),
                              p->stop_strings, p->n_stop_strings);
    if (st != SYN_OK) {
        request_destroy(r);
        return st;
    }
    r->t_submit = syn_now_ms();
    r->refs = 2; /* the handle and the engine */

    pthread_mutex_lock(&e->mutex);
    if (e->stopping) {
        pthread_mutex_unlock(&e->mutex);
        request_destroy(r);
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_submit: the engine is shutting down");
    }
    e->refs++;
    r->seq = e->next_seq++;
    r->queued = true;
    if (e->q_tail)
        e->q_tail->next = r;
    else
        e->q_head = r;
    e->q_tail = r;
    e->n_queued++;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mutex);
    *out = r;
    return SYN_OK;
}

/* Unlinks queued request r (mutex held). */
static void dequeue_locked(syn_engine *e, syn_request *r) {
    syn_request **link = &e->q_head, *prev = NULL;
    while (*link != r) {
        prev = *link;
        link = &(*link)->next;
    }
    *link = r->next;
    if (e->q_tail == r) e->q_tail = prev;
    r->next = NULL;
    r->queued = false;
    e->n_queued--;
}

syn_status syn_request_cancel(syn_request *r) {
    syn_clear_error();
    if (!r) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_request_cancel: request is NULL");
    syn_engine *e = r->engine;
    syn_status st = SYN_OK;
    pthread_mutex_lock(&e->mutex);
    if (r->done) {
        st = syn_fail(SYN_ERR_INVALID_ARGUMENT, "cannot cancel: the request has already finished (%s)",
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
    };
}

syn_status syn_request_wait(syn_request *r, syn_request_result *out) {
    syn_clear_error();
    if (!r || !out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_request_wait: NULL argument");
    syn_engine *e = r->engine;
    pthread_mutex_lock(&e->mutex);
    while (!r->done) pthread_cond_wait(&e->done, &e->mutex);
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

syn_status syn_engine_run(syn_engine *e, const syn_request_params *params, size_t n, syn_request **requests,
                          syn_run_stats *stats) {
    syn_clear_error();
    if (!e || (n && (!params || !requests))) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_engine_run: NULL argument");
    for (size_t i = 0; i < n; i++) requests[i] = NULL;
    syn_engine_stats before, after;
    syn_engine_get_stats(e, &before);
    const double t0 = syn_now_ms();
    for (size_t i = 0; i < n; i++) {
        syn_status st = syn_engine_submit(e, &params[i], &requests[i]);
        if (st != SYN_OK) {
            syn_fail_context(st, "request %zu of %zu", i, n);
            for (size_t j = 0; j < i; j++) {
                syn_request_free(requests[j]); /* cancels it; sets no error */
                requests[j] = NULL;
            }
            return st;
        }
    }
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
 * Scheduler
 * ------------------------------------------------------------------------------------------- */

/* Decides r's outcome during a step; retire_finished applies it after the step. */
static void mark_finished(syn_request *r, syn_finish_reason why, syn_status st, const char *msg) {
    r->phase = PHASE_FINISHED;
    r->finish_now = why;
    r->finish_status = st;
    snprintf(r->finish_msg, sizeof r->finish_msg, "%s", msg ? msg : "");
}

/* Returns r's blocks and unused reservation to the pool. */
static void release_blocks(syn_engine *e, syn_request *r) {
    for (uint32_t b = 0; b < r->n_blocks; b++) kv_pool_unref(e->pool, r->block_ids[b]);
    r->n_blocks = 0;
    kv_pool_unreserve(e->pool, r->reserved);
    r->reserved = 0;
}

/* Puts r into the active list, which is kept in submission order (mutex held). */
static void activate(syn_engine *e, syn_request *r) {
    uint32_t i = e->n_active++;
    for (; i > 0 && e->active[i - 1]->seq > r->seq; i--) e->active[i] = e->active[i - 1];
    e->active[i] = r;
}

/* Admits queued requests in FIFO order while a slot and the blocks for their n_fill positions and
 * the first generated token are free (mutex held). A request first looks up its leading full
 * blocks in the prefix cache; when it still needs logits (nothing generated yet), at least its
 * last prompt token is computed. */
static void admit_locked(syn_engine *e) {
    while (e->q_head && e->n_active < (uint32_t)e->params.n_parallel) {
        syn_request *r = e->q_head;
        const bool wants_logits = r->n_out == 0;
        uint32_t matched = 0;
        if (e->params.prefix_cache)
            matched = kv_pool_lookup(e->pool, r->ids, (r->n_fill - wants_logits) / SYN_KV_BLOCK, r->block_ids);
        uint32_t first = blocks_for((uint64_t)r->n_fill + 1);
        if (first > r->max_blocks) first = r->max_blocks;
        const uint32_t need = first > matched ? first - matched : 0;
        if (kv_pool_available(e->pool) < need) {
            for (uint32_t b = 0; b < matched; b++) kv_pool_unref(e->pool, r->block_ids[b]);
            return; /* the head waits for blocks; FIFO order is kept */
        }
        kv_pool_reserve(e->pool, need);
        dequeue_locked(e, r);
        for (uint32_t b = 0; b < matched; b++) r->block_data[b] = kv_pool_data(e->pool, r->block_ids[b]);
        r->n_blocks = matched;
        r->reserved = need;
        r->n_published = matched;
        r->publish_blocked = false;
        r->n_past = matched * SYN_KV_BLOCK;
        r->phase = r->n_past == r->n_fill ? PHASE_DECODE : PHASE_PREFILL;
        if (r->t_admit == 0) { /* the first admission: what the prefix cache saved of the prompt */
            r->t_admit = syn_now_ms();
            r->n_cached = r->n_past;
            e->stats.n_cached_tokens += r->n_cached;
        }
        activate(e, r);
    }
    /* With no request active every block is free or evictable, and submission checked that each
     * request fits the budget, so the head can always start; anything else is a bug, failed
     * rather than waited on forever. */
    if (e->n_active == 0 && e->q_head) {
        syn_request *r = e->q_head;
        dequeue_locked(e, r);
        finish_locked(r, SYN_FINISH_ERROR, SYN_ERR_INTERNAL, "engine: an idle engine could not admit the request");
    }
}

/* Takes r out of the active list and back to the queue's front, its blocks released: readmitted,
 * it recomputes its prompt and all but its last generated token (bitwise as before). */
static void preempt(syn_engine *e, syn_request *r) {
    release_blocks(e, r);
    r->n_past = 0;
    r->n_fill = (uint32_t)(r->n_prompt + (r->n_out ? r->n_out - 1 : 0));
    r->phase = PHASE_PREFILL;
    uint32_t i = 0;
    while (e->active[i] != r) i++;
    memmove(&e->active[i], &e->active[i + 1], sizeof *e->active * (e->n_active - i - 1));
    e->n_active--;
    pthread_mutex_lock(&e->mutex);
    r->queued = true;
    r->next = e->q_head;
    e->q_head = r;
    if (!e->q_tail) e->q_tail = r;
    e->n_queued++;
    e->stats.n_preempted++;
    pthread_mutex_unlock(&e->mutex);
}

/* Takes one more block for r: from its reservation, else from what the pool has free. */
static syn_status take_block(syn_engine *e, syn_request *r) {
    if (r->reserved == 0) {
        if (kv_pool_available(e->pool) == 0) return SYN_ERR_CONTEXT_FULL;
        kv_pool_reserve(e->pool, 1);
        r->reserved = 1;
    }
    int32_t id;
    syn_status st = kv_pool_alloc(e->pool, &id);
    if (st != SYN_OK) return st;
    r->reserved--;
    r->block_ids[r->n_blocks] = id;
    r->block_data[r->n_blocks++] = kv_pool_data(e->pool, id);
    return SYN_OK;
}

/* Gives every decoding request a block for its next position, in submission order. When the pool
 * is dry the most recently submitted active request is preempted (possibly the one asking); a
 * request alone that fills the whole budget finishes with SYN_FINISH_LENGTH. */
static void grow_decoders(syn_engine *e) {
    for (uint32_t i = 0; i < e->n_active; i++) {
        syn_request *r = e->active[i];
        while (r->phase == PHASE_DECODE && r->n_blocks <= r->n_past / SYN_KV_BLOCK) {
            syn_status st = take_block(e, r);
            if (st == SYN_OK) continue;
            if (st != SYN_ERR_CONTEXT_FULL) {
                mark_finished(r, SYN_FINISH_ERROR, st, syn_last_error());
            } else if (e->n_active == 1) {
                mark_finished(r, SYN_FINISH_LENGTH, SYN_OK, NULL);
            } else {
                syn_request *youngest = e->active[e->n_active - 1];
                preempt(e, youngest);
                if (youngest == r) return; /* r was the last in the list */
            }
        }
    }
}

/* Streams token id (just appended to r's output) through r's text stream, which holds back any
 * text that may be the start of a stop string. Returns false when r finished (stop string or the
 * callback's refusal). */
static bool stream_token(const syn_engine *e, syn_request *r, int32_t id, const float *logits,
                         uint64_t step) {
    const char *text;
    size_t len;
    const bool stopped = text_stream_push(&r->text, id, &text, &len);
    bool go_on = true;
    if (r->on_token) {
        const syn_token_event ev = {.token = id, .piece = text, .piece_len = len,
                                    .index = (uint32_t)(r->n_out - 1), .step = step,
                                    .logits = logits, .n_vocab = e->n_vocab};
        go_on = r->on_token(&ev, r->user_data);
    }
    text_stream_release(&r->text);
    if (stopped) {
        mark_finished(r, SYN_FINISH_STOP, SYN_OK, NULL);
        return false;
    }
    if (!go_on) {
        mark_finished(r, SYN_FINISH_CANCELLED, SYN_OK, NULL);
        return false;
    }
    return true;
}

/* Samples r's next token from logits and applies the stop conditions. */
static void sample_next(syn_engine *e, syn_request *r, const float *logits, uint64_t step) {
    const syn_tokenizer *tok = syn_model_tokenizer(e->model);
    int32_t id = -1;
    /* as `synapse run --ignore-eos`: end-of-generation tokens cannot be drawn */
    const syn_status st = syn_sampler_sample_banned(r->sampler, logits, e->n_vocab, r->ids, r->n_prompt + r->n_out,
                                                    e->eog_ids, r->ignore_eos ? e->n_eog : 0, &id);
    if (st != SYN_OK) {
        mark_finished(r, SYN_FINISH_ERROR, st, syn_last_error());
        return;
    }
    if (r->n_out == 0) r->t_first = syn_now_ms();
    if (!r->ignore_eos && syn_token_is_eog(tok, id)) {
        mark_finished(r, SYN_FINISH_EOG, SYN_OK, NULL);
        return;
    }
    for (size_t i = 0; i < r->n_stop; i++) {
        if (r->stop[i] == id) {
            mark_finished(r, SYN_FINISH_STOP, SYN_OK, NULL);
            return;
        }
    }
    r->ids[r->n_prompt + r->n_out++] = id;
    if ((r->on_token || r->text.n_stops) && !stream_token(e, r, id, logits, step)) return;
    if (r->n_out == (size_t)r->max_tokens) {
        mark_finished(r, SYN_FINISH_LENGTH, SYN_OK, NULL);
        return;
    }
    r->phase = PHASE_DECODE;
}

/* The final event: the text still held back (unless a stop string ended it) and how r finished. */
static void final_event(const syn_engine *e, syn_request *r) {
    if (!r->on_token) return;
    size_t len;
    const char *tail = text_stream_finish(&r->text, r->finish_now == SYN_FINISH_STOP, &len);
    const syn_token_event ev = {.token = -1, .piece = tail, .piece_len = len,
                                .index = (uint32_t)r->n_out, .step = e->stats.n_steps,
                                .n_vocab = e->n_vocab, .finish = r->finish_now};
    (void)r->on_token(&ev, r->user_data);
    text_stream_release(&r->text);
}

/* Removes finished requests from the active list (keeping admission order), releasing their
 * blocks and recording their outcome. Returns with the mutex held. */
static void retire_finished(syn_engine *e) {
    syn_request *finished[SYN_ENGINE_MAX_PARALLEL];
    uint32_t kept = 0, n_finished = 0;
    for (uint32_t i = 0; i < e->n_active; i++) {
        syn_request *r = e->active[i];
        if (r->phase == PHASE_FINISHED) {
            final_event(e, r);
            release_blocks(e, r);
            finished[n_finished++] = r;
        } else {
            e->active[kept++] = r;
        }
    }
    e->n_active = kept;
    pthread_mutex_lock(&e->mutex);
    for (uint32_t i = 0; i < n_finished; i++) {
        syn_request *r = finished[i];
        finish_locked(r, r->finish_now, r->finish_status, r->finish_msg); /* may free r */
    }
    e->stats.n_active = kept;
    e->stats.kv_blocks_used = kv_pool_used(e->pool);
    e->stats.kv_blocks_cached = kv_pool_cached(e->pool);
}

/* Allocates r's blocks up to position last (from its reservation). */
static syn_status ensure_blocks(syn_engine *e, syn_request *r, uint32_t last) {
    while (r->n_blocks <= last / SYN_KV_BLOCK) {
        syn_status st = take_block(e, r);
        if (st != SYN_OK) return syn_fail(st, "engine: no KV block for position %u", last);
    }
    return SYN_OK;
}

/* Adds r's next k tokens to the batch (*n tokens, *n_rows of them wanting logits so far); false
 * when its blocks could not be had (r is failed). */
static bool add_tokens(syn_engine *e, syn_request *r, size_t *n, uint32_t *n_rows, uint32_t k, bool logits_at_end) {
    syn_status st = ensure_blocks(e, r, r->n_past + k - 1);
    if (st != SYN_OK) {
        mark_finished(r, SYN_FINISH_ERROR, st, syn_last_error());
        return false;
    }
    for (uint32_t i = 0; i < k; i++) {
        const size_t t = (*n)++;
        e->b_tokens[t] = r->ids[r->n_past + i];
        e->b_pos[t] = r->n_past + i;
        e->b_blocks[t] = r->block_data;
        e->b_want[t] = logits_at_end && i + 1 == k;
    }
    r->step_tokens = k;
    r->step_logits = logits_at_end;
    if (logits_at_end) r->logits_row = (*n_rows)++;
    return true;
}

static syn_status grow_logits(syn_engine *e, uint32_t rows) {
    if (rows <= e->logits_rows) return SYN_OK;
    float *l = realloc(e->logits, sizeof *l * (size_t)rows * (size_t)e->n_vocab);
    if (!l) return syn_fail(SYN_ERR_NO_MEMORY, "engine: logits for %u requests", rows);
    e->logits = l;
    e->logits_rows = rows;
    return SYN_OK;
}

/* Enters r's newly completed full blocks into the prefix cache. */
static void publish_blocks(syn_engine *e, syn_request *r) {
    const uint32_t full = r->n_past / SYN_KV_BLOCK;
    while (!r->publish_blocked && r->n_published < full) {
        const uint32_t b = r->n_published;
        const int32_t parent = b ? r->block_ids[b - 1] : -1;
        if (!kv_pool_publish(e->pool, parent, r->ids + (size_t)b * SYN_KV_BLOCK, r->block_ids[b]))
            r->publish_blocked = true;
        else
            r->n_published++;
    }
}

/* One batched forward pass and what follows it. */
static void step(syn_engine *e, uint64_t step_index, bool inject_failure) {
    const double t0 = syn_now_ms();
    size_t n = 0;
    uint32_t n_decode = 0, n_logits = 0;
    grow_decoders(e);
    for (uint32_t i = 0; i < e->n_active; i++) {
        syn_request *r = e->active[i];
        r->step_tokens = 0;
        r->step_logits = false;
        if (r->phase == PHASE_DECODE && add_tokens(e, r, &n, &n_logits, 1, true)) n_decode++;
    }
    for (uint32_t i = 0; i < e->n_active && n < (size_t)e->params.max_step_tokens; i++) {
        syn_request *r = e->active[i];
        if (r->phase != PHASE_PREFILL) continue;
        const size_t left = r->n_fill - r->n_past, room = (size_t)e->params.max_step_tokens - n;
        const uint32_t k = (uint32_t)(left < room ? left : room);
        add_tokens(e, r, &n, &n_logits, k, k == left && r->n_out == 0); /* resumed: no logits */
    }

    syn_status st = grow_logits(e, n_logits);
    if (st == SYN_OK && inject_failure) st = syn_fail(SYN_ERR_INTERNAL, "engine: injected step failure (test)");
    if (st == SYN_OK && n > 0) {
        const syn_batch b = {.n = n, .tokens = e->b_tokens, .pos = e->b_pos,
                             .blocks = (void *const *const *)e->b_blocks, .want_logits = e->b_want,
                             .logits = e->logits};
        st = e->ops->forward_batch(e->backend, &b);
    }
    if (st != SYN_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "step %llu failed: %s", (unsigned long long)step_index, syn_last_error());
        for (uint32_t i = 0; i < e->n_active; i++)
            if (e->active[i]->step_tokens) mark_finished(e->active[i], SYN_FINISH_ERROR, st, msg);
    } else {
        for (uint32_t i = 0; i < e->n_active; i++) {
            syn_request *r = e->active[i];
            if (!r->step_tokens) continue;
            r->n_past += r->step_tokens;
            if (r->step_logits)
                sample_next(e, r, e->logits + (size_t)r->logits_row * (size_t)e->n_vocab, step_index);
            else if (r->phase == PHASE_PREFILL && r->n_past == r->n_fill && r->n_out > 0)
                r->phase = PHASE_DECODE; /* a preempted request caught up */
            if (e->params.prefix_cache) publish_blocks(e, r);
        }
    }
    const double ms = syn_now_ms() - t0;
    retire_finished(e); /* locks the mutex */
    if (n > 0 || st != SYN_OK) e->stats.n_steps++;
    if (st == SYN_OK) {
        e->stats.n_prompt_tokens += n - n_decode;
        e->stats.n_decode_tokens += n_decode;
        e->stats.n_generated += n_logits;
        if (n_decode > 0 && n == n_decode) {
            e->stats.n_decode_steps++;
            e->stats.decode_steps_ms += ms;
            e->stats.decode_steps_tokens += n_decode;
        }
    }
    pthread_mutex_unlock(&e->mutex);
}

static void *scheduler_main(void *arg) {
    syn_engine *e = arg;
    pthread_mutex_lock(&e->mutex);
    for (;;) {
        while (!e->stopping && e->n_active == 0 && !e->q_head) pthread_cond_wait(&e->work, &e->mutex);
        if (e->stopping) break;
        for (uint32_t i = 0; i < e->n_active; i++)
            if (e->active[i]->cancel) mark_finished(e->active[i], SYN_FINISH_CANCELLED, SYN_OK, NULL);
        admit_locked(e);
        const bool inject = e->fail_next_step;
        e->fail_next_step = false;
        const uint64_t step_index = e->stats.n_steps;
        pthread_mutex_unlock(&e->mutex);
        step(e, step_index, inject); /* returns with the mutex unlocked */
        pthread_mutex_lock(&e->mutex);
    }
    /* Shutdown: every unfinished request is cancelled. */
    pthread_mutex_unlock(&e->mutex);
    for (uint32_t i = 0; i < e->n_active; i++) mark_finished(e->active[i], SYN_FINISH_CANCELLED, SYN_OK, NULL);
    retire_finished(e);
    while (e->q_head) {
        syn_request *r = e->q_head;
        dequeue_locked(e, r);
        finish_locked(r, SYN_FINISH_CANCELLED, SYN_OK, NULL);
    }
    pthread_mutex_unlock(&e->mutex);
    return NULL;
}

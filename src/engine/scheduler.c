/*
 * scheduler.c: the engine's scheduler thread: admission from the FIFO queue into the n_parallel
 * slots, batched steps, KV blocks on demand and preemption, sampling, stop conditions and
 * streaming, and the end of a request (see the engine section of synapse.h for the contract and
 * threading model, scheduler.h for ownership).
 *
 * A step: every decoding request first gets a KV block for its next position (preempting the
 * most recently submitted requests when the pool is dry), then contributes its last sampled
 * token; prefilling requests contribute prompt tokens in submission order up to max_step_tokens;
 * only the last prompt token and decode tokens want logits. After the pass, each request with
 * logits samples with its own sampler, streams (its text stream holding back text that may be a
 * stop string), and finishes on EOG / stop token / stop string / length / callback refusal; the
 * full blocks of every request are entered into the prefix cache; finished requests get their
 * final event and release their blocks and slots.
 *
 * A preempted request keeps its tokens, sampler and text state and goes back to the queue's
 * front; readmitted, it "prefills" its prompt plus all but the last generated token (n_fill)
 * without wanting logits (after the cached prefix it finds, as any request), then decodes on from
 * that last token.
 *
 * An embedding request (embed) prefills like any other but wants no logits: its tokens that the
 * pooling reads (every one for mean, position 0 for cls, the last for last) want their final
 * hidden state instead (syn_batch.want_hidden), which pool_step folds into its pool in position
 * order after each step; after its last prompt token it takes its unit-length vector and
 * finishes, never decoding.
 *
 * Models with per-sequence memory in the slots (qwen35's recurrent state, gemma3's ring of the
 * sliding-window layers) resume a cached prefix only after a block carrying a snapshot of that
 * memory (kv_pool.h): a prefill slice ends at the prompt's last block boundary before its last
 * token (and where the prompt leaves a cached chain whose end has no snapshot), the memory there
 * is copied to the cached block ending there, and a request matching that block copies it back
 * into its slot and computes on from the boundary. Both memories advance
 * position by position as functions of the tokens alone, so this is bitwise the full computation.
 */
#include "engine/scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/kv_pool.h"
#include "engine/text_stream.h"

/* ---------------------------------------------------------------------------------------------
 * Queue and the end of a request
 * ------------------------------------------------------------------------------------------- */

void queue_push_back_locked(syn_engine *e, syn_request *r) {
    r->queued = true;
    if (e->q_tail)
        e->q_tail->next = r;
    else
        e->q_head = r;
    e->q_tail = r;
    e->n_queued++;
}

/* Puts r back at the queue's front (mutex held). */
static void queue_push_front_locked(syn_engine *e, syn_request *r) {
    r->queued = true;
    r->next = e->q_head;
    e->q_head = r;
    if (!e->q_tail) e->q_tail = r;
    e->n_queued++;
}

void dequeue_locked(syn_engine *e, syn_request *r) {
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

/* Frees (and forgets) what only the work on r needs: the sampler (whose candidate buffer can be
 * 12 bytes per vocabulary entry, 1.8 MB for Qwen2), the text stream, the stop tokens and the block
 * tables. */
static void free_work_buffers(syn_request *r) {
    syn_sampler_free(r->sampler);
    syn_grammar_matcher_free(r->matcher);
    syn_grammar_free(r->grammar);
    free(r->allowed);
    free(r->banned);
    free(r->bias);
    free(r->biased);
    free(r->trigger);
    free(r->tail);
    r->trigger = r->tail = NULL;
    r->bias = NULL;
    r->biased = NULL;
    r->matcher = NULL;
    r->grammar = NULL;
    r->allowed = NULL;
    r->banned = NULL;
    text_stream_free(&r->text);
    free(r->stop);
    free(r->block_ids);
    free(r->block_data);
    free(r->pool_sum);
    r->pool_sum = NULL;
    r->sampler = NULL;
    r->stop = NULL;
    r->block_ids = NULL;
    r->block_data = NULL;
}

void request_destroy(syn_request *r) {
    free_work_buffers(r);
    free(r->embedding);
    free(r->ids);
    free(r);
}

bool request_unref_locked(syn_request *r) {
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

void finish_locked(syn_request *r, syn_finish_reason why, syn_status status, const char *msg) {
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
 * Start and stop
 * ------------------------------------------------------------------------------------------- */

static void *scheduler_main(void *arg);

/* Everything the scheduler owns; e->backend and e->pool may be NULL. */
static void free_scheduler_state(syn_engine *e) {
    if (e->backend) e->ops->destroy(e->backend);
    kv_pool_free(e->pool);
    free(e->active);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_blocks);
    free(e->b_want);
    free(e->b_hidden);
    free(e->b_rstates);
    free(e->b_rings);
    for (int32_t i = 0; i < e->params.n_parallel; i++) {
        if (e->rstates) free(e->rstates[i]);
        if (e->ring_mem) free(e->ring_mem[i]);
        if (e->ring_tables) free(e->ring_tables[i]);
    }
    free(e->rstates);
    free(e->ring_mem);
    free(e->ring_tables);
    free(e->slot_used);
    free(e->logits);
    free(e->hidden);
    e->backend = NULL;
    e->pool = NULL;
}

syn_status scheduler_start(syn_engine *e, const syn_backend_config *cfg) {
    e->ops = &syn_optimized_backend;
    syn_status st = e->ops->create(e->model, cfg, &e->backend);
    if (st == SYN_OK) {
        const size_t block_bytes = e->ops->kv_block_bytes(e->backend);
        const uint64_t n_blocks = ((uint64_t)e->params.kv_budget_mib << 20) / block_bytes;
        if (n_blocks == 0)
            st = syn_fail(SYN_ERR_INVALID_ARGUMENT,
                          "kv_budget_mib %u holds no KV block of %zu bytes",
                          e->params.kv_budget_mib, block_bytes);
        else
            st = kv_pool_new(block_bytes, n_blocks > INT32_MAX ? INT32_MAX : (uint32_t)n_blocks,
                             &e->pool);
    }
    if (st == SYN_OK) {
        const size_t n_step = (size_t)e->params.max_step_tokens;
        e->active = calloc((size_t)e->params.n_parallel, sizeof *e->active);
        e->b_tokens = malloc(sizeof *e->b_tokens * n_step);
        e->b_pos = malloc(sizeof *e->b_pos * n_step);
        e->b_blocks = malloc(sizeof *e->b_blocks * n_step);
        e->b_want = malloc(sizeof *e->b_want * n_step);
        e->b_hidden = malloc(sizeof *e->b_hidden * n_step);
        if (!e->active || !e->b_tokens || !e->b_pos || !e->b_blocks || !e->b_want || !e->b_hidden)
            st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_new: out of memory for %d-token steps",
                          e->params.max_step_tokens);
    }
    if (st == SYN_OK && e->ops->recurrent_state_bytes)
        e->rstate_bytes = e->ops->recurrent_state_bytes(e->backend);
    if (st == SYN_OK && e->ops->ring_blocks) /* a step carries at most max_step_tokens of one */
        e->ring_blocks = e->ops->ring_blocks(e->backend, (uint32_t)e->params.max_step_tokens,
                                             &e->ring_block_bytes);
    if (st == SYN_OK && (e->rstate_bytes || e->ring_blocks)) {
        /* a snapshot keeps the ring blocks a query after the boundary reaches back to: positions
         * from boundary - W + 1 on, in at most (W + 14) / 16 blocks */
        const uint32_t reach =
            ((uint32_t)e->model->hp.swa_window + SYN_KV_BLOCK - 2) / SYN_KV_BLOCK;
        e->snap_ring_blocks = reach < e->ring_blocks ? reach : e->ring_blocks;
        e->snap_bytes = e->rstate_bytes + (size_t)e->snap_ring_blocks * e->ring_block_bytes;
        /* as many snapshots as slots: at most twice the slots' own per-sequence memory */
        if (e->params.prefix_cache)
            kv_pool_set_snapshots(e->pool, e->snap_bytes, (uint32_t)e->params.n_parallel);
        const size_t n_par = (size_t)e->params.n_parallel,
                     n_step = (size_t)e->params.max_step_tokens;
        e->slot_used = calloc(n_par, sizeof *e->slot_used);
        bool ok = e->slot_used != NULL;
        if (e->rstate_bytes) {
            e->b_rstates = malloc(sizeof *e->b_rstates * n_step);
            e->rstates = calloc(n_par, sizeof *e->rstates);
            ok = ok && e->b_rstates && e->rstates;
        }
        if (e->ring_blocks) {
            e->b_rings = malloc(sizeof *e->b_rings * n_step);
            e->ring_mem = calloc(n_par, sizeof *e->ring_mem);
            e->ring_tables = calloc(n_par, sizeof *e->ring_tables);
            ok = ok && e->b_rings && e->ring_mem && e->ring_tables;
        }
        if (!ok) st = syn_fail(SYN_ERR_NO_MEMORY, "syn_engine_new: out of memory for slots");
    }
    if (st == SYN_OK)
        e->n_eog = (size_t)syn_tokenizer_eog_ids(syn_model_tokenizer(e->model), &e->eog_ids);
    if (st == SYN_OK) {
        e->stats.kv_blocks_total = kv_pool_capacity(e->pool);
        e->stats.kv_block_bytes = e->ops->kv_block_bytes(e->backend);
        e->stats.kv_ring_bytes = (size_t)e->ring_blocks * e->ring_block_bytes;
        e->stats.kv_snapshot_bytes = e->params.prefix_cache ? e->snap_bytes : 0;
        if (pthread_create(&e->thread, NULL, scheduler_main, e) != 0)
            st = syn_fail(SYN_ERR_INTERNAL, "syn_engine_new: cannot start the scheduler thread");
        else
            e->thread_started = true;
    }
    if (st != SYN_OK) free_scheduler_state(e);
    return st;
}

void scheduler_stop(syn_engine *e) {
    pthread_mutex_lock(&e->mutex);
    e->stopping = true;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mutex);
    if (e->thread_started) pthread_join(e->thread, NULL);
    free_scheduler_state(e);
}

/* ---------------------------------------------------------------------------------------------
 * Admission and preemption
 * ------------------------------------------------------------------------------------------- */

/* Decides r's outcome during a step; retire_finished applies it after the step. */
static void mark_finished(syn_request *r, syn_finish_reason why, syn_status st, const char *msg) {
    r->phase = PHASE_FINISHED;
    r->finish_now = why;
    r->finish_status = st;
    snprintf(r->finish_msg, sizeof r->finish_msg, "%s", msg ? msg : "");
}

/* Returns r's blocks and unused reservation to the pool, and its slot. */
static void release_blocks(syn_engine *e, syn_request *r) {
    for (uint32_t b = 0; b < r->n_blocks; b++)
        kv_pool_unref(e->pool, r->block_ids[b]);
    r->n_blocks = 0;
    kv_pool_unreserve(e->pool, r->reserved);
    r->reserved = 0;
    if (r->slot >= 0) e->slot_used[r->slot] = false;
    r->slot = -1;
    r->rstate = NULL;
    r->ring = NULL;
}

/* Slot i's ring: its blocks, and the table of the n_ctx positions' blocks over them. */
static syn_status make_ring(syn_engine *e, int32_t i) {
    const uint32_t n = (e->n_ctx + SYN_KV_BLOCK - 1) / SYN_KV_BLOCK;
    e->ring_mem[i] = calloc(e->ring_blocks, e->ring_block_bytes);
    e->ring_tables[i] = malloc(sizeof *e->ring_tables[i] * n);
    if (!e->ring_mem[i] || !e->ring_tables[i]) {
        free(e->ring_mem[i]);
        free(e->ring_tables[i]);
        e->ring_mem[i] = NULL;
        e->ring_tables[i] = NULL;
        return syn_fail(SYN_ERR_NO_MEMORY, "engine: out of memory for a ring of %u KV blocks",
                        e->ring_blocks);
    }
    e->stats.kv_rings++;
    for (uint32_t b = 0; b < n; b++)
        e->ring_tables[i][b] = e->ring_mem[i] + (size_t)(b % e->ring_blocks) * e->ring_block_bytes;
    return SYN_OK;
}

/* Gives r a free slot (one exists: active requests are at most n_parallel); its first position
 * restarts the state and the ring. Errors: SYN_ERR_NO_MEMORY. */
static syn_status take_slot(syn_engine *e, syn_request *r) {
    int32_t i = 0;
    while (e->slot_used[i])
        i++;
    if (e->rstate_bytes && !e->rstates[i] && !(e->rstates[i] = malloc(e->rstate_bytes)))
        return syn_fail(SYN_ERR_NO_MEMORY,
                        "engine: out of memory for a recurrent state of %zu bytes",
                        e->rstate_bytes);
    if (e->ring_blocks && !e->ring_tables[i]) {
        syn_status st = make_ring(e, i);
        if (st != SYN_OK) return st;
    }
    e->slot_used[i] = true;
    r->slot = i;
    r->rstate = e->rstate_bytes ? e->rstates[i] : NULL;
    r->ring = e->ring_blocks ? e->ring_tables[i] : NULL;
    return SYN_OK;
}

/* The first ring block a snapshot at block boundary pos keeps (the last is pos / 16 - 1). */
static uint32_t snap_first_block(const syn_engine *e, uint32_t pos) {
    const uint32_t end = pos / SYN_KV_BLOCK;
    return end > e->snap_ring_blocks ? end - e->snap_ring_blocks : 0;
}

/* Copies r's slot memory, standing at block boundary pos, into snap (kv_pool.h). */
static void snapshot_save(const syn_engine *e, const syn_request *r, uint32_t pos, char *snap) {
    if (e->rstate_bytes) memcpy(snap, r->rstate, e->rstate_bytes);
    snap += e->rstate_bytes;
    for (uint32_t b = snap_first_block(e, pos); b < pos / SYN_KV_BLOCK; b++) {
        memcpy(snap, r->ring[b], e->ring_block_bytes);
        snap += e->ring_block_bytes;
    }
}

/* Sets r's slot memory to snap, taken at block boundary pos: r goes on from pos bitwise as the
 * sequence that took it did. */
static void snapshot_restore(const syn_engine *e, const syn_request *r, uint32_t pos,
                             const char *snap) {
    if (e->rstate_bytes) memcpy(r->rstate, snap, e->rstate_bytes);
    snap += e->rstate_bytes;
    for (uint32_t b = snap_first_block(e, pos); b < pos / SYN_KV_BLOCK; b++) {
        memcpy(r->ring[b], snap, e->ring_block_bytes);
        snap += e->ring_block_bytes;
    }
}

/* Puts r into the active list, which is kept in submission order (mutex held). */
static void activate(syn_engine *e, syn_request *r) {
    uint32_t i = e->n_active++;
    for (; i > 0 && e->active[i - 1]->seq > r->seq; i--)
        e->active[i] = e->active[i - 1];
    e->active[i] = r;
}

/* Admits queued requests in FIFO order while a slot and the blocks for their n_fill positions and
 * the first generated token are free (mutex held). A request first looks up its leading full
 * blocks in the prefix cache; when it still needs logits (nothing generated yet), at least its
 * last prompt token is computed. A model with per-sequence memory resumes only after the last
 * matched block with a snapshot, and its prefill takes one at its prompt's last block boundary
 * before the last token (which the same prompt again resumes at) and one where it leaves a cached
 * chain whose end had none (a prefix prompts share, such as a system prompt, resumed by the next
 * one that shares it). */
static void admit_locked(syn_engine *e) {
    while (e->q_head && e->n_active < (uint32_t)e->params.n_parallel) {
        syn_request *r = e->q_head;
        const bool wants_logits = r->n_out == 0;
        uint32_t matched = 0;
        /* mean and cls pooling need the hidden state of every / the first token: computed */
        const bool reuse = !r->embed || r->pooling == SYN_POOLING_LAST;
        if (e->params.prefix_cache && reuse)
            matched = kv_pool_lookup(e->pool, r->ids, (r->n_fill - wants_logits) / SYN_KV_BLOCK,
                                     r->block_ids);
        const uint32_t branch = matched * SYN_KV_BLOCK;
        if (e->snap_bytes)
            while (matched > 0 && !kv_pool_snapshot(e->pool, r->block_ids[matched - 1]))
                kv_pool_unref(e->pool, r->block_ids[--matched]);
        uint32_t first = blocks_for((uint64_t)r->n_fill + 1);
        if (first > r->max_blocks) first = r->max_blocks;
        const uint32_t need = first > matched ? first - matched : 0;
        if (kv_pool_available(e->pool) < need) {
            for (uint32_t b = 0; b < matched; b++)
                kv_pool_unref(e->pool, r->block_ids[b]);
            return; /* the head waits for blocks; FIFO order is kept */
        }
        kv_pool_reserve(e->pool, need);
        dequeue_locked(e, r);
        for (uint32_t b = 0; b < matched; b++)
            r->block_data[b] = kv_pool_data(e->pool, r->block_ids[b]);
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
        const uint32_t last =
            r->n_prompt ? (uint32_t)(r->n_prompt - 1) / SYN_KV_BLOCK * SYN_KV_BLOCK : 0;
        const bool snaps = e->params.prefix_cache && e->snap_bytes;
        r->snap_pos[0] = snaps && branch > r->n_past && branch != last ? branch : 0;
        r->snap_pos[1] = snaps && last > r->n_past ? last : 0;
        activate(e, r);
        if (e->slot_used && take_slot(e, r) != SYN_OK)
            mark_finished(r, SYN_FINISH_ERROR, SYN_ERR_NO_MEMORY, syn_last_error());
        else if (e->snap_bytes && matched)
            snapshot_restore(e, r, r->n_past, kv_pool_snapshot(e->pool, r->block_ids[matched - 1]));
    }
    /* With no request active every block is free or evictable, and submission checked that each
     * request fits the budget, so the head can always start; anything else is a bug, failed
     * rather than waited on forever. */
    if (e->n_active == 0 && e->q_head) {
        syn_request *r = e->q_head;
        dequeue_locked(e, r);
        finish_locked(r, SYN_FINISH_ERROR, SYN_ERR_INTERNAL,
                      "engine: an idle engine could not admit the request");
    }
}

/* Takes r out of the active list and back to the queue's front, its blocks released: readmitted,
 * it recomputes its prompt and all but its last generated token (bitwise as before). */
static void preempt(syn_engine *e, syn_request *r) {
    release_blocks(e, r);
    r->n_past = 0;
    if (r->embed) /* its rows come again: the mean starts over */
        memset(r->pool_sum, 0, sizeof *r->pool_sum * (size_t)e->model->hp.n_embd);
    r->n_fill = (uint32_t)(r->n_prompt + (r->n_out ? r->n_out - 1 : 0));
    r->phase = PHASE_PREFILL;
    uint32_t i = 0;
    while (e->active[i] != r)
        i++;
    memmove(&e->active[i], &e->active[i + 1], sizeof *e->active * (e->n_active - i - 1));
    e->n_active--;
    pthread_mutex_lock(&e->mutex);
    queue_push_front_locked(e, r);
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

/* ---------------------------------------------------------------------------------------------
 * Sampling, streaming and retirement
 * ------------------------------------------------------------------------------------------- */

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
        const syn_token_event ev = {.token = id,
                                    .piece = text,
                                    .piece_len = len,
                                    .index = (uint32_t)(r->n_out - 1),
                                    .step = step,
                                    .logits = logits,
                                    .n_vocab = e->n_vocab};
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

/* A lazy grammar's watch: appends token id's bytes to r's tail and, once the trigger shows,
 * feeds the matcher from it on and starts enforcing; a text the grammar refuses drops it. */
static syn_status watch_trigger(syn_request *r, const syn_tokenizer *tok, int32_t id) {
    size_t len;
    syn_status st = syn_tokenizer_token_bytes(tok, id, r->tail + r->tail_len,
                                              r->trigger_len + SYN_TRIGGER_TOKEN_BYTES, &len);
    if (st == SYN_ERR_BUFFER_TOO_SMALL) { /* a token longer than any real one: keep its end */
        char *big = malloc(len);
        if (!big) return syn_fail(SYN_ERR_NO_MEMORY, "grammar trigger: out of memory");
        st = syn_tokenizer_token_bytes(tok, id, big, len, &len);
        const size_t keep = r->trigger_len + SYN_TRIGGER_TOKEN_BYTES;
        if (st == SYN_OK) {
            memcpy(r->tail, big + len - keep, keep);
            r->tail_len = keep;
        }
        free(big);
        len = 0;
    }
    if (st != SYN_OK) return st;
    r->tail_len += len;
    const char *at = memmem(r->tail, r->tail_len, r->trigger, r->trigger_len);
    if (at) {
        bool ok;
        st = syn_grammar_matcher_feed(r->matcher, at, r->tail_len - (size_t)(at - r->tail), &ok);
        if (st != SYN_OK) return st;
        r->trigger_pending = false;
        if (!ok) { /* the model's text does not open the grammar: it stays free text */
            syn_grammar_matcher_free(r->matcher);
            r->matcher = NULL;
        }
        return SYN_OK;
    }
    if (r->tail_len >= r->trigger_len) { /* keep only what could begin the trigger */
        memmove(r->tail, r->tail + r->tail_len - (r->trigger_len - 1), r->trigger_len - 1);
        r->tail_len = r->trigger_len - 1;
    }
    return SYN_OK;
}

/* Samples r's next token from logits and applies the stop conditions. */
static void sample_next(syn_engine *e, syn_request *r, const float *logits, uint64_t step) {
    const syn_tokenizer *tok = syn_model_tokenizer(e->model);
    int32_t id = -1;
    /* as `synapse run --ignore-eos`: end-of-generation tokens cannot be drawn */
    const int32_t *banned = e->eog_ids;
    size_t n_banned = r->ignore_eos ? e->n_eog : 0;
    syn_status st = SYN_OK;
    if (r->n_bias) {
        memcpy(r->biased, logits, sizeof *r->biased * (size_t)e->n_vocab);
        for (size_t i = 0; i < r->n_bias; i++)
            r->biased[r->bias[i].token] += r->bias[i].bias;
        logits = r->biased;
    }
    if (r->matcher &&
        !r->trigger_pending) { /* the grammar bans every token that cannot continue it */
        st = syn_grammar_matcher_allowed(r->matcher, e->grammar_vocab, r->allowed);
        if (st == SYN_OK && r->ignore_eos)
            for (size_t i = 0; i < e->n_eog; i++)
                r->allowed[e->eog_ids[i] >> 6] &= ~(1ull << (e->eog_ids[i] & 63));
        n_banned = 0;
        for (int32_t w = 0; st == SYN_OK && w * 64 < e->n_vocab; w++) {
            const uint64_t bits = r->allowed[w];
            if (bits == ~0ull) continue; /* inside a string most words are all allowed */
            const int32_t end = w * 64 + 64 < e->n_vocab ? w * 64 + 64 : e->n_vocab;
            for (int32_t t = w * 64; t < end; t++)
                if (!(bits >> (t & 63) & 1)) r->banned[n_banned++] = t;
        }
        if (st == SYN_OK && n_banned == (size_t)e->n_vocab)
            st = syn_fail(SYN_ERR_INVALID_ARGUMENT,
                          "grammar: no token can continue the output (after %zu tokens)", r->n_out);
        banned = r->banned;
    }
    if (st == SYN_OK)
        st = syn_sampler_sample_banned(r->sampler, logits, e->n_vocab, r->ids,
                                       r->n_prompt + r->n_out, banned, n_banned, &id);
    if (st != SYN_OK) {
        mark_finished(r, SYN_FINISH_ERROR, st, syn_last_error());
        return;
    }
    if (r->n_out == 0) r->t_first = syn_now_ms();
    if (!r->ignore_eos && syn_tokenizer_is_eog(tok, id)) {
        mark_finished(r, SYN_FINISH_EOG, SYN_OK, NULL);
        return;
    }
    for (size_t i = 0; i < r->n_stop; i++) {
        if (r->stop[i] == id) {
            mark_finished(r, SYN_FINISH_STOP, SYN_OK, NULL);
            return;
        }
    }
    if (r->matcher && r->trigger_pending) {
        st = watch_trigger(r, tok, id);
        if (st != SYN_OK) {
            mark_finished(r, SYN_FINISH_ERROR, st, syn_last_error());
            return;
        }
    } else if (r->matcher) {
        bool ok;
        st = syn_grammar_matcher_feed_token(r->matcher, e->grammar_vocab, id, &ok);
        if (st == SYN_OK && !ok)
            st = syn_fail(SYN_ERR_INTERNAL, "grammar: the sampled token %d was masked out", id);
        if (st != SYN_OK) {
            mark_finished(r, SYN_FINISH_ERROR, st, syn_last_error());
            return;
        }
    }
    st = syn_sampler_accept(r->sampler, id); /* its frequency and presence penalties count it */
    if (st != SYN_OK) {
        mark_finished(r, SYN_FINISH_ERROR, st, syn_last_error());
        return;
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
    const syn_token_event ev = {.token = -1,
                                .piece = tail,
                                .piece_len = len,
                                .index = (uint32_t)r->n_out,
                                .step = e->stats.n_steps,
                                .n_vocab = e->n_vocab,
                                .finish = r->finish_now};
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
    e->stats.kv_snapshots = kv_pool_snapshots(e->pool);
}

/* ---------------------------------------------------------------------------------------------
 * Steps
 * ------------------------------------------------------------------------------------------- */

/* Allocates r's blocks up to position last (from its reservation). */
static syn_status ensure_blocks(syn_engine *e, syn_request *r, uint32_t last) {
    while (r->n_blocks <= last / SYN_KV_BLOCK) {
        syn_status st = take_block(e, r);
        if (st != SYN_OK) return syn_fail(st, "engine: no KV block for position %u", last);
    }
    return SYN_OK;
}

/* Whether embedding request r pools the hidden state of its position pos. */
static bool pools_position(const syn_request *r, uint32_t pos) {
    switch (r->pooling) {
    case SYN_POOLING_MEAN: return true;
    case SYN_POOLING_CLS: return pos == 0;
    default: return pos + 1 == r->n_fill; /* last */
    }
}

/* Adds r's next k tokens to the batch (*n tokens, *n_rows of them wanting logits, *n_hidden their
 * hidden state, so far); false when its blocks could not be had (r is failed). */
static bool add_tokens(syn_engine *e, syn_request *r, size_t *n, uint32_t *n_rows,
                       uint32_t *n_hidden, uint32_t k, bool logits_at_end) {
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
        e->b_hidden[t] = r->embed && pools_position(r, r->n_past + i);
        if (e->b_rstates) e->b_rstates[t] = r->rstate;
        if (e->b_rings) e->b_rings[t] = r->ring;
        r->step_hidden += e->b_hidden[t];
    }
    r->hidden_row = *n_hidden;
    *n_hidden += r->step_hidden;
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

static syn_status grow_hidden(syn_engine *e, uint32_t rows) {
    if (rows <= e->hidden_rows) return SYN_OK;
    const size_t n_embd = (size_t)e->model->hp.n_embd;
    float *h = realloc(e->hidden, sizeof *h * (size_t)rows * n_embd);
    if (!h) return syn_fail(SYN_ERR_NO_MEMORY, "engine: hidden states of %u tokens", rows);
    e->hidden = h;
    e->hidden_rows = rows;
    return SYN_OK;
}

/* Folds embedding request r's hidden rows of this step into its pool, in position order (so the
 * sum is the same however its prompt was split into steps); at the prompt's end, its unit-length
 * embedding and its finish. */
static void pool_step(syn_engine *e, syn_request *r) {
    const size_t n_embd = (size_t)e->model->hp.n_embd;
    for (uint32_t j = 0; j < r->step_hidden; j++) {
        const float *row = e->hidden + (size_t)(r->hidden_row + j) * n_embd;
        for (size_t i = 0; i < n_embd; i++)
            r->pool_sum[i] = r->pooling == SYN_POOLING_MEAN ? r->pool_sum[i] + row[i] : row[i];
    }
    if (r->n_past < r->n_fill) return;
    const double div = r->pooling == SYN_POOLING_MEAN ? (double)r->n_prompt : 1.0;
    for (size_t i = 0; i < n_embd; i++) {
        r->embedding[i] = (float)(r->pool_sum[i] / div);
        if (!isfinite(r->embedding[i])) { /* as NaN logits fail a generation */
            char msg[128];
            snprintf(msg, sizeof msg, "embedding: the pooled hidden state [%zu] is %s", i,
                     isnan(r->embedding[i]) ? "NaN" : "infinite");
            mark_finished(r, SYN_FINISH_ERROR, SYN_ERR_INVALID_ARGUMENT, msg);
            return;
        }
    }
    syn_embed_normalize(r->embedding, n_embd);
    mark_finished(r, SYN_FINISH_LENGTH, SYN_OK, NULL);
}

/* Enters r's newly completed full blocks into the prefix cache; where an equal block is cached
 * already (another sequence computed the same tokens), r shares it instead, so that the blocks
 * after it still enter the cache as its children. */
static void publish_blocks(syn_engine *e, syn_request *r) {
    const uint32_t full = r->n_past / SYN_KV_BLOCK;
    while (!r->publish_blocked && r->n_published < full) {
        const uint32_t b = r->n_published;
        const int32_t parent = b ? r->block_ids[b - 1] : -1;
        const int32_t at =
            kv_pool_publish(e->pool, parent, r->ids + (size_t)b * SYN_KV_BLOCK, r->block_ids[b]);
        if (at < 0) {
            r->publish_blocked = true;
            break;
        }
        if (at != r->block_ids[b]) { /* the same keys and values, cached first: share them */
            kv_pool_unref(e->pool, r->block_ids[b]);
            r->block_ids[b] = at;
            r->block_data[b] = kv_pool_data(e->pool, at);
        }
        r->n_published++;
    }
}

/* r's prefill has reached one of its snap_pos: its slot memory there becomes the snapshot of the
 * cached block ending there (r's own, or the equal one of a sequence that cached it first),
 * unless that block has one. */
static void take_snapshots(syn_engine *e, syn_request *r) {
    for (int i = 0; i < 2; i++) {
        if (r->snap_pos[i] != r->n_past) continue;
        const int32_t id = kv_pool_find(e->pool, r->ids, r->n_past / SYN_KV_BLOCK);
        char *snap = id >= 0 ? kv_pool_snapshot_take(e->pool, id) : NULL;
        if (snap) snapshot_save(e, r, r->n_past, snap);
        r->snap_pos[i] = 0;
    }
}

/* One batched forward pass and what follows it. */
static void step(syn_engine *e, uint64_t step_index, bool inject_failure) {
    const double t0 = syn_now_ms();
    size_t n = 0;
    uint32_t n_decode = 0, n_logits = 0, n_hidden = 0;
    grow_decoders(e);
    for (uint32_t i = 0; i < e->n_active; i++) {
        syn_request *r = e->active[i];
        r->step_tokens = 0;
        r->step_hidden = 0;
        r->step_logits = false;
        if (r->phase == PHASE_DECODE && add_tokens(e, r, &n, &n_logits, &n_hidden, 1, true))
            n_decode++;
    }
    for (uint32_t i = 0; i < e->n_active && n < (size_t)e->params.max_step_tokens; i++) {
        syn_request *r = e->active[i];
        if (r->phase != PHASE_PREFILL) continue;
        const size_t left = r->n_fill - r->n_past, room = (size_t)e->params.max_step_tokens - n;
        uint32_t k = (uint32_t)(left < room ? left : room);
        for (int s = 0; s < 2; s++) /* the slice ends where a snapshot is taken */
            if (r->snap_pos[s] > r->n_past && r->n_past + k > r->snap_pos[s])
                k = r->snap_pos[s] - r->n_past;
        /* resumed (n_out > 0) or embedding: no logits */
        add_tokens(e, r, &n, &n_logits, &n_hidden, k, k == left && r->n_out == 0 && !r->embed);
    }

    syn_status st = grow_logits(e, n_logits);
    if (st == SYN_OK) st = grow_hidden(e, n_hidden);
    if (st == SYN_OK && inject_failure)
        st = syn_fail(SYN_ERR_INTERNAL, "engine: injected step failure (test)");
    if (st == SYN_OK && n > 0) {
        const syn_batch b = {.n = n,
                             .tokens = e->b_tokens,
                             .pos = e->b_pos,
                             .blocks = (void *const *const *)e->b_blocks,
                             .want_logits = e->b_want,
                             .logits = e->logits,
                             .want_hidden = n_hidden ? e->b_hidden : NULL,
                             .hidden = e->hidden,
                             .rstates = e->b_rstates,
                             .rings = (void *const *const *)e->b_rings};
        st = e->ops->forward_batch(e->backend, &b);
    }
    if (st != SYN_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "step %llu failed: %s", (unsigned long long)step_index,
                 syn_last_error());
        for (uint32_t i = 0; i < e->n_active; i++)
            if (e->active[i]->step_tokens) mark_finished(e->active[i], SYN_FINISH_ERROR, st, msg);
    } else {
        for (uint32_t i = 0; i < e->n_active; i++) {
            syn_request *r = e->active[i];
            if (!r->step_tokens) continue;
            r->n_past += r->step_tokens;
            if (r->embed)
                pool_step(e, r);
            else if (r->step_logits)
                sample_next(e, r, e->logits + (size_t)r->logits_row * (size_t)e->n_vocab,
                            step_index);
            else if (r->phase == PHASE_PREFILL && r->n_past == r->n_fill && r->n_out > 0)
                r->phase = PHASE_DECODE; /* a preempted request caught up */
            if (e->params.prefix_cache) publish_blocks(e, r);
            if (r->snap_pos[0] || r->snap_pos[1]) take_snapshots(e, r);
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
        while (!e->stopping && e->n_active == 0 && !e->q_head)
            pthread_cond_wait(&e->work, &e->mutex);
        if (e->stopping) break;
        for (uint32_t i = 0; i < e->n_active; i++)
            if (e->active[i]->cancel)
                mark_finished(e->active[i], SYN_FINISH_CANCELLED, SYN_OK, NULL);
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
    for (uint32_t i = 0; i < e->n_active; i++)
        mark_finished(e->active[i], SYN_FINISH_CANCELLED, SYN_OK, NULL);
    retire_finished(e);
    while (e->q_head) {
        syn_request *r = e->q_head;
        dequeue_locked(e, r);
        finish_locked(r, SYN_FINISH_CANCELLED, SYN_OK, NULL);
    }
    pthread_mutex_unlock(&e->mutex);
    return NULL;
}

/*
 * scheduler.h: the engine's private types, and what engine.c (the public functions: creation,
 * submission, cancellation, waiting) calls in scheduler.c (the scheduler thread, the queue, the
 * end of a request). The calls go one way: scheduler.c never calls into engine.c.
 *
 * Ownership: fields under "mutex" are read and written with engine->mutex held; fields under
 * "scheduler" belong to the scheduler thread (and to submission before the request is queued).
 * A request struct lives while its handle is held or the engine still works on it (refs); the
 * engine struct lives while its owner or any request struct holds it (refs), so that handles stay
 * usable after syn_engine_free.
 */
#ifndef SYN_ENGINE_SCHEDULER_H
#define SYN_ENGINE_SCHEDULER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "engine/kv_pool.h"
#include "engine/text_stream.h"
#include "grammar/grammar.h"

/* The most bytes of one token a lazy grammar's tail makes room for (longer ones keep their end). */
#define SYN_TRIGGER_TOKEN_BYTES 1024
#include "synapse.h"

typedef enum req_phase { PHASE_PREFILL, PHASE_DECODE, PHASE_FINISHED } req_phase;

struct syn_request {
    struct syn_engine *engine;

    /* Set at submission, read-only afterwards (until finish_locked releases them). */
    int32_t *ids; /* [n_prompt + max_tokens]: the prompt, then the generated tokens; once
                   * finished, [n_out]: the generated tokens only (release_work_state) */
    size_t n_prompt;
    int32_t max_tokens;  /* > 0: what the caller's 0 meant resolved against the context */
    uint32_t max_blocks; /* blocks for positions [0, n_prompt + max_tokens - 1) */
    bool ignore_eos;
    int32_t *stop; /* [n_stop] */
    size_t n_stop;
    uint64_t seq; /* submission order: preemption takes the largest */
    syn_token_fn on_token;
    void *user_data;
    double t_submit;

    /* Scheduler. */
    syn_sampler *sampler;
    /* the request's grammar (NULL: none), its matcher's state, and the per-step mask buffers */
    syn_grammar *grammar;
    syn_grammar_matcher *matcher;
    uint64_t *allowed; /* [(n_vocab + 63) / 64] bits */
    int32_t *banned;   /* [n_vocab] */
    /* a lazy grammar: matcher is not used until trigger appears in the output; tail holds the
     * output's last bytes (trigger_len - 1 + a token's), where it is looked for */
    char *trigger;
    size_t trigger_len;
    bool trigger_pending;
    char *tail;
    size_t tail_len;
    syn_logit_bias *bias; /* [n_bias] the request's logit biases */
    size_t n_bias;
    float *biased;      /* [n_vocab] the logits with the biases added, when n_bias */
    text_stream text;   /* the streamed text: detokenizer, stop strings, held-back text */
    int32_t slot;       /* its slot while active (models with per-sequence memory), else -1 */
    float *rstate;      /* its slot's recurrent state while active (qwen35), else NULL */
    void *const *ring;  /* its slot's ring table while active (gemma3), else NULL */
    int32_t *block_ids; /* [max_blocks] pool ids of the sequence's blocks */
    void **block_data;  /* [max_blocks] their memory: the table the backend reads */
    uint32_t n_blocks;
    uint32_t reserved;    /* blocks still to draw from the pool's reservation */
    uint32_t n_published; /* leading blocks the prefix cache holds (an equal block cached first
                           * by another sequence replaces the request's own) */
    bool publish_blocked; /* a block could not be entered (its parent is not cached) */
    uint32_t n_past;      /* positions whose keys and values are stored */
    uint32_t n_fill;      /* positions to compute before decoding (re)starts: n_prompt, or after a
                           * preemption the prompt and all but the last generated token */
    size_t n_out;         /* generated tokens, in ids after the prompt */
    size_t n_cached;      /* prompt positions reused from the prefix cache */
    /* block boundaries where this prefill takes snapshots (0: none): where its prompt left the
     * cached chain it matched (a prefix other prompts share), and its prompt's last boundary
     * before its last token */
    uint32_t snap_pos[2];
    req_phase phase;
    uint32_t step_tokens; /* tokens in the current step */
    bool step_logits;     /* the current step computes its logits ... */
    uint32_t logits_row;  /* ... in this row of the step's logits (rows follow batch order) */
    /* An embedding request (embed): its prompt's hidden rows pooled instead of generation. */
    bool embed;
    syn_pooling pooling;  /* resolved: mean, cls or last */
    double *pool_sum;     /* [n_embd] mean: the sum of the rows so far; cls, last: the row */
    float *embedding;     /* [n_embd] the unit-length result (kept with the finished handle) */
    uint32_t step_hidden; /* hidden rows of the current step ... */
    uint32_t hidden_row;  /* ... from this row of the step's hidden buffer (batch order) */
    syn_finish_reason finish_now; /* decided during a step, applied after it */
    syn_status finish_status;
    char finish_msg[256];
    double t_admit, t_first;

    /* Mutex. */
    syn_request *next; /* queue link */
    bool queued;
    bool cancel;
    bool done;
    int refs; /* the handle + the engine until done */
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
    int32_t *b_tokens; /* [max_step_tokens] the step's batch */
    uint32_t *b_pos;
    void *const **b_blocks;
    bool *b_want;
    bool *b_hidden;    /* [max_step_tokens] the step's tokens whose hidden state embeddings pool */
    float **b_rstates; /* [max_step_tokens] the step's recurrent states, NULL: the model has none */
    void *const **b_rings; /* [max_step_tokens] the step's ring tables, NULL: no sliding window */
    /* Per-sequence memory in n_parallel slots, allocated on first use, held by a request while
     * active: the recurrent layers' state (qwen35) and the sliding-window layers' ring (gemma3:
     * those layers are not in the pool's blocks). A cached prefix's KV blocks carry neither, so a
     * sequence resumes only after a cached block with a snapshot of both (kv_pool.h): the state,
     * then the ring blocks of the window before the boundary; else it computes from position 0,
     * which restarts both. */
    size_t rstate_bytes;     /* 0: the model has no recurrent layer */
    float **rstates;         /* [n_parallel] */
    uint32_t ring_blocks;    /* blocks of a ring (ops->ring_blocks), 0: no sliding-window layer */
    size_t ring_block_bytes; /* bytes of one */
    char **ring_mem;         /* [n_parallel] -> [ring_blocks][ring_block_bytes] */
    void ***ring_tables; /* [n_parallel] -> [blocks of n_ctx] block b: ring block b % ring_blocks */
    size_t snap_bytes;   /* bytes of a snapshot: rstate_bytes + snap_ring_blocks ring blocks */
    uint32_t snap_ring_blocks; /* ring blocks a snapshot keeps: those the window reaches back */
    bool *slot_used;           /* [n_parallel] */
    float *logits;             /* [logits_rows][n_vocab] */
    uint32_t logits_rows;
    float *hidden; /* [hidden_rows][n_embd] */
    uint32_t hidden_rows;
    /* [n_eog] the vocabulary's end-of-generation tokens (the tokenizer's) */
    const int32_t *eog_ids;
    size_t n_eog;
    /* the vocabulary trie for grammars: built by the first submission with a grammar (under
     * mutex, before that request is queued), then read-only */
    syn_grammar_vocab *grammar_vocab;

    /* Mutex. */
    pthread_mutex_t mutex;
    pthread_cond_t work; /* a submission, a cancellation or shutdown */
    pthread_cond_t done; /* a request finished */
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

/* KV blocks holding `positions` positions. */
static inline uint32_t blocks_for(uint64_t positions) {
    return (uint32_t)((positions + SYN_KV_BLOCK - 1) / SYN_KV_BLOCK);
}

/* Creates the scheduler's state (the backend, the KV pool of kv_budget_mib, the step buffers) and
 * starts the scheduler thread. On failure that state is freed again; the caller still frees the
 * engine struct. */
syn_status scheduler_start(syn_engine *e, const syn_backend_config *cfg);

/* Stops the scheduler thread, which first cancels every unfinished request, and frees the
 * scheduler's state. */
void scheduler_stop(syn_engine *e);

/* Appends r to the queue (mutex held). */
void queue_push_back_locked(syn_engine *e, syn_request *r);

/* Unlinks queued request r (mutex held). */
void dequeue_locked(syn_engine *e, syn_request *r);

/* Records r's outcome, releases its work state and wakes its waiters (mutex held); drops the
 * engine's reference. */
void finish_locked(syn_request *r, syn_finish_reason why, syn_status status, const char *msg);

/* Frees a request struct that was never queued (or whose last reference is gone). */
void request_destroy(syn_request *r);

/* Drops one reference to r (mutex held), freeing it on the last one, which also drops r's
 * reference to the engine. Returns true when that was the engine's last reference: the caller
 * then destroys the engine after unlocking its mutex. */
bool request_unref_locked(syn_request *r);

#endif

/* test_engine.c: the concurrent engine (syn_engine): bitwise parity of every request's tokens and
 * logits with a plain syn_context run, whatever shares its steps (ragged prompts, arrival order,
 * requests arriving mid-generation, cancellations and slot reuse, thread counts, step capacity,
 * prefix reuse); fairness of decoding against a long prompt; limits and error paths (NaN logits
 * included); memory that follows the work done, not the request count or the budget. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "backend/backend.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/model.h"

enum { MAX_GEN = 64, MAX_JOBS = 16 };

typedef struct fixture {
    syn_model *model;
    const syn_tokenizer *tok;
    int32_t n_vocab;
    int32_t tokens[4096]; /* a deterministic token stream prompts are cut from */
} fixture;

/* One request's definition. */
typedef struct job {
    const int32_t *prompt;
    size_t n_prompt;
    int32_t max_tokens;
    syn_sampler_params sampling;
    bool ignore_eos;
} job;

/* What a run produced: each token, a hash of the logits it was sampled from, and its step. */
typedef struct trace {
    int32_t tokens[MAX_GEN];
    uint64_t hashes[MAX_GEN];
    uint64_t steps[MAX_GEN];
    size_t n;
    char text[4096];
    size_t text_len;
    int stop_after; /* the callback returns false after this many tokens; 0: never */
    void (*hook)(void *ctx, uint32_t index); /* called for each token (on the scheduler thread) */
    void *hook_ctx;
    int max_active;                 /* most active requests seen while it ran */
    syn_engine *engine;             /* for max_active */
    int n_final;                    /* final events seen (token -1) */
    syn_finish_reason final_finish; /* the finish reason the final event carried */
    bool piece_after_final;         /* an event came after the final one */
} trace;

/* FNV-1a over the raw bytes: any change of any logit changes it (with overwhelming odds). */
static uint64_t hash_logits(const float *l, int32_t n) {
    uint64_t h = 14695981039346656037ull;
    const unsigned char *b = (const unsigned char *)l;
    for (size_t i = 0; i < sizeof(float) * (size_t)n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static bool record_token(const syn_token_event *ev, void *user_data) {
    trace *t = user_data;
    if (ev->piece_len && t->text_len + ev->piece_len < sizeof t->text) {
        memcpy(t->text + t->text_len, ev->piece, ev->piece_len);
        t->text_len += ev->piece_len;
    }
    if (t->n_final) t->piece_after_final = true;
    if (ev->token < 0) { /* the final event: the held-back text and the finish reason */
        t->n_final++;
        t->final_finish = ev->finish;
        return true;
    }
    if (ev->finish != SYN_FINISH_NONE)
        fail_msg("token event %u carries a finish reason", ev->index);
    if (t->n >= MAX_GEN || ev->index != t->n)
        fail_msg("token event %u out of order (have %zu)", ev->index, t->n);
    t->tokens[t->n] = ev->token;
    t->hashes[t->n] = hash_logits(ev->logits, ev->n_vocab);
    t->steps[t->n] = ev->step;
    t->n++;
    if (t->engine) {
        syn_engine_stats s;
        syn_engine_get_stats(t->engine, &s);
        if ((int)s.n_active > t->max_active) t->max_active = (int)s.n_active;
    }
    if (t->hook) t->hook(t->hook_ctx, ev->index);
    return t->stop_after == 0 || (int)t->n < t->stop_after;
}

static int setup_file(void **state, const char *file) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->model = test_load_model(file);
    if (!f->model) {
        free(f);
        return -1;
    }
    f->tok = syn_model_tokenizer(f->model);
    f->n_vocab = syn_tokenizer_n_vocab(f->tok);
    test_fill_tokens(f->tokens, sizeof f->tokens / sizeof f->tokens[0], 987654321u);
    for (size_t i = 0; i < sizeof f->tokens / sizeof f->tokens[0]; i++)
        f->tokens[i] %= f->n_vocab;
    *state = f;
    return 0;
}

static int setup(void **state) { return setup_file(state, "qwen2-tiny-synth-q8_0.gguf"); }

/* gemma3 (a sliding window of 8 on two of its three layers): the engine's blocks keep the global
 * layer and each slot a ring of the window and a step for the local ones, as the syn_context it is
 * compared with keeps them in a ring of the window and a slice. */
static int setup_gemma3(void **state) { return setup_file(state, "arch2/gemma3-s5-q8_0.gguf"); }

/* phi3 (arch2/phi3-s5-q4_k_m.gguf): the fused-matrix views, partial rotary and LongRoPE through
 * the engine's forward_batch; the token stream folded into its 576-token vocabulary. */
static int setup_phi3(void **state) { return setup_file(state, "arch2/phi3-s5-q4_k_m.gguf"); }

/* qwen35: recurrent (gated delta net) layers, whose state lives in the engine's slots. */
static int setup_qwen35(void **state) { return setup_file(state, "arch2/qwen35-s5-q8_0.gguf"); }

static int teardown(void **state) {
    fixture *f = *state;
    syn_model_free(f->model);
    free(f);
    return 0;
}

/* The oracle: one request through a plain syn_context, as `synapse run` does it (prompt in one
 * decode, then one token at a time; history = prompt + generated, each generated token accepted
 * into the sampler's record for the frequency and presence penalties; EOG masked with
 * ignore_eos). */
static void reference(const fixture *f, const job *j, syn_kv_type kv, trace *out) {
    memset(out, 0, sizeof *out);
    syn_context_params cp = syn_context_default_params();
    cp.n_threads = 2;
    cp.kv_type = kv;
    cp.n_ctx = (uint32_t)(j->n_prompt + (size_t)j->max_tokens);
    syn_context *ctx = NULL;
    syn_sampler *sampler = NULL;
    int32_t *history = malloc(sizeof *history * (j->n_prompt + (size_t)j->max_tokens));
    float *masked = malloc(sizeof *masked * (size_t)f->n_vocab);
    assert_non_null(history);
    assert_non_null(masked);
    memcpy(history, j->prompt, sizeof *history * j->n_prompt);
    size_t n_hist = j->n_prompt;
    assert_int_equal(syn_context_new(f->model, &cp, &ctx), SYN_OK);
    assert_int_equal(syn_sampler_new(&j->sampling, &sampler), SYN_OK);
    assert_int_equal(syn_context_decode(ctx, j->prompt, j->n_prompt, NULL), SYN_OK);
    for (int32_t i = 0; i < j->max_tokens; i++) {
        const float *logits = syn_context_logits(ctx);
        const uint64_t h = hash_logits(logits, f->n_vocab);
        if (j->ignore_eos) {
            memcpy(masked, logits, sizeof *masked * (size_t)f->n_vocab);
            for (int32_t id = 0; id < f->n_vocab; id++)
                if (syn_tokenizer_is_eog(f->tok, id)) masked[id] = -1.0f / 0.0f;
            logits = masked;
        }
        int32_t id;
        assert_int_equal(syn_sampler_sample(sampler, logits, f->n_vocab, history, n_hist, &id),
                         SYN_OK);
        if (!j->ignore_eos && syn_tokenizer_is_eog(f->tok, id)) break;
        assert_int_equal(syn_sampler_accept(sampler, id), SYN_OK);
        out->tokens[out->n] = id;
        out->hashes[out->n++] = h;
        history[n_hist++] = id;
        if (i + 1 == j->max_tokens) break;
        assert_int_equal(syn_context_decode(ctx, &id, 1, NULL), SYN_OK);
    }
    syn_sampler_free(sampler);
    syn_context_free(ctx);
    free(history);
    free(masked);
}

static void assert_same_run(const trace *want, const trace *got, const char *what, size_t k) {
    if (want->n != got->n)
        fail_msg("%s, request %zu: %zu tokens, want %zu", what, k, got->n, want->n);
    for (size_t i = 0; i < want->n; i++) {
        if (want->tokens[i] != got->tokens[i])
            fail_msg("%s, request %zu: token %zu is %d, want %d", what, k, i, got->tokens[i],
                     want->tokens[i]);
        if (want->hashes[i] != got->hashes[i])
            fail_msg("%s, request %zu: logits of token %zu differ from the syn_context run", what,
                     k, i);
    }
}

/* A cancelled request produced a prefix of what it would have produced. */
static void assert_prefix_run(const trace *want, const trace *got, const char *what, size_t k) {
    assert_true(got->n <= want->n);
    for (size_t i = 0; i < got->n; i++) {
        if (want->tokens[i] != got->tokens[i] || want->hashes[i] != got->hashes[i])
            fail_msg("%s, cancelled request %zu: token %zu differs", what, k, i);
    }
}

/* Sixteen ragged requests: prompt lengths 1..~80 (around block edges too), greedy and seeded,
 * some with OpenAI's frequency and presence penalties (whose counts a preempted request keeps). */
static void make_jobs(const fixture *f, job *jobs, size_t n, size_t offset) {
    static const size_t lens[MAX_JOBS] = {1,  16, 17, 33, 5,  48, 70, 2,
                                          31, 32, 9,  64, 80, 3,  15, 47};
    for (size_t k = 0; k < n; k++) {
        job *j = &jobs[k];
        j->prompt = f->tokens + offset + k * 97;
        j->n_prompt = lens[k % MAX_JOBS];
        j->max_tokens = 4 + (int32_t)(k * 5 % 9);
        j->sampling = syn_sampler_default_params();
        if (k % 2 == 0) {
            j->sampling.temperature = 0.0f;
            j->sampling.frequency_penalty = k % 4 == 2 ? 1.5f : 0.0f;
        } else {
            j->sampling.seed = 1000 + k;
            j->sampling.repeat_penalty = k % 4 == 1 ? 1.1f : 1.0f;
            j->sampling.presence_penalty = k % 4 == 3 ? 0.8f : 0.0f;
            j->sampling.frequency_penalty = k % 4 == 3 ? -0.4f : 0.0f;
        }
        j->ignore_eos = k % 3 != 0;
    }
}

static syn_request_params request_of(const job *j, trace *t) {
    syn_request_params p = syn_request_default_params();
    p.prompt_tokens = j->prompt;
    p.n_prompt_tokens = j->n_prompt;
    p.max_tokens = j->max_tokens;
    p.sampling = j->sampling;
    p.ignore_eos = j->ignore_eos;
    p.on_token = t ? record_token : NULL;
    p.user_data = t;
    return p;
}

static syn_engine_params engine_params(int32_t n_parallel, int32_t threads, int32_t step_tokens) {
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = n_parallel;
    ep.n_threads = threads;
    ep.max_step_tokens = step_tokens;
    return ep;
}

/* Submits jobs in `order`, waits for all, checks each against its reference. */
static void run_and_compare(const fixture *f, const syn_engine_params *ep, const job *jobs,
                            const trace *want, const size_t *order, size_t n, const char *what) {
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, ep, &e), SYN_OK);
    trace *got = calloc(n, sizeof *got);
    syn_request **reqs = calloc(n, sizeof *reqs);
    assert_non_null(got);
    assert_non_null(reqs);
    for (size_t i = 0; i < n; i++) {
        const size_t k = order ? order[i] : i;
        syn_request_params p = request_of(&jobs[k], &got[k]);
        assert_int_equal(syn_engine_submit(e, &p, &reqs[k]), SYN_OK);
    }
    for (size_t k = 0; k < n; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_int_equal(res.status, SYN_OK);
        assert_true(res.finish == SYN_FINISH_LENGTH || res.finish == SYN_FINISH_EOG);
        assert_int_equal(res.n_tokens, got[k].n);
        assert_memory_equal(res.tokens, got[k].tokens, sizeof(int32_t) * got[k].n);
        assert_same_run(&want[k], &got[k], what, k);
        assert_int_equal(got[k].n_final, 1);
        assert_int_equal(got[k].final_finish, res.finish);
        assert_false(got[k].piece_after_final);
        syn_request_free(reqs[k]);
    }
    syn_engine_free(e);
    free(got);
    free(reqs);
}

/* ---- parity --------------------------------------------------------------------------------- */

/* Each of 16 requests alone, among 4 others and among 15 others, in submission, reversed and
 * shuffled order, with 1, 2 and 3 threads and step capacities that split prompts. */
static void test_parity_batches(void **state) {
    const fixture *f = *state;
    job jobs[MAX_JOBS];
    trace want[MAX_JOBS];
    make_jobs(f, jobs, MAX_JOBS, 0);
    for (size_t k = 0; k < MAX_JOBS; k++)
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);

    size_t reversed[MAX_JOBS], shuffled[MAX_JOBS];
    for (size_t i = 0; i < MAX_JOBS; i++) {
        reversed[i] = MAX_JOBS - 1 - i;
        shuffled[i] = (i * 7 + 3) % MAX_JOBS; /* 7 is coprime with 16: a permutation */
    }
    syn_engine_params alone = engine_params(1, 2, 512);
    run_and_compare(f, &alone, jobs, want, NULL, MAX_JOBS, "alone");
    for (int threads = 1; threads <= 3; threads++) {
        char what[64];
        syn_engine_params five = engine_params(5, threads, 512);
        snprintf(what, sizeof what, "5 slots, %d threads", threads);
        run_and_compare(f, &five, jobs, want, shuffled, MAX_JOBS, what);
        syn_engine_params sixteen = engine_params(16, threads, 16 + 7 * threads);
        snprintf(what, sizeof what, "16 slots, %d threads, %d-token steps", threads,
                 16 + 7 * threads);
        run_and_compare(f, &sixteen, jobs, want, reversed, MAX_JOBS, what);
    }
    syn_engine_params tight = engine_params(4, 2, 4); /* prompts cut into 1..4-token pieces */
    run_and_compare(f, &tight, jobs, want, NULL, MAX_JOBS, "4 slots, 4-token steps");
    syn_engine_params no_cache = engine_params(16, 2, 64);
    no_cache.prefix_cache = false;
    run_and_compare(f, &no_cache, jobs, want, shuffled, MAX_JOBS, "16 slots, no prefix cache");
}

/* ---- embeddings ------------------------------------------------------------------------------ */

/* The embedding request of job j's prompt (the jobs' ragged lengths): mean pooling (every
 * token's hidden state) for even lengths, last for odd ones. */
static syn_request_params embedding_of(const job *j) {
    syn_request_params p = syn_request_default_params();
    p.embed = true;
    p.pooling = j->n_prompt % 2 ? SYN_POOLING_LAST : SYN_POOLING_MEAN;
    p.prompt_tokens = j->prompt;
    p.n_prompt_tokens = j->n_prompt;
    return p;
}

/* Submits the embedding requests of jobs[n] (after generation requests when gen, interleaved) to
 * e and returns their vectors [n][n_embd]; generation traces go to got and are checked against
 * want. */
static float *embed_jobs(const fixture *f, syn_engine *e, const job *jobs, size_t n, bool gen,
                         const trace *want, const char *what) {
    const size_t d = (size_t)f->model->hp.n_embd;
    float *out = malloc(sizeof *out * n * d);
    trace *got = calloc(n, sizeof *got);
    syn_request **emb = calloc(n, sizeof *emb), **gens = calloc(n, sizeof *gens);
    assert_non_null(out);
    assert_non_null(got);
    assert_non_null(emb);
    assert_non_null(gens);
    for (size_t k = 0; k < n; k++) {
        if (gen) {
            syn_request_params g = request_of(&jobs[(k + 3) % n], &got[k]);
            assert_int_equal(syn_engine_submit(e, &g, &gens[k]), SYN_OK);
        }
        syn_request_params p = embedding_of(&jobs[k]);
        assert_int_equal(syn_engine_submit(e, &p, &emb[k]), SYN_OK);
    }
    for (size_t k = 0; k < n; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(emb[k], &res), SYN_OK);
        if (!res.embedding) fail_msg("%s, embedding %zu: %s", what, k, res.error);
        assert_int_equal(res.n_tokens, 0);
        memcpy(out + k * d, res.embedding, sizeof *out * d);
        syn_request_free(emb[k]);
        if (!gen) continue;
        assert_int_equal(syn_request_wait(gens[k], &res), SYN_OK);
        assert_same_run(&want[(k + 3) % n], &got[k], what, k);
        syn_request_free(gens[k]);
    }
    free(got);
    free(emb);
    free(gens);
    return out;
}

/* An embedding is bitwise the same alone (one slot, whole prompts) as among other embeddings and
 * generation requests in the same steps (ragged lengths, 1..3 threads, steps that split prompts);
 * the generations beside them stay bitwise those of syn_context. */
static void test_embedding_parity(void **state) {
    const fixture *f = *state;
    enum { N = 10 };
    const size_t d = (size_t)f->model->hp.n_embd;
    job jobs[N];
    trace want[N];
    make_jobs(f, jobs, N, 200);
    for (size_t k = 0; k < N; k++)
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    syn_engine_params alone_p = engine_params(1, 2, 512);
    syn_engine *alone = NULL;
    assert_int_equal(syn_engine_new(f->model, &alone_p, &alone), SYN_OK);
    float *solo = malloc(sizeof *solo * N * d);
    assert_non_null(solo);
    for (size_t k = 0; k < N; k++) {
        float *v = embed_jobs(f, alone, &jobs[k], 1, false, NULL, "alone");
        memcpy(solo + k * d, v, sizeof *v * d);
        free(v);
    }
    syn_engine_free(alone);
    for (int threads = 1; threads <= 3; threads++) {
        syn_engine_params ep = engine_params(N, threads, 9 + 7 * threads);
        syn_engine *e = NULL;
        assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
        char what[64];
        snprintf(what, sizeof what, "%d threads, %d-token steps", threads, 9 + 7 * threads);
        float *got = embed_jobs(f, e, jobs, N, true, want, what);
        for (size_t k = 0; k < N; k++)
            if (memcmp(got + k * d, solo + k * d, sizeof *got * d) != 0)
                fail_msg("%s: embedding %zu (%zu tokens) differs from its run alone", what, k,
                         jobs[k].n_prompt);
        free(got);
        syn_engine_free(e);
    }
    free(solo);
}

/* An embedding request preempted mid-prompt (decoding requests take its blocks when the pool runs
 * dry) starts its pool over when readmitted: its vector is bitwise the one it gets alone. */
static void test_embedding_preemption(void **state) {
    const fixture *f = *state;
    enum { N = 3, GEN = 400, STEP = 16, SPARE = 4 };
    const size_t d = (size_t)f->model->hp.n_embd;
    syn_engine_params ep = engine_params(N + 1, 2, STEP);
    ep.kv_budget_mib = 1;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    /* Three short prompts that decode long, growing a block per 16 steps each, and a long
     * embedding that takes all but SPARE blocks and prefills 13 tokens a step: the decoders run
     * the pool dry long before its prompt is done, and it is the youngest. */
    const job emb = {.prompt = f->tokens + 2000,
                     .n_prompt = (size_t)(st.kv_blocks_total - N - SPARE) * SYN_KV_BLOCK};
    assert_true(emb.n_prompt > 40 * STEP);
    syn_request *reqs[N], *er = NULL;
    for (size_t k = 0; k < N; k++) {
        const job j = {.prompt = f->tokens + 100 * k,
                       .n_prompt = 8,
                       .max_tokens = GEN,
                       .sampling = syn_sampler_default_params(),
                       .ignore_eos = true};
        syn_request_params p = request_of(&j, NULL);
        assert_int_equal(syn_engine_submit(e, &p, &reqs[k]), SYN_OK);
    }
    syn_request_params p = embedding_of(&emb);
    p.pooling = SYN_POOLING_MEAN; /* every row: a restart that kept old ones would show */
    assert_int_equal(syn_engine_submit(e, &p, &er), SYN_OK);
    syn_request_result res;
    for (size_t k = 0; k < N; k++) {
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_int_equal(res.n_tokens, GEN);
        syn_request_free(reqs[k]);
    }
    assert_int_equal(syn_request_wait(er, &res), SYN_OK);
    if (!res.embedding) fail_msg("the embedding failed: %s", res.error);
    float *preempted = malloc(sizeof *preempted * d);
    assert_non_null(preempted);
    memcpy(preempted, res.embedding, sizeof *preempted * d);
    syn_request_free(er);
    syn_engine_get_stats(e, &st);
    if (st.n_preempted == 0)
        fail_msg("the pool never ran dry: the test does not exercise preemption");
    syn_engine_free(e);

    syn_engine_params alone_p = engine_params(1, 2, 512);
    assert_int_equal(syn_engine_new(f->model, &alone_p, &e), SYN_OK);
    assert_int_equal(syn_engine_submit(e, &p, &er), SYN_OK);
    assert_int_equal(syn_request_wait(er, &res), SYN_OK);
    assert_non_null(res.embedding);
    assert_memory_equal(preempted, res.embedding, sizeof *preempted * d);
    syn_request_free(er);
    syn_engine_free(e);
    free(preempted);
}

/* An fp16 KV cache matches a syn_context with an fp16 cache, bitwise. */
static void test_parity_f16_kv(void **state) {
    const fixture *f = *state;
    job jobs[8];
    trace want[8];
    make_jobs(f, jobs, 8, 500);
    for (size_t k = 0; k < 8; k++)
        reference(f, &jobs[k], SYN_KV_F16, &want[k]);
    syn_engine_params ep = engine_params(8, 2, 40);
    ep.kv_type = SYN_KV_F16;
    run_and_compare(f, &ep, jobs, want, NULL, 8, "f16 KV, 8 slots");
}

/* Requests arriving while others generate (submitted from a token callback, i.e. between steps
 * at a known point), requests cancelled mid-generation (by the callback's return value and by
 * syn_request_cancel from another request's callback), and the queued requests that reuse their
 * slots and blocks: everything that finishes matches its reference; cancelled ones are prefixes. */
typedef struct arrivals {
    syn_engine *engine;
    const job *jobs;
    trace *traces;
    syn_request **reqs;
    size_t first, count;     /* jobs submitted by the hook */
    syn_request **to_cancel; /* cancelled by the hook */
    bool fired;
} arrivals;

static void submit_more(void *ctx, uint32_t index) {
    arrivals *a = ctx;
    if (index != 1 || a->fired) return;
    a->fired = true;
    for (size_t k = a->first; k < a->first + a->count; k++) {
        syn_request_params p = request_of(&a->jobs[k], &a->traces[k]);
        assert_int_equal(syn_engine_submit(a->engine, &p, &a->reqs[k]), SYN_OK);
    }
    if (a->to_cancel) assert_int_equal(syn_request_cancel(*a->to_cancel), SYN_OK);
}

static void test_parity_arrivals_and_cancellation(void **state) {
    const fixture *f = *state;
    enum { N = 12 };
    job jobs[N];
    trace want[N], got[N];
    syn_request *reqs[N] = {0};
    make_jobs(f, jobs, N, 1000);
    jobs[0].ignore_eos = true; /* its second token submits more requests */
    jobs[2].max_tokens = 40;   /* cancelled by the callback of request 0 */
    jobs[3].max_tokens = 40;   /* its own callback stops it after 3 tokens */
    for (size_t k = 0; k < N; k++)
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    memset(got, 0, sizeof got);
    got[3].stop_after = 3;

    for (int threads = 1; threads <= 3; threads += 2) {
        memset(got, 0, sizeof got);
        got[3].stop_after = 3;
        syn_engine *e = NULL;
        syn_engine_params ep = engine_params(4, threads, 24);
        assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
        arrivals a = {.engine = e,
                      .jobs = jobs,
                      .traces = got,
                      .reqs = reqs,
                      .first = 6,
                      .count = N - 6,
                      .to_cancel = &reqs[2]};
        got[0].hook = submit_more;
        got[0].hook_ctx = &a;
        for (size_t k = 0; k < 6; k++) {
            syn_request_params p = request_of(&jobs[k], &got[k]);
            assert_int_equal(syn_engine_submit(e, &p, &reqs[k]), SYN_OK);
        }
        for (size_t k = 0; k < N; k++) {
            syn_request_result res;
            assert_non_null(reqs[k]); /* submitted by the hook before request 0 finished */
            assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
            if (k == 2 || k == 3) {
                assert_int_equal(res.finish, SYN_FINISH_CANCELLED);
                assert_true(got[k].n < want[k].n);
                assert_prefix_run(&want[k], &got[k], "arrivals", k);
                if (k == 3) assert_int_equal(got[k].n, 3);
            } else {
                assert_same_run(&want[k], &got[k], "arrivals", k);
            }
            syn_request_free(reqs[k]);
            reqs[k] = NULL;
        }
        assert_true(a.fired);
        syn_engine_free(e);
    }
}

/* ---- prefix reuse -----------------------------------------------------------------------------
 */

/* A shared 48-token system prompt and a chat continuation are reused from the cache (result
 * n_cached_tokens) and give the same tokens and logits as computing everything. */
static void test_prefix_reuse(void **state) {
    const fixture *f = *state;
    enum { N = 5 };
    int32_t prompts[N + 1][128];
    job jobs[N + 1];
    trace want[N + 1], got[N + 1];
    for (size_t k = 0; k < N; k++) {
        memcpy(prompts[k], f->tokens + 2000, sizeof(int32_t) * 48); /* the shared system prompt */
        memcpy(prompts[k] + 48, f->tokens + 2100 + k * 50, sizeof(int32_t) * 30);
        jobs[k] = (job){.prompt = prompts[k],
                        .n_prompt = 48 + 5 + k * 6,
                        .max_tokens = 6,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.seed = 77 + k;
    }
    jobs[0].max_tokens = 14; /* 53 + 13 decoded positions: its answer completes a 4th block */
    for (size_t k = 0; k < N; k++)
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    /* The next turn of request 0's chat: its prompt, its answer, then new tokens. */
    size_t n0 = jobs[0].n_prompt;
    memcpy(prompts[N], prompts[0], sizeof(int32_t) * n0);
    memcpy(prompts[N] + n0, want[0].tokens, sizeof(int32_t) * want[0].n);
    memcpy(prompts[N] + n0 + want[0].n, f->tokens + 3000, sizeof(int32_t) * 20);
    jobs[N] = (job){.prompt = prompts[N],
                    .n_prompt = n0 + want[0].n + 20,
                    .max_tokens = 5,
                    .sampling = syn_sampler_default_params(),
                    .ignore_eos = true};
    jobs[N].sampling.temperature = 0.0f;
    reference(f, &jobs[N], SYN_KV_F32, &want[N]);

    for (int cache = 0; cache <= 1; cache++) {
        memset(got, 0, sizeof got);
        syn_engine_params ep = engine_params(4, 2, 64);
        ep.prefix_cache = cache;
        syn_engine *e = NULL;
        assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
        syn_request *r = NULL;
        syn_request_result res;
        syn_request_params p = request_of(&jobs[0], &got[0]);
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        assert_int_equal(res.n_cached_tokens, 0);
        syn_request_free(r);
        syn_request *rs[N + 1] = {0};
        for (size_t k = 1; k <= N; k++) {
            p = request_of(&jobs[k], &got[k]);
            assert_int_equal(syn_engine_submit(e, &p, &rs[k]), SYN_OK);
        }
        /* gemma3, qwen35: a sequence resumes only after a block with a snapshot of its ring or
         * recurrent state, taken at a prompt's last block boundary before its last token */
        const bool snapshots =
            f->model->hp.swa_window > 0 || syn_recurrent_layers(&f->model->hp) > 0;
        for (size_t k = 1; k <= N; k++) {
            assert_int_equal(syn_request_wait(rs[k], &res), SYN_OK);
            if (!cache)
                assert_int_equal(res.n_cached_tokens, 0);
            else if (k < N || snapshots)
                assert_int_equal(res.n_cached_tokens, 48);
            else /* the previous turn's full blocks, its answer's included */
                assert_int_equal(res.n_cached_tokens, 64);
            syn_request_free(rs[k]);
        }
        for (size_t k = 0; k <= N; k++)
            assert_same_run(&want[k], &got[k], cache ? "prefix cache" : "no cache", k);
        syn_engine_stats st;
        syn_engine_get_stats(e, &st);
        if (cache) assert_true(st.n_cached_tokens >= 48 * N);
        assert_int_equal(st.kv_snapshots > 0, cache && snapshots);
        syn_engine_free(e);
    }
}

/* One request on e, alone: its tokens and logits are want's; returns the prompt positions it
 * reused (result) after checking that the engine computed only the others (stats). */
static size_t run_alone_checked(syn_engine *e, const job *j, const trace *want, const char *what) {
    trace got;
    memset(&got, 0, sizeof got);
    syn_engine_stats before, after;
    syn_engine_get_stats(e, &before);
    syn_request *r = NULL;
    syn_request_result res;
    syn_request_params p = request_of(j, &got);
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.status, SYN_OK);
    assert_same_run(want, &got, what, 0);
    syn_engine_get_stats(e, &after);
    assert_int_equal(after.n_cached_tokens - before.n_cached_tokens, res.n_cached_tokens);
    assert_int_equal(after.n_prompt_tokens - before.n_prompt_tokens,
                     j->n_prompt - res.n_cached_tokens);
    const size_t cached = res.n_cached_tokens;
    syn_request_free(r);
    return cached;
}

/* Overwrites the one slot's memory (ring or recurrent state) with another sequence's: a 10-token
 * prompt (no block boundary: no snapshot) and 240 generated tokens, past every ring block. */
static void run_other(syn_engine *e, const fixture *f) {
    const job other = {.prompt = f->tokens + 3900,
                       .n_prompt = 10,
                       .max_tokens = 240,
                       .sampling = syn_sampler_default_params(),
                       .ignore_eos = true};
    syn_request *r = NULL;
    syn_request_result res;
    syn_request_params p = request_of(&other, NULL);
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.n_tokens, 240);
    syn_request_free(r);
}

/* gemma3 and qwen35 keep per-sequence memory outside the KV blocks (the sliding-window layers'
 * ring, the recurrent state): a cached prefix resumes only after a block with a snapshot of it,
 * taken at a prompt's last block boundary before its last token, and restored into the slot
 * (which another sequence used in between). With one slot (one snapshot), at step sizes that
 * split the prompt or not (the 40-token steps with F16 KV): the same prompt again and a longer
 * one resume at 192 of 200 positions; a prompt that forks at 100 finds cached blocks but no
 * snapshot and computes everything; a snapshot taken by a newer prompt leaves the older chain
 * without one, until the older prompt computed again takes it back. Three equal prompts computed
 * together in three slots leave one snapshot on the chain the first of them cached, which the
 * longer prompt then resumes at. Every run is bitwise the syn_context one. */
static void test_prefix_snapshots(void **state) {
    const fixture *f = *state;
    enum { A = 200, MORE = 50, FORK = 100, N = 3 };
    int32_t longer[A + MORE], fork[A];
    memcpy(longer, f->tokens + 100, sizeof(int32_t) * A);
    memcpy(longer + A, f->tokens + 3000, sizeof(int32_t) * MORE);
    memcpy(fork, f->tokens + 100, sizeof(int32_t) * FORK);
    memcpy(fork + FORK, f->tokens + 3500, sizeof(int32_t) * (A - FORK));
    const int32_t *prompts[N] = {f->tokens + 100, longer, fork};
    const size_t lens[N] = {A, A + MORE, A};
    job jobs[N];
    trace want[N], want16[N]; /* F32 and F16 KV */
    for (size_t k = 0; k < N; k++) {
        jobs[k] = (job){.prompt = prompts[k],
                        .n_prompt = lens[k],
                        .max_tokens = 8,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.seed = 31 + k;
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
        reference(f, &jobs[k], SYN_KV_F16, &want16[k]);
    }
    const int32_t steps[] = {16, 40, 512};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        syn_engine_params ep = engine_params(1, 2, steps[i]);
        ep.kv_type = i == 1 ? SYN_KV_F16 : SYN_KV_F32;
        const trace *w = i == 1 ? want16 : want;
        syn_engine *e = NULL;
        assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
        syn_engine_stats st;
        syn_engine_get_stats(e, &st);
        assert_true(st.kv_snapshot_bytes > 0);
        assert_int_equal(run_alone_checked(e, &jobs[0], &w[0], "first"), 0);
        syn_engine_get_stats(e, &st);
        assert_int_equal(st.kv_snapshots, 1);
        run_other(e, f);
        assert_int_equal(run_alone_checked(e, &jobs[0], &w[0], "again"), 192);
        run_other(e, f);
        assert_int_equal(run_alone_checked(e, &jobs[1], &w[1], "longer"), 192);
        /* the longer prompt's snapshot (at 240) took the only one: 200 tokens start over */
        assert_int_equal(run_alone_checked(e, &jobs[0], &w[0], "no snapshot"), 0);
        run_other(e, f);
        assert_int_equal(run_alone_checked(e, &jobs[0], &w[0], "taken back"), 192);
        assert_int_equal(run_alone_checked(e, &jobs[2], &w[2], "fork"), 0);
        syn_engine_get_stats(e, &st);
        assert_int_equal(st.kv_snapshots, 1);
        assert_true(st.kv_blocks_cached >= 12 + 3);
        syn_engine_free(e);
    }
    /* A shared 100-token prefix (a system prompt) with three different endings, in three slots
     * (three snapshots): the second prompt finds its 6 full blocks cached without a snapshot,
     * computes everything and leaves one where it leaves that chain, at 96, which the third
     * resumes at. The second again resumes at its own end (128): its blocks after the shared ones
     * entered the cache as children of the equal blocks the first had cached. */
    enum { SYS = 100 };
    int32_t sys[3][SYS + 40];
    job shared[3];
    trace want_shared[3];
    for (size_t k = 0; k < 3; k++) {
        memcpy(sys[k], f->tokens + 1200, sizeof(int32_t) * SYS);
        memcpy(sys[k] + SYS, f->tokens + 2200 + 100 * k, sizeof(int32_t) * 40);
        shared[k] = (job){.prompt = sys[k],
                          .n_prompt = SYS + 30 + 10 * (k % 2),
                          .max_tokens = 6,
                          .sampling = syn_sampler_default_params(),
                          .ignore_eos = true};
        shared[k].sampling.temperature = 0.0f;
        reference(f, &shared[k], SYN_KV_F32, &want_shared[k]);
    }
    syn_engine_params three = engine_params(3, 2, 64);
    syn_engine *e2 = NULL;
    assert_int_equal(syn_engine_new(f->model, &three, &e2), SYN_OK);
    assert_int_equal(run_alone_checked(e2, &shared[0], &want_shared[0], "system prompt 1"), 0);
    assert_int_equal(run_alone_checked(e2, &shared[1], &want_shared[1], "system prompt 2"), 0);
    assert_int_equal(run_alone_checked(e2, &shared[2], &want_shared[2], "system prompt 3"), 96);
    assert_int_equal(run_alone_checked(e2, &shared[1], &want_shared[1], "system prompt 2 again"),
                     128);
    syn_engine_free(e2);

    enum { SAME = 3 };
    syn_engine_params ep = engine_params(SAME, 2, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    trace got[SAME];
    syn_request *reqs[SAME];
    syn_request_params together[SAME];
    memset(got, 0, sizeof got);
    for (size_t k = 0; k < SAME; k++)
        together[k] = request_of(&jobs[0], &got[k]);
    /* queued at once, so all three start in the same step (submitted one by one, the first may
     * start alone and the others resume at the end of its cached chain: a second snapshot) */
    assert_int_equal(syn_engine_run(e, together, SAME, reqs, NULL), SYN_OK);
    for (size_t k = 0; k < SAME; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_same_run(&want[0], &got[k], "equal prompts together", k);
        syn_request_free(reqs[k]);
    }
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    assert_int_equal(st.kv_snapshots, 1);
    assert_int_equal(run_alone_checked(e, &jobs[1], &want[1], "longer after them"), 192);
    syn_engine_free(e);
}

/* With a budget of 128 blocks, ten 300-token prompts (18 full blocks each) cannot all stay cached:
 * the least recently used blocks go first. The latest prompt is fully reused, the first only
 * partly, both with unchanged results. */
static void test_prefix_lru_eviction(void **state) {
    const fixture *f = *state;
    enum { N = 10 };
    job jobs[N];
    trace want[2], got;
    for (size_t k = 0; k < N; k++) {
        jobs[k] = (job){.prompt = f->tokens + k * 300,
                        .n_prompt = 300,
                        .max_tokens = 3,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.temperature = 0.0f;
    }
    syn_engine_params ep = engine_params(2, 2, 256);
    ep.kv_budget_mib = 1;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    assert_int_equal(st.kv_blocks_total, (1u << 20) / st.kv_block_bytes);
    assert_true(st.kv_blocks_total < N * 18);
    for (size_t k = 0; k < N; k++) {
        syn_request *r = NULL;
        syn_request_result res;
        syn_request_params p = request_of(&jobs[k], NULL);
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        assert_int_equal(res.finish, SYN_FINISH_LENGTH);
        syn_request_free(r);
    }
    syn_engine_get_stats(e, &st);
    assert_true(st.kv_blocks_used <= st.kv_blocks_total);
    assert_true(st.kv_blocks_cached > 0);

    const size_t again[2] = {N - 1, 0};
    for (int i = 0; i < 2; i++)
        reference(f, &jobs[again[i]], SYN_KV_F32, &want[i]);
    for (int i = 0; i < 2; i++) {
        memset(&got, 0, sizeof got);
        syn_request *r = NULL;
        syn_request_result res;
        syn_request_params p = request_of(&jobs[again[i]], &got);
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        if (i == 0)
            assert_int_equal(res.n_cached_tokens, 288); /* 18 full blocks before the last token */
        else
            assert_true(res.n_cached_tokens < 288); /* its chain lost its least recently used end */
        assert_same_run(&want[i], &got, "after eviction", again[i]);
        syn_request_free(r);
    }
    syn_engine_free(e);
}

/* ---- scheduling -------------------------------------------------------------------------------
 */

/* A 2,000-token prompt arriving while 4 sequences decode is read over many steps, and every
 * decoding sequence still advances exactly one token per step. */
static void test_fairness_long_prompt(void **state) {
    const fixture *f = *state;
    enum { N = 5 };
    job jobs[N];
    trace want[N], got[N];
    syn_request *reqs[N] = {0};
    for (size_t k = 0; k < 4; k++) {
        jobs[k] = (job){.prompt = f->tokens + 100 * k,
                        .n_prompt = 5 + 4 * k,
                        .max_tokens = 40,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.temperature = 0.0f;
    }
    jobs[4] = (job){.prompt = f->tokens + 1000,
                    .n_prompt = 2000,
                    .max_tokens = 3,
                    .sampling = syn_sampler_default_params(),
                    .ignore_eos = true};
    for (size_t k = 0; k < N; k++)
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    memset(got, 0, sizeof got);

    syn_engine_params ep = engine_params(5, 2, 128);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    arrivals a = {.engine = e, .jobs = jobs, .traces = got, .reqs = reqs, .first = 4, .count = 1};
    got[0].hook = submit_more; /* the long prompt arrives after request 0's second token */
    got[0].hook_ctx = &a;
    for (size_t k = 0; k < 4; k++) {
        syn_request_params p = request_of(&jobs[k], &got[k]);
        assert_int_equal(syn_engine_submit(e, &p, &reqs[k]), SYN_OK);
    }
    for (size_t k = 0; k < N; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_same_run(&want[k], &got[k], "fairness", k);
        syn_request_free(reqs[k]);
    }
    const uint64_t arrival = got[0].steps[1], first_long = got[4].steps[0];
    /* 2,000 tokens in steps of at most 128 - 4 prompt tokens: at least 17 steps. */
    assert_true(first_long - arrival >= 16);
    for (size_t k = 0; k < 4; k++) {
        assert_true(got[k].steps[got[k].n - 1] >
                    first_long); /* it decoded through the long prefill */
        for (size_t i = 1; i < got[k].n; i++)
            if (got[k].steps[i] != got[k].steps[i - 1] + 1)
                fail_msg("request %zu: token %zu came at step %llu after step %llu", k, i,
                         (unsigned long long)got[k].steps[i],
                         (unsigned long long)got[k].steps[i - 1]);
    }
    syn_engine_free(e);
}

/* With a 1 MiB budget (128 blocks), three 900-token requests (57 blocks each) cannot all be
 * active: the third waits in the queue for blocks, then runs, with unchanged results. */
static void test_budget_admission(void **state) {
    const fixture *f = *state;
    enum { N = 3 };
    job jobs[N];
    trace want[N], got[N];
    syn_request *reqs[N];
    for (size_t k = 0; k < N; k++) {
        jobs[k] = (job){.prompt = f->tokens + 500 * k,
                        .n_prompt = 900,
                        .max_tokens = 8,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.temperature = 0.0f;
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    }
    memset(got, 0, sizeof got);
    syn_engine_params ep = engine_params(3, 2, 512);
    ep.kv_budget_mib = 1;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    for (size_t k = 0; k < N; k++) {
        got[k].engine = e;
        syn_request_params p = request_of(&jobs[k], &got[k]);
        assert_int_equal(syn_engine_submit(e, &p, &reqs[k]), SYN_OK);
    }
    for (size_t k = 0; k < N; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_same_run(&want[k], &got[k], "budget", k);
        assert_true(got[k].max_active <= 2);
        syn_request_free(reqs[k]);
    }
    assert_int_equal(got[0].max_active, 2);
    syn_engine_free(e);
}

/* ---- KV blocks on demand, preemption, stop strings ------------------------------------------ */

/* Four requests whose prompts fit the KV budget together but whose generations do not: the pool
 * runs dry mid-generation, the most recently submitted requests are preempted and recomputed, and
 * every request still produces bitwise the tokens and logits it produces alone. */
static void test_preemption_parity(void **state) {
    const fixture *f = *state;
    enum { N = 4, GEN = 64 };
    syn_engine_params ep = engine_params(N, 2, 512);
    ep.kv_budget_mib = 1;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    /* Each prompt takes a quarter of the pool less a block; its generation adds four more. */
    const uint32_t admit_blocks = st.kv_blocks_total / N - 1;
    const size_t n_prompt = (size_t)(admit_blocks - 1) * 16 + 8;
    job jobs[N];
    trace want[N], got[N];
    syn_request *reqs[N];
    for (size_t k = 0; k < N; k++) {
        jobs[k] = (job){.prompt = f->tokens + 700 * k,
                        .n_prompt = n_prompt,
                        .max_tokens = GEN,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.seed = 77 + k;
        if (k % 2) jobs[k].sampling.temperature = 0.0f;
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    }
    memset(got, 0, sizeof got);
    for (size_t k = 0; k < N; k++) {
        syn_request_params p = request_of(&jobs[k], &got[k]);
        assert_int_equal(syn_engine_submit(e, &p, &reqs[k]), SYN_OK);
    }
    for (size_t k = 0; k < N; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_int_equal(res.finish, SYN_FINISH_LENGTH);
        assert_same_run(&want[k], &got[k], "preemption", k);
        assert_int_equal(got[k].n_final, 1);
        syn_request_free(reqs[k]);
    }
    syn_engine_get_stats(e, &st);
    if (st.n_preempted == 0)
        fail_msg("the pool never ran dry: the test does not exercise preemption");
    syn_engine_free(e);
}

/* gemma3's local layers live in one ring per slot, not in the pool's blocks: a block holds the
 * global layers' K and V only, and two sequences far longer than the ring keep it at its size,
 * with the tokens and logits of syn_context. The ring holds the window and one slice of a
 * sequence's tokens, which the backend cuts at about W / 4 (16 for the window of 8) whatever the
 * step carries: (8 + 14) / 16 + 2 = 3 blocks for 16- and 512-token steps alike. */
static void test_swa_ring_memory(void **state) {
    const fixture *f = *state;
    const syn_hparams *hp = &f->model->hp;
    enum { N = 2 };
    int32_t n_local = 0;
    for (int32_t l = 0; l < hp->n_layer; l++)
        n_local += syn_layer_is_local(hp, l);
    assert_true(n_local > 0 && n_local < hp->n_attn_layers);
    assert_int_equal(hp->swa_window, 8);
    const size_t layer_bytes = 2 * SYN_KV_BLOCK * (size_t)hp->kv_dim * sizeof(float);
    const size_t ring_blocks = (8 + 16 - 2) / SYN_KV_BLOCK + 2;
    job jobs[N];
    trace want[N];
    for (size_t k = 0; k < N; k++) {
        jobs[k] = (job){.prompt = f->tokens + 500 * k,
                        .n_prompt = 200 + 100 * k,
                        .max_tokens = 24,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.seed = 5 + k;
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    }
    const int32_t steps[] = {16, 512};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        syn_engine *e = NULL;
        syn_engine_params ep = engine_params(N, 2, steps[i]);
        assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
        syn_engine_stats st;
        syn_engine_get_stats(e, &st);
        assert_int_equal(st.kv_block_bytes, layer_bytes * (size_t)(hp->n_attn_layers - n_local));
        assert_int_equal(st.kv_ring_bytes, ring_blocks * layer_bytes * (size_t)n_local);
        assert_int_equal(st.kv_rings, 0);
        trace got[N];
        syn_request *reqs[N];
        memset(got, 0, sizeof got);
        for (size_t k = 0; k < N; k++) { /* together, so that each takes a slot */
            syn_request_params p = request_of(&jobs[k], &got[k]);
            assert_int_equal(syn_engine_submit(e, &p, &reqs[k]), SYN_OK);
        }
        for (size_t k = 0; k < N; k++) {
            syn_request_result res;
            assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
            assert_same_run(&want[k], &got[k], "ring", k);
            syn_request_free(reqs[k]);
        }
        syn_engine_get_stats(e, &st);
        assert_int_equal(st.kv_rings, N); /* one per slot, whatever the sequences' length */
        syn_engine_free(e);
    }
}

/* A generated request's tokens (after wait), copied out. */
static size_t run_tokens(syn_engine *e, const syn_request_params *p, int32_t *out, size_t cap,
                         syn_finish_reason *finish) {
    syn_request *r = NULL;
    assert_int_equal(syn_engine_submit(e, p, &r), SYN_OK);
    syn_request_result res;
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_true(res.n_tokens <= cap);
    memcpy(out, res.tokens, sizeof *out * res.n_tokens);
    if (finish) *finish = res.finish;
    syn_request_free(r);
    return res.n_tokens;
}

/* logit_bias: +100 forces a token at every step (sampled at temperature 1 too), -INFINITY bans
 * the greedy choice, and tokens outside the vocabulary or NaN biases are refused at submission. */
static void test_logit_bias(void **state) {
    const fixture *f = *state;
    syn_engine_params ep = engine_params(2, 2, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_request_params p = syn_request_default_params();
    p.prompt_tokens = f->tokens + 10;
    p.n_prompt_tokens = 12;
    p.max_tokens = 8;
    p.ignore_eos = true;
    p.sampling.temperature = 0.0f;
    int32_t plain[8], got[8];
    assert_int_equal(run_tokens(e, &p, plain, 8, NULL), 8);
    const syn_logit_bias ban = {.token = plain[0], .bias = -INFINITY};
    p.logit_bias = &ban;
    p.n_logit_bias = 1;
    assert_int_equal(run_tokens(e, &p, got, 8, NULL), 8);
    for (size_t i = 0; i < 8; i++)
        assert_int_not_equal(got[i], plain[0]);
    const syn_logit_bias force = {.token = 1234, .bias = 100.0f};
    p.logit_bias = &force;
    p.sampling.temperature = 1.0f;
    p.sampling.seed = 5;
    assert_int_equal(run_tokens(e, &p, got, 8, NULL), 8);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(got[i], 1234);
    syn_logit_bias bad = {.token = f->n_vocab, .bias = 1.0f};
    p.logit_bias = &bad;
    syn_request *r = NULL;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "outside the vocabulary"));
    bad = (syn_logit_bias){.token = 3, .bias = NAN};
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "NaN"));
    assert_null(r);
    syn_engine_free(e);
}

/* Grammar-constrained requests under preemption and continuous batching: four sampled requests
 * with a grammar run out of KV blocks together, get preempted and recomputed, and each produces
 * exactly the tokens it produces alone, every one a continuation of the grammar. */
static void test_grammar_survives_preemption(void **state) {
    const fixture *f = *state;
    enum { N = 4, GEN = 48 };
    const char *grammar = "root ::= \"[\" (item (\", \" item)*)? \"]\"\n"
                          "item ::= [0-9]+ | \"\\\"\" [a-z ]* \"\\\"\"";
    syn_engine_params big = engine_params(1, 2, 512);
    syn_engine *alone = NULL;
    assert_int_equal(syn_engine_new(f->model, &big, &alone), SYN_OK);
    syn_engine_params ep = engine_params(N, 2, 512);
    ep.kv_budget_mib = 1;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    const uint32_t admit_blocks = st.kv_blocks_total / N - 1;
    const size_t n_prompt = (size_t)(admit_blocks - 1) * 16 + 8;
    syn_request_params p[N];
    int32_t want[N][GEN];
    size_t n_want[N];
    for (size_t k = 0; k < N; k++) {
        p[k] = syn_request_default_params();
        p[k].prompt_tokens = f->tokens + 700 * k;
        p[k].n_prompt_tokens = n_prompt;
        p[k].max_tokens = GEN;
        p[k].sampling.temperature = 1.0f;
        p[k].sampling.seed = 300 + k;
        p[k].grammar = grammar;
        n_want[k] = run_tokens(alone, &p[k], want[k], GEN, NULL);
        assert_true(n_want[k] > 0);
    }
    syn_request *reqs[N];
    for (size_t k = 0; k < N; k++)
        assert_int_equal(syn_engine_submit(e, &p[k], &reqs[k]), SYN_OK);
    for (size_t k = 0; k < N; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_int_equal(res.status, SYN_OK);
        assert_int_equal(res.n_tokens, n_want[k]);
        assert_memory_equal(res.tokens, want[k], sizeof *res.tokens * res.n_tokens);
        char text[4096];
        size_t len;
        assert_int_equal(
            syn_detokenize(f->tok, res.tokens, res.n_tokens, text, sizeof text - 1, &len), SYN_OK);
        text[len] = 0;
        assert_true(text[0] == '[');
        for (size_t i = 1; i < len; i++)
            if (!strchr("0123456789\", abcdefghijklmnopqrstuvwxyz]", text[i]))
                fail_msg("request %zu wrote '%s' outside the grammar", k, text);
        syn_request_free(reqs[k]);
    }
    syn_engine_get_stats(e, &st);
    if (st.n_preempted == 0)
        fail_msg("the pool never ran dry: the test does not exercise preemption");
    syn_engine_free(e);
    syn_engine_free(alone);
}

/* max_tokens 0 generates until the context is full; alone with a budget smaller than the
 * context, until the budget is. */
static void test_generate_to_the_end(void **state) {
    const fixture *f = *state;
    syn_engine_params ep = engine_params(2, 2, 64);
    ep.n_ctx = 100;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_request_params p = syn_request_default_params();
    p.prompt_tokens = f->tokens;
    p.n_prompt_tokens = 30;
    p.max_tokens = 0;
    p.ignore_eos = true;
    syn_request *r = NULL;
    syn_request_result res;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.finish, SYN_FINISH_LENGTH);
    assert_int_equal(res.n_tokens, 70);
    syn_request_free(r);
    p.n_prompt_tokens = 100; /* no room left for a token */
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_CONTEXT_FULL);
    syn_engine_free(e);

    ep = engine_params(1, 2, 64);
    ep.kv_budget_mib = 1;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    p.n_prompt_tokens = 30;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.finish, SYN_FINISH_LENGTH);
    /* The last generated token is never decoded: the budget's positions + 1 tokens in all. */
    assert_int_equal(res.n_prompt_tokens + res.n_tokens, (size_t)st.kv_blocks_total * 16 + 1);
    syn_request_free(r);
    syn_engine_free(e);
}

/* Stop strings end generation where the text first contains one, also when it spans tokens; the
 * streamed text ends right before it and never carried any part of it. */
static void test_stop_strings(void **state) {
    const fixture *f = *state;
    job j = {.prompt = f->tokens + 40,
             .n_prompt = 12,
             .max_tokens = 40,
             .sampling = syn_sampler_default_params(),
             .ignore_eos = true};
    j.sampling.temperature = 0.0f;
    syn_engine_params ep = engine_params(2, 2, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    trace full;
    memset(&full, 0, sizeof full);
    syn_request_params p = request_of(&j, &full);
    syn_request *r = NULL;
    syn_request_result res;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    syn_request_free(r);
    /* The text of each token, to find a stop string that spans a boundary. */
    size_t ends[MAX_GEN], end = 0;
    for (size_t i = 0; i < full.n; i++) {
        char piece[256];
        size_t len = 0;
        assert_int_equal(
            syn_tokenizer_token_bytes(f->tok, full.tokens[i], piece, sizeof piece, &len), SYN_OK);
        ends[i] = end += len;
    }
    assert_int_equal(end, full.text_len);
    size_t b = 0; /* a token boundary with at least 3 bytes on each side */
    for (size_t i = 0; i < full.n && !b; i++)
        if (ends[i] >= 3 && ends[i] + 3 <= end && (i == 0 || ends[i] - ends[i - 1] >= 1))
            b = ends[i];
    assert_true(b > 0);
    char stop[8];
    memcpy(stop, full.text + b - 3, 6);
    stop[6] = '\0';
    const char *first = memmem(full.text, full.text_len, stop, 6);
    assert_non_null(first);
    const size_t want_len = (size_t)(first - full.text);
    const char *stops[2] = {"\x01never-in-the-text", stop};

    for (int with_stream = 0; with_stream < 2; with_stream++) {
        trace got;
        memset(&got, 0, sizeof got);
        p = request_of(&j, with_stream ? &got : NULL);
        p.stop_strings = stops;
        p.n_stop_strings = 2;
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        assert_int_equal(res.finish, SYN_FINISH_STOP);
        /* Generation went on exactly until the token that completed the match. */
        size_t last = 0;
        while (ends[last] < want_len + 6)
            last++;
        assert_int_equal(res.n_tokens, last + 1);
        if (with_stream) {
            assert_int_equal(got.text_len, want_len);
            assert_memory_equal(got.text, full.text, want_len);
            assert_int_equal(got.n_final, 1);
            assert_int_equal(got.final_finish, SYN_FINISH_STOP);
        }
        syn_request_free(r);
    }
    /* Bad stop strings are refused. */
    const char *empty[1] = {""};
    p = request_of(&j, NULL);
    p.stop_strings = empty;
    p.n_stop_strings = 1;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    p.stop_strings = NULL;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    syn_engine_free(e);
}

/* Two engines sharing one syn_compute_pool run their steps in turns on the same threads: every
 * request of either is still bitwise its syn_context run. A pool/n_threads mismatch is refused. */
static void test_shared_compute_pool(void **state) {
    const fixture *f = *state;
    enum { N = 8 };
    job jobs[N];
    trace want[N], got[N];
    make_jobs(f, jobs, N, 300);
    for (size_t k = 0; k < N; k++)
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    syn_compute_pool *pool = NULL;
    assert_int_equal(syn_compute_pool_new(2, &pool), SYN_OK);
    assert_int_equal(syn_compute_pool_n_threads(pool), 2);
    syn_engine_params ep = engine_params(3, 0, 64);
    ep.pool = pool;
    syn_engine *engines[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        assert_int_equal(syn_engine_new(f->model, &ep, &engines[i]), SYN_OK);
    memset(got, 0, sizeof got);
    syn_request *reqs[N];
    for (size_t k = 0; k < N; k++) {
        syn_request_params p = request_of(&jobs[k], &got[k]);
        assert_int_equal(syn_engine_submit(engines[k % 2], &p, &reqs[k]), SYN_OK);
    }
    for (size_t k = 0; k < N; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_same_run(&want[k], &got[k], "shared pool", k);
        syn_request_free(reqs[k]);
    }
    for (int i = 0; i < 2; i++)
        syn_engine_free(engines[i]);
    ep.n_threads = 3;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "pool"));
    syn_compute_pool_free(pool);
    assert_int_equal(syn_compute_pool_new(-1, &pool), SYN_ERR_INVALID_ARGUMENT);
}

/* ---- prompts, streaming, stop tokens, helper --------------------------------------------------
 */

/* Text and chat prompts are tokenized as syn_tokenize / syn_chat_format would; the streamed
 * pieces concatenate to the detokenized output; a stop token ends generation before it. */
static void test_text_chat_stream_stop(void **state) {
    const fixture *f = *state;
    const char *text = "Hello, world! Tell me about <|im_start|>concurrency.";
    int32_t ids[128];
    size_t n_ids = 0;
    assert_int_equal(syn_tokenize(f->tok, text, strlen(text), false, true, ids, 128, &n_ids),
                     SYN_OK);
    job j = {.prompt = ids,
             .n_prompt = n_ids,
             .max_tokens = 12,
             .sampling = syn_sampler_default_params(),
             .ignore_eos = true};
    j.sampling.temperature = 0.0f;
    trace want, got;
    reference(f, &j, SYN_KV_F32, &want);

    syn_engine_params ep = engine_params(2, 2, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    memset(&got, 0, sizeof got);
    syn_request_params p = request_of(&j, &got);
    p.prompt_tokens = NULL;
    p.n_prompt_tokens = 0;
    p.prompt_text = text;
    syn_request *r = NULL;
    syn_request_result res;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.n_prompt_tokens, n_ids);
    assert_same_run(&want, &got, "text prompt", 0);
    char detok[4096];
    size_t n_bytes = 0;
    assert_int_equal(
        syn_detokenize(f->tok, res.tokens, res.n_tokens, detok, sizeof detok, &n_bytes), SYN_OK);
    assert_int_equal(got.text_len, n_bytes);
    assert_memory_equal(got.text, detok, n_bytes);
    syn_request_free(r);

    /* Stop at the first occurrence of the 5th generated token. */
    const int32_t stop = want.tokens[4];
    size_t first = 0;
    while (want.tokens[first] != stop)
        first++;
    memset(&got, 0, sizeof got);
    p = request_of(&j, &got);
    p.stop_tokens = &stop;
    p.n_stop_tokens = 1;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.finish, SYN_FINISH_STOP);
    assert_int_equal(res.n_tokens, first);
    syn_request_free(r);

    /* A chat renders through the model's template. */
    const syn_chat_message msgs[2] = {{"system", "You are terse."}, {"user", "Hi"}};
    char chat[1024];
    size_t chat_len = 0;
    assert_int_equal(syn_chat_format(f->model, NULL, msgs, 2, true, chat, sizeof chat, &chat_len),
                     SYN_OK);
    assert_int_equal(syn_tokenize(f->tok, chat, chat_len, false, true, ids, 128, &n_ids), SYN_OK);
    j.n_prompt = n_ids;
    reference(f, &j, SYN_KV_F32, &want);
    memset(&got, 0, sizeof got);
    p = request_of(&j, &got);
    p.prompt_tokens = NULL;
    p.n_prompt_tokens = 0;
    p.messages = msgs;
    p.n_messages = 2;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.n_prompt_tokens, n_ids);
    assert_same_run(&want, &got, "chat prompt", 0);
    syn_request_free(r);
    syn_engine_free(e);
}

/* syn_engine_run: every request in order, n_parallel at a time; aggregate counts add up. */
static void test_run_helper(void **state) {
    const fixture *f = *state;
    enum { N = 7 };
    job jobs[N];
    trace want[N], got[N];
    syn_request_params params[N];
    syn_request *reqs[N];
    make_jobs(f, jobs, N, 3000);
    memset(got, 0, sizeof got);
    size_t total = 0;
    for (size_t k = 0; k < N; k++) {
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
        params[k] = request_of(&jobs[k], &got[k]);
        total += want[k].n;
    }
    syn_engine_params ep = engine_params(3, 2, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_run_stats rs;
    assert_int_equal(syn_engine_run(e, params, N, reqs, &rs), SYN_OK);
    assert_int_equal(rs.n_generated, total);
    assert_true(rs.wall_ms > 0);
    assert_true(rs.tok_per_s > 0);
    assert_true(rs.n_steps > 0);
    for (size_t k = 0; k < N; k++) {
        syn_request_result res;
        assert_int_equal(syn_request_wait(reqs[k], &res), SYN_OK);
        assert_same_run(&want[k], &got[k], "syn_engine_run", k);
        syn_request_free(reqs[k]);
    }
    /* A bad request: none is submitted (nothing runs), and the error names its index. */
    syn_engine_stats before, after;
    syn_engine_get_stats(e, &before);
    params[4].max_tokens = -1;
    assert_int_equal(syn_engine_run(e, params, N, reqs, &rs), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "request 4"));
    for (size_t k = 0; k < N; k++)
        assert_null(reqs[k]);
    syn_engine_get_stats(e, &after);
    assert_int_equal(after.n_steps, before.n_steps);
    assert_int_equal(after.n_queued + after.n_active, 0);
    syn_engine_free(e);
}

/* ---- limits and errors --------------------------------------------------------------------------
 */

static void expect_engine_error(const fixture *f, syn_engine_params ep, const char *needle) {
    syn_engine *e = (syn_engine *)&e; /* must be reset to NULL */
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_ERR_INVALID_ARGUMENT);
    assert_null(e);
    if (!strstr(syn_last_error(), needle))
        fail_msg("message '%s' does not name '%s'", syn_last_error(), needle);
}

static void test_invalid_engine_params(void **state) {
    const fixture *f = *state;
    const int32_t bad_parallel[] = {0, -1, -100, SYN_ENGINE_MAX_PARALLEL + 1};
    for (size_t i = 0; i < sizeof bad_parallel / sizeof bad_parallel[0]; i++)
        expect_engine_error(f, engine_params(bad_parallel[i], 1, 512), "n_parallel");
    expect_engine_error(f, engine_params(8, 1, 4), "max_step_tokens");
    expect_engine_error(f, engine_params(1, 1, SYN_ENGINE_MAX_STEP_TOKENS + 1), "max_step_tokens");
    expect_engine_error(f, engine_params(1, -2, 16), "n_threads");
    syn_engine_params ep = engine_params(2, 1, 16);
    ep.kv_budget_mib = 0;
    expect_engine_error(f, ep, "kv_budget_mib");
    ep = engine_params(2, 1, 16);
    ep.n_ctx = 1u << 30;
    expect_engine_error(f, ep, "n_ctx");
    ep = engine_params(2, 1, 16);
    ep.isa = (syn_isa_tier)99;
    expect_engine_error(f, ep, "99");
    /* The limits themselves are accepted. */
    syn_engine *e = NULL;
    assert_int_equal(
        syn_engine_new(f->model,
                       &(syn_engine_params){.n_parallel = SYN_ENGINE_MAX_PARALLEL,
                                            .n_threads = 1,
                                            .kv_budget_mib = 16,
                                            .max_step_tokens = SYN_ENGINE_MAX_PARALLEL},
                       &e),
        SYN_OK);
    syn_engine_free(e);
}

static void test_request_limits(void **state) {
    const fixture *f = *state;
    syn_engine_params ep = engine_params(2, 1, 32);
    ep.n_ctx = 64;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_request *r = (syn_request *)&r;
    job j = {.prompt = f->tokens,
             .n_prompt = 60,
             .max_tokens = 5,
             .sampling = syn_sampler_default_params()};
    syn_request_params p = request_of(&j, NULL);
    /* Context overflow: 60 + 5 > 64. */
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_CONTEXT_FULL);
    assert_null(r);
    assert_non_null(strstr(syn_last_error(), "context of 64"));
    p.max_tokens = 4; /* exactly fits */
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    syn_request_result res;
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_true(res.finish == SYN_FINISH_LENGTH || res.finish == SYN_FINISH_EOG);
    /* Cancelling a finished request is an error naming how it finished. */
    assert_int_equal(syn_request_cancel(r), SYN_ERR_STATE);
    assert_non_null(strstr(syn_last_error(), "already finished"));
    syn_request_free(r);

    /* Bad requests. */
    p.n_prompt_tokens = 0;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "empty"));
    p.n_prompt_tokens = 3;
    p.prompt_text = "also text";
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "exactly one prompt"));
    p.prompt_text = NULL;
    const int32_t bad[2] = {5, f->n_vocab};
    p.prompt_tokens = bad;
    p.n_prompt_tokens = 2;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "index 1"));
    p.prompt_tokens = f->tokens;
    p.max_tokens = -1;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "max_tokens"));
    p.max_tokens = 3;
    p.sampling.top_p = 2.0f;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_null(r);
    /* A chat prompt needs at least one message, and the array that holds it. */
    const syn_chat_message hello = {.role = "user", .content = "hello"};
    p = request_of(&j, NULL);
    p.prompt_tokens = NULL;
    p.n_prompt_tokens = 0;
    p.max_tokens = 3;
    p.messages = &hello;
    p.n_messages = 0;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_null(r);
    assert_non_null(strstr(syn_last_error(), "n_messages 0"));
    p.messages = NULL;
    p.n_messages = 1;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "messages is NULL"));
    p.messages = &hello;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.status, SYN_OK);
    syn_request_free(r);
    /* Statistics into NULL, or of no engine: nothing happens. */
    syn_engine_get_stats(e, NULL);
    syn_engine_get_stats(NULL, NULL);
    syn_engine_free(e);

    /* Budget overflow: 1 MiB holds 128 blocks = 2,048 positions of the tiny model. */
    ep = engine_params(2, 1, 32);
    ep.kv_budget_mib = 1;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    p = request_of(&j, NULL);
    p.n_prompt_tokens = 2040;
    p.max_tokens = 100;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_ERR_CONTEXT_FULL);
    assert_non_null(strstr(syn_last_error(), "kv_budget_mib 1"));
    syn_engine_free(e);
}

/* A queued request cancelled before it runs finishes at once with nothing generated; a failed
 * step fails its requests with the error and the engine serves the next ones correctly. */
static void test_cancel_queued_and_failed_step(void **state) {
    const fixture *f = *state;
    job jobs[4];
    make_jobs(f, jobs, 4, 2500);
    jobs[0].ignore_eos = true;
    trace want[4], got[4];
    for (size_t k = 0; k < 4; k++)
        reference(f, &jobs[k], SYN_KV_F32, &want[k]);
    memset(got, 0, sizeof got);
    syn_engine_params ep = engine_params(1, 2, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);

    /* Request 0 holds the only slot; its second token submits request 1 and cancels it queued. */
    syn_request *r[4] = {0};
    arrivals a = {.engine = e,
                  .jobs = jobs,
                  .traces = got,
                  .reqs = r,
                  .first = 1,
                  .count = 1,
                  .to_cancel = &r[1]};
    got[0].hook = submit_more;
    got[0].hook_ctx = &a;
    syn_request_result res;
    syn_request_params p = request_of(&jobs[0], &got[0]);
    assert_int_equal(syn_engine_submit(e, &p, &r[0]), SYN_OK);
    assert_int_equal(syn_request_wait(r[0], &res), SYN_OK);
    assert_same_run(&want[0], &got[0], "before the cancelled one", 0);
    assert_non_null(r[1]);
    assert_int_equal(syn_request_wait(r[1], &res), SYN_OK);
    assert_int_equal(res.finish, SYN_FINISH_CANCELLED);
    assert_int_equal(res.n_tokens, 0);
    assert_int_equal(got[1].n, 0);

    syn_engine_fail_next_step(e);
    p = request_of(&jobs[2], &got[2]);
    assert_int_equal(syn_engine_submit(e, &p, &r[2]), SYN_OK);
    assert_int_equal(syn_request_wait(r[2], &res), SYN_OK);
    assert_int_equal(res.finish, SYN_FINISH_ERROR);
    assert_int_equal(res.status, SYN_ERR_INTERNAL);
    assert_non_null(strstr(res.error, "injected"));
    assert_int_equal(res.n_tokens, 0);

    p = request_of(&jobs[3], &got[3]);
    assert_int_equal(syn_engine_submit(e, &p, &r[3]), SYN_OK);
    assert_int_equal(syn_request_wait(r[3], &res), SYN_OK);
    assert_int_equal(res.status, SYN_OK);
    assert_same_run(&want[3], &got[3], "after a failed step", 3);
    for (int i = 0; i < 4; i++)
        syn_request_free(r[i]);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    assert_int_equal(st.n_active, 0);
    assert_int_equal(st.kv_blocks_used, st.kv_blocks_cached); /* only the cache holds blocks */
    syn_engine_free(e);
}

/* A copy of the tiny model, dir/name, whose token_embd rows ids[0..n_ids) have every block scale
 * set to the fp16 bits `scale`: with the tied output projection that scales logits[id] (a NaN
 * makes it NaN after every token; prompts must avoid the ids). Returns its path. */
static char *write_scaled_rows_model(const char *dir, const char *name, const int32_t *ids,
                                     size_t n_ids, uint16_t scale) {
    const char *src = test_data_path("qwen2-tiny-synth-q8_0.gguf");
    gguf_file *g = NULL;
    assert_int_equal(gguf_open(src, &g), SYN_OK);
    const gguf_tensor *t = gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, GGML_TYPE_Q8_0);
    const size_t data_at = (size_t)((const uint8_t *)t->data - g->base);
    const size_t row_bytes = (size_t)ggml_row_size(t->type, t->ne[0]),
                 n_blocks = (size_t)t->ne[0] / 32;
    gguf_close(g);
    size_t size = 0;
    uint8_t *bytes = test_read_file(src, &size);
    assert_non_null(bytes);
    const uint8_t le[2] = {(uint8_t)(scale & 0xff), (uint8_t)(scale >> 8)};
    for (size_t i = 0; i < n_ids; i++)
        for (size_t b = 0; b < n_blocks; b++)
            memcpy(bytes + data_at + (size_t)ids[i] * row_bytes + b * 34, le, 2);
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    assert_non_null(path);
    sprintf(path, "%s/%s", dir, name);
    assert_int_equal(test_write_file(path, bytes, size), 0);
    free(bytes);
    return path;
}

static syn_model *load_model_file(const char *path) {
    syn_model_params mp = syn_model_default_params();
    mp.prefetch = false;
    syn_model *model = NULL;
    assert_int_equal(syn_model_load(path, &mp, &model), SYN_OK);
    return model;
}

/* With ignore_eos, greedy requests whose unmasked choice is an end-of-generation token get the
 * masked logits' choice: the engine samples a greedy request unmasked and masks only when that
 * picked such a token. A model whose EOG rows are scaled up (fp16 64.0 scales) picks them often;
 * every request must match the masked reference, and the unmasked runs must stop on EOG at least
 * once (or this test would not reach that path). */
static void test_ignore_eos_greedy_masks_when_needed(void **state) {
    const fixture *f = *state;
    enum { N = 8 };
    int32_t eog[8];
    size_t n_eog = 0;
    for (int32_t id = 0; id < f->n_vocab && n_eog < 8; id++)
        if (syn_tokenizer_is_eog(f->tok, id)) eog[n_eog++] = id;
    assert_true(n_eog > 0);
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char *path = write_scaled_rows_model(dir, "loud_eog.gguf", eog, n_eog, 0x5400);
    fixture g = *f;
    g.model = load_model_file(path);
    job jobs[N];
    trace want[N];
    int eog_stops = 0;
    for (size_t k = 0; k < N; k++) {
        jobs[k] = (job){.prompt = f->tokens + 300 + 50 * k,
                        .n_prompt = 10,
                        .max_tokens = 12,
                        .sampling = syn_sampler_default_params(),
                        .ignore_eos = true};
        jobs[k].sampling.temperature = 0.0f;
        for (size_t i = 0; i < jobs[k].n_prompt; i++)
            assert_false(syn_tokenizer_is_eog(f->tok, jobs[k].prompt[i]));
        reference(&g, &jobs[k], SYN_KV_F32, &want[k]);
        job unmasked = jobs[k];
        unmasked.ignore_eos = false;
        trace t;
        reference(&g, &unmasked, SYN_KV_F32, &t);
        eog_stops += t.n < (size_t)unmasked.max_tokens;
    }
    printf("greedy runs that stop on an EOG token without ignore_eos: %d of %d\n", eog_stops, N);
    assert_true(eog_stops > 0);
    syn_engine_params ep = engine_params(4, 2, 64);
    run_and_compare(&g, &ep, jobs, want, NULL, N, "ignore_eos, scaled EOG rows");
    syn_model_free(g.model);
    test_remove_dir(dir);
    free(path);
    free(dir);
}

/* NaN logits fail their request (SYN_FINISH_ERROR, the sampler's status and message naming the
 * id), greedy or sampled, as a NaN hidden state fails an embedding, and the engine goes on
 * serving: the next request runs, nothing stays active, no block leaks. */
static void test_nan_logits_fail_the_request(void **state) {
    const fixture *f = *state;
    enum { NAN_ID = 1000 };
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    const int32_t nan_id = NAN_ID;
    char *path = write_scaled_rows_model(dir, "nan.gguf", &nan_id, 1, 0x7e00);
    syn_model *model = load_model_file(path);
    syn_engine_params ep = engine_params(2, 1, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(model, &ep, &e), SYN_OK);
    const float temperatures[] = {0.0f, 0.8f, 0.0f};
    for (size_t k = 0; k < sizeof temperatures / sizeof temperatures[0]; k++) {
        job j = {.prompt = f->tokens + 40 * k,
                 .n_prompt = 20,
                 .max_tokens = 4,
                 .sampling = syn_sampler_default_params()};
        for (size_t i = 0; i < j.n_prompt; i++)
            assert_int_not_equal(j.prompt[i], NAN_ID);
        j.sampling.temperature = temperatures[k];
        trace got = {0};
        syn_request_params p = request_of(&j, &got);
        syn_request *r = NULL;
        assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
        syn_request_result res;
        assert_int_equal(syn_request_wait(r, &res), SYN_OK);
        if (res.finish != SYN_FINISH_ERROR || res.status != SYN_ERR_INVALID_ARGUMENT ||
            !strstr(res.error, "logits[1000] is NaN"))
            fail_msg("request %zu: finish %s, status %d, error '%s'", k,
                     syn_finish_reason_name(res.finish), res.status, res.error);
        assert_int_equal(res.n_tokens, 0);
        assert_int_equal(got.n, 0);
        syn_request_free(r);
    }
    /* an embedding of a prompt holding that token: its hidden state is NaN */
    int32_t prompt[3] = {f->tokens[7], NAN_ID, f->tokens[9]};
    const job nan_prompt = {.prompt = prompt, .n_prompt = 3};
    syn_request_params p = embedding_of(&nan_prompt);
    p.pooling = SYN_POOLING_MEAN;
    syn_request *r = NULL;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    syn_request_result res;
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    if (res.finish != SYN_FINISH_ERROR || res.embedding || !strstr(res.error, "is NaN"))
        fail_msg("embedding: finish %s, error '%s'", syn_finish_reason_name(res.finish), res.error);
    syn_request_free(r);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    assert_int_equal(st.n_active, 0);
    assert_int_equal(st.kv_blocks_used, st.kv_blocks_cached);
    syn_engine_free(e);
    syn_model_free(model);
    test_remove_dir(dir);
    free(path);
    free(dir);
}

/* Freeing the engine with requests queued and running cancels them; the handles stay valid. */
static void test_free_with_outstanding_requests(void **state) {
    const fixture *f = *state;
    job jobs[6];
    make_jobs(f, jobs, 6, 3500);
    syn_engine_params ep = engine_params(2, 2, 64);
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    syn_request *r[6];
    for (size_t k = 0; k < 6; k++) {
        jobs[k].max_tokens = 60;
        syn_request_params p = request_of(&jobs[k], NULL);
        assert_int_equal(syn_engine_submit(e, &p, &r[k]), SYN_OK);
    }
    syn_request_free(r[5]); /* freed while queued */
    syn_engine_free(e);
    for (size_t k = 0; k < 5; k++) {
        syn_request_result res;
        assert_true(syn_request_is_done(r[k]));
        assert_int_equal(syn_request_wait(r[k], &res), SYN_OK);
        assert_true(res.finish == SYN_FINISH_CANCELLED || res.finish == SYN_FINISH_LENGTH);
        assert_int_equal(syn_request_cancel(r[k]), SYN_ERR_STATE);
        syn_request_free(r[k]);
    }
}

/* ---- memory --------------------------------------------------------------------------------- */

typedef struct short_requests {
    const fixture *f;
    size_t n;
    uint32_t kv_budget_mib;
} short_requests;

/* In a child of test_run_in_child: n two-token requests through syn_engine_run, every handle
 * held until all have finished. Every third samples (seeded), which takes an [n_vocab] candidate
 * buffer; the others are greedy, which needs none and is five times as fast. Returns 0 when each
 * finished by length or EOG. */
static int run_short_requests(void *arg) {
    const short_requests *sr = arg;
    syn_engine_params ep = engine_params(16, 2, 256);
    ep.kv_budget_mib = sr->kv_budget_mib;
    syn_engine *e = NULL;
    if (syn_engine_new(sr->f->model, &ep, &e) != SYN_OK) return 1;
    syn_request_params *params = calloc(sr->n, sizeof *params);
    syn_request **reqs = calloc(sr->n, sizeof *reqs);
    int failed = !params || !reqs;
    for (size_t k = 0; !failed && k < sr->n; k++) {
        job j = {.prompt = sr->f->tokens + k % 1000,
                 .n_prompt = 8,
                 .max_tokens = 2,
                 .sampling = syn_sampler_default_params()};
        j.sampling.seed = k;
        if (k % 3 != 0) j.sampling.temperature = 0.0f;
        params[k] = request_of(&j, NULL);
    }
    if (!failed) failed = syn_engine_run(e, params, sr->n, reqs, NULL) != SYN_OK;
    for (size_t k = 0; !failed && k < sr->n; k++) {
        syn_request_result res;
        failed = syn_request_wait(reqs[k], &res) != SYN_OK ||
                 (res.finish != SYN_FINISH_LENGTH && res.finish != SYN_FINISH_EOG);
    }
    for (size_t k = 0; reqs && k < sr->n; k++)
        syn_request_free(reqs[k]);
    syn_engine_free(e);
    free(params);
    free(reqs);
    return failed;
}

/* A finished request keeps only its result: 3,000 two-token requests, all held to the end, peak
 * far below the [n_vocab] sampler buffer (1.8 MB) the sampling ones once kept until
 * syn_request_free (1.8 GB for these 1,000). Under ASan, which is slower, 300 requests. */
static void test_finished_requests_release_memory(void **state) {
    short_requests sr = {.f = *state, .n = 3000, .kv_budget_mib = 1024};
#ifdef UNDER_ASAN
    sr.n = 300;
#endif
    long peak_kib;
    assert_int_equal(test_run_in_child(run_short_requests, &sr, &peak_kib), 0);
    printf("%zu finished requests: peak RSS grew by %ld KiB\n", sr.n, peak_kib);
    if (peak_kib > 100 * 1024) fail_msg("peak RSS grew by %ld KiB, more than 100 MiB", peak_kib);
}

/* The KV budget is a bound, not an allocation: a 1 TiB budget costs nothing until blocks are used
 * (its per-block bookkeeping once took 0.5 GB up front). */
static void test_huge_kv_budget_costs_nothing(void **state) {
    short_requests sr = {.f = *state, .n = 1, .kv_budget_mib = 1u << 20};
    long peak_kib;
    assert_int_equal(test_run_in_child(run_short_requests, &sr, &peak_kib), 0);
    printf("a 1 TiB KV budget: peak RSS grew by %ld KiB\n", peak_kib);
    if (peak_kib > 32 * 1024) fail_msg("peak RSS grew by %ld KiB, more than 32 MiB", peak_kib);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_batches),
        cmocka_unit_test(test_parity_f16_kv),
        cmocka_unit_test(test_embedding_parity),
        cmocka_unit_test(test_embedding_preemption),
        cmocka_unit_test(test_parity_arrivals_and_cancellation),
        cmocka_unit_test(test_prefix_reuse),
        cmocka_unit_test(test_prefix_lru_eviction),
        cmocka_unit_test(test_fairness_long_prompt),
        cmocka_unit_test(test_budget_admission),
        cmocka_unit_test(test_preemption_parity),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_grammar_survives_preemption),
        cmocka_unit_test(test_generate_to_the_end),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_shared_compute_pool),
        cmocka_unit_test(test_text_chat_stream_stop),
        cmocka_unit_test(test_run_helper),
        cmocka_unit_test(test_invalid_engine_params),
        cmocka_unit_test(test_request_limits),
        cmocka_unit_test(test_cancel_queued_and_failed_step),
        cmocka_unit_test(test_free_with_outstanding_requests),
        cmocka_unit_test(test_nan_logits_fail_the_request),
        cmocka_unit_test(test_ignore_eos_greedy_masks_when_needed),
        cmocka_unit_test(test_finished_requests_release_memory),
        cmocka_unit_test(test_huge_kv_budget_costs_nothing),
    };
    const struct CMUnitTest swa_tests[] = {
        cmocka_unit_test(test_parity_batches),    cmocka_unit_test(test_parity_f16_kv),
        cmocka_unit_test(test_prefix_reuse),      cmocka_unit_test(test_prefix_snapshots),
        cmocka_unit_test(test_preemption_parity), cmocka_unit_test(test_swa_ring_memory),
        cmocka_unit_test(test_embedding_parity),
    };
    const struct CMUnitTest phi3_tests[] = {
        cmocka_unit_test(test_parity_batches),
        cmocka_unit_test(test_parity_f16_kv),
        cmocka_unit_test(test_embedding_parity),
    };
    /* Per-sequence recurrent state: alone-vs-batched, prefix reuse after snapshots of it, and
     * preemption parity. */
    const struct CMUnitTest recurrent[] = {
        cmocka_unit_test(test_parity_batches),   cmocka_unit_test(test_parity_f16_kv),
        cmocka_unit_test(test_prefix_reuse),     cmocka_unit_test(test_prefix_snapshots),
        cmocka_unit_test(test_embedding_parity), cmocka_unit_test(test_preemption_parity),
    };
    int failed = cmocka_run_group_tests_name("engine", tests, setup, teardown);
    failed += cmocka_run_group_tests_name("engine, gemma3", swa_tests, setup_gemma3, teardown);
    failed += cmocka_run_group_tests_name("engine, phi3", phi3_tests, setup_phi3, teardown);
    failed += cmocka_run_group_tests_name("engine, qwen35 q8_0", recurrent, setup_qwen35, teardown);
    return failed;
}

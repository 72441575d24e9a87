/*
 * optimized.c: the optimized backend: Q8_0 activations into the SIMD kernels (src/kernels), a
 * persistent thread pool, fused layer steps and a KV cache held in fixed-size blocks.
 *
 * One forward pass takes a batch of tokens from any number of sequences (backend.h: syn_batch),
 * each with its position, its sequence's block table and whether its logits are wanted; it runs
 * in slices of up to OPT_MAX_BATCH tokens. Per layer, for a slice of n tokens (x: the residual
 * stream [n][n_embd]):
 *   norm   h = rmsnorm(x) * attn_norm, quantized into the activation formats its consumers take
 *          (Q8_0, Q8_1, Q8_K: kernels.h)                                         (job: tokens)
 *   qkv    one job over the heads of wq, wk and wv together: a chunk computes its heads' rows for
 *          every token, adds the bias (if any), RMS-norms each Q/K head (qwen3), rotates the first
 *          n_rot dims of Q/K (RoPE table, NeoX or adjacent pairs, frequency factors, phi3's
 *          attn_factor) and stores K/V into each token's own sequence blocks (phi3's fused
 *          matrices arrive as the separate views, model.h)
 *   attn   one job over (token, kv head): the kv head's group of query heads over the token's
 *          sequence, positions 0..pos (a local layer: the sliding window's), quantized in place
 *   wo     row chunks of wo; x += for those rows (with a post-attention norm, gemma3: the rows
 *          only, then one job over the tokens: x += rmsnorm(wo a) * post_attn_norm)
 *   norm   as above with ffn_norm
 *   ffn    row chunks covering the same rows of gate and up: silu(gate) * up (gemma3: gelu.h's
 *          GELU), quantized in place (chunks of whole activation blocks: 32 rows, 256 for a
 *          k-quant w_down)
 *   down   row chunks of w_down; x += for those rows (with post_ffn_norm: as wo)
 * then the final norm and output projection for the tokens that want logits only, as one matrix
 * pass: a decode step of k sequences reads every weight matrix once for all k tokens; the output
 * chunks soft-cap their logits when the model says so. Tokens that want their hidden state
 * (syn_batch.want_hidden: embeddings) get the final norm alone, in float32, without the output
 * projection.
 *
 * qwen35's recurrent layers replace norm .. wo by a gated delta net (forward_recurrent): one job
 * over the rows of its four input projections, then its float32 steps (optimized_delta_net.c:
 * the convolution over channel ranges, the recurrence per V head, each running the slice's tokens
 * in order against each token's own sequence state, syn_batch.rstates), then ssm_out as wo. Its
 * attention layers take a per-head sigmoid gate from wq (q_gate) and rotate only the first n_rot
 * of each head; only attention layers have a part in the KV blocks.
 *
 * The syn_context path (forward) is a batch of one sequence whose blocks the state owns; the
 * engine (src/engine/) owns the blocks of its sequences and calls forward_batch. A model with
 * sliding-window layers keeps those layers apart, in a ring of blocks per sequence covering the
 * window plus the tokens of one slice (the syn_context path's ring_blocks; the engine's slots,
 * syn_batch.rings), so their memory stays near the window however long the sequence; the blocks
 * hold the other layers only.
 *
 * Weights are used where they are mapped. Quantized matrices go through the kernel tier's entry for
 * their type (kernels.h: syn_kernels.mat) with activations quantized as ggml pairs with that type
 * (model/wtype.h: act_type); an input feeding matrices of several types is quantized once per
 * format. A matrix the tier cannot run is refused at creation, naming the tensor.
 * F32/F16/BF16 matrices take a float path (rows converted one at a time, float activations,
 * fixed-order dot), as llama.cpp quantizes activations only for quantized weights.
 *
 * Determinism: every value is computed per token, by one chunk, in an order that depends neither
 * on the slice's size or content nor on the thread count: the kernels fix each row's reduction
 * order (kernels.h), norms run per token, attention of a (token, kv head) runs in one chunk over
 * keys 0..pos, and no reduction crosses threads or tokens. So a token's logits are bitwise equal
 * for any chunking of a prompt, any thread count, token-by-token decoding, and whatever other
 * sequences share its batch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/delta_net.h"
#include "backend/gelu.h"
#include "core/block_arena.h"
#include "core/error.h"
#include "kernels/fp16.h"
#include "kernels/kernels.h"
#include "model/wtype.h"
#include "synapse_internal.h"
#include "threads/threadpool.h"

_Static_assert((int)SYN_KV_BLOCK == (int)SYN_ATTN_BLOCK,
               "the attention kernel reads the KV blocks");

/* The quantized activation formats, as bits. */
enum { OPT_FMT_Q8_0 = 1, OPT_FMT_Q8_1 = 2, OPT_FMT_Q8_K = 4 };

/* An input quantized into the formats its consumers take: q (Q8_0, and Q8_1's blocks) and s
 * (Q8_1's sums) in rows of dim / 32 blocks, k (Q8_K) in rows of dim / 256; NULL when no matrix
 * of the model takes that format. */
typedef struct opt_act_bufs {
    block_q8_0 *q;
    uint16_t *s;
    block_q8_k *k;
} opt_act_bufs;

enum {
    OPT_MAX_BATCH = 512,     /* tokens per slice: bounds the scratch buffers */
    OPT_ROWS_PER_CHUNK = 64, /* matrix rows per job chunk: a multiple of Q8_0 blocks and tiles */
    OPT_TILE_ROWS = 16,      /* the matmul kernels' row tile (kernels.h) */
    OPT_OUT_ROWS_PER_CHUNK = 256,
    OPT_FFN_DECODE_SHARE = 4,      /* ffn chunks per thread when decoding one token */
    OPT_FFN_DECODE_MIN_ROWS = 256, /* and at least this many rows per chunk (kernels.h) */
    OPT_BATCH_SHARE = 4, /* chunks per thread of each matrix when a step has several tokens */
};

/* Norm weights and biases as float32: views of F32 tensors, copies of others; NULL when the model
 * lacks them. */
typedef struct opt_layer_vecs {
    const float *attn_norm, *ffn_norm;           /* [n_embd] */
    const float *bq;                             /* [q_dim] */
    const float *bk, *bv;                        /* [kv_dim] */
    const float *q_norm, *k_norm;                /* [head_dim] per-head norms of Q and K (qwen3) */
    const float *post_attn_norm, *post_ffn_norm; /* [n_embd] (gemma3) */
} opt_layer_vecs;

typedef struct opt_state {
    const struct syn_model *model;
    syn_kernels k;
    syn_step_times *times; /* synapse_internal.h: what run() records while times->on */
    syn_threadpool *pool;
    bool owns_pool; /* false: a syn_compute_pool's threads, shared with other engines */
    int n_threads;
    syn_kv_type kv_type;
    uint32_t n_ctx;

    int32_t q_dim;    /* n_head * head_dim */
    int32_t kv_dim;   /* n_head_kv * head_dim */
    int32_t qkv_dim;  /* q_dim + 2 * kv_dim: one token's row of the qkv buffer */
    int32_t group;    /* query heads per kv head */
    unsigned fmt_all; /* the activation formats (OPT_FMT_* bits) of every matrix of the model */

    opt_layer_vecs *vecs; /* [n_layer] */
    syn_dn_layer *dn;     /* [n_layer] a recurrent layer's float32 parameters (qwen35), else NULL */
    float *dn_copies;     /* their backing store */
    int32_t *kv_layer;    /* [n_layer] an attention layer's index among those with KV, else -1 */
    size_t dn_floats;     /* syn_dn_state_floats: one sequence's recurrent state, 0: none */
    const float *output_norm;
    const float *rope_factor; /* [n_rot / 2] syn_model_rope_factors for n_ctx, NULL: all 1 */
    float *rope_scaled;       /* [n_rot / 2] rope_factor / rope_freq_scale, when scaled */
    float *vec_copies;        /* backing store of the vectors that are not F32 views */

    /* KV block geometry (backend.h, kernels/floats.h): a block is [n_layer] of [n_head_kv] of
     * K [head_dim][SYN_KV_BLOCK] followed by V [head_dim / 16][SYN_KV_BLOCK][16]. */
    size_t kv_k_bytes; /* one layer's K (or V) in a block, all heads */

    /* The syn_context path's one sequence: blocks made usable on demand, zeroed, back to back
     * in one arena (core/block_arena.h). */
    syn_block_arena own_arena;
    void **own_blocks; /* [n_own_blocks]: the arena's blocks, as the block table batches take */
    uint32_t n_own_blocks;
    uint32_t *ctx_pos; /* [OPT_MAX_BATCH] batch arrays of that path */
    void *const **ctx_blocks;
    bool *ctx_want;
    bool *ctx_hidden;    /* [OPT_MAX_BATCH] forward_hidden's want_hidden: all true */
    float *own_rstate;   /* [dn_floats] its recurrent state, NULL without recurrent layers */
    float **ctx_rstates; /* [OPT_MAX_BATCH] all own_rstate */
    uint32_t own_rpos;   /* the position own_rstate stands at */
    /* Its sliding-window layers (ring_blocks 0: the model has none, and own blocks hold every
     * layer): ring_blocks blocks of ring_block_bytes, position p in ring block (p / SYN_KV_BLOCK)
     * % ring_blocks, enough for the window and one slice of ring_slice tokens; the other layers in
     * own blocks of own_block_bytes. layer_slot[l]: layer l's index among the layers of its kind,
     * its place in those blocks. */
    uint32_t ring_blocks, ring_slice;
    size_t ring_block_bytes, own_block_bytes;
    int32_t *layer_slot; /* [n_layer] */
    syn_block_arena ring_arena;
    void **ring_table;      /* [blocks of n_ctx]: the ring block of each block of positions */
    void *const **ctx_ring; /* [OPT_MAX_BATCH] */
    /* Positions [kv_lo, kv_hi) are held by every layer: forward can go on at pos only if it
     * attends to none before kv_lo (the ring overwrites older positions). */
    uint32_t kv_lo, kv_hi;

    /* RoPE table for positions [0, rope_cap): cos and sin of angle
     * pos * base^(-2i/n_rot) / (rope_factor[i] / rope_freq_scale), i < n_rot/2, times
     * rope_attn_factor; and the local layers' (base rope_freq_base_swa, no factors, no scaling,
     * times rope_attn_factor too), NULL when the model has no local layer. */
    uint32_t rope_cap;
    float *rope_cos, *rope_sin;         /* [rope_cap][n_rot / 2] */
    float *rope_cos_swa, *rope_sin_swa; /* [rope_cap][n_rot / 2] */

    /* Slice scratch for batch_cap tokens. */
    size_t batch_cap;
    float *x;         /* [batch][n_embd] residual stream */
    float *h;         /* [batch][n_embd] normalised input of a sub-layer */
    float *qkv;       /* [batch][qkv_dim] q | k | v after bias, head norms and RoPE */
    float *attn;      /* [batch][q_dim] attention output, all heads */
    float *proj;      /* [batch][n_embd] wo / w_down output before the residual add */
    float *gate;      /* [batch][n_ff] gate, then silu(gate) * up */
    float *up;        /* [batch][n_ff] */
    float *qg;        /* [batch][2 * q_dim] q_gate's wq rows (per head: query, gate), else NULL */
    float *attn_gate; /* [batch][q_dim] the heads' gates, else NULL */
    /* qwen35's recurrent layers, else NULL */
    float *dn_m;     /* [batch][ssm_conv_dim] the q | k | v projection, then convolved */
    float *dn_z;     /* [batch][ssm_inner] */
    float *dn_beta;  /* [batch][ssm_n_v_heads] */
    float *dn_alpha; /* [batch][ssm_n_v_heads] */
    float *dn_out;   /* [batch][ssm_inner] the heads' gated outputs */
    /* [batch][max(n_embd, q_dim, ssm_inner) / block] quantized normed input or mixer output */
    opt_act_bufs hq;
    opt_act_bufs hq_ff; /* [batch][n_ff / block] quantized silu(gate) * up (written while the ffn
                         * job still reads hq, hence its own buffers) */
    size_t *out_rows;   /* [batch] slice rows whose logits are wanted */

    /* Per-thread scratch. */
    float **row_tmp;  /* [n_threads] -> [max(n_embd, n_ff, q_dim)] one float weight row */
    float **attn_tmp; /* [n_threads] -> [syn_attn_scratch_floats(group)] */
    float **dn_tmp;   /* [n_threads] -> [syn_dn_head_scratch_floats], qwen35 only */
} opt_state;

/* The activation format of matrix t as a bit (0: the float path). */
static unsigned fmt_of(const syn_tensor *t) {
    switch (syn_wtype_get(t->type)->act_type) {
    case GGML_TYPE_Q8_0: return OPT_FMT_Q8_0;
    case GGML_TYPE_Q8_1: return OPT_FMT_Q8_1;
    case GGML_TYPE_Q8_K: return OPT_FMT_Q8_K;
    default: return 0;
    }
}

/* Elements per block of the formats in fmt: what a quantized piece of a row must be made of. */
static int64_t fmt_block(unsigned fmt) { return fmt & OPT_FMT_Q8_K ? QK_K : QK8_0; }

/* Quantizes src[n], elements [e0, e0 + n) of token t's row of width dim, into each format of fmt
 * in b (Q8_1's blocks are Q8_0's, so one quantizer fills both). */
static void quantize_into(const opt_state *s, unsigned fmt, const float *src, const opt_act_bufs *b,
                          size_t t, int64_t dim, int64_t e0, int64_t n) {
    const size_t q = t * (size_t)(dim / QK8_0) + (size_t)(e0 / QK8_0);
    if (fmt & OPT_FMT_Q8_1)
        s->k.quantize_row_q8_1(src, b->q + q, b->s + q, n);
    else if (fmt & OPT_FMT_Q8_0)
        s->k.quantize_row_q8_0(src, b->q + q, n);
    if (fmt & OPT_FMT_Q8_K)
        s->k.quantize_row_q8_k(src, b->k + t * (size_t)(dim / QK_K) + (size_t)(e0 / QK_K), n);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* ---------------------------------------------------------------------------------------------
 * Creation
 * ------------------------------------------------------------------------------------------- */

static void opt_destroy(void *opaque) {
    opt_state *s = opaque;
    if (!s) return;
    if (s->owns_pool) syn_threadpool_free(s->pool);
    syn_block_arena_release(&s->own_arena);
    syn_block_arena_release(&s->ring_arena);
    free(s->own_blocks);
    free(s->layer_slot);
    free(s->ring_table);
    free(s->ctx_ring);
    free(s->ctx_pos);
    free(s->ctx_blocks);
    free(s->ctx_want);
    free(s->ctx_hidden);
    free(s->own_rstate);
    free(s->ctx_rstates);
    for (int i = 0; s->dn_tmp && i < s->n_threads; i++)
        free(s->dn_tmp[i]);
    free(s->dn_tmp);
    free(s->dn);
    free(s->dn_copies);
    free(s->kv_layer);
    float *dn_bufs[] = {s->qg, s->attn_gate, s->dn_m, s->dn_z, s->dn_beta, s->dn_alpha, s->dn_out};
    for (size_t i = 0; i < sizeof dn_bufs / sizeof dn_bufs[0]; i++)
        free(dn_bufs[i]);
    for (int i = 0; s->row_tmp && i < s->n_threads; i++)
        free(s->row_tmp[i]);
    for (int i = 0; s->attn_tmp && i < s->n_threads; i++)
        free(s->attn_tmp[i]);
    free(s->row_tmp);
    free(s->attn_tmp);
    free(s->vecs);
    free(s->times);
    free(s->vec_copies);
    free(s->rope_scaled);
    free(s->rope_cos);
    free(s->rope_sin);
    free(s->rope_cos_swa);
    free(s->rope_sin_swa);
    free(s->x);
    free(s->h);
    free(s->qkv);
    free(s->attn);
    free(s->proj);
    free(s->gate);
    free(s->up);
    opt_act_bufs *bufs[] = {&s->hq, &s->hq_ff};
    for (int i = 0; i < 2; i++) {
        free(bufs[i]->q);
        free(bufs[i]->s);
        free(bufs[i]->k);
    }
    free(s->out_rows);
    free(s);
}

/* Floats of the float32 copy of vector tensor t (0: absent). */
static size_t vec_floats(const syn_tensor *t) { return t->data ? (size_t)t->ne[0] : 0; }

/* A float32 copy of vector tensor t ([ne0]) taken from *store (advanced past it); NULL when the
 * model lacks t. Copies, never views of the mapping: once the model's interleaved copies have
 * released the file's pages, a view would map a whole 2 MiB page back in for a 3.5 KiB norm. */
static const float *vec_view(const syn_tensor *t, float **store) {
    if (!t->data) return NULL;
    float *dst = *store;
    syn_tensor_row(t, 0, dst);
    *store += t->ne[0];
    return dst;
}

/* Binds the norm weights and biases (copies). */
static syn_status bind_vectors(opt_state *s) {
    const struct syn_model *m = s->model;
    const syn_hparams *hp = &m->hp;
    const syn_tensor *factors = syn_model_rope_factors(m, s->n_ctx);
    size_t copies = vec_floats(&m->output_norm) + vec_floats(factors);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const syn_layer *L = &m->layers[l];
        const syn_tensor *v[9] = {&L->attn_norm,    &L->ffn_norm, &L->bq,     &L->bk,
                                  &L->bv,           &L->q_norm,   &L->k_norm, &L->post_attn_norm,
                                  &L->post_ffn_norm};
        for (int i = 0; i < 9; i++)
            copies += vec_floats(v[i]);
    }
    s->vecs = calloc((size_t)(uint32_t)hp->n_layer, sizeof *s->vecs); /* n_layer >= 1 (loader) */
    s->vec_copies = copies ? malloc(sizeof(float) * copies) : NULL;
    if (!s->vecs || (copies && !s->vec_copies))
        return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory for norm weights");
    float *store = s->vec_copies;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const syn_layer *L = &m->layers[l];
        s->vecs[l] = (opt_layer_vecs){
            .attn_norm = vec_view(&L->attn_norm, &store),
            .ffn_norm = vec_view(&L->ffn_norm, &store),
            .bq = vec_view(&L->bq, &store),
            .bk = vec_view(&L->bk, &store),
            .bv = vec_view(&L->bv, &store),
            .q_norm = vec_view(&L->q_norm, &store),
            .k_norm = vec_view(&L->k_norm, &store),
            .post_attn_norm = vec_view(&L->post_attn_norm, &store),
            .post_ffn_norm = vec_view(&L->post_ffn_norm, &store),
        };
    }
    s->output_norm = vec_view(&m->output_norm, &store);
    s->rope_factor = vec_view(factors, &store);
    if (hp->rope_freq_scale != 1.0f) {
        const int32_t half = hp->n_rot / 2;
        s->rope_scaled = malloc(sizeof(float) * (size_t)half);
        if (!s->rope_scaled)
            return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory for RoPE factors");
        for (int32_t i = 0; i < half; i++) /* pos * scale / f = pos / (f / scale), as reference.c */
            s->rope_scaled[i] = (s->rope_factor ? s->rope_factor[i] : 1.0f) / hp->rope_freq_scale;
    }
    return SYN_OK;
}

/* The recurrent layers' float32 parameters (copies: ssm_conv1d is tiny and may be F16) and every
 * layer's index among those with a KV part. */
static syn_status bind_recurrent(opt_state *s) {
    const syn_hparams *hp = &s->model->hp;
    s->kv_layer = malloc(sizeof *s->kv_layer * (size_t)(uint32_t)hp->n_layer);
    if (!s->kv_layer) return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory");
    int32_t n_kv = 0;
    for (int32_t l = 0; l < hp->n_layer; l++)
        s->kv_layer[l] = syn_layer_recurrent(hp, l) ? -1 : n_kv++;
    if (!syn_recurrent_layers(hp)) return SYN_OK;
    const size_t per_layer = (size_t)hp->ssm_conv_dim * (size_t)hp->ssm_conv_kernel +
                             2 * (size_t)hp->ssm_n_v_heads + (size_t)hp->ssm_head_v;
    const size_t n_rec = (size_t)(hp->n_layer - hp->n_attn_layers);
    s->dn = calloc((size_t)(uint32_t)hp->n_layer, sizeof *s->dn);
    s->dn_copies = malloc(sizeof(float) * per_layer * n_rec);
    if (!s->dn || !s->dn_copies)
        return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory for the delta net");
    float *store = s->dn_copies, *taps = malloc(sizeof(float) * (size_t)hp->ssm_conv_kernel);
    if (!taps) return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory");
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if (!syn_layer_recurrent(hp, l)) continue;
        const syn_layer *L = &s->model->layers[l];
        syn_dn_layer *P = &s->dn[l];
        P->conv = store;
        for (int32_t ch = 0; ch < hp->ssm_conv_dim; ch++) {
            syn_tensor_row(&L->ssm_conv, ch, taps);
            for (int32_t j = 0; j < hp->ssm_conv_kernel; j++)
                P->conv[(size_t)j * (size_t)hp->ssm_conv_dim + (size_t)ch] = taps[j];
        }
        store += (size_t)hp->ssm_conv_dim * (size_t)hp->ssm_conv_kernel;
        P->dt_bias = store;
        syn_tensor_row(&L->ssm_dt_bias, 0, store);
        store += hp->ssm_n_v_heads;
        P->a = store;
        syn_tensor_row(&L->ssm_a, 0, store);
        store += hp->ssm_n_v_heads;
        P->norm = store;
        syn_tensor_row(&L->ssm_norm, 0, store);
        store += hp->ssm_head_v;
    }
    free(taps);
    s->dn_floats = syn_dn_state_floats(hp);
    return SYN_OK;
}

/* A quantized matrix needs this tier's kernels for its type (every tier has them for every type of
 * the weight-type table; the check keeps a gap in a table from becoming a crash) and must meet
 * their layout contract (kernels.h); float matrices take the float path. */
static syn_status check_matrix(const syn_tensor *t, const syn_kernels *k) {
    const syn_wtype *wt = syn_wtype_get(t->type);
    if (wt->act_type == GGML_TYPE_F32) return SYN_OK;
    const syn_type_kernels *tk = &k->mat[t->type];
    if (!tk->matvec || !tk->matmul)
        return syn_fail(
            SYN_ERR_UNSUPPORTED,
            "optimized backend: tensor '%s' has type %s, for which tier %s has no kernels; "
            "--backend reference runs this model",
            t->name, ggml_type_name(t->type), syn_isa_tier_name(k->isa));
    const uint64_t block_bytes = ggml_type_size(t->type),
                   n_blocks = (uint64_t)t->ne[0] / ggml_block_size(t->type);
    if (t->row_bytes % 2 != 0 || (uintptr_t)t->data % 2 != 0 ||
        t->row_bytes < n_blocks * block_bytes)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "optimized backend: %s tensor '%s' has row length %lld / row bytes %llu / "
                        "alignment the kernels cannot use",
                        ggml_type_name(t->type), t->name, (long long)t->ne[0],
                        (unsigned long long)t->row_bytes);
    return SYN_OK;
}

static syn_status check_model(const struct syn_model *m, const syn_kernels *k) {
    const syn_hparams *hp = &m->hp;
    if (hp->head_dim % SYN_ATTN_KEY_GROUP != 0 || hp->head_dim < 2)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "optimized backend: head_dim %d is not a multiple of %d", hp->head_dim,
                        SYN_ATTN_KEY_GROUP);
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv != 0)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "optimized backend: %d query heads do not group over %d kv heads",
                        hp->n_head, hp->n_head_kv);
    if (hp->ssm_inner > 0 && hp->ssm_head_v % 8 != 0) /* the delta_rule kernel's lanes */
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "optimized backend: delta-net value head size %d is not a multiple of 8",
                        hp->ssm_head_v);
    /* In the order the forward pass reads them, so the tensor named is the first it cannot run. */
    syn_status st = SYN_OK;
    for (int32_t l = 0; st == SYN_OK && l < hp->n_layer; l++) {
        const syn_tensor *w[SYN_LAYER_MATRICES];
        syn_layer_matrices(&m->layers[l], w);
        for (size_t i = 0; st == SYN_OK && i < SYN_LAYER_MATRICES; i++)
            st = check_matrix(w[i], k);
    }
    return st == SYN_OK ? check_matrix(&m->output, k) : st;
}

/* The blocks of a sequence's ring (ring_blocks above) for slices of up to `slice` (>= 1) of its
 * tokens. A slice of S tokens stores its keys before attending, so the ring holds the window W and
 * a slice: its first token attends W - 1 positions back while its last writes S - 1 ahead, which
 * spans at most (W + S - 2) / 16 + 2 blocks. */
static uint32_t ring_span(const opt_state *s, uint32_t slice) {
    const uint64_t span = ((uint64_t)s->model->hp.swa_window + slice - 2) / SYN_KV_BLOCK + 2;
    const uint64_t ctx_blocks = ((uint64_t)s->n_ctx + SYN_KV_BLOCK - 1) / SYN_KV_BLOCK;
    return (uint32_t)(span < ctx_blocks ? span : ctx_blocks);
}

/* The split of the layers, and the syn_context path's ring: S is about W / 4 (16 to
 * OPT_MAX_BATCH), so the ring stays near the window while prefill slices stay long enough for the
 * matrix kernels. */
static void plan_ring(opt_state *s) {
    const syn_hparams *hp = &s->model->hp;
    int32_t n_local = 0, n_global = 0;
    for (int32_t l = 0; l < hp->n_layer; l++)
        s->layer_slot[l] = syn_layer_is_local(hp, l) ? n_local++ : n_global++;
    if (n_local == 0) return;
    const uint32_t window = (uint32_t)hp->swa_window, quarter = (window / 4 + 15) / 16 * 16;
    s->ring_slice = quarter < 16 ? 16 : quarter > OPT_MAX_BATCH ? OPT_MAX_BATCH : quarter;
    s->ring_blocks = ring_span(s, s->ring_slice);
    s->ring_block_bytes = 2 * s->kv_k_bytes * (size_t)n_local;
    /* a model of local layers only keeps one (unused) layer's room in its own blocks */
    s->own_block_bytes = 2 * s->kv_k_bytes * (size_t)(n_global > 0 ? n_global : 1);
}

static syn_status opt_create(const struct syn_model *model, const syn_backend_config *cfg,
                             void **out) {
    syn_kernels kernels;
    syn_status st = syn_kernels_get(cfg->isa, &kernels);
    if (st == SYN_OK) st = check_model(model, &kernels);
    if (st != SYN_OK) return st;
    opt_state *s = calloc(1, sizeof *s);
    if (s) s->times = calloc(1, sizeof *s->times);
    if (!s || !s->times) {
        free(s);
        return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory");
    }
    const syn_hparams *hp = &model->hp;
    s->model = model;
    s->kv_type = cfg->kv_type;
    s->n_ctx = cfg->n_ctx;
    s->k = kernels;
    s->q_dim = hp->q_dim;
    s->kv_dim = hp->kv_dim;
    s->qkv_dim = hp->q_dim + 2 * hp->kv_dim;
    s->group = hp->n_head / hp->n_head_kv;
    s->fmt_all = fmt_of(&model->output);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const syn_tensor *w[SYN_LAYER_MATRICES];
        syn_layer_matrices(&model->layers[l], w);
        for (size_t i = 0; i < SYN_LAYER_MATRICES; i++)
            s->fmt_all |= fmt_of(w[i]);
    }
    const size_t elem = cfg->kv_type == SYN_KV_F16 ? sizeof(uint16_t) : sizeof(float);
    s->kv_k_bytes = elem * SYN_KV_BLOCK * (size_t)s->kv_dim;
    s->own_block_bytes = 2 * s->kv_k_bytes * (size_t)hp->n_attn_layers;

    int n_threads = cfg->shared_pool ? syn_threadpool_n_threads(cfg->shared_pool) : cfg->n_threads;
    if (n_threads == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = online < 1 ? 1 : online > SYN_MAX_THREADS ? SYN_MAX_THREADS : (int)online;
    }
    if (n_threads < 1 || n_threads > SYN_MAX_THREADS) {
        free(s);
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "thread count %d is outside the optimized backend's 1..%d", n_threads,
                        SYN_MAX_THREADS);
    }

    st = bind_vectors(s);
    if (st == SYN_OK) st = bind_recurrent(s);
    if (st == SYN_OK && cfg->shared_pool) {
        s->pool = cfg->shared_pool;
    } else if (st == SYN_OK) {
        st = syn_threadpool_new(n_threads, &s->pool);
        s->owns_pool = st == SYN_OK;
    }
    if (st == SYN_OK) {
        s->n_threads = n_threads;
        s->ctx_pos = malloc(sizeof *s->ctx_pos * OPT_MAX_BATCH);
        s->ctx_blocks = malloc(sizeof *s->ctx_blocks * OPT_MAX_BATCH);
        s->ctx_want = malloc(sizeof *s->ctx_want * OPT_MAX_BATCH);
        s->ctx_hidden = malloc(sizeof *s->ctx_hidden * OPT_MAX_BATCH);
        s->ctx_ring = malloc(sizeof *s->ctx_ring * OPT_MAX_BATCH);
        s->layer_slot = malloc(sizeof *s->layer_slot * (size_t)hp->n_layer);
        s->row_tmp = calloc((size_t)n_threads, sizeof *s->row_tmp);
        s->attn_tmp = calloc((size_t)n_threads, sizeof *s->attn_tmp);
        if (s->dn_floats) {
            s->own_rstate = malloc(sizeof(float) * s->dn_floats);
            s->ctx_rstates = malloc(sizeof *s->ctx_rstates * OPT_MAX_BATCH);
            s->dn_tmp = calloc((size_t)n_threads, sizeof *s->dn_tmp);
        }
        if (!s->ctx_pos || !s->ctx_blocks || !s->ctx_want || !s->ctx_hidden || !s->ctx_ring ||
            !s->layer_slot || !s->row_tmp || !s->attn_tmp ||
            (s->dn_floats && (!s->own_rstate || !s->ctx_rstates || !s->dn_tmp)))
            st = syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory");
        else
            plan_ring(s);
        const size_t dn_tmp_floats = syn_dn_head_scratch_floats(hp);
        for (int i = 0; st == SYN_OK && s->dn_tmp && i < n_threads; i++)
            if (!(s->dn_tmp[i] = malloc(sizeof(float) * dn_tmp_floats)))
                st = syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory");
        size_t widest = max_sz(max_sz((size_t)hp->n_embd, (size_t)hp->n_ff), (size_t)hp->q_dim);
        const size_t attn_floats = syn_attn_scratch_floats(s->group);
        for (int i = 0; st == SYN_OK && i < n_threads; i++) {
            s->row_tmp[i] = malloc(sizeof(float) * widest);
            s->attn_tmp[i] = malloc(sizeof(float) * attn_floats);
            if (!s->row_tmp[i] || !s->attn_tmp[i])
                st = syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: out of memory");
        }
    }
    if (st != SYN_OK) {
        opt_destroy(s);
        return st;
    }
    *out = s;
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * On-demand growth: KV cache, RoPE table, slice scratch
 * ------------------------------------------------------------------------------------------- */

/* The ring of the syn_context path, whole at its first use, and the table mapping each block of
 * positions of the context to its ring block. */
static syn_status make_ring(opt_state *s) {
    if (s->ring_blocks == 0 || s->ring_table) return SYN_OK;
    static const char what[] = "optimized backend: sliding-window KV cache";
    syn_status st = syn_block_arena_init(&s->ring_arena, s->ring_block_bytes, s->ring_blocks, what);
    if (st == SYN_OK) st = syn_block_arena_grow(&s->ring_arena, s->ring_blocks, what);
    if (st != SYN_OK) return st;
    const uint32_t n = (s->n_ctx + SYN_KV_BLOCK - 1) / SYN_KV_BLOCK;
    s->ring_table = malloc(sizeof *s->ring_table * n);
    if (!s->ring_table)
        return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: ring table of %u blocks", n);
    for (uint32_t b = 0; b < n; b++)
        s->ring_table[b] = syn_block_arena_at(&s->ring_arena, b % s->ring_blocks);
    return SYN_OK;
}

/* The syn_context path's blocks for positions [0, n_positions). New blocks are zeroed so that the
 * unused lanes of a partial key group hold finite numbers. */
static syn_status grow_own_blocks(opt_state *s, uint32_t n_positions) {
    const uint32_t need = (n_positions + SYN_KV_BLOCK - 1) / SYN_KV_BLOCK;
    if (need <= s->n_own_blocks) return SYN_OK;
    static const char what[] = "optimized backend: KV cache";
    syn_status st = SYN_OK;
    if (!s->own_arena.base)
        st = syn_block_arena_init(&s->own_arena, s->own_block_bytes,
                                  (s->n_ctx + SYN_KV_BLOCK - 1) / SYN_KV_BLOCK, what);
    if (st == SYN_OK) st = syn_block_arena_grow(&s->own_arena, need, what);
    if (st != SYN_OK) return st;
    void **table = realloc(s->own_blocks, sizeof *table * need);
    if (!table)
        return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: KV block table of %u blocks", need);
    s->own_blocks = table;
    for (; s->n_own_blocks < need; s->n_own_blocks++)
        table[s->n_own_blocks] = syn_block_arena_at(&s->own_arena, s->n_own_blocks);
    return SYN_OK;
}

/* Grows one RoPE table (*c, *sn) from rope_cap to cap positions, with base and per-pair divisors
 * factor (NULL: 1), cos and sin times rope_attn_factor. False when out of memory. */
static bool grow_rope_table(const opt_state *s, uint32_t cap, float base, const float *factor,
                            float **c, float **sn) {
    const syn_hparams *hp = &s->model->hp;
    const size_t half = (size_t)hp->n_rot / 2;
    float *nc = realloc(*c, sizeof(float) * half * cap);
    if (nc) *c = nc;
    float *ns = realloc(*sn, sizeof(float) * half * cap);
    if (ns) *sn = ns;
    if (!nc || !ns) return false;
    /* The reference backend's formula, so both rotate by the same float32 values. */
    for (uint32_t p = s->rope_cap; p < cap; p++) {
        for (size_t i = 0; i < half; i++) {
            double angle = (double)p * pow((double)base, -2.0 * (double)i / hp->n_rot);
            if (factor) angle /= factor[i];
            nc[(size_t)p * half + i] = (float)(cos(angle) * (double)hp->rope_attn_factor);
            ns[(size_t)p * half + i] = (float)(sin(angle) * (double)hp->rope_attn_factor);
        }
    }
    return true;
}

static syn_status grow_rope(opt_state *s, uint32_t n_positions) {
    if (n_positions <= s->rope_cap) return SYN_OK;
    const syn_hparams *hp = &s->model->hp;
    uint32_t cap = s->rope_cap ? s->rope_cap : 64;
    while (cap < n_positions)
        cap = cap > s->n_ctx / 2 ? s->n_ctx : cap * 2;
    if (cap < n_positions) cap = n_positions;
    bool ok = grow_rope_table(s, cap, hp->rope_freq_base,
                              s->rope_scaled ? s->rope_scaled : s->rope_factor, &s->rope_cos,
                              &s->rope_sin);
    if (ok && hp->swa_window > 0)
        ok = grow_rope_table(s, cap, hp->rope_freq_base_swa, NULL, &s->rope_cos_swa,
                             &s->rope_sin_swa);
    if (!ok)
        return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: RoPE table of %u positions", cap);
    s->rope_cap = cap;
    return SYN_OK;
}

/* b's buffers of the formats in fmt for n rows of dim elements; false when out of memory. */
static bool grow_act(opt_act_bufs *b, unsigned fmt, size_t n, size_t dim) {
    bool ok = true;
    if (fmt & (OPT_FMT_Q8_0 | OPT_FMT_Q8_1)) {
        block_q8_0 *q = realloc(b->q, sizeof(block_q8_0) * n * (dim / QK8_0 + 1));
        if (q) b->q = q;
        ok = ok && q;
    }
    if (fmt & OPT_FMT_Q8_1) {
        uint16_t *sums = realloc(b->s, sizeof(uint16_t) * n * (dim / QK8_0 + 1));
        if (sums) b->s = sums;
        ok = ok && sums;
    }
    if (fmt & OPT_FMT_Q8_K) {
        block_q8_k *k = realloc(b->k, sizeof(block_q8_k) * n * (dim / QK_K + 1));
        if (k) b->k = k;
        ok = ok && k;
    }
    return ok;
}

static syn_status grow_batch(opt_state *s, size_t n) {
    if (n <= s->batch_cap) return SYN_OK;
    const syn_hparams *hp = &s->model->hp;
    size_t ne = (size_t)hp->n_embd, nff = (size_t)hp->n_ff, nq = (size_t)hp->q_dim;
    float **f[] = {&s->x, &s->h, &s->proj};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        float *p = realloc(*f[i], sizeof(float) * n * ne);
        if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: scratch for %zu tokens", n);
        *f[i] = p;
    }
    float *attn = realloc(s->attn, sizeof(float) * n * nq);
    if (attn) s->attn = attn;
    float *qkv = realloc(s->qkv, sizeof(float) * n * (size_t)s->qkv_dim);
    if (qkv) s->qkv = qkv;
    float *gate = realloc(s->gate, sizeof(float) * n * nff);
    if (gate) s->gate = gate;
    float *up = realloc(s->up, sizeof(float) * n * nff);
    if (up) s->up = up;
    const size_t inner = (size_t)hp->ssm_inner, nv = (size_t)hp->ssm_n_v_heads;
    struct {
        float **p;
        size_t per_token; /* 0: the model has no use for it */
    } extra[] = {
        {&s->qg, hp->q_gate ? 2 * nq : 0},
        {&s->attn_gate, hp->q_gate ? nq : 0},
        {&s->dn_m, (size_t)hp->ssm_conv_dim},
        {&s->dn_z, inner},
        {&s->dn_beta, nv},
        {&s->dn_alpha, nv},
        {&s->dn_out, inner},
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        if (!extra[i].per_token) continue;
        float *p = realloc(*extra[i].p, sizeof(float) * n * extra[i].per_token);
        if (!p) return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: scratch for %zu tokens", n);
        *extra[i].p = p;
    }
    bool act_ok = grow_act(&s->hq, s->fmt_all, n, max_sz(max_sz(ne, nq), inner)) &&
                  grow_act(&s->hq_ff, s->fmt_all, n, nff);
    size_t *out_rows = realloc(s->out_rows, sizeof(size_t) * n);
    if (out_rows) s->out_rows = out_rows;
    if (!attn || !qkv || !gate || !up || !act_ok || !out_rows)
        return syn_fail(SYN_ERR_NO_MEMORY, "optimized backend: scratch for %zu tokens", n);
    s->batch_cap = n;
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Jobs: each step of a layer is one pool job whose arguments are a struct of its own, built on
 * the caller's stack and passed as the job's ctx; chunks return 0.
 * ------------------------------------------------------------------------------------------- */

/* The tokens of the slice being run. */
typedef struct opt_slice {
    size_t n;                   /* tokens */
    const uint32_t *pos;        /* [n] their positions */
    void *const *const *blocks; /* [n] their sequences' block tables */
    void *const *const *ring;   /* [n] their local layers' tables (the syn_context path's ring);
                                 * NULL: blocks hold every layer */
    float *const *rstates;      /* [n] their sequences' recurrent states (qwen35), else NULL */
} opt_slice;

/* The block table holding layer's K/V for token t of sl, and the layer's offset in those blocks. */
static void *const *kv_table(const opt_state *s, const opt_slice *sl, size_t t, int32_t layer,
                             size_t *layer_off) {
    const size_t layer_bytes = 2 * s->kv_k_bytes;
    if (!sl->ring) { /* every attention layer, in order (recurrent layers have no part) */
        *layer_off = (size_t)s->kv_layer[layer] * layer_bytes;
        return sl->blocks[t];
    }
    *layer_off = (size_t)s->layer_slot[layer] * layer_bytes;
    return syn_layer_is_local(&s->model->hp, layer) ? sl->ring[t] : sl->blocks[t];
}

/* The input of a matrix step: n tokens' rows of the matrices' n_in columns. */
typedef struct opt_acts {
    size_t n;              /* tokens */
    const float *f;        /* [n][n_in] as floats, for float matrices */
    const opt_act_bufs *q; /* the same quantized, for quantized ones */
} opt_acts;

/* y[t * y_stride + r] = (W row r) . in's token t, for r in [r0, r1), t < in->n. */
static void mat_rows(const opt_state *s, const syn_tensor *w, const opt_acts *in, int64_t r0,
                     int64_t r1, float *y, int64_t y_stride, int thread) {
    const int64_t n_in = w->ne[0];
    const unsigned fmt = fmt_of(w);
    if (fmt) {
        const syn_type_kernels *tk = &s->k.mat[w->type];
        const int64_t nb = n_in / (int64_t)ggml_block_size(w->type);
        const syn_act_q8_1 q8_1 = {in->q->q, in->q->s};
        const void *act = fmt == OPT_FMT_Q8_K   ? (const void *)in->q->k
                          : fmt == OPT_FMT_Q8_1 ? (const void *)&q8_1
                                                : (const void *)in->q->q;
        /* the x16 copy's whole groups inside [r0, r1) once it is published, the rows elsewhere:
         * the same bits either way (kernels.h) */
        const int64_t packed = atomic_load_explicit(&w->x16_rows, memory_order_acquire);
        const syn_x16_kernels *xk = &s->k.x16[w->type];
        /* read only once x16_rows has published it */
        const syn_x16 packed_w = packed > 0 ? syn_tensor_x16(w) : (syn_x16){0};
        int64_t g0 = r1, g1 = r1;
        if (packed > 0 && xk->matvec) {
            g0 = (r0 + SYN_X16_ROWS - 1) / SYN_X16_ROWS * SYN_X16_ROWS;
            g1 = r1 / SYN_X16_ROWS * SYN_X16_ROWS;
            g1 = g1 < packed ? g1 : packed;
            if (g1 <= g0) g0 = g1 = r1;
        }
        const int64_t span[3][2] = {{r0, g0}, {g0, g1}, {g1, r1}};
        for (int i = 0; i < 3; i++) {
            const int64_t a0 = span[i][0], a1 = span[i][1];
            if (a1 <= a0) continue;
            if (in->n == 1 && i == 1)
                xk->matvec(nb, &packed_w, a0, a1, act, y);
            else if (in->n == 1)
                tk->matvec(nb, w->data, (size_t)w->row_bytes, a0, a1, act, y);
            else if (i == 1) /* a decode step of k sequences: one pass over the weights */
                xk->matmul(nb, &packed_w, a0, a1, act, (int64_t)in->n, y, y_stride);
            else
                tk->matmul(nb, w->data, (size_t)w->row_bytes, a0, a1, act, (int64_t)in->n, y,
                           y_stride);
        }
        return;
    }
    float *row = s->row_tmp[thread];
    for (int64_t r = r0; r < r1; r++) {
        syn_tensor_row(w, r, row);
        for (size_t t = 0; t < in->n; t++)
            y[(int64_t)t * y_stride + r] = s->k.dot_f32(row, in->f + t * (size_t)n_in, n_in);
    }
}

/* The sum of x[i]^2 over x[n], in double: eight partial sums (element i goes to sum i mod 8) added
 * pairwise at the end, a fixed order, so every tier and batch shape gets the same bits; eight
 * chains of dependent adds instead of one, whose latency made the norms a visible share of a
 * batched step. */
static double sum_squares(const float *x, size_t n) {
    /* named: kept in registers */
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += (double)x[i] * x[i];
        s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2];
        s3 += (double)x[i + 3] * x[i + 3];
        s4 += (double)x[i + 4] * x[i + 4];
        s5 += (double)x[i + 5] * x[i + 5];
        s6 += (double)x[i + 6] * x[i + 6];
        s7 += (double)x[i + 7] * x[i + 7];
    }
    double tail[8] = {0};
    for (; i < n; i++)
        tail[i % 8] = (double)x[i] * x[i];
    s0 += tail[0], s1 += tail[1], s2 += tail[2], s3 += tail[3];
    s4 += tail[4], s5 += tail[5], s6 += tail[6], s7 += tail[7];
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

/* Norm job, one chunk per token t: h[t] = rmsnorm(x[row]) * w, row = rows[t] (or t), quantized
 * into hq in fmt. */
typedef struct norm_job {
    const opt_state *s;
    const float *w;     /* [n_embd] the norm's weight */
    const size_t *rows; /* [n] the x row of each token; NULL: token t's is row t */
    unsigned fmt;       /* formats of hq (OPT_FMT_* bits) */
} norm_job;

static int job_norm(void *ctx, int64_t t, int thread) {
    (void)thread;
    const norm_job *j = ctx;
    const opt_state *s = j->s;
    const syn_hparams *hp = &s->model->hp;
    const size_t ne = (size_t)hp->n_embd;
    const float *x = s->x + (j->rows ? j->rows[t] : (size_t)t) * ne;
    float *h = s->h + (size_t)t * ne;
    const float scale = (float)(1.0 / sqrt(sum_squares(x, ne) / (double)ne + hp->rms_norm_eps));
    for (size_t i = 0; i < ne; i++)
        h[i] = x[i] * scale * j->w[i];
    quantize_into(s, j->fmt, h, &s->hq, (size_t)t, (int64_t)ne, 0, (int64_t)ne);
    return 0;
}

/* Quantize job, one chunk per token t: src's row t into dst in fmt. */
typedef struct quant_job {
    const opt_state *s;
    const float *src;        /* [n][dim] */
    const opt_act_bufs *dst; /* [n][dim / block] */
    unsigned fmt;
    int64_t dim;
} quant_job;

static int job_quantize(void *ctx, int64_t t, int thread) {
    (void)thread;
    const quant_job *j = ctx;
    quantize_into(j->s, j->fmt, j->src + (size_t)t * (size_t)j->dim, j->dst, (size_t)t, j->dim, 0,
                  j->dim);
    return 0;
}

/* Rotates the first n_rot dims of heads [h0, h1) of row (each [head_dim]) by position pos, with a
 * local layer's table when local: pair i (of half = n_rot/2) is (i, i + half) in the NeoX layout,
 * (2i, 2i + 1) in the adjacent one. */
static void rope_heads(const opt_state *s, float *row, int32_t h0, int32_t h1, uint32_t pos,
                       bool local) {
    const int32_t hd = s->model->hp.head_dim, half = s->model->hp.n_rot / 2;
    const bool neox = s->model->hp.rope_layout == SYN_ROPE_NEOX;
    /* pair i: (step * i, step * i + other) */
    const int32_t step = neox ? 1 : 2, other = neox ? half : 1;
    const float *c = (local ? s->rope_cos_swa : s->rope_cos) + (size_t)pos * (size_t)half;
    const float *sn = (local ? s->rope_sin_swa : s->rope_sin) + (size_t)pos * (size_t)half;
    for (int32_t h = h0; h < h1; h++) {
        float *p = row + (size_t)h * (size_t)hd;
        for (int32_t i = 0; i < half; i++) {
            float *p0 = p + step * i, *p1 = p0 + other;
            const float x0 = *p0, x1 = *p1;
            const float a = x0 * c[i], b = x1 * sn[i];
            *p0 = a - b;
            const float e = x0 * sn[i], f = x1 * c[i];
            *p1 = e + f;
        }
    }
}

/* RMS-norms heads [h0, h1) of row (each [head_dim]) in place with weight w[head_dim] (qwen3's Q/K
 * norms), in the norm step's order of operations. */
static void norm_heads(const opt_state *s, float *row, int32_t h0, int32_t h1, const float *w) {
    const size_t hd = (size_t)s->model->hp.head_dim;
    const double eps = s->model->hp.rms_norm_eps;
    for (int32_t h = h0; h < h1; h++) {
        float *p = row + (size_t)h * hd;
        const float scale = (float)(1.0 / sqrt(sum_squares(p, hd) / (double)hd + eps));
        for (size_t i = 0; i < hd; i++)
            p[i] = p[i] * scale * w[i];
    }
}

/* Stores heads [h0, h1) of k or v (row [kv_dim]) at position pos of a layer's part (layer_off
 * bytes into each block) of a sequence's blocks (each head's K then V, kernels/floats.h). */
static void store_kv(const opt_state *s, size_t layer_off, bool is_k, const float *row, int32_t h0,
                     int32_t h1, uint32_t pos, void *const *blocks) {
    const size_t hd = (size_t)s->model->hp.head_dim, head_elems = 2 * (size_t)SYN_KV_BLOCK * hd;
    const size_t in_block = pos % SYN_KV_BLOCK;
    char *base = (char *)blocks[pos / SYN_KV_BLOCK] + layer_off;
    for (int32_t h = h0; h < h1; h++) {
        const float *src = row + (size_t)h * hd;
        for (size_t i = 0; i < hd; i++) {
            const size_t slab = i - i % 16, w = hd - slab < 16 ? hd - slab : 16;
            const size_t k_at = i * SYN_KV_BLOCK + in_block;
            const size_t v_at = SYN_KV_BLOCK * (hd + slab) + in_block * w + i % 16;
            const size_t at = (size_t)h * head_elems + (is_k ? k_at : v_at);
            if (s->kv_type == SYN_KV_F16)
                ((uint16_t *)base)[at] = syn_k_f32_to_fp16(src[i]);
            else
                ((float *)base)[at] = src[i];
        }
    }
}

/* Rows per chunk of a matrix of n_rows rows taking n_act tokens, a multiple of align. One token:
 * OPT_ROWS_PER_CHUNK. Several: about OPT_BATCH_SHARE chunks per thread, as each matmul call
 * prepares its activation (block sums, scales) and transposes its weight tiles once for all its
 * rows, work that short chunks repeat. */
static int64_t rows_per_chunk(const opt_state *s, size_t n_act, int64_t n_rows, int64_t align) {
    int64_t rows = OPT_ROWS_PER_CHUNK;
    if (n_act > 1) {
        const int64_t parts = (int64_t)OPT_BATCH_SHARE * s->n_threads;
        const int64_t share = (n_rows + parts - 1) / parts;
        rows = share > rows ? share : rows;
    }
    return (rows + align - 1) / align * align;
}

/* Heads of q, k or v per qkv chunk: OPT_ROWS_PER_CHUNK rows' worth for one token, and for several
 * about OPT_BATCH_SHARE chunks of q per thread (rows_per_chunk says why). */
static int32_t qkv_heads_per_chunk(const opt_state *s, size_t n_act) {
    const syn_hparams *hp = &s->model->hp;
    const int64_t rows = rows_per_chunk(s, n_act, (int64_t)hp->n_head * hp->head_dim, 1);
    return rows <= hp->head_dim ? 1 : (int32_t)(rows / hp->head_dim);
}

/* QKV job: one chunk per group of heads_per_chunk heads of wq, of wk or of wv (qkv_chunk), which
 * computes those rows for every token of the slice, adds the bias, norms and rotates the heads
 * (q, k) and stores them in the cache (k, v). */
typedef struct qkv_job {
    const opt_state *s;
    int32_t layer;
    opt_slice sl;
    opt_acts in; /* [n][n_embd] the normed input */
    int32_t heads_per_chunk;
} qkv_job;

/* Chunk -> (matrix 0/1/2 = q/k/v, heads [h0, h1)). */
static void qkv_chunk(const qkv_job *j, int64_t chunk, int *mat, int32_t *h0, int32_t *h1) {
    const syn_hparams *hp = &j->s->model->hp;
    const int32_t hpc = j->heads_per_chunk;
    const int64_t nq = (hp->n_head + hpc - 1) / hpc, nk = (hp->n_head_kv + hpc - 1) / hpc;
    int32_t n_heads = hp->n_head;
    if (chunk < nq) {
        *mat = 0;
    } else if (chunk < nq + nk) {
        *mat = 1;
        chunk -= nq;
        n_heads = hp->n_head_kv;
    } else {
        *mat = 2;
        chunk -= nq + nk;
        n_heads = hp->n_head_kv;
    }
    *h0 = (int32_t)chunk * hpc;
    *h1 = *h0 + hpc < n_heads ? *h0 + hpc : n_heads;
}

static int64_t qkv_n_chunks(const qkv_job *j) {
    const syn_hparams *hp = &j->s->model->hp;
    const int32_t hpc = j->heads_per_chunk;
    return (hp->n_head + hpc - 1) / hpc + 2 * ((hp->n_head_kv + hpc - 1) / hpc);
}

static int job_qkv(void *ctx, int64_t chunk, int thread) {
    const qkv_job *j = ctx;
    const opt_state *s = j->s;
    const syn_hparams *hp = &s->model->hp;
    const syn_layer *L = &s->model->layers[j->layer];
    const opt_layer_vecs *V = &s->vecs[j->layer];
    int mat;
    int32_t h0, h1;
    qkv_chunk(j, chunk, &mat, &h0, &h1);
    const syn_tensor *w = mat == 0 ? &L->wq : mat == 1 ? &L->wk : &L->wv;
    const float *bias = mat == 0 ? V->bq : mat == 1 ? V->bk : V->bv;
    const float *head_norm = mat == 0 ? V->q_norm : mat == 1 ? V->k_norm : NULL;
    const size_t off = mat == 0   ? 0
                       : mat == 1 ? (size_t)s->q_dim
                                  : (size_t)s->q_dim + (size_t)s->kv_dim;
    const int64_t r0 = (int64_t)h0 * hp->head_dim, r1 = (int64_t)h1 * hp->head_dim;
    const bool gated = mat == 0 && hp->q_gate;
    if (gated) /* per head: the query rows, then the gate rows, split into qkv and attn_gate */
        mat_rows(s, w, &j->in, 2 * r0, 2 * r1, s->qg, 2 * (int64_t)s->q_dim, thread);
    else
        mat_rows(s, w, &j->in, r0, r1, s->qkv + off, s->qkv_dim, thread);
    for (size_t t = 0; t < j->sl.n; t++) {
        float *row = s->qkv + t * (size_t)s->qkv_dim + off;
        const size_t hd = (size_t)hp->head_dim;
        for (int32_t h = h0; gated && h < h1; h++) {
            const float *qg = s->qg + (t * (size_t)s->q_dim + (size_t)h * hd) * 2;
            memcpy(row + (size_t)h * hd, qg, sizeof(float) * hd);
            memcpy(s->attn_gate + t * (size_t)s->q_dim + (size_t)h * hd, qg + hd,
                   sizeof(float) * hd);
        }
        if (bias)
            for (int64_t r = r0; r < r1; r++)
                row[r] += bias[r];
        if (head_norm) norm_heads(s, row, h0, h1, head_norm);
        const uint32_t pos = j->sl.pos[t];
        if (mat != 2) rope_heads(s, row, h0, h1, pos, syn_layer_is_local(hp, j->layer));
        if (mat != 0) {
            size_t layer_off;
            void *const *table = kv_table(s, &j->sl, t, j->layer, &layer_off);
            store_kv(s, layer_off, mat == 1, row, h0, h1, pos, table);
        }
    }
    return 0;
}

/* Attention job: one chunk per (token, kv head), the kv head's group of query heads over the
 * token's sequence, into attn; quantized into hq in quant_fmt when that is not 0. */
typedef struct attn_job {
    const opt_state *s;
    int32_t layer;
    opt_slice sl;
    unsigned quant_fmt; /* wo's formats when the group's output is whole blocks of them, else 0 */
} attn_job;

static int job_attention(void *ctx, int64_t chunk, int thread) {
    const attn_job *j = ctx;
    const opt_state *s = j->s;
    const syn_hparams *hp = &s->model->hp;
    const size_t t = (size_t)(chunk / hp->n_head_kv);
    const int32_t kv_head = (int32_t)(chunk % hp->n_head_kv);
    /* the group's first element of q */
    const size_t head0 = (size_t)kv_head * (size_t)s->group * (size_t)hp->head_dim;
    float *out = s->attn + t * (size_t)s->q_dim + head0;
    const uint32_t pos = j->sl.pos[t], window = (uint32_t)hp->swa_window;
    const bool windowed = syn_layer_is_local(hp, j->layer) && pos >= window;
    size_t layer_off;
    void *const *table = kv_table(s, &j->sl, t, j->layer, &layer_off);
    const syn_attn_args a = {
        .head_dim = hp->head_dim,
        .n_head_kv = hp->n_head_kv,
        .kv_head = kv_head,
        .group = s->group,
        .n_keys = pos + 1,
        .first_key = windowed ? pos - window + 1 : 0,
        .f16 = s->kv_type == SYN_KV_F16,
        .scale = hp->attn_scale,
        .blocks = (const void *const *)table,
        .layer_off = layer_off,
        .q = s->qkv + t * (size_t)s->qkv_dim + head0,
        .out = out,
        .scratch = s->attn_tmp[thread],
    };
    s->k.attention(&a);
    if (hp->q_gate) {
        const float *g = s->attn_gate + t * (size_t)s->q_dim + head0;
        for (int64_t i = 0; i < (int64_t)s->group * hp->head_dim; i++)
            out[i] *= 1.0f / (1.0f + expf(-g[i]));
    }
    if (j->quant_fmt)
        quantize_into(s, j->quant_fmt, out, &s->hq, t, s->q_dim, (int64_t)head0,
                      (int64_t)s->group * hp->head_dim);
    return 0;
}

/* Residual job (wo, w_down), one chunk per rows_per_chunk rows r of w: proj = those rows of
 * w . in, then x += proj for them unless a post norm (post_norm_job) adds them. */
typedef struct residual_job {
    const opt_state *s;
    const syn_tensor *w; /* [n_embd][n_in] */
    opt_acts in;         /* [n][n_in] */
    int64_t rows_per_chunk;
    bool proj_only; /* leave x to post_norm_job */
} residual_job;

static int job_residual(void *ctx, int64_t chunk, int thread) {
    const residual_job *j = ctx;
    const opt_state *s = j->s;
    const size_t ne = (size_t)s->model->hp.n_embd;
    int64_t r0, r1;
    syn_chunk_rows((int64_t)ne, j->rows_per_chunk, chunk, &r0, &r1);
    mat_rows(s, j->w, &j->in, r0, r1, s->proj, (int64_t)ne, thread);
    if (j->proj_only) return 0;
    for (size_t t = 0; t < j->in.n; t++)
        for (int64_t r = r0; r < r1; r++)
            s->x[t * ne + (size_t)r] += s->proj[t * ne + (size_t)r];
    return 0;
}

/* Post-norm job (gemma3), one chunk per token t: x[t] += rmsnorm(proj[t]) * w, in the norm
 * step's order of operations. */
typedef struct post_norm_job {
    const opt_state *s;
    const float *w; /* [n_embd] */
} post_norm_job;

static int job_post_norm(void *ctx, int64_t t, int thread) {
    (void)thread;
    const post_norm_job *j = ctx;
    const opt_state *s = j->s;
    const size_t ne = (size_t)s->model->hp.n_embd;
    const float *p = s->proj + (size_t)t * ne;
    float *x = s->x + (size_t)t * ne;
    const float scale =
        (float)(1.0 / sqrt(sum_squares(p, ne) / (double)ne + s->model->hp.rms_norm_eps));
    for (size_t i = 0; i < ne; i++)
        x[i] += p[i] * scale * j->w[i];
    return 0;
}

/* Rows of gate/up per ffn chunk for n tokens. Several tokens: rows_per_chunk's, in matmul's tiles.
 * One token: a chunk reads gate's rows and then up's, so each chunk restarts two weight streams;
 * long chunks (about OPT_FFN_DECODE_SHARE per thread, leaving some to steal from a late thread)
 * keep the streams sequential. A multiple of w_down's activation block, so each chunk quantizes
 * whole blocks of silu(gate) * up. */
static int64_t ffn_rows_per_chunk(const opt_state *s, const syn_tensor *w_down, size_t n) {
    const int64_t block = fmt_block(fmt_of(w_down)), nff = s->model->hp.n_ff;
    if (n == 1) {
        const int64_t parts = (int64_t)OPT_FFN_DECODE_SHARE * s->n_threads;
        int64_t rows = (nff + parts - 1) / parts;
        rows = rows > OPT_FFN_DECODE_MIN_ROWS ? rows : OPT_FFN_DECODE_MIN_ROWS;
        return (rows + block - 1) / block * block;
    }
    return rows_per_chunk(s, n, nff, block > OPT_TILE_ROWS ? block : OPT_TILE_ROWS);
}

/* FFN job, one chunk per rows_per_chunk rows [r0, r1) of gate and up: those rows of both, then
 * silu(gate) * up into gate, quantized for w_down into hq_ff (w_down's rows are whole blocks, so
 * n_ff and every chunk's rows are block aligned). */
typedef struct ffn_job {
    const opt_state *s;
    const syn_layer *L; /* w_gate, w_up [n_ff][n_embd], w_down (its format) */
    opt_acts in;        /* [n][n_embd] the normed input */
    int64_t rows_per_chunk;
} ffn_job;

static int job_ffn(void *ctx, int64_t chunk, int thread) {
    const ffn_job *j = ctx;
    const opt_state *s = j->s;
    const size_t nff = (size_t)s->model->hp.n_ff;
    int64_t r0, r1;
    syn_chunk_rows((int64_t)nff, j->rows_per_chunk, chunk, &r0, &r1);
    mat_rows(s, &j->L->w_gate, &j->in, r0, r1, s->gate, (int64_t)nff, thread);
    mat_rows(s, &j->L->w_up, &j->in, r0, r1, s->up, (int64_t)nff, thread);
    const unsigned fmt = fmt_of(&j->L->w_down);
    for (size_t t = 0; t < j->in.n; t++) {
        float *g = s->gate + t * nff + (size_t)r0;
        if (s->model->hp.ffn_act == SYN_FFN_GELU_TANH)
            s->k.geglu(g, s->up + t * nff + (size_t)r0, r1 - r0, syn_gelu_fp16_table());
        else
            s->k.swiglu(g, s->up + t * nff + (size_t)r0, r1 - r0);
        quantize_into(s, fmt, g, &s->hq_ff, t, (int64_t)nff, r0, r1 - r0);
    }
    return 0;
}

/* Output job, one chunk per OPT_OUT_ROWS_PER_CHUNK rows of the output projection. */
typedef struct output_job {
    const opt_state *s;
    opt_acts in;   /* [n][n_embd] the normed tokens that want logits */
    float *logits; /* [n][n_vocab] */
} output_job;

static int job_output(void *ctx, int64_t chunk, int thread) {
    const output_job *j = ctx;
    const syn_tensor *w = &j->s->model->output;
    int64_t r0, r1;
    syn_chunk_rows(w->ne[1], OPT_OUT_ROWS_PER_CHUNK, chunk, &r0, &r1);
    mat_rows(j->s, w, &j->in, r0, r1, j->logits, w->ne[1], thread);
    const float cap = j->s->model->hp.final_logit_softcap;
    if (cap > 0.0f)
        for (size_t t = 0; t < j->in.n; t++)
            for (int64_t r = r0; r < r1; r++) {
                float *y = j->logits + (int64_t)t * w->ne[1] + r;
                *y = cap * tanhf(*y / cap);
            }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Forward
 * ------------------------------------------------------------------------------------------- */

/* Adds one run of step (ns of wall time, macs int8 multiply-adds) to s's step times. */
static void record_step(const opt_state *s, const char *step, uint64_t ns, uint64_t macs) {
    syn_step_times *t = s->times;
    size_t i = 0;
    while (i < t->n && strcmp(t->steps[i].step, step) != 0)
        i++;
    if (i == t->n) {
        if (t->n == SYN_MAX_STEPS) {
            t->other_ns += ns;
            return;
        }
        t->steps[t->n++] = (syn_step_time){.step = step};
    }
    t->steps[i].ns += ns;
    t->steps[i].runs++;
    t->steps[i].macs += macs;
}

/* Runs one step of the forward pass on the pool; macs: the int8 multiply-adds of the quantized
 * matrices it multiplies by (mat_macs), for the step times. */
static syn_status run(const opt_state *s, int64_t n_chunks, syn_chunk_fn fn, void *job,
                      const char *step, uint64_t macs) {
    const bool timed = s->times->on;
    const uint64_t t0 = timed ? syn_now_ns() : 0;
    int rc = syn_threadpool_run(s->pool, n_chunks, fn, job);
    if (rc != 0)
        return syn_fail(SYN_ERR_INTERNAL, "optimized backend: step '%s' failed (%d)", step, rc);
    if (timed) record_step(s, step, syn_now_ns() - t0, macs);
    return SYN_OK;
}

/* The int8 multiply-adds of n tokens' rows times the quantized matrix w (0 for a float one or
 * none). */
static uint64_t mat_macs(const syn_tensor *w, size_t n) {
    return w->data && fmt_of(w) ? (uint64_t)n * (uint64_t)w->ne[0] * (uint64_t)w->ne[1] : 0;
}

/* h (and hq in formats fmt) = rmsnorm of n_tok rows of x: rows[t], or the first n_tok when NULL. */
static syn_status norm_rows(const opt_state *s, const float *w, const size_t *rows, size_t n_tok,
                            unsigned fmt) {
    norm_job j = {.s = s, .w = w, .rows = rows, .fmt = fmt};
    return run(s, (int64_t)n_tok, job_norm, &j, "norm", 0);
}

/* Projection job of a recurrent layer: one chunk per rows_per_chunk rows of one of its input
 * matrices (ssm_qkv, ssm_z, ssm_beta, ssm_alpha), chunks of matrix i from first[i]. */
typedef struct proj_job {
    const opt_state *s;
    opt_acts in; /* [n][n_embd] the normed input */
    const syn_tensor *w[4];
    float *y[4]; /* [n][rows of w[i]] */
    int64_t rows_per_chunk[4];
    int64_t first[5];
} proj_job;

static int job_proj(void *ctx, int64_t chunk, int thread) {
    const proj_job *j = ctx;
    int i = 0;
    while (chunk >= j->first[i + 1])
        i++;
    int64_t r0, r1;
    syn_chunk_rows(j->w[i]->ne[1], j->rows_per_chunk[i], chunk - j->first[i], &r0, &r1);
    mat_rows(j->s, j->w[i], &j->in, r0, r1, j->y[i], j->w[i]->ne[1], thread);
    return 0;
}

enum { OPT_DN_CONV_CHANNELS = 128 }; /* channels per convolution chunk */

/* Delta-net step jobs (optimized_delta_net.c): convolution chunks over channel ranges, recurrence
 * chunks one per V head. */
typedef struct dn_job {
    const opt_state *s;
    int32_t layer;
    syn_dn_seqs seqs;
} dn_job;

static int job_dn_conv(void *ctx, int64_t chunk, int thread) {
    (void)thread;
    const dn_job *j = ctx;
    const syn_hparams *hp = &j->s->model->hp;
    int64_t c0, c1;
    syn_chunk_rows(hp->ssm_conv_dim, OPT_DN_CONV_CHANNELS, chunk, &c0, &c1);
    syn_dn_conv(hp, j->layer, &j->s->dn[j->layer], &j->seqs, j->s->k.dn_conv, j->s->dn_m,
                (int32_t)c0, (int32_t)c1);
    return 0;
}

static int job_dn_head(void *ctx, int64_t chunk, int thread) {
    const dn_job *j = ctx;
    const opt_state *s = j->s;
    syn_dn_head(&s->model->hp, j->layer, &s->dn[j->layer], &j->seqs, (int32_t)chunk, s->dn_m,
                s->dn_z, s->dn_beta, s->dn_alpha, s->k.delta_rule, s->k.dot_f32, s->dn_out,
                s->dn_tmp[thread]);
    return 0;
}

/* x += the gated delta net mixer of recurrent layer l (qwen35). */
static syn_status forward_recurrent(const opt_state *s, const opt_slice *sl, int32_t l) {
    const syn_hparams *hp = &s->model->hp;
    const syn_layer *L = &s->model->layers[l];
    const int64_t ne = hp->n_embd;
    proj_job proj = {
        .s = s,
        .in = {.n = sl->n, .f = s->h, .q = &s->hq},
        .w = {&L->ssm_qkv, &L->ssm_z, &L->ssm_beta, &L->ssm_alpha},
        .y = {s->dn_m, s->dn_z, s->dn_beta, s->dn_alpha},
    };
    unsigned in_fmt = 0;
    for (int i = 0; i < 4; i++) {
        in_fmt |= fmt_of(proj.w[i]);
        proj.rows_per_chunk[i] = rows_per_chunk(s, sl->n, proj.w[i]->ne[1], OPT_TILE_ROWS);
        proj.first[i + 1] = proj.first[i] + (proj.w[i]->ne[1] + proj.rows_per_chunk[i] - 1) /
                                                proj.rows_per_chunk[i];
    }
    syn_status st = norm_rows(s, s->vecs[l].attn_norm, NULL, sl->n, in_fmt);
    uint64_t proj_macs = 0;
    for (int i = 0; i < 4; i++)
        proj_macs += mat_macs(proj.w[i], sl->n);
    if (st == SYN_OK)
        st = run(s, proj.first[4], job_proj, &proj, "delta-net projections", proj_macs);
    dn_job dn = {.s = s, .layer = l, .seqs = {.n = sl->n, .pos = sl->pos, .states = sl->rstates}};
    const int64_t conv_chunks =
        (hp->ssm_conv_dim + OPT_DN_CONV_CHANNELS - 1) / OPT_DN_CONV_CHANNELS;
    if (st == SYN_OK) st = run(s, conv_chunks, job_dn_conv, &dn, "delta-net convolution", 0);
    if (st == SYN_OK) st = run(s, hp->ssm_n_v_heads, job_dn_head, &dn, "delta-net recurrence", 0);
    const unsigned out_fmt = fmt_of(&L->ssm_out);
    if (st == SYN_OK && out_fmt) {
        quant_job q = {
            .s = s, .src = s->dn_out, .dst = &s->hq, .fmt = out_fmt, .dim = hp->ssm_inner};
        st = run(s, (int64_t)sl->n, job_quantize, &q, "quantize", 0);
    }
    const int64_t res_rows = rows_per_chunk(s, sl->n, ne, OPT_TILE_ROWS);
    residual_job out = {
        .s = s,
        .w = &L->ssm_out,
        .in = {.n = sl->n, .f = s->dn_out, .q = &s->hq},
        .rows_per_chunk = res_rows,
    };
    if (st == SYN_OK)
        st = run(s, (ne + res_rows - 1) / res_rows, job_residual, &out, "ssm_out",
                 mat_macs(&L->ssm_out, sl->n));
    return st;
}

/* x += the attention mixer of attention layer l. */
static syn_status forward_attention(const opt_state *s, const opt_slice *sl, int32_t l) {
    const syn_hparams *hp = &s->model->hp;
    const syn_layer *L = &s->model->layers[l];
    const int64_t ne = hp->n_embd;
    const opt_acts normed = {.n = sl->n, .f = s->h, .q = &s->hq};

    const unsigned qkv_fmt = fmt_of(&L->wq) | fmt_of(&L->wk) | fmt_of(&L->wv);
    syn_status st = norm_rows(s, s->vecs[l].attn_norm, NULL, sl->n, qkv_fmt);
    qkv_job qkv = {
        .s = s,
        .layer = l,
        .sl = *sl,
        .in = normed,
        .heads_per_chunk = qkv_heads_per_chunk(s, sl->n),
    };
    if (st == SYN_OK)
        st = run(s, qkv_n_chunks(&qkv), job_qkv, &qkv, "qkv",
                 mat_macs(&L->wq, sl->n) + mat_macs(&L->wk, sl->n) + mat_macs(&L->wv, sl->n));

    /* The attention chunk of a (token, kv head) quantizes its heads' output itself when they are
     * whole blocks of every format wo takes; otherwise a step of its own does. */
    const unsigned wo_fmt = fmt_of(&L->wo);
    const bool fused = wo_fmt && ((int64_t)s->group * hp->head_dim) % fmt_block(wo_fmt) == 0;
    attn_job attn = {.s = s, .layer = l, .sl = *sl, .quant_fmt = fused ? wo_fmt : 0};
    if (st == SYN_OK)
        st = run(s, (int64_t)sl->n * hp->n_head_kv, job_attention, &attn, "attention", 0);
    if (st == SYN_OK && wo_fmt && !fused) {
        quant_job q = {.s = s, .src = s->attn, .dst = &s->hq, .fmt = wo_fmt, .dim = s->q_dim};
        st = run(s, (int64_t)sl->n, job_quantize, &q, "quantize", 0);
    }
    const int64_t res_rows = rows_per_chunk(s, sl->n, ne, OPT_TILE_ROWS); /* wo, w_down */
    const opt_layer_vecs *V = &s->vecs[l];
    residual_job wo = {
        .s = s,
        .w = &L->wo,
        .in = {.n = sl->n, .f = s->attn, .q = &s->hq},
        .rows_per_chunk = res_rows,
        .proj_only = V->post_attn_norm != NULL,
    };
    if (st == SYN_OK)
        st = run(s, (ne + res_rows - 1) / res_rows, job_residual, &wo, "wo",
                 mat_macs(&L->wo, sl->n));
    post_norm_job post_attn = {.s = s, .w = V->post_attn_norm};
    if (st == SYN_OK && wo.proj_only)
        st = run(s, (int64_t)sl->n, job_post_norm, &post_attn, "post-attention norm", 0);
    return st;
}

static syn_status forward_layer(const opt_state *s, const opt_slice *sl, int32_t l) {
    const syn_hparams *hp = &s->model->hp;
    const syn_layer *L = &s->model->layers[l];
    const int64_t ne = hp->n_embd, nff = hp->n_ff;
    const opt_acts normed = {.n = sl->n, .f = s->h, .q = &s->hq};
    const opt_layer_vecs *V = &s->vecs[l];
    syn_status st =
        syn_layer_recurrent(hp, l) ? forward_recurrent(s, sl, l) : forward_attention(s, sl, l);
    const int64_t res_rows = rows_per_chunk(s, sl->n, ne, OPT_TILE_ROWS); /* w_down */

    const unsigned ffn_fmt = fmt_of(&L->w_gate) | fmt_of(&L->w_up);
    if (st == SYN_OK) st = norm_rows(s, s->vecs[l].ffn_norm, NULL, sl->n, ffn_fmt);
    ffn_job ffn = {
        .s = s,
        .L = L,
        .in = normed,
        .rows_per_chunk = ffn_rows_per_chunk(s, &L->w_down, sl->n),
    };
    const int64_t ffn_chunks = (nff + ffn.rows_per_chunk - 1) / ffn.rows_per_chunk;
    if (st == SYN_OK)
        st = run(s, ffn_chunks, job_ffn, &ffn, "ffn",
                 mat_macs(&L->w_gate, sl->n) + mat_macs(&L->w_up, sl->n));
    residual_job down = {
        .s = s,
        .w = &L->w_down,
        .in = {.n = sl->n, .f = s->gate, .q = &s->hq_ff},
        .rows_per_chunk = res_rows,
        .proj_only = V->post_ffn_norm != NULL,
    };
    if (st == SYN_OK)
        st = run(s, (ne + res_rows - 1) / res_rows, job_residual, &down, "down",
                 mat_macs(&L->w_down, sl->n));
    post_norm_job post_ffn = {.s = s, .w = V->post_ffn_norm};
    if (st == SYN_OK && down.proj_only)
        st = run(s, (int64_t)sl->n, job_post_norm, &post_ffn, "post-FFN norm", 0);
    return st;
}

/* The final norm of the slice rows of x that want their hidden state, copied out to hidden
 * ([count][n_embd]) in token order: no quantization, since no matrix reads them. */
static syn_status hidden_rows(const opt_state *s, const syn_batch *b, size_t start, size_t n,
                              float *hidden) {
    const size_t ne = (size_t)s->model->hp.n_embd;
    size_t n_out = 0;
    for (size_t t = 0; t < n; t++)
        if (b->want_hidden[start + t]) s->out_rows[n_out++] = t;
    if (n_out == 0) return SYN_OK;
    syn_status st = norm_rows(s, s->output_norm, s->out_rows, n_out, 0);
    if (st == SYN_OK) memcpy(hidden, s->h, sizeof(float) * n_out * ne);
    return st;
}

/* Tokens [start, start + n) of batch b (n <= batch_cap), with their local layers' tables ring
 * ([b->n], NULL: b's blocks hold every layer); the logits of those that want them go to logits
 * ([count][n_vocab]), the hidden states of those that want them to hidden ([count][n_embd]). */
static syn_status forward_slice(const opt_state *s, const syn_batch *b, void *const *const *ring,
                                size_t start, size_t n, float *logits, float *hidden) {
    const struct syn_model *m = s->model;
    const size_t ne = (size_t)m->hp.n_embd;
    const opt_slice sl = {
        .n = n,
        .pos = b->pos + start,
        .blocks = b->blocks + start,
        .ring = ring ? ring + start : NULL,
        .rstates = b->rstates ? b->rstates + start : NULL,
    };
    for (size_t t = 0; t < n; t++) {
        float *x = s->x + t * ne;
        syn_tensor_row(&m->tok_embd, b->tokens[start + t], x);
        for (size_t i = 0; i < ne; i++)
            x[i] *= m->hp.embd_scale;
    }
    syn_status st = SYN_OK;
    for (int32_t l = 0; st == SYN_OK && l < m->hp.n_layer; l++)
        st = forward_layer(s, &sl, l);
    if (st == SYN_OK && b->want_hidden) st = hidden_rows(s, b, start, n, hidden);
    if (st != SYN_OK) return st;

    size_t n_out = 0;
    for (size_t t = 0; t < n; t++)
        if (b->want_logits[start + t]) s->out_rows[n_out++] = t;
    if (n_out == 0) return SYN_OK;
    st = norm_rows(s, s->output_norm, s->out_rows, n_out, fmt_of(&m->output));
    output_job out = {.s = s, .in = {.n = n_out, .f = s->h, .q = &s->hq}, .logits = logits};
    const int64_t n_chunks =
        (m->output.ne[1] + OPT_OUT_ROWS_PER_CHUNK - 1) / OPT_OUT_ROWS_PER_CHUNK;
    if (st == SYN_OK)
        st = run(s, n_chunks, job_output, &out, "output", mat_macs(&m->output, n_out));
    return st;
}

static size_t opt_kv_block_bytes(const void *opaque) {
    const opt_state *s = opaque;
    return s->own_block_bytes;
}

/* ring_span for slices of up to seq_tokens of one sequence (forward_tokens cuts a batch into
 * slices of at most ring_slice tokens). */
static uint32_t opt_ring_blocks(const void *opaque, uint32_t seq_tokens, size_t *block_bytes) {
    const opt_state *s = opaque;
    *block_bytes = s->ring_block_bytes;
    if (s->ring_blocks == 0) return 0;
    const uint32_t slice = seq_tokens < 1               ? 1
                           : seq_tokens > s->ring_slice ? s->ring_slice
                                                        : seq_tokens;
    return ring_span(s, slice);
}

/* forward_batch, with ring as forward_slice's. */
static syn_status forward_tokens(opt_state *s, const syn_batch *b, void *const *const *ring) {
    if (b->n == 0) return SYN_OK;
    if (s->ring_blocks && !ring)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "optimized backend: %s has sliding-window layers and the batch no rings",
                        s->model->arch->name);
    uint32_t max_pos = 0;
    for (size_t i = 0; i < b->n; i++)
        max_pos = b->pos[i] > max_pos ? b->pos[i] : max_pos;
    if (max_pos >= s->n_ctx)
        return syn_fail(SYN_ERR_CONTEXT_FULL,
                        "optimized backend: position %u is beyond the context of %u", max_pos,
                        s->n_ctx);
    if (s->dn_floats && !b->rstates)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "optimized backend: %s has recurrent layers and the batch no states",
                        s->model->arch->name);
    syn_status st = grow_rope(s, max_pos + 1);
    if (st == SYN_OK) st = grow_batch(s, b->n < OPT_MAX_BATCH ? b->n : OPT_MAX_BATCH);
    const size_t n_vocab = (size_t)s->model->hp.n_vocab, n_embd = (size_t)s->model->hp.n_embd;
    size_t n_out = 0, n_hid = 0; /* logits and hidden rows written by earlier slices */
    /* sliding-window layers: slices of about W / 4, so that a ring of the window and one slice
     * holds what a slice attends to (an engine step may carry far more of one sequence) */
    const size_t cap = s->ring_blocks ? s->ring_slice : OPT_MAX_BATCH;
    for (size_t start = 0; st == SYN_OK && start < b->n; start += cap) {
        const size_t len = b->n - start < cap ? b->n - start : cap;
        st = forward_slice(s, b, ring, start, len, b->logits + n_out * n_vocab,
                           b->want_hidden ? b->hidden + n_hid * n_embd : NULL);
        for (size_t t = start; t < start + len; t++) {
            n_out += b->want_logits[t];
            n_hid += b->want_hidden && b->want_hidden[t];
        }
    }
    return st;
}

static size_t opt_recurrent_state_bytes(const void *opaque) {
    const opt_state *s = opaque;
    return sizeof(float) * s->dn_floats;
}

static syn_status opt_forward_batch(void *opaque, const syn_batch *b) {
    return forward_tokens(opaque, b, b->rings);
}

/* Whether the syn_context path's cache holds every position a token at pos attends to (and its
 * recurrent state, which only moves forward, stands at pos or restarts there at 0). */
static bool opt_can_resume(const void *opaque, uint32_t pos) {
    const opt_state *s = opaque;
    const uint32_t window = (uint32_t)s->model->hp.swa_window;
    if (pos > s->kv_hi) return false;
    if (s->dn_floats && pos != 0 && pos != s->own_rpos) return false;
    return pos == 0 || s->kv_lo == 0 ||
           (window > 0 && pos >= window && s->kv_lo <= pos - window + 1);
}

static size_t opt_kv_layer_bytes(const void *opaque, int32_t layer) {
    const opt_state *s = opaque;
    if (syn_layer_recurrent(&s->model->hp, layer)) return 0; /* no part in the blocks */
    const bool in_ring = s->ring_blocks > 0 && syn_layer_is_local(&s->model->hp, layer);
    const uint32_t blocks = in_ring ? (s->ring_table ? s->ring_blocks : 0) : s->n_own_blocks;
    return 2 * s->kv_k_bytes * blocks;
}

/* The syn_context path: one sequence in the state's own blocks (and ring), in batches of
 * OPT_MAX_BATCH tokens (ring_slice with a ring); hidden [n][n_embd] when not NULL (no logits),
 * else logits as forward's. */
static syn_status run_own(opt_state *s, const int32_t *tokens, size_t n, uint32_t pos0,
                          float *hidden, float *logits, bool all_logits) {
    if (n == 0) return SYN_OK;
    if (s->dn_floats && pos0 != 0 && pos0 != s->own_rpos)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "optimized backend: %s's recurrent state stands at position %u and cannot "
                        "be rewound to %u (only restarted from 0)",
                        s->model->arch->name, s->own_rpos, pos0);
    if (!opt_can_resume(s, pos0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "optimized backend: the sliding-window cache no longer holds the positions "
                        "before %u",
                        pos0);
    const size_t n_vocab = (size_t)s->model->hp.n_vocab, n_embd = (size_t)s->model->hp.n_embd;
    const size_t slice = s->ring_blocks ? s->ring_slice : OPT_MAX_BATCH;
    syn_status st = grow_own_blocks(s, pos0 + (uint32_t)n);
    if (st == SYN_OK) st = make_ring(s);
    for (size_t start = 0; st == SYN_OK && start < n; start += slice) {
        const size_t len = n - start < slice ? n - start : slice;
        for (size_t t = 0; t < len; t++) {
            s->ctx_pos[t] = pos0 + (uint32_t)(start + t);
            s->ctx_blocks[t] = s->own_blocks;
            s->ctx_ring[t] = s->ring_table;
            s->ctx_want[t] = !hidden && (all_logits || start + t == n - 1);
            s->ctx_hidden[t] = true;
            if (s->ctx_rstates) s->ctx_rstates[t] = s->own_rstate;
        }
        const syn_batch b = {
            .n = len,
            .tokens = tokens + start,
            .pos = s->ctx_pos,
            .blocks = s->ctx_blocks,
            .want_logits = s->ctx_want,
            .logits = all_logits ? logits + start * n_vocab : logits,
            .want_hidden = hidden ? s->ctx_hidden : NULL,
            .hidden = hidden ? hidden + start * n_embd : NULL,
            .rstates = s->ctx_rstates,
        };
        st = forward_tokens(s, &b, s->ring_blocks ? s->ctx_ring : NULL);
    }
    /* after a failure the state is partly advanced: only a restart is sound */
    s->own_rpos = st == SYN_OK ? pos0 + (uint32_t)n : UINT32_MAX;
    /* The ring keeps its last ring_blocks blocks of positions, of all this call may have written
     * even when it failed part way; positions from pos0 on are held only after a success. */
    if (pos0 == 0) s->kv_lo = 0; /* a new sequence */
    const uint32_t end = pos0 + (uint32_t)n, last = (end - 1) / SYN_KV_BLOCK;
    if (s->ring_blocks && last >= s->ring_blocks) {
        const uint32_t oldest = (last - s->ring_blocks + 1) * SYN_KV_BLOCK;
        s->kv_lo = oldest > s->kv_lo ? oldest : s->kv_lo;
    }
    s->kv_hi = st == SYN_OK ? end : pos0;
    return st;
}

static syn_status opt_forward(void *opaque, const int32_t *tokens, size_t n, uint32_t pos0,
                              float *logits, bool all_logits) {
    return run_own(opaque, tokens, n, pos0, NULL, logits, all_logits);
}

static syn_status opt_forward_hidden(void *opaque, const int32_t *tokens, size_t n, uint32_t pos0,
                                     float *hidden) {
    return run_own(opaque, tokens, n, pos0, hidden, NULL, false);
}

static syn_step_times *opt_step_times(void *opaque) { return ((opt_state *)opaque)->times; }

const syn_backend_ops syn_optimized_backend = {
    .name = "optimized",
    .create = opt_create,
    .destroy = opt_destroy,
    .forward = opt_forward,
    .forward_hidden = opt_forward_hidden,
    .can_resume = opt_can_resume,
    .kv_layer_bytes = opt_kv_layer_bytes,
    .kv_block_bytes = opt_kv_block_bytes,
    .recurrent_state_bytes = opt_recurrent_state_bytes,
    .ring_blocks = opt_ring_blocks,
    .forward_batch = opt_forward_batch,
    .step_times = opt_step_times,
};

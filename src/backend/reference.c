/*
 * reference.c: the reference backend, the oracle every faster path is compared with.
 *
 * Plain scalar float32, one token at a time, written to be read: weights are dequantized one row
 * at a time into float32, activations stay float32, dot products and norms accumulate in double.
 * The KV cache is float32 and grows on demand (doubling) up to the context size, so a short
 * request never pays for the model's full context.
 *
 * One block of any architecture of the table (src/model/arch.h), for a token at position pos (x
 * is the residual stream [n_embd], the embedding row times embd_scale; a tensor the model lacks
 * is skipped):
 *   h = rmsnorm(x) * attn_norm
 *   q = Wq h + bq [n_head][head_dim],  k = Wk h + bk,  v = Wv h + bv [n_head_kv][head_dim]
 *   q_i = rmsnorm(q_i) * q_norm, k_j = rmsnorm(k_j) * k_norm for each head (qwen3)
 *   q, k = rope(q, k, pos) on the first n_rot dims of each head (the rest pass unchanged): NeoX
 *          pairs (i, i + n_rot/2) or adjacent pairs (2i, 2i + 1), pair i at angle
 *          pos * freq_scale * base^(-2i/n_rot) / factor[i] (rope_freqs, or phi3's LongRoPE short
 *          or long factors by n_ctx), cos and sin times rope_attn_factor;  cache k, v at pos
 *          (a local layer: base rope_freq_base_swa, no factors, no scaling)
 *   for each query head i (kv head i / (n_head / n_head_kv)):
 *       a_i = softmax(q_i . k_t * attn_scale, t = t0..pos) . v_t
 *       (t0 = 0, or pos - swa_window + 1 in a local layer)
 *   x = x + rmsnorm(Wo a) * post_attn_norm        (without post_attn_norm: x + Wo a)
 *   h = rmsnorm(x) * ffn_norm
 *   x = x + rmsnorm(Wdown (act(Wgate h) * (Wup h))) * post_ffn_norm   (act: silu, or gelu.h's)
 * and at the end logits = Woutput (rmsnorm(x) * output_norm), soft-capped when the model says so
 * (forward_hidden stops at rmsnorm(x) * output_norm: the hidden state embeddings pool).
 * A local layer's cache is a ring of swa_window positions (position t in slot t % swa_window).
 * phi3's fused q | k | v and gate | up matrices arrive as the separate views (model.h), so its
 * block is this one.
 * qwen35: RoPE covers the first n_rot of each head; Wq also yields a gate per head, the attention
 * output a_i *= sigmoid(gate_i); the recurrent layers' mixer is a gated delta net
 * (reference_delta_net.c), whose state this backend's one sequence keeps beside the KV cache.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/delta_net.h"
#include "backend/gelu.h"
#include "core/error.h"

typedef struct ref_state {
    const struct syn_model *model;
    uint32_t n_ctx;  /* positions the context may hold */
    uint32_t kv_cap; /* positions allocated so far (grows up to n_ctx) */
    /* Positions [kv_lo, kv_hi) are held by every layer (a local layer's ring overwrites the
     * positions before the window): a sequence can go on at pos only if it attends to none
     * before kv_lo. */
    uint32_t kv_lo, kv_hi;
    float **k_cache; /* [n_layer] -> [kv_positions(layer)][n_head_kv * head_dim] */
    float **v_cache; /* [n_layer] -> [kv_positions(layer)][n_head_kv * head_dim] */
    syn_ref_dn *dn;  /* the recurrent layers' scratch and state (qwen35), else NULL */
    uint32_t dn_pos; /* the position dn's state stands at: a forward must start there or at 0 */
    /* scratch, sized once */
    float *x;           /* [n_embd] residual stream */
    float *h;           /* [n_embd] normalised input of a sub-layer */
    float *q;           /* [q_dim] */
    float *qg;          /* [2 * q_dim] q_gate's query and gate rows, else NULL */
    float *attn;        /* [q_dim] attention output, all heads */
    float *gate;        /* [n_ff] */
    float *up;          /* [n_ff] */
    float *scores;      /* [n_ctx] attention scores of one head (grows with kv_cap) */
    float *row;         /* [max(n_embd, n_ff, q_dim)] one dequantized weight row */
    float *rope_factor; /* [n_rot / 2] syn_model_rope_factors (or ones) / rope_freq_scale */
    float *rope_ones;   /* [n_rot / 2] ones: a local layer's factors */
} ref_state;

/* Positions layer l's cache holds: kv_cap, at most the window in a local layer, none in a
 * recurrent one. */
static uint32_t kv_positions(const ref_state *s, int32_t l) {
    const syn_hparams *hp = &s->model->hp;
    if (syn_layer_recurrent(hp, l)) return 0;
    if (syn_layer_is_local(hp, l) && (uint32_t)hp->swa_window < s->kv_cap)
        return (uint32_t)hp->swa_window;
    return s->kv_cap;
}

/* Layer l's cache slot of position pos. */
static size_t kv_slot(const ref_state *s, int32_t l, uint32_t pos) {
    const syn_hparams *hp = &s->model->hp;
    return syn_layer_is_local(hp, l) ? pos % (uint32_t)hp->swa_window : pos;
}

static void ref_destroy(void *opaque) {
    ref_state *s = opaque;
    if (!s) return;
    if (s->k_cache)
        for (int32_t l = 0; l < s->model->hp.n_layer; l++)
            free(s->k_cache[l]);
    if (s->v_cache)
        for (int32_t l = 0; l < s->model->hp.n_layer; l++)
            free(s->v_cache[l]);
    free(s->k_cache);
    free(s->v_cache);
    free(s->x);
    free(s->h);
    free(s->q);
    free(s->qg);
    syn_ref_dn_free(s->dn);
    free(s->attn);
    free(s->gate);
    free(s->up);
    free(s->scores);
    free(s->row);
    free(s->rope_factor);
    free(s->rope_ones);
    free(s);
}

static syn_status ref_create(const struct syn_model *model, const syn_backend_config *cfg,
                             void **out) {
    /* Single-threaded by design, and uses no kernels, so n_threads and isa do not apply. */
    if (cfg->kv_type != SYN_KV_F32)
        return syn_fail(SYN_ERR_UNSUPPORTED, "the reference backend keeps a float32 KV cache only");
    const syn_hparams *hp = &model->hp;
    ref_state *s = calloc(1, sizeof *s);
    if (!s) return syn_fail(SYN_ERR_NO_MEMORY, "reference backend: out of memory");
    s->model = model;
    s->n_ctx = cfg->n_ctx;
    int32_t widest = hp->n_ff > hp->n_embd ? hp->n_ff : hp->n_embd;
    if (hp->q_dim > widest) widest = hp->q_dim;
    s->k_cache = calloc((size_t)hp->n_layer, sizeof *s->k_cache);
    s->v_cache = calloc((size_t)hp->n_layer, sizeof *s->v_cache);
    s->x = malloc(sizeof(float) * (size_t)hp->n_embd);
    s->h = malloc(sizeof(float) * (size_t)hp->n_embd);
    s->q = malloc(sizeof(float) * (size_t)hp->q_dim);
    s->attn = malloc(sizeof(float) * (size_t)hp->q_dim);
    s->gate = malloc(sizeof(float) * (size_t)hp->n_ff);
    s->up = malloc(sizeof(float) * (size_t)hp->n_ff);
    s->row = malloc(sizeof(float) * (size_t)widest);
    s->rope_factor = malloc(sizeof(float) * (size_t)(hp->n_rot / 2));
    s->rope_ones = malloc(sizeof(float) * (size_t)(hp->n_rot / 2));
    if (hp->q_gate) s->qg = malloc(sizeof(float) * 2 * (size_t)hp->q_dim);
    syn_status st = syn_recurrent_layers(hp) ? syn_ref_dn_new(model, &s->dn) : SYN_OK;
    if (st != SYN_OK) {
        ref_destroy(s);
        return st;
    }
    if (!s->k_cache || !s->v_cache || !s->x || !s->h || !s->q || !s->attn || !s->gate || !s->up ||
        !s->row || !s->rope_factor || !s->rope_ones || (hp->q_gate && !s->qg)) {
        ref_destroy(s);
        return syn_fail(SYN_ERR_NO_MEMORY, "reference backend: out of memory");
    }
    const syn_tensor *factors = syn_model_rope_factors(model, cfg->n_ctx);
    if (factors->data)
        syn_tensor_row(factors, 0, s->rope_factor);
    else
        for (int32_t i = 0; i < hp->n_rot / 2; i++)
            s->rope_factor[i] = 1.0f;
    for (int32_t i = 0; i < hp->n_rot / 2; i++) {
        s->rope_factor[i] /= hp->rope_freq_scale; /* pos * scale / f = pos / (f / scale) */
        s->rope_ones[i] = 1.0f;
    }
    *out = s;
    return SYN_OK;
}

/* Makes room for positions [0, n_positions) in every layer's cache. */
static syn_status ensure_kv_capacity(ref_state *s, uint32_t n_positions) {
    if (n_positions <= s->kv_cap) return SYN_OK;
    uint32_t cap = s->kv_cap ? s->kv_cap : 64;
    while (cap < n_positions)
        cap = cap > s->n_ctx / 2 ? s->n_ctx : cap * 2;
    if (cap > s->n_ctx) cap = s->n_ctx;
    const syn_hparams *hp = &s->model->hp;
    const uint32_t old_cap = s->kv_cap;
    s->kv_cap = cap;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if (syn_layer_recurrent(hp, l)) continue;
        const size_t bytes = sizeof(float) * (size_t)kv_positions(s, l) * (size_t)hp->kv_dim;
        float *k = realloc(s->k_cache[l], bytes);
        if (k) s->k_cache[l] = k;
        float *v = realloc(s->v_cache[l], bytes);
        if (v) s->v_cache[l] = v;
        if (!k || !v) {
            s->kv_cap = old_cap; /* the layers already grown keep their larger buffers */
            return syn_fail(SYN_ERR_NO_MEMORY, "reference backend: KV cache of %u positions", cap);
        }
    }
    float *scores = realloc(s->scores, sizeof(float) * cap);
    if (!scores) return syn_fail(SYN_ERR_NO_MEMORY, "reference backend: out of memory");
    s->scores = scores;
    return SYN_OK;
}

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], for x, out [n]. */
static void rmsnorm(float *out, const float *x, const syn_tensor *weight, float eps, float *row) {
    int64_t n = weight->ne[0];
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum_sq += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(sum_sq / (double)n + eps));
    syn_tensor_row(weight, 0, row);
    for (int64_t i = 0; i < n; i++)
        out[i] = x[i] * scale * row[i];
}

/* y[n_out] = W x[n_in] (+ bias[n_out] when bias is not NULL and the model has it),
 * W = {n_in, n_out}. */
static void matvec(float *y, const syn_tensor *w, const float *x, const syn_tensor *bias,
                   float *row) {
    int64_t n_in = w->ne[0], n_out = w->ne[1];
    for (int64_t r = 0; r < n_out; r++) {
        syn_tensor_row(w, r, row);
        double acc = 0.0;
        for (int64_t i = 0; i < n_in; i++)
            acc += (double)row[i] * x[i];
        y[r] = (float)acc;
    }
    if (bias && bias->data) {
        syn_tensor_row(bias, 0, row);
        for (int64_t r = 0; r < n_out; r++)
            y[r] += row[r];
    }
}

/* Rotates the first hp->n_rot dims of each head of vec [n_heads][head_dim] by position pos: pair
 * i (of n_rot/2) is (i, i + n_rot/2) in the NeoX layout, (2i, 2i + 1) in the adjacent one, at
 * angle pos * base^(-2i/n_rot) / factor[i] (factor: rope_factor, which holds the frequency scale,
 * or a local layer's ones), with cos and sin scaled by rope_attn_factor. */
static void rope(float *vec, int32_t n_heads, const syn_hparams *hp, uint32_t pos, float base,
                 const float *factor) {
    const int32_t head_dim = hp->head_dim, n_rot = hp->n_rot, half = n_rot / 2;
    const syn_rope_layout layout = hp->rope_layout;
    const double mscale = hp->rope_attn_factor;
    for (int32_t i = 0; i < half; i++) {
        double angle = (double)pos * pow((double)base, -2.0 * i / n_rot) / factor[i];
        float c = (float)(cos(angle) * mscale), sn = (float)(sin(angle) * mscale);
        int32_t a = layout == SYN_ROPE_NEOX ? i : 2 * i,
                b = layout == SYN_ROPE_NEOX ? i + half : 2 * i + 1;
        for (int32_t h = 0; h < n_heads; h++) {
            float *p = vec + (size_t)h * head_dim;
            float x0 = p[a], x1 = p[b];
            p[a] = x0 * c - x1 * sn;
            p[b] = x0 * sn + x1 * c;
        }
    }
}

/* Each head of vec [n_heads][head_dim] RMS-normed in place with weight [head_dim], when the model
 * has the weight. */
static void head_norms(float *vec, int32_t n_heads, const syn_tensor *weight, float eps,
                       float *row) {
    if (!weight->data) return;
    int64_t hd = weight->ne[0];
    for (int32_t h = 0; h < n_heads; h++)
        rmsnorm(vec + h * hd, vec + h * hd, weight, eps, row);
}

/* Grouped-query attention of one token at position pos over cached positions t0..pos of layer l
 * (t0 = 0, or the window's first position in a local layer). */
static void attention(ref_state *s, int32_t layer, uint32_t pos) {
    const syn_hparams *hp = &s->model->hp;
    int32_t hd = hp->head_dim, kvd = hp->kv_dim, group = hp->n_head / hp->n_head_kv;
    const float *k_cache = s->k_cache[layer], *v_cache = s->v_cache[layer];
    const double scale = hp->attn_scale;
    const uint32_t t0 = syn_layer_is_local(hp, layer) && pos >= (uint32_t)hp->swa_window
                            ? pos - (uint32_t)hp->swa_window + 1
                            : 0;
    for (int32_t head = 0; head < hp->n_head; head++) {
        const float *q = s->q + (size_t)head * hd;
        int32_t kv_head = head / group;
        float max_score = -INFINITY;
        for (uint32_t t = t0; t <= pos; t++) {
            const float *k = k_cache + kv_slot(s, layer, t) * kvd + (size_t)kv_head * hd;
            double dot = 0.0;
            for (int32_t i = 0; i < hd; i++)
                dot += (double)q[i] * k[i];
            s->scores[t] = (float)(dot * scale);
            if (s->scores[t] > max_score) max_score = s->scores[t];
        }
        double sum = 0.0;
        for (uint32_t t = t0; t <= pos; t++) {
            s->scores[t] = expf(s->scores[t] - max_score);
            sum += s->scores[t];
        }
        float *out = s->attn + (size_t)head * hd;
        for (int32_t i = 0; i < hd; i++) {
            double acc = 0.0;
            for (uint32_t t = t0; t <= pos; t++)
                acc += (double)s->scores[t] *
                       v_cache[kv_slot(s, layer, t) * kvd + (size_t)kv_head * hd + i];
            out[i] = (float)(acc / sum);
        }
    }
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* h = the attention mixer of layer l for the normed input s->h of a token at position pos (before
 * any post-attention norm). */
static void attention_mixer(ref_state *s, int32_t l, uint32_t pos) {
    const syn_hparams *hp = &s->model->hp;
    const syn_layer *L = &s->model->layers[l];
    const int32_t kvd = hp->kv_dim, hd = hp->head_dim;
    float *k = s->k_cache[l] + kv_slot(s, l, pos) * kvd;
    float *v = s->v_cache[l] + kv_slot(s, l, pos) * kvd;
    const bool local = syn_layer_is_local(hp, l);
    const float base = local ? hp->rope_freq_base_swa : hp->rope_freq_base;
    const float *factor = local ? s->rope_ones : s->rope_factor;
    if (hp->q_gate) { /* per head: hd query rows, then hd gate rows */
        matvec(s->qg, &L->wq, s->h, NULL, s->row);
        for (int32_t head = 0; head < hp->n_head; head++)
            memcpy(s->q + (size_t)head * hd, s->qg + 2 * (size_t)head * hd, sizeof(float) * hd);
    } else {
        matvec(s->q, &L->wq, s->h, &L->bq, s->row);
    }
    matvec(k, &L->wk, s->h, &L->bk, s->row);
    matvec(v, &L->wv, s->h, &L->bv, s->row);
    head_norms(s->q, hp->n_head, &L->q_norm, hp->rms_norm_eps, s->row);
    head_norms(k, hp->n_head_kv, &L->k_norm, hp->rms_norm_eps, s->row);
    rope(s->q, hp->n_head, hp, pos, base, factor);
    rope(k, hp->n_head_kv, hp, pos, base, factor);
    attention(s, l, pos);
    if (hp->q_gate)
        for (int32_t head = 0; head < hp->n_head; head++)
            for (int32_t i = 0; i < hd; i++) {
                const float g = s->qg[2 * (size_t)head * hd + (size_t)hd + (size_t)i];
                s->attn[(size_t)head * hd + (size_t)i] *= 1.0f / (1.0f + expf(-g));
            }
    matvec(s->h, &L->wo, s->attn, NULL, s->row);
}

/* One token through the whole model; its final normed hidden state [n_embd] into hidden and its
 * logits [n_vocab] into logits, each when not NULL. */
static void forward_token(ref_state *s, int32_t token, uint32_t pos, float *hidden, float *logits) {
    const struct syn_model *m = s->model;
    const syn_hparams *hp = &m->hp;

    syn_tensor_row(&m->tok_embd, token, s->x);
    for (int32_t i = 0; i < hp->n_embd; i++)
        s->x[i] *= hp->embd_scale;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const syn_layer *L = &m->layers[l];
        rmsnorm(s->h, s->x, &L->attn_norm, hp->rms_norm_eps, s->row);
        if (syn_layer_recurrent(hp, l))
            syn_ref_dn_mixer(s->dn, l, s->h, s->h);
        else
            attention_mixer(s, l, pos);
        if (L->post_attn_norm.data)
            rmsnorm(s->h, s->h, &L->post_attn_norm, hp->rms_norm_eps, s->row);
        for (int32_t i = 0; i < hp->n_embd; i++)
            s->x[i] += s->h[i];

        rmsnorm(s->h, s->x, &L->ffn_norm, hp->rms_norm_eps, s->row);
        matvec(s->gate, &L->w_gate, s->h, NULL, s->row);
        matvec(s->up, &L->w_up, s->h, NULL, s->row);
        if (hp->ffn_act == SYN_FFN_GELU_TANH)
            syn_geglu_fp16(s->gate, s->up, hp->n_ff);
        else
            for (int32_t i = 0; i < hp->n_ff; i++)
                s->gate[i] = silu(s->gate[i]) * s->up[i];
        matvec(s->h, &L->w_down, s->gate, NULL, s->row);
        if (L->post_ffn_norm.data) rmsnorm(s->h, s->h, &L->post_ffn_norm, hp->rms_norm_eps, s->row);
        for (int32_t i = 0; i < hp->n_embd; i++)
            s->x[i] += s->h[i];
    }
    if (!hidden && !logits) return;
    rmsnorm(s->h, s->x, &m->output_norm, hp->rms_norm_eps, s->row);
    if (hidden) memcpy(hidden, s->h, sizeof(float) * (size_t)hp->n_embd);
    if (!logits) return;
    matvec(logits, &m->output, s->h, NULL, s->row);
    if (hp->final_logit_softcap > 0.0f)
        for (int32_t i = 0; i < hp->n_vocab; i++)
            logits[i] = hp->final_logit_softcap * tanhf(logits[i] / hp->final_logit_softcap);
}

/* Whether the cache holds every position a token at pos attends to (and a recurrent state, which
 * only moves forward, stands at pos or restarts there at 0). */
static bool ref_can_resume(const void *opaque, uint32_t pos) {
    const ref_state *s = opaque;
    const uint32_t window = (uint32_t)s->model->hp.swa_window;
    if (pos > s->kv_hi) return false;
    if (s->dn && pos != 0 && pos != s->dn_pos) return false;
    return pos == 0 || s->kv_lo == 0 ||
           (window > 0 && pos >= window && s->kv_lo <= pos - window + 1);
}

static size_t ref_kv_layer_bytes(const void *opaque, int32_t layer) {
    const ref_state *s = opaque;
    return 2 * sizeof(float) * (size_t)kv_positions(s, layer) * (size_t)s->model->hp.kv_dim;
}

/* forward and forward_hidden: hidden [n][n_embd] when not NULL, else logits as forward's. */
static syn_status run_tokens(ref_state *s, const int32_t *tokens, size_t n, uint32_t pos0,
                             float *hidden, float *logits, bool all_logits) {
    if (s->dn && pos0 != 0 && pos0 != s->dn_pos)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "reference backend: %s's recurrent state stands at position %u and cannot "
                        "be rewound to %u (only restarted from 0)",
                        s->model->arch->name, s->dn_pos, pos0);
    if (!ref_can_resume(s, pos0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                        "reference backend: the sliding-window cache no longer holds the positions "
                        "before %u",
                        pos0);
    syn_status st = ensure_kv_capacity(s, pos0 + (uint32_t)n);
    if (st != SYN_OK) return st;
    if (s->dn) {
        if (pos0 == 0) syn_ref_dn_reset(s->dn);
        s->dn_pos = pos0 + (uint32_t)n;
    }
    const size_t n_vocab = (size_t)s->model->hp.n_vocab, n_embd = (size_t)s->model->hp.n_embd;
    for (size_t i = 0; i < n; i++) {
        bool last = i + 1 == n;
        float *out = hidden || !(all_logits || last) ? NULL
                     : all_logits                    ? logits + i * n_vocab
                                                     : logits;
        forward_token(s, tokens[i], pos0 + (uint32_t)i, hidden ? hidden + i * n_embd : NULL, out);
    }
    const uint32_t window = (uint32_t)s->model->hp.swa_window;
    if (pos0 == 0) s->kv_lo = 0; /* a new sequence */
    s->kv_hi = pos0 + (uint32_t)n;
    if (window > 0 && s->kv_hi > window && s->kv_hi - window > s->kv_lo)
        s->kv_lo = s->kv_hi - window;
    return SYN_OK;
}

static syn_status ref_forward(void *opaque, const int32_t *tokens, size_t n, uint32_t pos0,
                              float *logits, bool all_logits) {
    return run_tokens(opaque, tokens, n, pos0, NULL, logits, all_logits);
}

static syn_status ref_forward_hidden(void *opaque, const int32_t *tokens, size_t n, uint32_t pos0,
                                     float *hidden) {
    return run_tokens(opaque, tokens, n, pos0, hidden, NULL, false);
}

const syn_backend_ops syn_reference_backend = {
    .name = "reference",
    .create = ref_create,
    .destroy = ref_destroy,
    .forward = ref_forward,
    .forward_hidden = ref_forward_hidden,
    .can_resume = ref_can_resume,
    .kv_layer_bytes = ref_kv_layer_bytes,
};

/*
 * reference_delta_net.c: the reference backend's gated delta net mixer (delta_net.h), written to
 * be read: plain scalar float32 values, weights dequantized a row at a time, dot products and
 * norms accumulated in double, one token at a time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/delta_net.h"
#include "core/error.h"

struct syn_ref_dn {
    const struct syn_model *model;
    float *state; /* [syn_dn_state_floats]: the one sequence's state */
    float *m;     /* [conv_dim] projection, then the convolved q | k | v */
    float *z;     /* [inner] */
    float *beta;  /* [nv] */
    float *alpha; /* [nv] */
    float *o;     /* [inner] the heads' outputs */
    float *vecs;  /* [nv + nv + dv] one layer's ssm_dt_bias, ssm_a, ssm_norm */
    float *row;   /* [max(n_embd, inner, conv_dim, K)] one dequantized weight row */
};

size_t syn_dn_state_floats(const syn_hparams *hp) {
    const size_t n_rec = (size_t)(hp->n_layer - hp->n_attn_layers);
    return n_rec * ((size_t)(hp->ssm_conv_kernel - 1) * (size_t)hp->ssm_conv_dim +
                    (size_t)hp->ssm_n_v_heads * (size_t)hp->ssm_head_k * (size_t)hp->ssm_head_v);
}

/* The recurrent layers before layer: all but the attention layers, every interval-th. */
static size_t recurrent_index(const syn_hparams *hp, int32_t layer) {
    return (size_t)(layer - layer / hp->full_attn_interval);
}

size_t syn_dn_conv_offset(const syn_hparams *hp, int32_t layer) {
    const size_t conv = (size_t)(hp->ssm_conv_kernel - 1) * (size_t)hp->ssm_conv_dim;
    const size_t mats = (size_t)hp->ssm_n_v_heads * (size_t)hp->ssm_head_k * (size_t)hp->ssm_head_v;
    return recurrent_index(hp, layer) * (conv + mats);
}

size_t syn_dn_matrix_offset(const syn_hparams *hp, int32_t layer) {
    return syn_dn_conv_offset(hp, layer) +
           (size_t)(hp->ssm_conv_kernel - 1) * (size_t)hp->ssm_conv_dim;
}

void syn_ref_dn_free(syn_ref_dn *d) {
    if (!d) return;
    free(d->state);
    free(d->m);
    free(d->z);
    free(d->beta);
    free(d->alpha);
    free(d->o);
    free(d->vecs);
    free(d->row);
    free(d);
}

syn_status syn_ref_dn_new(const struct syn_model *model, syn_ref_dn **out) {
    const syn_hparams *hp = &model->hp;
    syn_ref_dn *d = calloc(1, sizeof *d);
    if (!d) return syn_fail(SYN_ERR_NO_MEMORY, "reference backend: out of memory");
    d->model = model;
    size_t widest = (size_t)hp->n_embd;
    const int32_t dims[] = {hp->ssm_inner, hp->ssm_conv_dim, hp->ssm_conv_kernel};
    for (size_t i = 0; i < 3; i++)
        widest = (size_t)dims[i] > widest ? (size_t)dims[i] : widest;
    d->state = calloc(syn_dn_state_floats(hp), sizeof(float));
    d->m = malloc(sizeof(float) * (size_t)hp->ssm_conv_dim);
    d->z = malloc(sizeof(float) * (size_t)hp->ssm_inner);
    d->beta = malloc(sizeof(float) * (size_t)hp->ssm_n_v_heads);
    d->alpha = malloc(sizeof(float) * (size_t)hp->ssm_n_v_heads);
    d->o = malloc(sizeof(float) * (size_t)hp->ssm_inner);
    d->vecs = malloc(sizeof(float) * (2 * (size_t)hp->ssm_n_v_heads + (size_t)hp->ssm_head_v));
    d->row = malloc(sizeof(float) * widest);
    if (!d->state || !d->m || !d->z || !d->beta || !d->alpha || !d->o || !d->vecs || !d->row) {
        syn_ref_dn_free(d);
        return syn_fail(SYN_ERR_NO_MEMORY, "reference backend: out of memory for the delta net");
    }
    *out = d;
    return SYN_OK;
}

void syn_ref_dn_reset(syn_ref_dn *d) {
    memset(d->state, 0, sizeof(float) * syn_dn_state_floats(&d->model->hp));
}

/* y[n_out] = W x[n_in], W = {n_in, n_out}. */
static void dn_matvec(float *y, const syn_tensor *w, const float *x, float *row) {
    for (int64_t r = 0; r < w->ne[1]; r++) {
        syn_tensor_row(w, r, row);
        double acc = 0.0;
        for (int64_t i = 0; i < w->ne[0]; i++)
            acc += (double)row[i] * x[i];
        y[r] = (float)acc;
    }
}

static float dn_silu(float x) { return x / (1.0f + expf(-x)); }

/* x[n] / max(|x|, eps) in place. */
static void l2_normalize(float *x, int32_t n, float eps) {
    double sum_sq = 0.0;
    for (int32_t i = 0; i < n; i++)
        sum_sq += (double)x[i] * x[i];
    const double norm = sqrt(sum_sq);
    const float scale = (float)(1.0 / (norm > eps ? norm : eps));
    for (int32_t i = 0; i < n; i++)
        x[i] *= scale;
}

void syn_ref_dn_mixer(syn_ref_dn *d, int32_t layer, const float *h, float *out) {
    const struct syn_model *mdl = d->model;
    const syn_hparams *hp = &mdl->hp;
    const syn_layer *L = &mdl->layers[layer];
    const int32_t K = hp->ssm_conv_kernel, C = hp->ssm_conv_dim, nk = hp->ssm_n_k_heads,
                  nv = hp->ssm_n_v_heads, dk = hp->ssm_head_k, dv = hp->ssm_head_v;
    float *conv_state = d->state + syn_dn_conv_offset(hp, layer); /* [K-1][C], oldest first */
    float *S = d->state + syn_dn_matrix_offset(hp, layer);        /* [nv][dk][dv] */

    dn_matvec(d->m, &L->ssm_qkv, h, d->row);
    dn_matvec(d->z, &L->ssm_z, h, d->row);
    dn_matvec(d->beta, &L->ssm_beta, h, d->row);
    dn_matvec(d->alpha, &L->ssm_alpha, h, d->row);

    /* Causal depthwise convolution over the K-1 last inputs and this one, then silu. */
    for (int32_t ch = 0; ch < C; ch++) {
        syn_tensor_row(&L->ssm_conv, ch, d->row);
        double acc = (double)d->row[K - 1] * d->m[ch];
        for (int32_t j = 0; j < K - 1; j++)
            acc += (double)d->row[j] * conv_state[(size_t)j * C + ch];
        for (int32_t j = 0; j + 1 < K - 1; j++)
            conv_state[(size_t)j * C + ch] = conv_state[(size_t)(j + 1) * C + ch];
        if (K > 1) conv_state[(size_t)(K - 2) * C + ch] = d->m[ch];
        d->m[ch] = dn_silu((float)acc);
    }
    float *q = d->m, *k = d->m + (size_t)nk * dk, *v = d->m + 2 * (size_t)nk * dk;
    for (int32_t i = 0; i < nk; i++) {
        l2_normalize(q + (size_t)i * dk, dk, hp->rms_norm_eps);
        l2_normalize(k + (size_t)i * dk, dk, hp->rms_norm_eps);
    }
    const float q_scale = (float)(1.0 / sqrt((double)dk));
    for (int32_t i = 0; i < nk * dk; i++)
        q[i] *= q_scale;

    float *dt_bias = d->vecs, *a = d->vecs + nv, *norm_w = d->vecs + 2 * (size_t)nv;
    syn_tensor_row(&L->ssm_dt_bias, 0, dt_bias);
    syn_tensor_row(&L->ssm_a, 0, a);
    syn_tensor_row(&L->ssm_norm, 0, norm_w);
    for (int32_t hv = 0; hv < nv; hv++) {
        const float *qh = q + (size_t)(hv % nk) * dk, *kh = k + (size_t)(hv % nk) * dk;
        const float *vh = v + (size_t)hv * dv;
        float *Sh = S + (size_t)hv * dk * dv, *oh = d->o + (size_t)hv * dv;
        const float x = d->alpha[hv] + dt_bias[hv];
        const float softplus = x > 20.0f ? x : log1pf(expf(x));
        const float decay = expf(softplus * a[hv]);
        const float beta = 1.0f / (1.0f + expf(-d->beta[hv]));
        for (size_t i = 0; i < (size_t)dk * dv; i++)
            Sh[i] *= decay;
        for (int32_t j = 0; j < dv; j++) {
            double sk = 0.0;
            for (int32_t i = 0; i < dk; i++)
                sk += (double)Sh[(size_t)i * dv + j] * kh[i];
            const float delta = beta * (vh[j] - (float)sk);
            for (int32_t i = 0; i < dk; i++)
                Sh[(size_t)i * dv + j] += kh[i] * delta;
        }
        double sum_sq = 0.0;
        for (int32_t j = 0; j < dv; j++) {
            double acc = 0.0;
            for (int32_t i = 0; i < dk; i++)
                acc += (double)Sh[(size_t)i * dv + j] * qh[i];
            oh[j] = (float)acc;
            sum_sq += acc * acc;
        }
        /* gated RMS norm */
        const float scale = (float)(1.0 / sqrt(sum_sq / dv + hp->rms_norm_eps));
        for (int32_t j = 0; j < dv; j++)
            oh[j] = oh[j] * scale * norm_w[j] * dn_silu(d->z[(size_t)hv * dv + j]);
    }
    dn_matvec(out, &L->ssm_out, d->o, d->row);
}

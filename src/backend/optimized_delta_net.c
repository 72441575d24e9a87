/*
 * optimized_delta_net.c: the optimized backend's float32 steps of the gated delta net
 * (delta_net.h), between its matrix jobs (optimized.c): the causal convolution over channel
 * ranges, and the recurrence per V head.
 *
 * Determinism: each step runs the tokens of a slice in order, token by token, with fixed-order
 * loops (compiled once, without ISA flags, so every tier runs the same code). A token's values
 * depend only on its sequence's state and its own inputs, so batched prefill is bitwise equal to
 * decoding one token at a time, whatever else shares the batch and however chunks fall on threads.
 * The state matrix S_h [dk][dv] is walked row by row (key i), the value index innermost, so the
 * loops run over contiguous memory.
 */
#include <math.h>
#include <string.h>

#include "backend/delta_net.h"

static float silu_f(float x) { return x / (1.0f + expf(-x)); }

void syn_dn_conv(const syn_hparams *hp, int32_t layer, const syn_dn_layer *P, const syn_dn_seqs *q,
                 float *m, int32_t c0, int32_t c1) {
    const int32_t K = hp->ssm_conv_kernel, C = hp->ssm_conv_dim;
    const size_t off = syn_dn_conv_offset(hp, layer);
    for (size_t t = 0; t < q->n; t++) {
        float *st = q->states[t] + off; /* [K-1][C], the oldest input first */
        float *row = m + t * (size_t)C;
        if (q->pos[t] == 0)
            for (int32_t j = 0; j < K - 1; j++)
                memset(st + (size_t)j * C + c0, 0, sizeof(float) * (size_t)(c1 - c0));
        for (int32_t ch = c0; ch < c1; ch++) {
            const float *w = P->conv + (size_t)ch * K;
            float acc = 0.0f;
            for (int32_t j = 0; j < K - 1; j++)
                acc += w[j] * st[(size_t)j * C + ch];
            acc += w[K - 1] * row[ch];
            for (int32_t j = 0; j + 1 < K - 1; j++)
                st[(size_t)j * C + ch] = st[(size_t)(j + 1) * C + ch];
            if (K > 1) st[(size_t)(K - 2) * C + ch] = row[ch];
            row[ch] = silu_f(acc);
        }
    }
}

/* dst[n] = src[n] * scale / max(|src|, eps). */
static void l2_norm_scaled(float *dst, const float *src, int32_t n, float eps, float scale) {
    double sum_sq = 0.0;
    for (int32_t i = 0; i < n; i++)
        sum_sq += (double)src[i] * src[i];
    const double norm = sqrt(sum_sq);
    const float inv = (float)(1.0 / (norm > eps ? norm : eps));
    for (int32_t i = 0; i < n; i++)
        dst[i] = src[i] * inv * scale;
}

void syn_dn_head(const syn_hparams *hp, int32_t layer, const syn_dn_layer *P, const syn_dn_seqs *q,
                 int32_t h, const float *c, const float *z, const float *beta, const float *alpha,
                 float *out, float *scratch) {
    const int32_t C = hp->ssm_conv_dim, nk = hp->ssm_n_k_heads, nv = hp->ssm_n_v_heads,
                  dk = hp->ssm_head_k, dv = hp->ssm_head_v, kh = h % nk;
    const size_t inner = (size_t)hp->ssm_inner, S_elems = (size_t)dk * dv;
    const size_t off = syn_dn_matrix_offset(hp, layer) + (size_t)h * S_elems;
    const float eps = hp->rms_norm_eps, q_scale = 1.0f / sqrtf((float)dk);
    float *qv = scratch, *kv = scratch + dk, *sk = scratch + 2 * dk, *o = sk + dv;
    for (size_t t = 0; t < q->n; t++) {
        float *S = q->states[t] + off;
        if (q->pos[t] == 0) memset(S, 0, sizeof(float) * S_elems);
        const float *row = c + t * (size_t)C;
        l2_norm_scaled(qv, row + (size_t)kh * dk, dk, eps, q_scale);
        l2_norm_scaled(kv, row + (size_t)(nk + kh) * dk, dk, eps, 1.0f);
        const float *v = row + 2 * (size_t)nk * dk + (size_t)h * dv;
        const float x = alpha[t * (size_t)nv + (size_t)h] + P->dt_bias[h];
        const float softplus = x > 20.0f ? x : log1pf(expf(x));
        const float decay = expf(softplus * P->a[h]);
        const float b = 1.0f / (1.0f + expf(-beta[t * (size_t)nv + (size_t)h]));

        /* S *= decay; sk = S^T k */
        for (int32_t j = 0; j < dv; j++)
            sk[j] = 0.0f;
        for (int32_t i = 0; i < dk; i++) {
            float *Si = S + (size_t)i * dv;
            const float ki = kv[i];
            for (int32_t j = 0; j < dv; j++) {
                Si[j] *= decay;
                sk[j] += Si[j] * ki;
            }
        }
        /* d = b (v - sk), kept in sk; S += k d^T; o = S^T q */
        for (int32_t j = 0; j < dv; j++) {
            sk[j] = b * (v[j] - sk[j]);
            o[j] = 0.0f;
        }
        for (int32_t i = 0; i < dk; i++) {
            float *Si = S + (size_t)i * dv;
            const float ki = kv[i], qi = qv[i];
            for (int32_t j = 0; j < dv; j++) {
                Si[j] += ki * sk[j];
                o[j] += Si[j] * qi;
            }
        }
        /* out = rmsnorm(o) * norm * silu(z) */
        double sum_sq = 0.0;
        for (int32_t j = 0; j < dv; j++)
            sum_sq += (double)o[j] * o[j];
        const float scale = (float)(1.0 / sqrt(sum_sq / dv + eps));
        const float *zh = z + t * inner + (size_t)h * dv;
        float *dst = out + t * inner + (size_t)h * dv;
        for (int32_t j = 0; j < dv; j++)
            dst[j] = o[j] * scale * P->norm[j] * silu_f(zh[j]);
    }
}

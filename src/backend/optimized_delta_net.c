/*
 * optimized_delta_net.c: the optimized backend's float32 steps of the gated delta net
 * (delta_net.h), between its matrix jobs (optimized.c): the causal convolution over channel
 * ranges, and the recurrence per V head.
 *
 * Determinism: each step runs the tokens of a slice in order, token by token, with fixed-order
 * loops (compiled once, without ISA flags, so every tier runs the same code; the convolution and
 * the recurrence's inner loops are the tier's dn_conv and delta_rule kernels, floats.h, bitwise
 * the same on every tier). A
 * token's values depend only on its sequence's state and its own inputs, so batched prefill is
 * bitwise equal to decoding one token at a time, whatever else shares the batch and however chunks
 * fall on threads.
 */
#include <math.h>
#include <string.h>

#include "backend/delta_net.h"

static float silu_f(float x) { return x / (1.0f + expf(-x)); }

void syn_dn_conv(const syn_hparams *hp, int32_t layer, const syn_dn_layer *P, const syn_dn_seqs *q,
                 syn_dn_conv_fn conv, float *m, int32_t c0, int32_t c1) {
    const int32_t K = hp->ssm_conv_kernel, C = hp->ssm_conv_dim;
    const size_t off = syn_dn_conv_offset(hp, layer);
    for (size_t t = 0; t < q->n; t++) {
        float *st = q->states[t] + off; /* [K-1][C], the oldest input first */
        if (q->pos[t] == 0)
            for (int32_t j = 0; j < K - 1; j++)
                memset(st + (size_t)j * C + c0, 0, sizeof(float) * (size_t)(c1 - c0));
        conv(m + t * (size_t)C + c0, st + c0, P->conv + c0, K, (size_t)C, c1 - c0);
    }
}

/* dst[n] = src[n] * scale / max(|src|, eps), |src| from the tier's dot (the same bits on every
 * tier). */
static void l2_norm_scaled(float *dst, const float *src, int32_t n, float eps, float scale,
                           syn_dot_f32_fn dot) {
    const float norm = sqrtf(dot(src, src, n));
    const float inv = 1.0f / (norm > eps ? norm : eps);
    for (int32_t i = 0; i < n; i++)
        dst[i] = src[i] * inv * scale;
}

void syn_dn_head(const syn_hparams *hp, int32_t layer, const syn_dn_layer *P, const syn_dn_seqs *q,
                 int32_t h, const float *c, const float *z, const float *beta, const float *alpha,
                 syn_delta_rule_fn delta_rule, syn_dot_f32_fn dot, float *out, float *scratch) {
    const int32_t C = hp->ssm_conv_dim, nk = hp->ssm_n_k_heads, nv = hp->ssm_n_v_heads,
                  dk = hp->ssm_head_k, dv = hp->ssm_head_v, kh = h % nk;
    const size_t inner = (size_t)hp->ssm_inner, S_elems = (size_t)dk * dv;
    const size_t off = syn_dn_matrix_offset(hp, layer) + (size_t)h * S_elems;
    const float eps = hp->rms_norm_eps, q_scale = 1.0f / sqrtf((float)dk);
    float *qk = scratch, *gates = scratch + SYN_DN_TILE * 2 * (size_t)dk;
    for (size_t t = 0; t < q->n;) {
        /* a run of one sequence's tokens: the rule walks its state once per run */
        float *S = q->states[t] + off;
        if (q->pos[t] == 0) memset(S, 0, sizeof(float) * S_elems);
        size_t e = t + 1;
        while (e < q->n && e - t < SYN_DN_TILE && q->states[e] == q->states[t] && q->pos[e] != 0)
            e++;
        for (size_t u = t; u < e; u++) {
            const float *row = c + u * (size_t)C;
            float *qu = qk + (u - t) * 2 * (size_t)dk;
            l2_norm_scaled(qu, row + (size_t)kh * dk, dk, eps, q_scale, dot);
            l2_norm_scaled(qu + dk, row + (size_t)(nk + kh) * dk, dk, eps, 1.0f, dot);
            const float x = alpha[u * (size_t)nv + (size_t)h] + P->dt_bias[h];
            const float softplus = x > 20.0f ? x : log1pf(expf(x));
            gates[2 * (u - t)] = expf(softplus * P->a[h]);
            gates[2 * (u - t) + 1] = 1.0f / (1.0f + expf(-beta[u * (size_t)nv + (size_t)h]));
        }
        const syn_delta_rule_args args = {
            .dk = dk,
            .dv = dv,
            .n = e - t,
            .S = S,
            .qk = qk,
            .gates = gates,
            .v = c + t * (size_t)C + 2 * (size_t)nk * dk + (size_t)h * dv,
            .v_stride = (size_t)C,
            .o = out + t * inner + (size_t)h * dv,
            .o_stride = inner,
        };
        delta_rule(&args);
        for (size_t u = t; u < e; u++) { /* out = rmsnorm(o) * norm * silu(z), in place */
            float *o = out + u * inner + (size_t)h * dv;
            const float scale = 1.0f / sqrtf(dot(o, o, dv) / (float)dv + eps);
            const float *zh = z + u * inner + (size_t)h * dv;
            for (int32_t j = 0; j < dv; j++)
                o[j] = o[j] * scale * P->norm[j] * silu_f(zh[j]);
        }
        t = e;
    }
}

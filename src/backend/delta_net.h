/*
 * delta_net.h: the gated delta net ("linear attention") mixer of qwen35's recurrent layers, for
 * both backends: the reference's scalar mixer of one token (reference_delta_net.c), and the
 * per-sequence recurrent state and the float32 steps the optimized backend runs around its matrix
 * kernels (optimized_delta_net.c).
 *
 * For one token with normed input h [n_embd] (nk = ssm_n_k_heads, nv = ssm_n_v_heads, dk =
 * ssm_head_k, dv = ssm_head_v, K = ssm_conv_kernel):
 *   m = ssm_qkv h [conv_dim],  z = ssm_z h [nv][dv]
 *   beta = sigmoid(ssm_beta h) [nv],  g = softplus(ssm_alpha h + ssm_dt_bias) * ssm_a [nv]
 *   c[ch] = silu(sum_j ssm_conv[ch][j] * m_(t-K+1+j)[ch])  (the state holds the K-1 last m)
 *   q [nk][dk] | k [nk][dk] | v [nv][dv] = c;  q, k L2-normed per head (x / max(|x|, eps)),
 *   q /= sqrt(dk)
 *   V head h reads Q/K head h % nk (llama.cpp's converter tiles the V heads):
 *     S_h = S_h * exp(g_h)  [dk][dv];  d = beta_h (v_h - S_h^T k);  S_h += k d^T;  o_h = S_h^T q
 *     out_h = rmsnorm(o_h) * ssm_norm * silu(z_h)
 *   the mixer's output is ssm_out out [n_embd].
 * The state of a sequence starts at zeros; it cannot be rewound, only restarted from position 0.
 */
#ifndef SYN_BACKEND_DELTA_NET_H
#define SYN_BACKEND_DELTA_NET_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/floats.h"
#include "model/model.h"
#include "synapse.h"

/* Floats of one sequence's recurrent state, all recurrent layers: per layer the convolution's
 * last K-1 inputs [K-1][conv_dim] and each V head's matrix [nv][dk][dv]. 0 when the model has no
 * recurrent layer. */
size_t syn_dn_state_floats(const syn_hparams *hp);

/* ---- reference backend ---- */

typedef struct syn_ref_dn syn_ref_dn;

/* The reference's delta-net scratch and its one sequence's state (zeros). */
syn_status syn_ref_dn_new(const struct syn_model *model, syn_ref_dn **out);
void syn_ref_dn_free(syn_ref_dn *d);
void syn_ref_dn_reset(syn_ref_dn *d);

/* out[n_embd] = the mixer of recurrent layer `layer` for one token's normed input h[n_embd],
 * advancing that layer's state by the token; out may be h. */
void syn_ref_dn_mixer(syn_ref_dn *d, int32_t layer, const float *h, float *out);

/* ---- optimized backend: the float32 steps between its matrix jobs ---- */

/* One recurrent layer's float32 parameters, converted once. */
typedef struct syn_dn_layer {
    float *conv;    /* [K][conv_dim]: tap j of every channel together (the file's transpose) */
    float *dt_bias; /* [nv] */
    float *a;       /* [nv] */
    float *norm;    /* [dv] */
} syn_dn_layer;

/* The tokens of a slice and their sequences' states: tokens of one sequence come in position
 * order, and a token at position 0 starts its sequence's state from zeros. */
typedef struct syn_dn_seqs {
    size_t n;             /* tokens */
    const uint32_t *pos;  /* [n] */
    float *const *states; /* [n] each token's sequence state, syn_dn_state_floats floats */
} syn_dn_seqs;

/* The convolution step of recurrent layer `layer` for channels [c0, c1): m [n][conv_dim] is
 * replaced by silu(conv(m)), each token reading and advancing its own sequence's state. */
void syn_dn_conv(const syn_hparams *hp, int32_t layer, const syn_dn_layer *P, const syn_dn_seqs *q,
                 syn_dn_conv_fn conv, float *m, int32_t c0, int32_t c1);

/* Tokens of one sequence the recurrence runs through its state at a time. */
enum { SYN_DN_TILE = 32 };

/* Floats of scratch syn_dn_head needs. */
static inline size_t syn_dn_head_scratch_floats(const syn_hparams *hp) {
    return SYN_DN_TILE * (2 * (size_t)hp->ssm_head_k + 2);
}

/* The recurrence of V head h of recurrent layer `layer`: reads c [n][conv_dim] (after
 * syn_dn_conv), z [n][inner], beta and alpha [n][nv] (the raw projections), advances each token's
 * sequence state through the tier's delta_rule kernel and writes head h of out [n][inner].
 * scratch: [syn_dn_head_scratch_floats(hp)]. */
void syn_dn_head(const syn_hparams *hp, int32_t layer, const syn_dn_layer *P, const syn_dn_seqs *q,
                 int32_t h, const float *c, const float *z, const float *beta, const float *alpha,
                 syn_delta_rule_fn delta_rule, syn_dot_f32_fn dot, float *out, float *scratch);

/* Offsets (in floats) of recurrent layer `layer`'s conv state and matrices in a sequence's
 * state; the order follows the layers. */
size_t syn_dn_conv_offset(const syn_hparams *hp, int32_t layer);
size_t syn_dn_matrix_offset(const syn_hparams *hp, int32_t layer);

#endif

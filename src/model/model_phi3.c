/* model_phi3.c: what loading phi3 adds to model_load.c: LongRoPE's hyperparameters and factors,
 * and the fused attn_qkv / ffn_up matrices split into views of their rows. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/model_phi3.h"

enum { KEY_CAP = 96 };

syn_status syn_phi3_read_longrope(const gguf_file *f, const syn_arch *arch, syn_hparams *hp) {
    char key[KEY_CAP];
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", arch->name);
    uint32_t orig = (uint32_t)hp->n_ctx_train;
    syn_status st = gguf_get_u32_opt(f, key, &orig);
    if (st != SYN_OK) return st;
    if (orig == 0 || orig > INT32_MAX)
        return syn_fail(SYN_ERR_FORMAT, "model: %s is %" PRIu32 ", expected a positive count", key,
                        orig);
    hp->n_ctx_orig = (int32_t)orig;

    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", arch->name);
    float factor = 1.0f;
    if ((st = gguf_get_f32_opt(f, key, &factor)) != SYN_OK) return st;
    if (!(isfinite(factor) && factor > 0.0f)) /* NaN fails the comparison too */
        return syn_fail(SYN_ERR_FORMAT, "model: %s is %g, expected a finite positive number", key,
                        isnan(factor) ? (double)NAN : (double)factor);
    hp->rope_attn_factor = factor;
    return SYN_OK;
}

/* Rows [r0, r0 + n) of t as a tensor of their own: rows are whole blocks of t's type, so the view
 * starts on a block and every kernel reads it as it reads t. */
static syn_tensor row_view(const syn_tensor *t, int64_t r0, int64_t n) {
    syn_tensor v = *t;
    v.ne[1] = n;
    v.data = (const uint8_t *)t->data + (uint64_t)r0 * t->row_bytes;
    return v;
}

void syn_phi3_split_fused(syn_model *m) {
    const syn_hparams *hp = &m->hp;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        syn_layer *L = &m->layers[il];
        if (L->wqkv.data) {
            L->wq = row_view(&L->wqkv, 0, hp->q_dim);
            L->wk = row_view(&L->wqkv, hp->q_dim, hp->kv_dim);
            L->wv = row_view(&L->wqkv, (int64_t)hp->q_dim + hp->kv_dim, hp->kv_dim);
        }
        if (L->w_gate_up.data) {
            L->w_gate = row_view(&L->w_gate_up, 0, hp->n_ff);
            L->w_up = row_view(&L->w_gate_up, hp->n_ff, hp->n_ff);
        }
    }
}

/* Every value of vector t is a finite positive divisor. */
static syn_status check_divisors(const syn_tensor *t) {
    float *v = malloc(sizeof(float) * (size_t)t->ne[0]);
    if (!v) return syn_fail(SYN_ERR_NO_MEMORY, "model: out of memory");
    syn_tensor_row(t, 0, v);
    syn_status st = SYN_OK;
    for (int64_t i = 0; i < t->ne[0]; i++)
        if (!(isfinite(v[i]) && v[i] > 0.0f)) {
            st = syn_fail(SYN_ERR_FORMAT,
                          "model: tensor '%s' has %g at %" PRId64
                          ": RoPE factors must be finite and positive",
                          t->name, isnan(v[i]) ? (double)NAN : (double)v[i], i);
            break;
        }
    free(v);
    return st;
}

syn_status syn_phi3_check_rope_factors(const syn_model *m) {
    const syn_tensor *s = &m->rope_factors_short, *l = &m->rope_factors_long;
    if (!s->data != !l->data)
        return syn_fail(SYN_ERR_FORMAT,
                        "model: tensor '%s' is present without '%s': LongRoPE needs both sets",
                        s->data ? s->name : l->name,
                        s->data ? "rope_factors_long.weight" : "rope_factors_short.weight");
    syn_status st = SYN_OK;
    if (s->data) st = check_divisors(s);
    if (st == SYN_OK && l->data) st = check_divisors(l);
    return st;
}

const syn_tensor *syn_model_rope_factors(const syn_model *m, uint32_t n_ctx) {
    if (!m->rope_factors_short.data) return &m->rope_freqs;
    return n_ctx > (uint32_t)m->hp.n_ctx_orig ? &m->rope_factors_long : &m->rope_factors_short;
}

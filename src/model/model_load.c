/* model_load.c: loads a GGUF model of an architecture of the table (arch.h): hyperparameters,
 * tensor views checked against them and the weight-type table (wtype.h), tokenizer. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file_map.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/model_phi3.h"
#include "model/wtype.h"
#include "synapse_internal.h"
#include "tokenizer/tokenizer.h"

enum {
    TENSOR_NAME_CAP = 64, /* "blk.4294967295.attn_output.weight" and the like fit with room */
    KEY_CAP = 64,         /* "qwen3.attention.layer_norm_rms_epsilon" and the like */
};

syn_model_params syn_model_default_params(void) {
    return (syn_model_params){.prefetch = true, .huge_pages = true, .interleave = true};
}

/* ---------------------------------------------------------------------------------------------
 * Hyperparameters
 * ------------------------------------------------------------------------------------------- */

/* A required (or, with dflt >= 0, optional) positive count that must fit in int32. */
static syn_status read_count(const gguf_file *f, const char *key, int64_t dflt, int32_t *out) {
    uint32_t v = dflt >= 0 ? (uint32_t)dflt : 0;
    syn_status st = dflt >= 0 ? gguf_get_u32_opt(f, key, &v) : gguf_get_u32(f, key, &v);
    if (st != SYN_OK) return st;
    if (v == 0) return syn_fail(SYN_ERR_FORMAT, "model: %s is 0, expected a positive count", key);
    if (v > INT32_MAX)
        return syn_fail(SYN_ERR_FORMAT, "model: %s is %" PRIu32 ", above the supported maximum %d",
                        key, v, INT32_MAX);
    *out = (int32_t)v;
    return SYN_OK;
}

/* A positive finite float (RoPE base, epsilon); NaN, infinities, zero and negatives are refused. */
static syn_status read_positive_float(const gguf_file *f, const char *key, bool optional,
                                      float dflt, float *out) {
    float v = dflt;
    syn_status st = optional ? gguf_get_f32_opt(f, key, &v) : gguf_get_f32(f, key, &v);
    if (st != SYN_OK) return st;
    if (isnan(v)) /* printed without a sign, whatever sign bit the file set */
        return syn_fail(SYN_ERR_FORMAT, "model: %s is nan, expected a finite positive number", key);
    if (!isfinite(v) || v <= 0.0f)
        return syn_fail(SYN_ERR_FORMAT, "model: %s is %g, expected a finite positive number", key,
                        (double)v);
    *out = v;
    return SYN_OK;
}

/* "ARCH.suffix" into buf (architecture names are short: see arch.c). */
static const char *arch_key(char *buf, size_t cap, const syn_arch *arch, const char *suffix) {
    snprintf(buf, cap, "%s.%s", arch->name, suffix);
    return buf;
}

/* Keys of features no entry of the table computes: refused by name rather than ignored. */
static syn_status refuse_unsupported_features(const gguf_file *f, const syn_arch *arch) {
    char key[KEY_CAP];
    uint32_t experts = 0;
    syn_status st = gguf_get_u32_opt(f, arch_key(key, sizeof key, arch, "expert_count"), &experts);
    if (st != SYN_OK) return st;
    if (experts > 0)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "model: %s is %" PRIu32 ": mixture-of-experts models are not supported",
                        key, experts);
    const bool swa_key =
        !arch->swa && gguf_find_kv(f, arch_key(key, sizeof key, arch, "attention.sliding_window"));
    if (swa_key && arch->ignores_sliding_window)
        syn_log(SYN_LOG_WARN, "model: ignoring %s, as llama.cpp does for %s", key, arch->name);
    else if (swa_key)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "model: %s is set: sliding-window attention is not supported", key);
    gguf_str scaling = {0, NULL};
    if ((st = gguf_get_str_opt(f, arch_key(key, sizeof key, arch, "rope.scaling.type"),
                               &scaling)) != SYN_OK)
        return st;
    if (scaling.data && !gguf_str_eq(scaling, "none") && !gguf_str_eq(scaling, "linear")) {
        int len = scaling.len > 64 ? 64 : (int)scaling.len;
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "model: %s '%.*s' is not supported (only 'none' and 'linear')", key, len,
                        scaling.data);
    }
    return SYN_OK;
}

/* The head size: ARCH.attention.key_length when present (it may make n_head * head_dim differ
 * from n_embd), else n_embd / n_head. Values must match keys; RoPE covers an even number of the
 * head's dims (n_rot), all of them unless ARCH.rope.dimension_count says fewer. */
static syn_status read_head_dim(const gguf_file *f, const syn_arch *arch, syn_hparams *hp) {
    char key[KEY_CAP], vkey[KEY_CAP], rkey[KEY_CAP];
    syn_status st;
    if (gguf_find_kv(f, arch_key(key, sizeof key, arch, "attention.key_length"))) {
        if ((st = read_count(f, key, -1, &hp->head_dim)) != SYN_OK) return st;
    } else if (hp->n_embd % hp->n_head != 0) {
        return syn_fail(SYN_ERR_FORMAT,
                        "model: %s.attention.head_count %d does not divide %s.embedding_length %d",
                        arch->name, hp->n_head, arch->name, hp->n_embd);
    } else {
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    int32_t value_dim = hp->head_dim, rope_dim = hp->head_dim;
    if ((st = read_count(f, arch_key(vkey, sizeof vkey, arch, "attention.value_length"),
                         hp->head_dim, &value_dim)) != SYN_OK ||
        (st = read_count(f, arch_key(rkey, sizeof rkey, arch, "rope.dimension_count"), hp->head_dim,
                         &rope_dim)) != SYN_OK)
        return st;
    if (value_dim != hp->head_dim)
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "model: %s %d differs from the key head size %d: not supported", vkey,
                        value_dim, hp->head_dim);
    if (hp->head_dim % 2 != 0)
        return syn_fail(SYN_ERR_FORMAT, "model: head size %d must be even for RoPE", hp->head_dim);
    if (rope_dim > hp->head_dim || rope_dim % 2 != 0)
        return syn_fail(SYN_ERR_FORMAT, "model: %s %d must be even and at most the head size %d",
                        rkey, rope_dim, hp->head_dim);
    hp->n_rot = rope_dim;
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim;
    if (q_dim > INT32_MAX)
        return syn_fail(SYN_ERR_FORMAT,
                        "model: %d heads of %d values exceed the supported width %d", hp->n_head,
                        hp->head_dim, INT32_MAX);
    hp->q_dim = (int32_t)q_dim;
    return SYN_OK;
}

/* Linear RoPE scaling, the query scale, logit soft-capping, the embedding scale, and the sliding
 * window of an entry that has one (arch.h: swa). */
static syn_status read_variant_hparams(const gguf_file *f, const syn_arch *arch, syn_hparams *hp) {
    char key[KEY_CAP];
    syn_status st;
    hp->ffn_act = arch->ffn_act;
    hp->embd_scale = arch->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    /* llama.cpp's query scale; Gemma 3 27B (62 blocks) has query_pre_attn_scalar n_embd / n_head
     * (168) rather than its head size (128), and llama.cpp keys it on the block count. */
    const bool gemma3_27b = arch->swa && arch->embd_scale && hp->n_layer == 62;
    hp->attn_scale = 1.0f / sqrtf((float)(gemma3_27b ? hp->n_embd / hp->n_head : hp->head_dim));

    /* llama.cpp applies rope.scaling.factor as linear scaling unless the type says otherwise. */
    hp->rope_freq_scale = 1.0f;
    gguf_str scaling = {0, NULL};
    if ((st = gguf_get_str_opt(f, arch_key(key, sizeof key, arch, "rope.scaling.type"),
                               &scaling)) != SYN_OK)
        return st;
    if (!scaling.data || gguf_str_eq(scaling, "linear")) {
        float factor = 1.0f;
        if ((st = read_positive_float(f, arch_key(key, sizeof key, arch, "rope.scaling.factor"),
                                      true, 1.0f, &factor)) != SYN_OK)
            return st;
        hp->rope_freq_scale = 1.0f / factor;
    }

    hp->final_logit_softcap = 0.0f;
    if (gguf_find_kv(f, arch_key(key, sizeof key, arch, "final_logit_softcapping")) &&
        (st = read_positive_float(f, key, false, 0.0f, &hp->final_logit_softcap)) != SYN_OK)
        return st;

    /* Read for embeddings only: an unknown value is refused there (syn_pooling_resolve), not
     * here, since generation does not need it. */
    hp->pooling_type = -1;
    if (gguf_find_kv(f, arch_key(key, sizeof key, arch, "pooling_type"))) {
        uint32_t pooling;
        if ((st = gguf_get_u32_opt(f, key, &pooling)) != SYN_OK) return st;
        hp->pooling_type = pooling > INT32_MAX ? INT32_MAX : (int32_t)pooling;
    }

    hp->swa_window = 0;
    hp->swa_pattern = 1;
    hp->rope_freq_base_swa = hp->rope_freq_base;
    if (!arch->swa) return SYN_OK;
    /* Real Gemma 3 files omit the pattern; llama.cpp then takes 6 (five local layers, one
     * global), and 10000 for the local layers' RoPE base. */
    if ((st = read_count(f, arch_key(key, sizeof key, arch, "attention.sliding_window"), -1,
                         &hp->swa_window)) != SYN_OK ||
        (st = read_count(f, arch_key(key, sizeof key, arch, "attention.sliding_window_pattern"), 6,
                         &hp->swa_pattern)) != SYN_OK ||
        (st = read_positive_float(f, arch_key(key, sizeof key, arch, "rope.freq_base_swa"), true,
                                  10000.0f, &hp->rope_freq_base_swa)) != SYN_OK)
        return st;
    return SYN_OK;
}

static size_t required_tensors(const syn_tensor_rule *rules, size_t n_rules) {
    size_t n = 0;
    for (size_t i = 0; i < n_rules; i++)
        n += !rules[i].optional;
    return n;
}

/* The fewest tensors any block of arch must have. */
static size_t required_layer_tensors(const syn_arch *arch) {
    size_t n = required_tensors(arch->layer_tensors, arch->n_layer_tensors);
    if (arch->n_recurrent_tensors) {
        size_t r = required_tensors(arch->recurrent_tensors, arch->n_recurrent_tensors);
        n = r < n ? r : n;
    }
    return n;
}

/* The rules of block il: its kind's list (arch.h). */
static const syn_tensor_rule *layer_rules(const syn_model *m, int32_t il, size_t *n) {
    if (syn_layer_recurrent(&m->hp, il)) {
        *n = m->arch->n_recurrent_tensors;
        return m->arch->recurrent_tensors;
    }
    *n = m->arch->n_layer_tensors;
    return m->arch->layer_tensors;
}

/* A hybrid's layer pattern and delta-net shape (qwen35): ARCH.full_attention_interval and the
 * ARCH.ssm.* keys, checked to describe whole heads. */
static syn_status read_recurrent_hparams(const gguf_file *f, const syn_arch *arch,
                                         syn_hparams *hp) {
    hp->n_attn_layers = hp->n_layer;
    if (!arch->n_recurrent_tensors) return SYN_OK;
    char k[6][KEY_CAP];
    /* Real files end with multi-token-prediction blocks (qwen35.nextn_predict_layers), which
     * llama.cpp counts in block_count and does not run for plain decoding: neither do we, and
     * their tensors stay unbound. */
    uint32_t nextn = 0;
    syn_status st =
        gguf_get_u32_opt(f, arch_key(k[0], KEY_CAP, arch, "nextn_predict_layers"), &nextn);
    if (st != SYN_OK) return st;
    if (nextn >= (uint32_t)hp->n_layer)
        return syn_fail(SYN_ERR_FORMAT, "model: %s %" PRIu32 " leaves none of %s.block_count %d",
                        k[0], nextn, arch->name, hp->n_layer);
    hp->n_layer -= (int32_t)nextn;
    if ((st = read_count(f, arch_key(k[0], KEY_CAP, arch, "full_attention_interval"), -1,
                         &hp->full_attn_interval)) != SYN_OK ||
        (st = read_count(f, arch_key(k[1], KEY_CAP, arch, "ssm.conv_kernel"), -1,
                         &hp->ssm_conv_kernel)) != SYN_OK ||
        (st = read_count(f, arch_key(k[2], KEY_CAP, arch, "ssm.state_size"), -1,
                         &hp->ssm_head_k)) != SYN_OK ||
        (st = read_count(f, arch_key(k[3], KEY_CAP, arch, "ssm.group_count"), -1,
                         &hp->ssm_n_k_heads)) != SYN_OK ||
        (st = read_count(f, arch_key(k[4], KEY_CAP, arch, "ssm.time_step_rank"), -1,
                         &hp->ssm_n_v_heads)) != SYN_OK ||
        (st = read_count(f, arch_key(k[5], KEY_CAP, arch, "ssm.inner_size"), -1, &hp->ssm_inner)) !=
            SYN_OK)
        return st;
    if (hp->ssm_inner % hp->ssm_n_v_heads != 0)
        return syn_fail(SYN_ERR_FORMAT, "model: %s %d does not divide %s %d", k[4],
                        hp->ssm_n_v_heads, k[5], hp->ssm_inner);
    if (hp->ssm_n_v_heads % hp->ssm_n_k_heads != 0)
        return syn_fail(SYN_ERR_FORMAT, "model: %s %d does not divide %s %d", k[3],
                        hp->ssm_n_k_heads, k[4], hp->ssm_n_v_heads);
    const int64_t conv_dim = 2 * (int64_t)hp->ssm_n_k_heads * hp->ssm_head_k + hp->ssm_inner;
    if (conv_dim > INT32_MAX)
        return syn_fail(SYN_ERR_FORMAT, "model: %s and %s give a width above %d", k[2], k[3],
                        INT32_MAX);
    hp->ssm_conv_dim = (int32_t)conv_dim;
    hp->ssm_head_v = hp->ssm_inner / hp->ssm_n_v_heads;
    /* A sequence's state (per layer: the kernel - 1 last inputs, nv matrices of dk x dv) must be
     * countable in floats: the backends size it. */
    uint64_t mats, conv, per_layer, total;
    if (__builtin_mul_overflow((uint64_t)hp->ssm_n_v_heads * (uint64_t)hp->ssm_head_k,
                               (uint64_t)hp->ssm_head_v, &mats) ||
        __builtin_mul_overflow((uint64_t)(hp->ssm_conv_kernel - 1), (uint64_t)conv_dim, &conv) ||
        __builtin_add_overflow(mats, conv, &per_layer) ||
        __builtin_mul_overflow(per_layer, (uint64_t)hp->n_layer, &total) ||
        total > SIZE_MAX / sizeof(float))
        return syn_fail(SYN_ERR_FORMAT,
                        "model: a delta-net state of %d x %d x %d values per layer is beyond any "
                        "memory",
                        hp->ssm_n_v_heads, hp->ssm_head_k, hp->ssm_head_v);
    hp->n_attn_layers = hp->n_layer / hp->full_attn_interval;
    if (hp->n_attn_layers == 0) /* every real hybrid has some; the KV blocks assume it */
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "model: %s %d above %s.block_count %d leaves no attention layer", k[0],
                        hp->full_attn_interval, arch->name, hp->n_layer);
    return SYN_OK;
}

static syn_status read_hparams(const gguf_file *f, const syn_arch **arch_out, syn_hparams *hp) {
    gguf_str name = {0, NULL};
    syn_status st = gguf_get_str(f, "general.architecture", &name);
    if (st != SYN_OK) return st;
    const syn_arch *arch = syn_arch_find(name.data, (size_t)name.len);
    if (!arch) {
        int len = name.len > 64 ? 64 : (int)name.len;
        return syn_fail(SYN_ERR_UNSUPPORTED,
                        "model: unsupported architecture '%.*s' (general.architecture); this build "
                        "supports %s",
                        len, name.data, syn_arch_names());
    }
    *arch_out = arch;
    hp->rope_layout = arch->rope;
    char k[6][KEY_CAP];
    if ((st = read_count(f, arch_key(k[0], KEY_CAP, arch, "block_count"), -1, &hp->n_layer)) !=
            SYN_OK ||
        (st = read_count(f, arch_key(k[1], KEY_CAP, arch, "context_length"), -1,
                         &hp->n_ctx_train)) != SYN_OK ||
        (st = read_count(f, arch_key(k[2], KEY_CAP, arch, "embedding_length"), -1, &hp->n_embd)) !=
            SYN_OK ||
        (st = read_count(f, arch_key(k[3], KEY_CAP, arch, "feed_forward_length"), -1, &hp->n_ff)) !=
            SYN_OK ||
        (st = read_count(f, arch_key(k[4], KEY_CAP, arch, "attention.head_count"), -1,
                         &hp->n_head)) != SYN_OK ||
        (st = read_count(f, arch_key(k[5], KEY_CAP, arch, "attention.head_count_kv"), hp->n_head,
                         &hp->n_head_kv)) != SYN_OK ||
        (st = refuse_unsupported_features(f, arch)) != SYN_OK ||
        (st = read_head_dim(f, arch, hp)) != SYN_OK ||
        (st = read_recurrent_hparams(f, arch, hp)) != SYN_OK)
        return st;
    hp->q_gate = arch->q_gate;
    if (hp->n_head_kv > hp->n_head || hp->n_head % hp->n_head_kv != 0)
        return syn_fail(SYN_ERR_FORMAT, "model: %s %d must divide %s %d", k[5], hp->n_head_kv, k[4],
                        hp->n_head);
    hp->kv_dim = hp->n_head_kv * hp->head_dim; /* at most q_dim */
    if ((st = read_positive_float(f, arch_key(k[0], KEY_CAP, arch, "rope.freq_base"), true,
                                  10000.0f, &hp->rope_freq_base)) != SYN_OK ||
        (st = read_positive_float(f,
                                  arch_key(k[1], KEY_CAP, arch, "attention.layer_norm_rms_epsilon"),
                                  false, 0.0f, &hp->rms_norm_eps)) != SYN_OK ||
        (st = read_variant_hparams(f, arch, hp)) != SYN_OK)
        return st;
    hp->rope_attn_factor = 1.0f;
    hp->n_ctx_orig = hp->n_ctx_train;
    if (arch->longrope && (st = syn_phi3_read_longrope(f, arch, hp)) != SYN_OK) return st;
    /* Every block has the architecture's required tensors: this bounds the layer allocation by
     * the file size, while leaving a missing tensor to be reported by name. */
    const size_t per_layer = required_layer_tensors(arch);
    if ((uint64_t)hp->n_layer > f->n_tensors / per_layer)
        return syn_fail(SYN_ERR_FORMAT,
                        "model: %s.block_count %d needs %" PRIu64
                        " tensors but the file has %" PRIu64,
                        arch->name, hp->n_layer, (uint64_t)hp->n_layer * per_layer, f->n_tensors);
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Tensor binding
 * ------------------------------------------------------------------------------------------- */

static int64_t dim_value(const syn_hparams *hp, syn_dim d) {
    switch (d) {
    case SYN_DIM_EMBD: return hp->n_embd;
    case SYN_DIM_Q: return hp->q_dim;
    case SYN_DIM_KV: return hp->kv_dim;
    case SYN_DIM_FF: return hp->n_ff;
    case SYN_DIM_HEAD: return hp->head_dim;
    case SYN_DIM_ROPE_PAIRS: return hp->n_rot / 2;
    case SYN_DIM_VOCAB: return hp->n_vocab;
    case SYN_DIM_QKV: return (int64_t)hp->q_dim + 2 * (int64_t)hp->kv_dim;
    case SYN_DIM_FF2: return 2 * (int64_t)hp->n_ff;
    case SYN_DIM_Q_GATED: return 2 * (int64_t)hp->q_dim;
    case SYN_DIM_SSM_KERNEL: return hp->ssm_conv_kernel;
    case SYN_DIM_SSM_CONV: return hp->ssm_conv_dim;
    case SYN_DIM_SSM_INNER: return hp->ssm_inner;
    case SYN_DIM_SSM_HEADS: return hp->ssm_n_v_heads;
    case SYN_DIM_SSM_HEAD_V: return hp->ssm_head_v;
    case SYN_DIM_NONE: break;
    }
    return 0;
}

static void format_shape(char *buf, size_t cap, const uint64_t *ne, uint32_t n_dims) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < n_dims && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRIu64, d ? ", " : "", ne[d]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* Binds tensor name by rule into *out. Trailing dimensions of 1 are accepted. Missing:
 * SYN_ERR_FORMAT, or SYN_OK with out->data NULL when the rule makes it optional. Matrices may be
 * of any type of the weight-type table; norms and biases of the float types. */
static syn_status bind_tensor(syn_model *m, const char *name, const syn_tensor_rule *rule,
                              syn_tensor *out, size_t *name_slot) {
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (rule->optional) return SYN_OK;
        return syn_fail(SYN_ERR_FORMAT, "model: missing tensor '%s'", name);
    }
    const bool matrix = rule->ne1 != SYN_DIM_NONE;
    const syn_wtype *wt = syn_wtype_get(t->type);
    if (!wt || (!matrix && wt->act_type != GGML_TYPE_F32))
        return syn_fail(
            SYN_ERR_UNSUPPORTED,
            "model: tensor '%s' has type %s, which this build does not support (supported%s: %s)",
            name, ggml_type_name(t->type), matrix ? "" : " for norms and biases",
            matrix ? syn_wtype_names() : "f32, f16, bf16");
    const int64_t ne0 = dim_value(&m->hp, rule->ne0),
                  ne1 = matrix ? dim_value(&m->hp, rule->ne1) : 1;
    uint64_t want[GGUF_MAX_DIMS] = {(uint64_t)ne0, (uint64_t)ne1, 1, 1};
    if (memcmp(want, t->ne, sizeof want) != 0) {
        char have_s[128], want_s[64];
        format_shape(have_s, sizeof have_s, t->ne, t->n_dims);
        format_shape(want_s, sizeof want_s, want, matrix ? 2 : 1);
        return syn_fail(SYN_ERR_FORMAT,
                        "model: tensor '%s' has shape %s but the hyperparameters require %s", name,
                        have_s, want_s);
    }
    char *slot = m->tensor_names + *name_slot * TENSOR_NAME_CAP;
    (*name_slot)++;
    snprintf(slot, TENSOR_NAME_CAP, "%s", name);
    out->name = slot;
    out->type = t->type;
    out->ne[0] = ne0;
    out->ne[1] = ne1;
    out->row_bytes = ggml_row_size(t->type, (uint64_t)ne0); /* the reader checked whole blocks */
    out->data = t->data;
    m->n_params += t->n_elements;
    m->weight_bytes += t->nbytes;
    return SYN_OK;
}

static syn_status bind_layer(syn_model *m, int32_t il, syn_layer *L, size_t *slot) {
    size_t n_rules;
    const syn_tensor_rule *rules = layer_rules(m, il, &n_rules);
    for (size_t i = 0; i < n_rules; i++) {
        const syn_tensor_rule *rule = &rules[i];
        char name[TENSOR_NAME_CAP];
        snprintf(name, sizeof name, "blk.%d.%s", il, rule->name);
        syn_status st = bind_tensor(m, name, rule, (syn_tensor *)((char *)L + rule->slot), slot);
        if (st != SYN_OK) return st;
    }
    return SYN_OK;
}

static syn_status bind_tensors(syn_model *m) {
    syn_hparams *hp = &m->hp;
    const syn_arch *arch = m->arch;
    /* token_embd first: its row count is the vocabulary size every other check uses. */
    const gguf_tensor *te = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te) return syn_fail(SYN_ERR_FORMAT, "model: missing tensor 'token_embd.weight'");
    if (te->ne[1] > INT32_MAX)
        return syn_fail(SYN_ERR_FORMAT,
                        "model: tensor 'token_embd.weight' has %" PRIu64
                        " rows, above the supported %d",
                        te->ne[1], INT32_MAX);
    hp->n_vocab = (int32_t)te->ne[1];

    const size_t per_layer = arch->n_recurrent_tensors > arch->n_layer_tensors
                                 ? arch->n_recurrent_tensors
                                 : arch->n_layer_tensors;
    size_t n_names = (size_t)hp->n_layer * per_layer + arch->n_model_tensors, slot = 0;
    m->tensor_names = calloc(n_names, TENSOR_NAME_CAP);
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->tensor_names || !m->layers)
        return syn_fail(SYN_ERR_NO_MEMORY, "model: out of memory for %d layers", hp->n_layer);

    syn_status st;
    for (size_t i = 0; i < arch->n_model_tensors; i++) {
        const syn_tensor_rule *rule = &arch->model_tensors[i];
        if ((st = bind_tensor(m, rule->name, rule, (syn_tensor *)((char *)m + rule->slot),
                              &slot)) != SYN_OK)
            return st;
    }
    m->tied_output = m->output.data == NULL;
    if (m->tied_output) m->output = m->tok_embd;
    for (int32_t il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(m, il, &m->layers[il], &slot)) != SYN_OK) return st;
    syn_phi3_split_fused(m);
    if ((st = syn_phi3_check_rope_factors(m)) != SYN_OK) return st;

    uint64_t unused = m->gguf->n_tensors - slot;
    if (unused > 0)
        syn_log(SYN_LOG_WARN, "model: ignoring %" PRIu64 " tensors that %s does not use", unused,
                arch->name);
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Prefetch: map the weight pages in on a background thread, in the order the forward pass reads
 * them (block 0 first, the output projection last), so that the first tokens neither wait for
 * the disk nor take a page fault per 64 KiB. MADV_POPULATE_READ (Linux 5.14+) fills the page
 * tables in one call per tensor; older kernels fall back to touching one byte per page.
 * token_embd is skipped unless it doubles as the output projection: only the rows of the
 * prompt's tokens are read from it.
 * ------------------------------------------------------------------------------------------- */

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static void prefetch_range(syn_model *m, const syn_tensor *t, long page) {
    if (!t->data || atomic_load_explicit(&m->prefetch_stop, memory_order_relaxed)) return;
    const uint8_t *begin = t->data;
    const uint8_t *end = begin + (uint64_t)t->ne[1] * t->row_bytes;
    uintptr_t aligned = (uintptr_t)begin & ~(uintptr_t)(page - 1);
    size_t len = (size_t)(end - (const uint8_t *)aligned);
    if (madvise((void *)aligned, len, MADV_POPULATE_READ) == 0) return;
    madvise((void *)aligned, len, MADV_WILLNEED);
    volatile uint8_t sink = 0;
    for (const uint8_t *p = (const uint8_t *)aligned; p < end; p += page) {
        if (atomic_load_explicit(&m->prefetch_stop, memory_order_relaxed)) return;
        sink ^= *p;
    }
    (void)sink;
}

/* ---- The x16 copies (kernels.h) -------------------------------------------------------------- */

/* Whether the background thread interleaves t: a matrix of at least one group of 16 rows whose
 * type the best tier this CPU runs reads in an x16 layout. */
static bool interleaves(const syn_tensor *t, const syn_kernels *k) {
    return t->data && t->ne[1] >= SYN_X16_ROWS && k->x16[t->type].matvec &&
           syn_x16_code_bytes(t->type) > 0;
}

/* The codes, then the scales (kernels.h), of t's copy. */
static size_t x16_bytes(const syn_tensor *t) {
    const size_t blocks = (size_t)(t->ne[1] / SYN_X16_ROWS) * (size_t)syn_tensor_blocks(t);
    const size_t b = blocks * (syn_x16_code_bytes(t->type) + syn_x16_scale_bytes(t->type));
    return (b + 63) / 64 * 64;
}

/* Calls fn on each matrix the backends multiply by, in forward order (the output last, once
 * when tied). */
static void for_each_matrix(syn_model *m, void (*fn)(syn_model *, syn_tensor *, void *),
                            void *ctx) {
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const syn_tensor *w[SYN_LAYER_MATRICES];
        syn_layer_matrices(&m->layers[il], w);
        for (size_t i = 0; i < SYN_LAYER_MATRICES; i++)
            if (w[i]->data) fn(m, (syn_tensor *)w[i], ctx);
    }
    fn(m, &m->output, ctx);
}

typedef struct x16_pass {
    syn_kernels k;
    size_t bytes;     /* sizing pass: the arena's bytes */
    uint8_t *next;    /* packing pass: where the next copy goes */
    syn_tensor *prev; /* the matrix copied before the current one */
    long page;
} x16_pass;

static void size_x16(syn_model *m, syn_tensor *t, void *ctx) {
    (void)m;
    x16_pass *p = ctx;
    if (interleaves(t, &p->k)) p->bytes += x16_bytes(t);
}

enum {
    X16_PACK_GROUPS = 64, /* groups written and published at a time */
    X16_DELAY_MS = 500,   /* from loading to the first copy */
};

/* Releases the file pages wholly inside rows [r0, r1) of t (a mapped file only). */
static void release_rows(const syn_model *m, const syn_tensor *t, int64_t r0, int64_t r1,
                         uintptr_t page) {
    if (!m->gguf->owns_mapping) return;
    const uintptr_t begin = (uintptr_t)t->data + (uintptr_t)r0 * t->row_bytes;
    const uintptr_t end = (uintptr_t)t->data + (uintptr_t)r1 * t->row_bytes;
    const uintptr_t lo = (begin + page - 1) & ~(page - 1), hi = end & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Writes t's copy X16_PACK_GROUPS groups at a time (stopping early when asked), publishing each
 * range once written and releasing the file pages wholly inside its rows: decode reads the copy
 * of those rows from then on, and the process holds about one range twice at most. */
static void pack_x16(syn_model *m, syn_tensor *t, void *ctx) {
    x16_pass *p = ctx;
    if (!interleaves(t, &p->k)) return;
    const int64_t n_groups = t->ne[1] / SYN_X16_ROWS, nb = syn_tensor_blocks(t);
    t->x16 = p->next;
    p->next += x16_bytes(t);
    /* a tied embedding reads its rows through the same copy (syn_tensor_row) */
    syn_tensor *twin = m->tied_output && t == &m->output ? &m->tok_embd : NULL;
    if (twin) twin->x16 = t->x16;
    const syn_x16 x = syn_tensor_x16(t);
    uint8_t *codes = (uint8_t *)x.codes, *scales = (uint8_t *)x.scales;
    const uintptr_t page = (uintptr_t)p->page;
    for (int64_t g = 0; g < n_groups; g += X16_PACK_GROUPS) {
        if (atomic_load_explicit(&m->prefetch_stop, memory_order_relaxed)) return;
        const int64_t g1 = g + X16_PACK_GROUPS < n_groups ? g + X16_PACK_GROUPS : n_groups;
        syn_x16_pack(t->type, nb, t->data, (size_t)t->row_bytes, g, g1, codes, scales);
        atomic_store_explicit(&t->x16_rows, g1 * SYN_X16_ROWS, memory_order_release);
        if (twin) atomic_store_explicit(&twin->x16_rows, g1 * SYN_X16_ROWS, memory_order_release);
        release_rows(m, t, g * SYN_X16_ROWS, g1 * SYN_X16_ROWS, page);
    }
    /* A huge page across the previous matrix's end was mapped again by decode reading this one's
     * rows; they are copied now, so it goes for good. */
    if (p->prev) release_rows(m, p->prev, 0, atomic_load(&p->prev->x16_rows), page);
    p->prev = t;
}

/* The arena for every copy (2 MiB aligned, in huge pages where the kernel gives them), then the
 * copies in forward order. False: none was made. */
static bool interleave_all(syn_model *m, long page) {
    x16_pass p = {.page = page};
    if (syn_kernels_get(syn_isa_tier_best(), &p.k) != SYN_OK) return false;
    for_each_matrix(m, size_x16, &p);
    if (p.bytes == 0) return false;
    const size_t huge = 2u << 20, len = (p.bytes + huge - 1) / huge * huge;
    uint8_t *raw =
        mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return false;
    uint8_t *base = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    if (base > raw) munmap(raw, (size_t)(base - raw));
    munmap(base + len, (size_t)(raw + huge - base));
    madvise(base, len, MADV_HUGEPAGE);
    m->x16_arena = base;
    m->x16_bytes = len;
    p.next = base;
    for_each_matrix(m, pack_x16, &p);
    if (p.prev) release_rows(m, p.prev, 0, atomic_load(&p.prev->x16_rows), (uintptr_t)page);
    return true;
}

/* Waits ms milliseconds, or less when syn_model_free asks the thread to stop: true when asked. */
static bool wait_unless_stopped(syn_model *m, long ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += ms % 1000 * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->prefetch_lock);
    int rc = 0; /* 0 again after a spurious wake-up; ETIMEDOUT (or an error) ends the wait */
    while (!atomic_load(&m->prefetch_stop) && rc == 0)
        rc = pthread_cond_timedwait(&m->prefetch_wake, &m->prefetch_lock, &until);
    pthread_mutex_unlock(&m->prefetch_lock);
    return atomic_load(&m->prefetch_stop);
}

static void *prefetch_main(void *arg) {
    syn_model *m = arg;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    /* The copies first, with the CPU's spare time only (SCHED_IDLE), and from X16_DELAY_MS after
     * loading: a short run is not slowed (started at once at normal priority, the copies cost a
     * 13-token run a third of its wall time; at idle priority still a tenth, their memory traffic
     * competing with decode's, docs/BENCHMARKS.md), and a server writes them while it waits for
     * requests. Once they are made decode reads no file page of theirs, and warming the rest
     * would only map back the pages they released. */
    if (m->prefetch_interleave) {
        if (wait_unless_stopped(m, X16_DELAY_MS)) return NULL;
        struct sched_param idle = {0}, normal = {0};
        const bool lowered = pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) == 0;
        const bool made = interleave_all(m, page);
        if (lowered) pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
        if (made) return NULL;
    }
    if (!m->prefetch_warm) return NULL;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const syn_layer *L = &m->layers[il];
        size_t n_rules;
        const syn_tensor_rule *rules = layer_rules(m, il, &n_rules);
        for (size_t i = 0; i < n_rules; i++)
            prefetch_range(m, (const syn_tensor *)((const char *)L + rules[i].slot), page);
    }
    prefetch_range(m, &m->output_norm, page);
    prefetch_range(m, m->tied_output ? &m->tok_embd : &m->output, page);
    return NULL;
}

void syn_model_wait_background(syn_model *model) {
    if (!model || !model->prefetch_started) return;
    pthread_join(model->prefetch_thread, NULL);
    model->prefetch_started = false;
}

size_t syn_model_interleaved_bytes(const syn_model *model) { return model ? model->x16_bytes : 0; }

/* ---------------------------------------------------------------------------------------------
 * Load and free
 * ------------------------------------------------------------------------------------------- */

static char *copy_str(gguf_str s) {
    char *c = malloc((size_t)s.len + 1);
    if (!c) return NULL;
    if (s.len) memcpy(c, s.data, (size_t)s.len);
    c[s.len] = '\0';
    return c;
}

syn_status syn_model_load_gguf(gguf_file *f, const syn_model_params *params, syn_model **out) {
    if (!out) {
        gguf_close(f);
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_model_load: out is NULL");
    }
    *out = NULL;
    if (!f) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_model_load: no file");
    syn_model_params p = params ? *params : syn_model_default_params();
    syn_model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(f);
        return syn_fail(SYN_ERR_NO_MEMORY, "syn_model_load: out of memory");
    }
    m->gguf = f;
    atomic_init(&m->prefetch_stop, false);
    pthread_condattr_t wake_attr;
    pthread_condattr_init(&wake_attr);
    pthread_condattr_setclock(&wake_attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&m->prefetch_lock, NULL);
    pthread_cond_init(&m->prefetch_wake, &wake_attr);
    pthread_condattr_destroy(&wake_attr);

    syn_status st = read_hparams(f, &m->arch, &m->hp);
    if (st == SYN_OK) st = bind_tensors(m);
    if (st == SYN_OK) st = tokenizer_load(f, m->hp.n_vocab, &m->tokenizer);
    if (st == SYN_OK) {
        gguf_str name = {0, ""};
        if ((st = gguf_get_str_opt(f, "general.name", &name)) == SYN_OK) {
            m->name = copy_str(name);
            if (!m->name) st = syn_fail(SYN_ERR_NO_MEMORY, "syn_model_load: out of memory");
        }
    }
    if (st != SYN_OK) {
        syn_model_free(m);
        return st;
    }
    /* Warming pages only pays for a file mapping; a failed thread start just skips both. */
    m->prefetch_warm = p.prefetch && f->owns_mapping;
    m->prefetch_interleave = p.interleave;
    if (m->prefetch_warm || m->prefetch_interleave)
        m->prefetch_started = pthread_create(&m->prefetch_thread, NULL, prefetch_main, m) == 0;
    *out = m;
    return SYN_OK;
}

syn_status syn_model_load(const char *path, const syn_model_params *params, syn_model **out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_model_load: out is NULL");
    *out = NULL;
    if (!path) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_model_load: path is NULL");
    gguf_file *f = NULL;
    const bool huge = params ? params->huge_pages : syn_model_default_params().huge_pages;
    syn_status st = gguf_open_ex(path, huge ? GGUF_OPEN_HUGE_PAGES : 0, &f);
    if (st != SYN_OK) return st;
    return syn_model_load_gguf(f, params, out);
}

uint64_t syn_model_huge_page_bytes(const syn_model *model) {
    if (!model || !model->gguf->owns_mapping) return 0;
    return syn_file_map_huge_bytes(model->gguf->base, model->gguf->size);
}

void syn_model_free(syn_model *model) {
    if (!model) return;
    if (model->prefetch_started) {
        pthread_mutex_lock(&model->prefetch_lock);
        atomic_store(&model->prefetch_stop, true);
        pthread_cond_signal(&model->prefetch_wake);
        pthread_mutex_unlock(&model->prefetch_lock);
        pthread_join(model->prefetch_thread, NULL);
    }
    pthread_cond_destroy(&model->prefetch_wake);
    pthread_mutex_destroy(&model->prefetch_lock);
    if (model->x16_arena) munmap(model->x16_arena, model->x16_bytes);
    tokenizer_free(model->tokenizer);
    free(model->layers);
    free(model->tensor_names);
    free(model->name);
    gguf_close(model->gguf);
    free(model);
}

const syn_tokenizer *syn_model_tokenizer(const syn_model *model) {
    return model ? model->tokenizer : NULL;
}

void syn_model_get_info(const syn_model *model, syn_model_info *info) {
    if (!model || !info) return;
    const syn_hparams *hp = &model->hp;
    *info = (syn_model_info){
        .architecture = model->arch->name,
        .name = model->name,
        .n_vocab = hp->n_vocab,
        .n_ctx_train = hp->n_ctx_train,
        .n_embd = hp->n_embd,
        .n_layer = hp->n_layer,
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .n_ff = hp->n_ff,
        .rope_freq_base = hp->rope_freq_base,
        .rms_norm_eps = hp->rms_norm_eps,
        .tied_output = model->tied_output,
        .n_params = model->n_params,
        .weight_bytes = model->weight_bytes,
        .swa_window = hp->swa_window,
        .swa_pattern = hp->swa_pattern,
        .rope_freq_base_swa = hp->rope_freq_base_swa,
        .rope_freq_scale = hp->rope_freq_scale,
        .pooling_type = hp->pooling_type,
    };
}

/* Copies src (len bytes) into buf as far as it fits, NUL-terminated. */
static void copy_out(char *buf, size_t cap, const char *src, size_t len) {
    if (cap == 0) return;
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(buf, src, n);
    buf[n] = '\0';
}

/* The shortest %g text that reads back as v ("1e-06" rather than "9.99999997e-07"). */
static int format_float(char *buf, size_t cap, float v) {
    int len = 0;
    for (int digits = 1; digits <= 9; digits++) {
        len = snprintf(buf, cap, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return len;
}

/* The full length in *n_bytes; buf holds what fits. */
static syn_status meta_text_out(char *buf, size_t cap, const char *text, size_t len,
                                size_t *n_bytes) {
    copy_out(buf, cap, text, len);
    *n_bytes = len;
    if (len >= cap)
        return syn_fail(SYN_ERR_BUFFER_TOO_SMALL,
                        "syn_model_meta_str: the value needs %zu bytes and a NUL, cap is %zu", len,
                        cap);
    return SYN_OK;
}

syn_status syn_model_meta_str(const syn_model *model, const char *key, char *buf, size_t cap,
                              size_t *n_bytes) {
    if (!model || !key || !n_bytes || (!buf && cap > 0))
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_model_meta_str: %s is NULL",
                        !model     ? "model"
                        : !key     ? "key"
                        : !n_bytes ? "n_bytes"
                                   : "buf");
    *n_bytes = 0;
    const gguf_kv *kv = gguf_find_kv(model->gguf, key);
    if (!kv) {
        if (cap > 0) buf[0] = '\0';
        return syn_fail(SYN_ERR_NOT_FOUND, "the file has no metadata key '%s'", key);
    }
    if (kv->type == GGUF_TYPE_STRING)
        return meta_text_out(buf, cap, kv->value.str.data, (size_t)kv->value.str.len, n_bytes);
    char text[96];
    int len;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64: len = snprintf(text, sizeof text, "%" PRIu64, kv->value.u64); break;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64: len = snprintf(text, sizeof text, "%" PRId64, kv->value.i64); break;
    case GGUF_TYPE_FLOAT32: len = format_float(text, sizeof text, (float)kv->value.f64); break;
    case GGUF_TYPE_FLOAT64: len = snprintf(text, sizeof text, "%.17g", kv->value.f64); break;
    case GGUF_TYPE_BOOL:
        len = snprintf(text, sizeof text, "%s", kv->value.u64 ? "true" : "false");
        break;
    default: /* arrays */
        len = snprintf(text, sizeof text, "[%s x %" PRIu64 "]", gguf_type_name(kv->value.arr.type),
                       kv->value.arr.count);
        break;
    }
    return meta_text_out(buf, cap, text, (size_t)len, n_bytes);
}

const gguf_file *syn_model_gguf(const syn_model *model) { return model ? model->gguf : NULL; }

void syn_model_get_work(const syn_model *model, syn_model_work *out) {
    const syn_hparams *hp = &model->hp;
    *out = (syn_model_work){
        .token_embd_bytes = model->tok_embd.row_bytes * (uint64_t)model->tok_embd.ne[1],
        .kv_values_per_position =
            2ull * (uint64_t)hp->n_attn_layers * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim,
        .block_matrix_type = hp->n_layer > 0 ? model->layers[0].wq.type : GGML_TYPE_COUNT,
        .swa_window = (uint32_t)hp->swa_window,
    };
    /* a hybrid's first block may be recurrent: its input projection stands for the query's */
    if (hp->n_layer > 0 && !model->layers[0].wq.data)
        out->block_matrix_type = model->layers[0].ssm_qkv.type;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const syn_layer *L = &model->layers[l];
        if (syn_layer_is_local(hp, l))
            out->kv_values_local += 2ull * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim;
        const syn_tensor *mats[] = {&L->wq,     &L->wk,       &L->wv,        &L->wo,
                                    &L->w_gate, &L->w_up,     &L->w_down,    &L->ssm_qkv,
                                    &L->ssm_z,  &L->ssm_beta, &L->ssm_alpha, &L->ssm_out};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (mats[i]->data)
                out->macs_per_token += (uint64_t)mats[i]->ne[0] * (uint64_t)mats[i]->ne[1];
    }
}

/* model_phi3.h: the loader steps phi3 brought (model_phi3.c), called by model_load.c. */
#ifndef SYN_MODEL_PHI3_H
#define SYN_MODEL_PHI3_H

#include "gguf/gguf.h"
#include "model/model.h"

/* LongRoPE hyperparameters (arch->longrope): n_ctx_orig from rope.scaling.original_context_length
 * (default n_ctx_train) and rope_attn_factor from rope.scaling.attn_factor (default 1). */
syn_status syn_phi3_read_longrope(const gguf_file *f, const syn_arch *arch, syn_hparams *hp);

/* Every layer's fused wqkv / w_gate_up (when bound) into views of their rows: wq, wk, wv and
 * w_gate, w_up. */
void syn_phi3_split_fused(syn_model *m);

/* The LongRoPE factors: both sets or neither, every divisor finite and positive. */
syn_status syn_phi3_check_rope_factors(const syn_model *m);

#endif

/* pooling.c: which pooling an embedding uses (the model's pooling_type or the caller's) and the
 * unit-length scaling every embedding gets; the pooling itself runs in the engine's steps
 * (src/engine/scheduler.c), over the hidden rows the backend's forward_batch returns. */
#include <math.h>

#include "core/error.h"
#include "model/model.h"
#include "synapse.h"

const char *syn_pooling_name(syn_pooling pooling) {
    switch (pooling) {
    case SYN_POOLING_MODEL: return "model";
    case SYN_POOLING_MEAN: return "mean";
    case SYN_POOLING_CLS: return "cls";
    case SYN_POOLING_LAST: return "last";
    }
    return "?";
}

syn_status syn_pooling_resolve(const syn_model *model, syn_pooling pooling, syn_pooling *out) {
    if (!model || !out)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_pooling_resolve: NULL argument");
    switch (pooling) {
    case SYN_POOLING_MEAN:
    case SYN_POOLING_CLS:
    case SYN_POOLING_LAST: *out = pooling; return SYN_OK;
    case SYN_POOLING_MODEL: break;
    default: return syn_fail(SYN_ERR_INVALID_ARGUMENT, "unknown pooling %d", (int)pooling);
    }
    const int32_t stored = model->hp.pooling_type;
    if (stored < 0) { /* no key: a causal LM's last token has seen the whole input */
        *out = SYN_POOLING_LAST;
        return SYN_OK;
    }
    if (stored >= SYN_POOLING_MEAN && stored <= SYN_POOLING_LAST) {
        *out = (syn_pooling)stored;
        return SYN_OK;
    }
    return syn_fail(SYN_ERR_UNSUPPORTED,
                    "%s.pooling_type is %d (%s): it gives no one vector per input; ask for mean, "
                    "cls or last pooling",
                    model->arch->name, stored,
                    stored == 0   ? "none"
                    : stored == 4 ? "rank"
                                  : "unknown");
}

void syn_embed_normalize(float *v, size_t d) {
    if (!v) return;
    double sum_sq = 0.0;
    for (size_t i = 0; i < d; i++)
        sum_sq += (double)v[i] * v[i];
    if (sum_sq == 0.0) return;
    const double scale = 1.0 / sqrt(sum_sq);
    for (size_t i = 0; i < d; i++)
        v[i] = (float)(v[i] * scale);
}

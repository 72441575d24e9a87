/* agreement.h: teacher-forced comparison of a backend's logits with the oracles and llama.cpp
 * outputs in tests/data/llamacpp-greedy-tiny.json (see /shared/testdata/README.md). */
#ifndef SYN_TEST_AGREEMENT_H
#define SYN_TEST_AGREEMENT_H

#include <stdbool.h>

#include "synapse.h"

typedef struct agreement_stats {
    int n_steps;           /* steps compared */
    double max_abs_diff;   /* largest |ours - theirs| over the compared logits */
    double mean_abs_diff;  /* mean of the same */
    int n_argmax_checked;  /* steps whose margin was clear enough to compare argmax */
    int n_argmax_mismatch; /* of those, steps where our argmax differs */
    int n_argmax_excused;  /* AGAINST_F32_REF_AS_LLAMA_CPP: clear steps left out because llama.cpp's
                            * own argmax (the fixture's top5) differs from the oracle's there */
} agreement_stats;

typedef enum agreement_against {
    AGAINST_LLAMA_CPP,            /* llama.cpp's top5 logits and greedy tokens */
    AGAINST_F32_REF,              /* the float32 oracle's own top5 */
    AGAINST_F32_REF_AS_LLAMA_CPP, /* the same, for an engine that quantizes activations as llama.cpp
                                   * does: argmax is not compared where llama.cpp's own differs */
    AGAINST_Q8_REF                /* the Q8_0-activation oracle's own top5 */
} agreement_against;

/* Teacher-forces every prompt of model_key ("qwen2-tiny-synth-q8_0" or "qwen2-tiny-synth-f32")
 * along llama.cpp's tokens through a fresh context with params, and accumulates the logit
 * differences at the chosen source's top-5 ids and the argmax mismatches at steps whose margin
 * (by that source) is >= min_margin. Returns false (with a message on stderr) when the data or
 * model cannot be read. */
bool agreement_run(const char *model_key, const syn_context_params *params,
                   agreement_against against, double min_margin, agreement_stats *stats);

/* The same along the runs of arch/FILE.oracle.json for the model file (a path under tests/data,
 * e.g. "arch/qwen3-s5-q8_0.gguf"): its llama.cpp top5 and margins, or its f32_ref (the exact
 * oracle) with margins taken from the oracle's own top-2. */
bool agreement_run_arch(const char *file, const syn_context_params *params,
                        agreement_against against, double min_margin, agreement_stats *stats);

/* The reference backend on an arch file (agreement_run_arch against its f32_ref, margins >= 0.01),
 * asserted with cmocka: all 3 x 32 steps within max_diff of the oracle's top-5 logits and the
 * oracle's argmax at every clear step (more than 50 of them). */
void agreement_assert_reference(const char *file, double max_diff);

/* The optimized backend (params) on an arch file, against (margins >= 0.1), asserted with cmocka
 * to lie no farther from the oracle than llama.cpp's default run (llama_max, llama_mean: the
 * file's README table): mean <= 1.15x llama.cpp's + 0.002, max <= max_factor x llama.cpp's +
 * 0.005 (the issues' bound is max_factor 1.3), all 3 x 32 steps, more than 50 clear ones. The
 * stats are returned for the caller's argmax rule. */
agreement_stats agreement_assert_near_llama_cpp(const char *file, const syn_context_params *params,
                                                agreement_against against, double llama_max,
                                                double llama_mean, double max_factor);

/* Prints one line of stats, labelled what, for the test log. */
void agreement_print(const char *what, const agreement_stats *stats);

#endif

/* agreement.c: see agreement.h. Reads the JSON fixture with jansson. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agreement.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synapse_internal.h"
#include "test_util.h"

static int top1_index(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Compares one prompt's steps; returns false on malformed data or a library failure. */
static bool compare_prompt(syn_model *model, const syn_context_params *params, json_t *prompt,
                           agreement_against against, double min_margin, agreement_stats *st,
                           double *sum_abs, long *n_abs) {
    json_t *prompt_ids = json_object_get(prompt, "prompt_ids");
    json_t *generated = json_object_get(prompt, "generated_ids");
    json_t *source =
        against == AGAINST_LLAMA_CPP
            ? prompt
            : json_object_get(prompt, against == AGAINST_Q8_REF ? "q8_ref" : "f32_ref");
    if (!json_is_array(prompt_ids) || !json_is_array(generated) || !json_is_object(source)) {
        fprintf(stderr, "agreement: fixture lacks prompt_ids, generated_ids or the oracle\n");
        return false;
    }
    size_t n_prompt = json_array_size(prompt_ids), n_gen = json_array_size(generated);
    size_t n_tokens = n_prompt + n_gen - 1; /* the last generated token is never an input */
    int32_t *tokens = malloc(sizeof *tokens * n_tokens);
    syn_model_info info;
    syn_model_get_info(model, &info);
    float *logits = malloc(sizeof(float) * n_tokens * (size_t)info.n_vocab);
    syn_context *ctx = NULL;
    bool ok = tokens && logits;
    for (size_t i = 0; ok && i < n_tokens; i++) {
        json_t *id =
            i < n_prompt ? json_array_get(prompt_ids, i) : json_array_get(generated, i - n_prompt);
        tokens[i] = (int32_t)json_integer_value(id);
    }
    syn_context_params p = *params;
    p.n_ctx = (uint32_t)n_tokens;
    if (ok && syn_context_new(model, &p, &ctx) != SYN_OK) {
        fprintf(stderr, "agreement: syn_context_new: %s\n", syn_last_error());
        ok = false;
    }
    if (ok && syn_context_decode(ctx, tokens, n_tokens, logits) != SYN_OK) {
        fprintf(stderr, "agreement: syn_context_decode: %s\n", syn_last_error());
        ok = false;
    }
    json_t *steps = json_object_get(source, "steps");
    json_t *margins = json_object_get(source, "margin");
    for (size_t k = 0; ok && k < n_gen; k++) {
        const float *row = logits + (n_prompt - 1 + k) * (size_t)info.n_vocab;
        json_t *top5 = against == AGAINST_LLAMA_CPP
                           ? json_array_get(json_object_get(prompt, "top5"), k)
                           : json_object_get(json_array_get(steps, k), "top5");
        if (!json_is_array(top5) || json_array_size(top5) == 0) {
            fprintf(stderr, "agreement: step %zu has no top5\n", k);
            ok = false;
            break;
        }
        for (size_t j = 0; j < json_array_size(top5); j++) {
            json_t *pair = json_array_get(top5, j);
            int id = (int)json_integer_value(json_array_get(pair, 0));
            double want = json_number_value(json_array_get(pair, 1));
            double diff = fabs((double)row[id] - want);
            if (diff > st->max_abs_diff) st->max_abs_diff = diff;
            *sum_abs += diff;
            (*n_abs)++;
        }
        /* q8_ref carries no margin list: its own top-5 gives it. */
        double margin = json_is_array(margins)
                            ? json_number_value(json_array_get(margins, k))
                            : json_number_value(json_array_get(json_array_get(top5, 0), 1)) -
                                  json_number_value(json_array_get(json_array_get(top5, 1), 1));
        if (margin >= min_margin) {
            int want = (int)json_integer_value(json_array_get(json_array_get(top5, 0), 0));
            /* llama.cpp's argmax at this step: with quantized activations it can leave a clear
             * oracle argmax too, and no engine quantizing as ggml does is asked to do better. */
            json_t *llama_top5 = json_array_get(json_object_get(prompt, "top5"), k);
            int llama_want =
                (int)json_integer_value(json_array_get(json_array_get(llama_top5, 0), 0));
            if (against == AGAINST_F32_REF_AS_LLAMA_CPP && json_is_array(llama_top5) &&
                llama_want != want) {
                st->n_argmax_excused++;
            } else {
                st->n_argmax_checked++;
                if (top1_index(row, info.n_vocab) != want) st->n_argmax_mismatch++;
            }
        }
        st->n_steps++;
    }
    syn_context_free(ctx);
    free(logits);
    free(tokens);
    return ok;
}

/* Teacher-forces every prompt of the JSON array prompts through the model file (in tests/data). */
static bool run_prompts(const char *file, json_t *prompts, const syn_context_params *params,
                        agreement_against against, double min_margin, agreement_stats *stats) {
    syn_model *model = NULL;
    syn_model_params mp = syn_model_default_params();
    mp.prefetch = false;
    if (syn_model_load(test_data_path(file), &mp, &model) != SYN_OK) {
        fprintf(stderr, "agreement: cannot load %s: %s\n", file, syn_last_error());
        return false;
    }
    syn_model_wait_background(model); /* the interleaved copies, so every run reads them */
    double sum_abs = 0.0;
    long n_abs = 0;
    bool ok = json_is_array(prompts);
    for (size_t i = 0; ok && i < json_array_size(prompts); i++)
        ok = compare_prompt(model, params, json_array_get(prompts, i), against, min_margin, stats,
                            &sum_abs, &n_abs);
    stats->mean_abs_diff = n_abs ? sum_abs / (double)n_abs : 0.0;
    syn_model_free(model);
    return ok && stats->n_steps > 0;
}

bool agreement_run(const char *model_key, const syn_context_params *params,
                   agreement_against against, double min_margin, agreement_stats *stats) {
    memset(stats, 0, sizeof *stats);
    json_error_t jerr;
    json_t *root = json_load_file(test_data_path("llamacpp-greedy-tiny.json"), 0, &jerr);
    if (!root) {
        fprintf(stderr, "agreement: cannot read fixture: %s\n", jerr.text);
        return false;
    }
    json_t *entry = json_object_get(json_object_get(root, "models"), model_key);
    char file[256];
    snprintf(file, sizeof file, "%s.gguf", model_key);
    bool ok = entry && run_prompts(file, json_object_get(entry, "prompts"), params, against,
                                   min_margin, stats);
    json_decref(root);
    return ok;
}

bool agreement_run_arch(const char *file, const syn_context_params *params,
                        agreement_against against, double min_margin, agreement_stats *stats) {
    memset(stats, 0, sizeof *stats);
    char oracle[256];
    snprintf(oracle, sizeof oracle, "%s.oracle.json", file);
    json_error_t jerr;
    json_t *runs = json_load_file(test_data_path(oracle), 0, &jerr);
    if (!runs) {
        fprintf(stderr, "agreement: cannot read %s: %s\n", oracle, jerr.text);
        return false;
    }
    bool ok = run_prompts(file, runs, params, against, min_margin, stats);
    json_decref(runs);
    return ok;
}

void agreement_print(const char *what, const agreement_stats *s) {
    printf("%s: %d steps, max |diff| %.5f, mean %.5f, argmax checked %d, mismatches %d, left out "
           "(llama.cpp's differs) %d\n",
           what, s->n_steps, s->max_abs_diff, s->mean_abs_diff, s->n_argmax_checked,
           s->n_argmax_mismatch, s->n_argmax_excused);
}

void agreement_assert_reference(const char *file, double max_diff) {
    syn_context_params p = syn_context_default_params();
    p.backend = SYN_BACKEND_REFERENCE;
    agreement_stats s;
    assert_true(agreement_run_arch(file, &p, AGAINST_F32_REF, 0.01, &s));
    agreement_print(file, &s);
    assert_int_equal(s.n_steps, 3 * 32);
    assert_true(s.max_abs_diff < max_diff);
    assert_true(s.n_argmax_checked > 50);
    assert_int_equal(s.n_argmax_mismatch, 0);
}

agreement_stats agreement_assert_near_llama_cpp(const char *file, const syn_context_params *params,
                                                agreement_against against, double llama_max,
                                                double llama_mean, double max_factor) {
    agreement_stats s;
    assert_true(agreement_run_arch(file, params, against, 0.1, &s));
    printf("%s, %s KV, ", params->backend == SYN_BACKEND_REFERENCE ? "reference" : "optimized",
           params->kv_type == SYN_KV_F16 ? "f16" : "f32");
    agreement_print(file, &s);
    assert_int_equal(s.n_steps, 3 * 32);
    assert_true(s.max_abs_diff <= max_factor * llama_max + 0.005);
    assert_true(s.mean_abs_diff <= 1.15 * llama_mean + 0.002);
    assert_true(s.n_argmax_checked > 50);
    return s;
}

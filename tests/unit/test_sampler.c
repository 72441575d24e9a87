/* test_sampler.c: greedy, temperature, top-k/top-p/min-p, repetition, frequency and presence
 * penalties and seeding, each checked against hand-computed distributions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "synapse.h"

static syn_sampler_params plain(float temperature) {
    syn_sampler_params p = syn_sampler_default_params();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

static int32_t sample_once(syn_sampler *s, const float *logits, int32_t n) {
    int32_t tok = -1;
    assert_int_equal(syn_sampler_sample(s, logits, n, NULL, 0, &tok), SYN_OK);
    return tok;
}

/* Draws n_draws tokens and returns the frequency of each of n ids in freq. */
static void frequencies(const syn_sampler_params *p, const float *logits, int32_t n, int n_draws,
                        double *freq) {
    syn_sampler *s = NULL;
    assert_int_equal(syn_sampler_new(p, &s), SYN_OK);
    memset(freq, 0, sizeof(double) * (size_t)n);
    for (int i = 0; i < n_draws; i++)
        freq[sample_once(s, logits, n)] += 1.0 / n_draws;
    syn_sampler_free(s);
}

static void test_greedy_first_maximum(void **state) {
    (void)state;
    const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    syn_sampler_params p = plain(0.0f);
    syn_sampler *s = NULL;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    assert_int_equal(sample_once(s, logits, 5), 1); /* ties go to the first index */
    syn_sampler_free(s);
}

/* The specification of greedy: the first index whose logit is strictly above every earlier one. */
static int32_t first_maximum(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Long rows take greedy's vector scan (groups of 16, then a scalar tail): every length from 1 to
 * 100 and the maximum planted at each position, repeated in later lanes, groups and the tail;
 * zeros of either sign as the maximum; all -inf; and a NaN anywhere is refused by its index. */
static void test_greedy_long_rows(void **state) {
    (void)state;
    syn_sampler_params p = plain(0.0f);
    syn_sampler *s = NULL;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    float l[100];
    uint32_t rng = 12345;
    for (int32_t n = 1; n <= 100; n++) {
        for (int32_t at = 0; at < n; at++) {
            for (int32_t i = 0; i < n; i++) {
                rng = rng * 1664525u + 1013904223u;
                l[i] = (float)(rng >> 8) / (float)(1u << 24) - 2.0f; /* [-2, -1) */
            }
            l[at] = 3.0f;
            if (at + 5 < n) l[at + 5] = 3.0f; /* a tie in another lane or group: the first wins */
            if (at + 17 < n) l[at + 17] = 3.0f;
            const int32_t got = sample_once(s, l, n);
            if (got != first_maximum(l, n) || got != at)
                fail_msg("n %d, maximum at %d: got %d", n, at, got);
        }
    }
    for (int32_t i = 0; i < 40; i++)
        l[i] = -1.0f;
    l[7] = -0.0f;
    l[23] = 0.0f;
    l[38] = -0.0f;
    assert_int_equal(sample_once(s, l, 40), 7); /* -0 == +0: the first zero */
    for (int32_t i = 0; i < 40; i++)
        l[i] = -INFINITY;
    assert_int_equal(sample_once(s, l, 40), 0);
    for (int32_t at = 0; at < 40; at++) {
        for (int32_t i = 0; i < 40; i++)
            l[i] = (float)i;
        l[at] = NAN;
        int32_t tok = -7;
        char want[32];
        snprintf(want, sizeof want, "logits[%d] is NaN", at);
        assert_int_equal(syn_sampler_sample(s, l, 40, NULL, 0, &tok), SYN_ERR_INVALID_ARGUMENT);
        assert_int_equal(tok, -7);
        assert_non_null(strstr(syn_last_error(), want));
    }
    syn_sampler_free(s);
}

/* syn_sampler_sample_banned: banned tokens are never drawn, greedy or sampled, and the result is
 * exactly syn_sampler_sample's on a copy with those logits at -inf (the same draws for a seed);
 * the logits are left as they were; bad lists are refused. */
static void test_banned_tokens(void **state) {
    (void)state;
    float logits[40], masked[40];
    for (int i = 0; i < 40; i++)
        logits[i] = (float)((i * 7) % 11) * 0.3f;
    logits[9] = 9.0f; /* the best, then 31 */
    logits[31] = 8.0f;
    const int32_t banned[] = {9, 3};
    memcpy(masked, logits, sizeof masked);
    masked[9] = masked[3] = -INFINITY;
    syn_sampler_params modes[3] = {plain(0.0f), plain(1.0f), syn_sampler_default_params()};
    modes[2].repeat_penalty = 1.2f;
    const int32_t history[] = {31, 5};
    for (size_t m = 0; m < 3; m++) {
        syn_sampler *s = NULL, *ref = NULL;
        assert_int_equal(syn_sampler_new(&modes[m], &s), SYN_OK);
        assert_int_equal(syn_sampler_new(&modes[m], &ref), SYN_OK);
        for (int i = 0; i < 300; i++) {
            int32_t got = -1, want = -1;
            assert_int_equal(syn_sampler_sample_banned(s, logits, 40, history, 2, banned, 2, &got),
                             SYN_OK);
            assert_int_equal(syn_sampler_sample(ref, masked, 40, history, 2, &want), SYN_OK);
            if (got != want || got == 9 || got == 3)
                fail_msg("mode %zu, draw %d: %d, want %d", m, i, got, want);
        }
        int32_t tok = -1; /* nothing banned: syn_sampler_sample itself */
        assert_int_equal(syn_sampler_sample_banned(s, logits, 40, NULL, 0, NULL, 0, &tok), SYN_OK);
        if (m == 0) assert_int_equal(tok, 9);
        const int32_t other[] = {3}; /* the best not banned: greedy's first look is its answer */
        assert_int_equal(syn_sampler_sample_banned(s, logits, 40, NULL, 0, other, 1, &tok), SYN_OK);
        if (m == 0) assert_int_equal(tok, 9);
        float nan_banned[40]; /* a NaN in a banned logit does not count: it is -inf */
        memcpy(nan_banned, logits, sizeof nan_banned);
        nan_banned[3] = NAN;
        assert_int_equal(syn_sampler_sample_banned(s, nan_banned, 40, NULL, 0, other, 1, &tok),
                         SYN_OK);
        assert_int_not_equal(tok, 3);
        if (m == 0) assert_int_equal(tok, 9);
        nan_banned[9] = NAN; /* ... but one elsewhere is still refused */
        tok = -7;
        assert_int_equal(syn_sampler_sample_banned(s, nan_banned, 40, NULL, 0, other, 1, &tok),
                         SYN_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(syn_last_error(), "logits[9] is NaN"));
        assert_int_equal(tok, -7);
        syn_sampler_free(s);
        syn_sampler_free(ref);
    }
    assert_true(logits[9] == 9.0f && logits[3] == (float)((3 * 7) % 11) * 0.3f);
    syn_sampler_params p = plain(0.0f);
    syn_sampler *s = NULL;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    int32_t tok = -7;
    const int32_t out_of_range[] = {40}, negative[] = {-1};
    assert_int_equal(syn_sampler_sample_banned(s, logits, 40, NULL, 0, out_of_range, 1, &tok),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "banned id 40"));
    assert_int_equal(syn_sampler_sample_banned(s, logits, 40, NULL, 0, negative, 1, &tok),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_sampler_sample_banned(s, logits, 40, NULL, 0, NULL, 1, &tok),
                     SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(tok, -7);
    syn_sampler_free(s);
}

/* Logits log(0.5), log(0.3), log(0.2) at temperature 1 give those probabilities. */
static void test_temperature_one_matches_softmax(void **state) {
    (void)state;
    const float logits[] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    syn_sampler_params p = plain(1.0f);
    double f[3];
    frequencies(&p, logits, 3, 20000, f);
    assert_true(fabs(f[0] - 0.5) < 0.02 && fabs(f[1] - 0.3) < 0.02 && fabs(f[2] - 0.2) < 0.02);
}

/* Temperature 0.5 squares the probabilities before renormalising: 25:9:4 over 38. */
static void test_temperature_sharpens(void **state) {
    (void)state;
    const float logits[] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    syn_sampler_params p = plain(0.5f);
    double f[3];
    frequencies(&p, logits, 3, 20000, f);
    assert_true(fabs(f[0] - 25.0 / 38) < 0.02 && fabs(f[1] - 9.0 / 38) < 0.02 &&
                fabs(f[2] - 4.0 / 38) < 0.02);
}

static void test_top_k_keeps_k_best(void **state) {
    (void)state;
    const float logits[] = {logf(0.1f), logf(0.4f), logf(0.2f), logf(0.3f)};
    syn_sampler_params p = plain(1.0f);
    p.top_k = 2; /* ids 1 and 3 remain: 0.4 : 0.3 */
    double f[4];
    frequencies(&p, logits, 4, 20000, f);
    assert_true(f[0] == 0.0 && f[2] == 0.0);
    assert_true(fabs(f[1] - 4.0 / 7) < 0.02 && fabs(f[3] - 3.0 / 7) < 0.02);
}

/* Top-k without a penalty is found in place (a heap over the logits); with a penalty, through the
 * full candidate list. On Qwen2-sized logits with many ties, a penalty that only touches ids far
 * below the top-k must leave every draw of the same seed unchanged: the two paths pick the same
 * candidates in the same order (ties by ascending id). */
static void test_top_k_paths_agree(void **state) {
    (void)state;
    enum { N = 151936, DRAWS = 300 };
    static float logits[N];
    uint32_t x = 12345u;
    for (int32_t i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        logits[i] = (float)(x >> 24) / 16.0f; /* 256 distinct values: ties everywhere */
    }
    int32_t history[4] = {0};
    int32_t n_hist = 0;
    for (int32_t i = 0; i < N && n_hist < 4; i++)
        if (logits[i] == 0.0f) history[n_hist++] = i; /* the lowest logit: never in a top-k */
    assert_int_equal(n_hist, 4);
    const int32_t ks[] = {1, 40, 257, 1024};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        syn_sampler_params in_place = syn_sampler_default_params(), full = in_place;
        in_place.top_k = full.top_k = ks[t];
        in_place.temperature = full.temperature = 1.5f;
        in_place.seed = full.seed = 99;
        full.repeat_penalty = 1.3f;
        syn_sampler *a = NULL, *b = NULL;
        assert_int_equal(syn_sampler_new(&in_place, &a), SYN_OK);
        assert_int_equal(syn_sampler_new(&full, &b), SYN_OK);
        for (int d = 0; d < DRAWS; d++) {
            int32_t ta = -1, tb = -2;
            assert_int_equal(syn_sampler_sample(a, logits, N, history, (size_t)n_hist, &ta),
                             SYN_OK);
            assert_int_equal(syn_sampler_sample(b, logits, N, history, (size_t)n_hist, &tb),
                             SYN_OK);
            if (ta != tb)
                fail_msg("top_k %d, draw %d: %d in place, %d through the full list", ks[t], d, ta,
                         tb);
        }
        syn_sampler_free(a);
        syn_sampler_free(b);
    }
}

static void test_top_p_keeps_nucleus(void **state) {
    (void)state;
    const float logits[] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    syn_sampler_params p = plain(1.0f);
    p.top_p = 0.75f; /* 0.5 + 0.3 reaches 0.75: ids 0 and 1 */
    double f[4];
    frequencies(&p, logits, 4, 20000, f);
    assert_true(f[2] == 0.0 && f[3] == 0.0);
    assert_true(fabs(f[0] - 0.625) < 0.02);
}

static void test_min_p_drops_unlikely(void **state) {
    (void)state;
    const float logits[] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    syn_sampler_params p = plain(1.0f);
    p.min_p = 0.2f; /* threshold 0.1: id 3 (0.05) goes */
    double f[4];
    frequencies(&p, logits, 4, 20000, f);
    assert_true(f[3] == 0.0);
    assert_true(f[2] > 0.1);
}

/* llama.cpp's rule: a positive logit is divided by the penalty, a negative one multiplied. */
static void test_repeat_penalty(void **state) {
    (void)state;
    const float logits[] = {2.0f, 1.5f, -0.5f};
    syn_sampler_params p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    syn_sampler *s = NULL;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    const int32_t history[] = {0, 0, 2};
    int32_t tok = -1;
    /* 2.0 -> 1.0 so id 1 (1.5) wins greedily. */
    assert_int_equal(syn_sampler_sample(s, logits, 3, history, 3, &tok), SYN_OK);
    assert_int_equal(tok, 1);
    syn_sampler_free(s);
}

/* OpenAI's penalties, logit -= frequency * count + presence * (count > 0), count over the tokens
 * accepted as generated. Logits {2.0, 1.0, 0.5}, accepted 0, 0, 1, frequency 0.5, presence 0.25:
 *   id 0: 2.0 - 0.5 * 2 - 0.25 = 0.75;  id 1: 1.0 - 0.5 * 1 - 0.25 = 0.25;  id 2: 0.5 (unseen)
 *   exp(0.75) = 2.117000, exp(0.25) = 1.284025, exp(0.5) = 1.648721; sum 5.049746
 *   p = 0.419229, 0.254275, 0.326496 at temperature 1.
 * (Presence counted per occurrence would give p0 = 0.3599; no penalty p0 = 0.6285.) */
static void test_frequency_presence_penalties(void **state) {
    (void)state;
    const float logits[] = {2.0f, 1.0f, 0.5f};
    syn_sampler_params p = plain(1.0f);
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    p.seed = 7;
    syn_sampler *s = NULL;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    const int32_t accepted[] = {0, 0, 1};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(syn_sampler_accept(s, accepted[i]), SYN_OK);
    enum { DRAWS = 40000 };
    double f[3] = {0};
    for (int i = 0; i < DRAWS; i++)
        f[sample_once(s, logits, 3)] += 1.0 / DRAWS;
    syn_sampler_free(s);
    const double expected[3] = {0.419229, 0.254275, 0.326496};
    for (int i = 0; i < 3; i++)
        if (fabs(f[i] - expected[i]) > 0.01)
            fail_msg("id %d drawn %.4f of the time, expected %.4f", i, f[i], expected[i]);
}

/* The penalties count what syn_sampler_accept recorded, never the history (the prompt): greedy
 * over {2.0, 1.8, 0.5} (frequency 0.3, presence 0.2) picks id 0 with id 0 all over the history
 * and nothing accepted; once id 0 is accepted, 2.0 - 0.3 - 0.2 = 1.5 < 1.8 and id 1 wins; with
 * id 1 accepted too, 1.8 - 0.3 - 0.2 = 1.3 < 1.5 and id 0 is back. A negative frequency penalty
 * raises repeated ids: 1.8 + 0.5 = 2.3 beats 2.0. */
static void test_penalties_count_generated_only(void **state) {
    (void)state;
    const float logits[] = {2.0f, 1.8f, 0.5f};
    const int32_t prompt[] = {0, 0, 0, 0, 0, 0};
    syn_sampler_params p = plain(0.0f);
    p.frequency_penalty = 0.3f;
    p.presence_penalty = 0.2f;
    syn_sampler *s = NULL;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    int32_t tok = -1;
    assert_int_equal(syn_sampler_sample(s, logits, 3, prompt, 6, &tok), SYN_OK);
    assert_int_equal(tok, 0); /* the prompt's six 0s cost nothing */
    assert_int_equal(syn_sampler_accept(s, 0), SYN_OK);
    assert_int_equal(syn_sampler_sample(s, logits, 3, prompt, 6, &tok), SYN_OK);
    assert_int_equal(tok, 1);
    assert_int_equal(syn_sampler_accept(s, 1), SYN_OK);
    assert_int_equal(syn_sampler_sample(s, logits, 3, NULL, 0, &tok), SYN_OK);
    assert_int_equal(tok, 0);
    assert_int_equal(syn_sampler_accept(s, 99), SYN_OK); /* beyond n_vocab: ignored */
    assert_int_equal(syn_sampler_sample(s, logits, 3, NULL, 0, &tok), SYN_OK);
    assert_int_equal(tok, 0);
    assert_int_equal(syn_sampler_accept(s, -1), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_sampler_accept(NULL, 0), SYN_ERR_INVALID_ARGUMENT);
    syn_sampler_free(s);

    p = plain(0.0f);
    p.frequency_penalty = -0.5f;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    assert_int_equal(syn_sampler_accept(s, 1), SYN_OK);
    assert_int_equal(syn_sampler_sample(s, logits, 3, NULL, 0, &tok), SYN_OK);
    assert_int_equal(tok, 1);
    syn_sampler_free(s);
}

static void test_seed_reproducible(void **state) {
    (void)state;
    float logits[64];
    for (int i = 0; i < 64; i++)
        logits[i] = (float)((i * 37) % 11) * 0.1f;
    syn_sampler_params p = plain(1.0f);
    int32_t a[50], b[50], c[50];
    syn_sampler *s1 = NULL, *s2 = NULL, *s3 = NULL;
    p.seed = 42;
    assert_int_equal(syn_sampler_new(&p, &s1), SYN_OK);
    assert_int_equal(syn_sampler_new(&p, &s2), SYN_OK);
    p.seed = 43;
    assert_int_equal(syn_sampler_new(&p, &s3), SYN_OK);
    for (int i = 0; i < 50; i++) {
        a[i] = sample_once(s1, logits, 64);
        b[i] = sample_once(s2, logits, 64);
        c[i] = sample_once(s3, logits, 64);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    syn_sampler_free(s1);
    syn_sampler_free(s2);
    syn_sampler_free(s3);
}

/* A NaN logit is a numerical fault: refused in every mode, with the first NaN's index named,
 * wherever it lies (first, after the maximum, everywhere), and the token left unset. -inf (a
 * masked token) stays valid. */
static void test_nan_logits_refused(void **state) {
    (void)state;
    syn_sampler_params modes[4] = {plain(0.0f), plain(1.0f), syn_sampler_default_params(),
                                   plain(0.7f)};
    modes[3].repeat_penalty = 1.3f;
    const int32_t history[] = {1, 2};
    const float nan_first[] = {NAN, 1.0f, 2.0f, NAN};
    const float nan_last[] = {0.5f, 1.0f, 2.0f, NAN};
    const float all_nan[] = {NAN, NAN, NAN, NAN};
    const struct {
        const float *logits;
        const char *names;
    } cases[] = {{nan_first, "logits[0] is NaN"},
                 {nan_last, "logits[3] is NaN"},
                 {all_nan, "logits[0] is NaN"}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        syn_sampler *s = NULL;
        assert_int_equal(syn_sampler_new(&modes[m], &s), SYN_OK);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int32_t tok = -7;
            const syn_status st = syn_sampler_sample(s, cases[c].logits, 4, history, 2, &tok);
            if (st != SYN_ERR_INVALID_ARGUMENT || tok != -7 ||
                !strstr(syn_last_error(), cases[c].names))
                fail_msg("mode %zu, case %zu: status %d, token %d, message '%s'", m, c, st, tok,
                         syn_last_error());
        }
        const float masked[] = {-INFINITY, 1.0f, -INFINITY, 0.5f};
        assert_int_equal(sample_once(s, masked, 2), 1);
        syn_sampler_free(s);
    }
}

static void test_invalid_parameters(void **state) {
    (void)state;
    syn_sampler *s = NULL;
    syn_sampler_params p = plain(1.0f);
    p.top_p = 1.5f;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "top-p"));
    p = plain(1.0f);
    p.min_p = -0.1f;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_ERR_INVALID_ARGUMENT);
    p = plain(NAN);
    assert_int_equal(syn_sampler_new(&p, &s), SYN_ERR_INVALID_ARGUMENT);
    p = plain(1.0f);
    p.repeat_penalty = 0.0f;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_ERR_INVALID_ARGUMENT);
    assert_null(s);
    const float bad[] = {NAN, 2.5f, -2.01f, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = plain(1.0f);
        p.frequency_penalty = bad[i];
        assert_int_equal(syn_sampler_new(&p, &s), SYN_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(syn_last_error(), "frequency penalty"));
        p = plain(1.0f);
        p.presence_penalty = bad[i];
        assert_int_equal(syn_sampler_new(&p, &s), SYN_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(syn_last_error(), "presence penalty"));
        assert_null(s);
    }
    p = plain(1.0f);
    p.frequency_penalty = -2.0f; /* the ends of the range are valid */
    p.presence_penalty = 2.0f;
    assert_int_equal(syn_sampler_new(&p, &s), SYN_OK);
    syn_sampler_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_first_maximum),
        cmocka_unit_test(test_greedy_long_rows),
        cmocka_unit_test(test_banned_tokens),
        cmocka_unit_test(test_temperature_one_matches_softmax),
        cmocka_unit_test(test_temperature_sharpens),
        cmocka_unit_test(test_top_k_keeps_k_best),
        cmocka_unit_test(test_top_k_paths_agree),
        cmocka_unit_test(test_top_p_keeps_nucleus),
        cmocka_unit_test(test_min_p_drops_unlikely),
        cmocka_unit_test(test_repeat_penalty),
        cmocka_unit_test(test_frequency_presence_penalties),
        cmocka_unit_test(test_penalties_count_generated_only),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_nan_logits_refused),
        cmocka_unit_test(test_invalid_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

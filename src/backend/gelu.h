/*
 * gelu.h: GELU's tanh approximation, gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * rounded as ggml's CPU backend computes it: x is rounded to fp16, gelu of that value is rounded
 * to fp16, and inputs at or below -10 give 0, at or above 10 give x. llama.cpp's logits (and the
 * float32 oracles of tests/data/arch2) carry that rounding, so both backends use it: the exact
 * function lies up to 2e-3 from them on gemma3-s5, the rounded one about 6e-4.
 */
#ifndef SYN_BACKEND_GELU_H
#define SYN_BACKEND_GELU_H

#include <stdint.h>

/* gelu(x) with ggml's fp16 rounding. Thread-safe (the table behind it is built once). */
float syn_gelu_fp16(float x);

/* The table behind it: gelu of every binary16 value, as binary16 bits [65536] (the optimized
 * backend's geglu kernels, floats.h, read it). Thread-safe. */
const uint16_t *syn_gelu_fp16_table(void);

/* g[i] = syn_gelu_fp16(g[i]) * u[i], for g, u [n]: the gated FFN's activation (GEGLU). */
void syn_geglu_fp16(float *g, const float *u, int64_t n);

#endif

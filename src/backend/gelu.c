/* gelu.c: GELU through a table of its fp16 values (gelu.h), as ggml computes it. */
#include "backend/gelu.h"

#include <math.h>
#include <pthread.h>

#include "kernels/fp16.h"

/* gelu of every fp16 input, as fp16 bits: 128 KiB, filled once. */
static uint16_t gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void fill_table(void) {
    for (uint32_t h = 0; h < (1u << 16); h++) {
        const float x = syn_k_fp16_to_f32((uint16_t)h);
        /* in float, as ggml's table: the constants are sqrt(2/pi) and 0.044715 */
        const float y =
            0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
        gelu_table[h] = syn_k_f32_to_fp16(y);
    }
}

const uint16_t *syn_gelu_fp16_table(void) {
    pthread_once(&gelu_once, fill_table);
    return gelu_table;
}

float syn_gelu_fp16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    pthread_once(&gelu_once, fill_table);
    return syn_k_fp16_to_f32(gelu_table[syn_k_f32_to_fp16(x)]);
}

void syn_geglu_fp16(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        g[i] = syn_gelu_fp16(g[i]) * u[i];
}

/* fp16.h: IEEE binary16 <-> binary32 conversions for the kernels, self-contained so that the
 * kernel files (and the ARM test harness) build without the model module. */
#ifndef SYN_KERNELS_FP16_H
#define SYN_KERNELS_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t syn_k_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float syn_k_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Exact: every binary16 value, subnormals, infinities and NaNs included, is a binary32 value. */
static inline float syn_k_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return syn_k_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) return syn_k_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    /* zero or subnormal: mant * 2^-24, exact in binary32 */
    float v = (float)mant * syn_k_bits_f32(0x33800000u); /* 2^-24 */
    return sign ? -v : v;
}

/* Round to nearest, ties to even; overflow gives infinity, NaN stays a (quiet) NaN. */
static inline uint16_t syn_k_f32_to_fp16(float f) {
    uint32_t u = syn_k_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (abs < 0x38800000u) {                                   /* below 2^-14: subnormal */
        /* Adding 0.5 lets the FPU's own round-to-nearest-even produce the subnormal bits. */
        float r = syn_k_bits_f32(abs) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(syn_k_f32_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round half to even */
    return (uint16_t)(sign | (uint16_t)(abs >> 13));
}

#endif

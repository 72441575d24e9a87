/* cpu_features.h: the kernel ISA tiers, runtime CPU detection, and tier selection by name or by
 * the public tier (synapse.h's syn_isa_tier). */
#ifndef SYN_KERNELS_CPU_FEATURES_H
#define SYN_KERNELS_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

#include "synapse.h"

/* Kernel tiers, in order of preference within each architecture. */
typedef enum syn_isa {
    SYN_ISA_SCALAR = 0,  /* portable C; the reference every other tier is tested against */
    SYN_ISA_AVX2,        /* x86-64: AVX2 + FMA + F16C */
    SYN_ISA_AVX512_VNNI, /* x86-64: AVX-512 F/BW/VL + VNNI (256-bit VNNI forms) */
    SYN_ISA_AVX_VNNI,    /* x86-64: AVX-VNNI (VEX-encoded dot product, no AVX-512) */
    SYN_ISA_NEON_DOT,    /* aarch64: Advanced SIMD + dot product (SDOT) */
    SYN_ISA_I8MM,        /* aarch64: dot product + int8 matrix multiply (SMMLA) */
} syn_isa;

enum { SYN_ISA_COUNT = 6 };

/* "scalar", "avx2", "avx512-vnni", "avx-vnni", "neon-dot", "i8mm"; "?" for an invalid value. */
const char *syn_isa_name(syn_isa isa);

/* Parses a tier name (exactly as syn_isa_name spells it). SYN_ERR_INVALID_ARGUMENT when unknown. */
syn_status syn_isa_parse(const char *name, syn_isa *out);

/* True when this build contains the tier's kernels and this CPU (and OS) can run them. */
bool syn_isa_available(syn_isa isa);

/* SYN_OK, or SYN_ERR_UNAVAILABLE with a message naming the tier and what is missing. */
syn_status syn_isa_check(syn_isa isa);

/* The fastest available tier (SYN_ISA_SCALAR at worst). */
syn_isa syn_isa_best(void);

/* True on an x86-64 CPU with GFNI (CPUID.(EAX=7,ECX=0):ECX bit 8): the avx512-vnni tier then takes
 * its GFNI builds of the 4- and 5-bit matvecs (same results, fewer instructions). */
bool syn_cpu_has_gfni(void);

/* Names this CPU in buf (at most n bytes, NUL-terminated), for benchmark reports: on x86-64 the
 * CPUID brand string and the family and model numbers (AMD family 25 is Zen 3 / Zen 4, 26 Zen 5),
 * on aarch64 /proc/cpuinfo's implementer and part codes; "unknown CPU" where neither is known. */
void syn_cpu_describe(char *buf, size_t n);

/* "auto" -> syn_isa_best(); any other name -> syn_isa_parse() then syn_isa_check(). Never falls
 * back silently: an unavailable tier is SYN_ERR_UNAVAILABLE. */
syn_status syn_isa_resolve(const char *name, syn_isa *out);

/* The internal tier of a public one (synapse.h's syn_isa_tier, whose values start with "auto";
 * syn_isa has none, so that its switches stay exhaustive). False for SYN_TIER_AUTO and for a value
 * outside the public enum. */
bool syn_tier_isa(syn_isa_tier tier, syn_isa *out);

/* The internal tier to run for a public one: auto -> syn_isa_best(); any other must be known
 * (SYN_ERR_INVALID_ARGUMENT) and available (SYN_ERR_UNAVAILABLE naming what is missing). */
syn_status syn_resolve_tier(syn_isa_tier tier, syn_isa *out);

#endif

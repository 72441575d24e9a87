/* cpu_features.c: runtime detection of the kernel tiers (cpuid/xgetbv on x86-64, the auxiliary
 * vector's hwcaps on aarch64). Detection is read-only and cheap, so nothing is cached. */
#include "kernels/cpu_features.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "synapse_internal.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

static const char *const tier_names[SYN_TIER_COUNT] = {
    [SYN_TIER_AUTO] = "auto",         [SYN_TIER_SCALAR] = "scalar",
    [SYN_TIER_AVX2] = "avx2",         [SYN_TIER_AVX512_VNNI] = "avx512-vnni",
    [SYN_TIER_AVX_VNNI] = "avx-vnni", [SYN_TIER_NEON_DOT] = "neon-dot",
    [SYN_TIER_I8MM] = "i8mm",
};

const char *syn_isa_tier_name(syn_isa_tier tier) {
    return (unsigned)tier < SYN_TIER_COUNT ? tier_names[tier] : "?";
}

syn_status syn_isa_tier_parse(const char *name, syn_isa_tier *out) {
    syn_clear_error();
    if (!name || !out)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_isa_tier_parse: NULL argument");
    for (int i = 0; i < SYN_TIER_COUNT; i++) {
        if (strcmp(name, tier_names[i]) == 0) {
            *out = (syn_isa_tier)i;
            return SYN_OK;
        }
    }
    return syn_fail(SYN_ERR_INVALID_ARGUMENT,
                    "unknown isa '%s' (expected auto, scalar, avx2, avx512-vnni, avx-vnni, "
                    "neon-dot or i8mm)",
                    name);
}

#if defined(__x86_64__)
/* AVX-VNNI is CPUID.(EAX=7,ECX=1):EAX bit 4; the OS must also save YMM state (XCR0 bits 1-2). */
static bool x86_has_avx_vnni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6u) != 0x6u) return false;
    if (__get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 1, a, b, c, d);
    return (a >> 4) & 1u;
}

/* F16C is CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c"). */
static bool x86_has_avx2_base(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C)) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

bool syn_cpu_has_gfni(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    return (c >> 8) & 1u;
#else
    return false;
#endif
}

#if defined(__x86_64__)
void syn_cpu_describe(char *buf, size_t n) {
    if (n == 0) return;
    unsigned r[12] = {0}, a, b, c, d;
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) { /* int in clang's cpuid.h */
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    }
    char brand[sizeof r + 1]; /* 48 bytes, space-padded, NUL-terminated when shorter */
    memcpy(brand, r, sizeof r);
    brand[sizeof r] = '\0';
    size_t start = 0, end = strlen(brand);
    while (brand[start] == ' ')
        start++;
    while (end > start && brand[end - 1] == ' ')
        end--;
    brand[end] = '\0';
    const char *name = brand + start;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        snprintf(buf, n, "%s", *name ? name : "unknown x86-64 CPU");
        return;
    }
    /* CPUID.1:EAX: the displayed family adds the extended family to 15; the model takes the
     * extended model bits from base family 6 up, as Linux's x86_model() does (/proc/cpuinfo). */
    const unsigned base_family = (a >> 8) & 0xFu, base_model = (a >> 4) & 0xFu;
    const unsigned family = base_family == 0xFu ? base_family + ((a >> 20) & 0xFFu) : base_family;
    const unsigned model = base_family >= 6u ? (((a >> 16) & 0xFu) << 4) | base_model : base_model;
    snprintf(buf, n, "%s (family %u, model %u)", *name ? name : "x86-64", family, model);
}
#elif defined(__aarch64__)
void syn_cpu_describe(char *buf, size_t n) {
    if (n == 0) return;
    unsigned implementer = 0, part = 0;
    bool have_impl = false, have_part = false;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f) && !(have_impl && have_part)) {
        if (!have_impl) have_impl = sscanf(line, "CPU implementer : %x", &implementer) == 1;
        if (!have_part) have_part = sscanf(line, "CPU part : %x", &part) == 1;
    }
    if (f) fclose(f);
    if (have_impl && have_part)
        snprintf(buf, n, "aarch64 (implementer 0x%02x, part 0x%03x)", implementer, part);
    else
        snprintf(buf, n, "aarch64");
}
#else
void syn_cpu_describe(char *buf, size_t n) {
    if (n > 0) snprintf(buf, n, "unknown CPU");
}
#endif

/* NULL when available, else what is missing (for the error message). */
static const char *missing_feature(syn_isa_tier isa) {
    switch (isa) {
    case SYN_TIER_AUTO: break; /* not a tier of its own: resolve it first */
    case SYN_TIER_SCALAR: return NULL;
#if defined(__x86_64__)
    case SYN_TIER_AVX2: return x86_has_avx2_base() ? NULL : "AVX2/FMA/F16C";
    case SYN_TIER_AVX512_VNNI:
        return x86_has_avx2_base() && __builtin_cpu_supports("avx512f") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512vnni")
                   ? NULL
                   : "AVX-512 F/BW/VL/VNNI";
    case SYN_TIER_AVX_VNNI: return x86_has_avx2_base() && x86_has_avx_vnni() ? NULL : "AVX-VNNI";
    case SYN_TIER_NEON_DOT:
    case SYN_TIER_I8MM: return "an aarch64 build";
#elif defined(__aarch64__)
    case SYN_TIER_NEON_DOT:
        return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? NULL : "the dot-product extension";
    case SYN_TIER_I8MM:
        return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) && (getauxval(AT_HWCAP2) & HWCAP2_I8MM)
                   ? NULL
                   : "the dot-product and int8 matrix-multiply extensions";
    case SYN_TIER_AVX2:
    case SYN_TIER_AVX512_VNNI:
    case SYN_TIER_AVX_VNNI: return "an x86-64 build";
#else
    case SYN_TIER_AVX2:
    case SYN_TIER_AVX512_VNNI:
    case SYN_TIER_AVX_VNNI:
    case SYN_TIER_NEON_DOT:
    case SYN_TIER_I8MM: return "a build for its architecture";
#endif
    }
    return "a valid tier";
}

bool syn_isa_tier_available(syn_isa_tier isa) { return missing_feature(isa) == NULL; }

syn_status syn_isa_tier_check(syn_isa_tier isa) {
    const char *missing = missing_feature(isa);
    if (!missing) return SYN_OK;
    return syn_fail(SYN_ERR_UNAVAILABLE, "isa '%s' is unavailable: it needs %s",
                    syn_isa_tier_name(isa), missing);
}

syn_isa_tier syn_isa_tier_best(void) {
    static const syn_isa_tier preference[] = {SYN_TIER_AVX512_VNNI, SYN_TIER_AVX_VNNI,
                                              SYN_TIER_AVX2, SYN_TIER_I8MM, SYN_TIER_NEON_DOT};
    for (size_t i = 0; i < sizeof preference / sizeof preference[0]; i++) {
        if (syn_isa_tier_available(preference[i])) return preference[i];
    }
    return SYN_TIER_SCALAR;
}

syn_status syn_isa_tier_resolve(syn_isa_tier tier, syn_isa_tier *out) {
    if (tier == SYN_TIER_AUTO) {
        *out = syn_isa_tier_best();
        return SYN_OK;
    }
    if ((unsigned)tier >= SYN_TIER_COUNT)
        return syn_fail(SYN_ERR_INVALID_ARGUMENT, "unknown isa tier %d", (int)tier);
    *out = tier;
    return syn_isa_tier_check(tier);
}

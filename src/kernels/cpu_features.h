/* cpu_features.h: the kernel ISA tiers, runtime CPU detection, and tier selection by name or by
 * the public tier (synapse.h's syn_isa_tier). */
#ifndef SYN_KERNELS_CPU_FEATURES_H
#define SYN_KERNELS_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

#include "synapse.h"
#include "synapse_internal.h"

/* The kernel tiers are synapse.h's syn_isa_tier (its converters syn_isa_tier_name / _parse are
 * defined in cpu_features.c); kernel tables are indexed by it, SYN_TIER_AUTO's slot unused. */
enum { SYN_TIER_COUNT = SYN_TIER_I8MM + 1 };

/* True when this build contains the tier's kernels and this CPU (and OS) can run them. */
bool syn_isa_tier_available(syn_isa_tier isa);

/* SYN_OK, or SYN_ERR_UNAVAILABLE with a message naming the tier and what is missing. */
syn_status syn_isa_tier_check(syn_isa_tier isa);

/* The fastest available tier (SYN_TIER_SCALAR at worst). */
syn_isa_tier syn_isa_tier_best(void);

/* True on an x86-64 CPU with GFNI (CPUID.(EAX=7,ECX=0):ECX bit 8): the avx512-vnni tier then takes
 * its GFNI builds of the 4- and 5-bit matvecs (same results, fewer instructions). */
bool syn_cpu_has_gfni(void);

/* syn_cpu_describe (the benchmark's CPU name): declared in synapse_internal.h. */

/* syn_isa_tier_resolve (auto -> syn_isa_tier_best(), any other checked): declared in
 * synapse_internal.h, as the benchmark's int8 peak follows it. */

#endif

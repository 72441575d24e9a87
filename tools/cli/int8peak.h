/*
 * int8peak.h: the machine's peak rate of int8 multiply-adds with the instruction the optimized
 * backend's kernels use on a tier, measured on every thread with independent dependency chains
 * (so only the execution ports limit it): the ceiling for prefill, which is compute-bound.
 * `synapse bench` measures it in the same run as the prompt speeds it compares with it.
 */
#ifndef SYNAPSE_TOOL_INT8PEAK_H
#define SYNAPSE_TOOL_INT8PEAK_H

#include <stdint.h>

/* One thread's chains: iters rounds of the tier's int8 dot instruction on independent
 * accumulators; returns the multiply-adds done (what it computed is discarded). */
typedef uint64_t (*int8peak_chain_fn)(uint64_t iters);

/* The chain for a kernel tier's name ("avx512-vnni", "avx-vnni", "avx2"), or NULL where none is
 * measured (scalar, the ARM tiers). */
int8peak_chain_fn int8peak_chain(const char *isa);

/* 1e9 multiply-adds per second with n_threads threads running chain at once, the best of n_passes.
 * Returns the exit code (EXIT_RUNTIME with the error printed when threads cannot start). */
int int8peak_measure(int8peak_chain_fn chain, int32_t n_threads, int32_t n_passes, double *gmacs);

#endif

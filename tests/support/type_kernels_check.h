/* type_kernels_check.h: the checks of every quantized type's kernels on one tier against the
 * scalar tier (the specification), shared by the x86 unit test (tests/unit/test_kernels.c) and
 * the aarch64 harness run under qemu (tests/arm/test_kernels_arm.c). Portable C, no cmocka. */
#ifndef SYN_TEST_TYPE_KERNELS_CHECK_H
#define SYN_TEST_TYPE_KERNELS_CHECK_H

#include "kernels/kernels.h"

/* Runs every check of tier k against ref (the scalar table); returns the number of failed
 * checks, each printed with the tier, type and shape, and adds the passed ones to *n_passed. */
int type_kernels_check(const syn_kernels *k, const syn_kernels *ref, const char *name,
                       int *n_passed);

/* Where tier k reads the x16 layout of type: its shapes (several groups, long rows, two token
 * chunks, one block), each also through check_shape's row kernels; returns the failed checks and
 * adds the passed x16 checks (three row ranges per shape) to *n_x16_passed as well. Every check
 * of type_kernels_check covers the x16 kernels too where its shape has a whole group. */
int type_kernels_check_x16(const syn_kernels *k, const syn_kernels *ref, const char *name,
                           uint32_t type, int *n_passed, int *n_x16_passed);

/* Checks the scalar specification itself against float64 arithmetic on the same codes and the
 * Q8_K quantizer against its rule's properties; returns the number of failed checks. */
int type_kernels_check_spec(const syn_kernels *ref, int *n_passed);

#endif

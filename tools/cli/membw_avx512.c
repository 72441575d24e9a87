/* membw_avx512.c: the bandwidth probe's reads in 64-byte AVX-512 loads (membw_impl.h). */
#include <stdint.h>

typedef uint64_t membw_vec __attribute__((vector_size(64)));
#define MEMBW_READ membw_read_64
#include "membw_impl.h"

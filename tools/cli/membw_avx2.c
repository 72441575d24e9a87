/* membw_avx2.c: the bandwidth probe's reads in 32-byte AVX loads (membw_impl.h). */
#include <stdint.h>

typedef uint64_t membw_vec __attribute__((vector_size(32)));
#define MEMBW_READ membw_read_32
#include "membw_impl.h"

/* clock.h: the library's monotonic clock, syn_now_ms (declared in synapse_internal.h, which the
 * tools' timings share). */
#ifndef SYN_CORE_CLOCK_H
#define SYN_CORE_CLOCK_H

#include "synapse_internal.h"

#endif

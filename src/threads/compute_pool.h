/* compute_pool.h: the thread pool behind a public syn_compute_pool, for the engine. */
#ifndef SYN_COMPUTE_POOL_H
#define SYN_COMPUTE_POOL_H

#include "synapse.h"
#include "threads/threadpool.h"

syn_threadpool *syn_compute_pool_threads(const syn_compute_pool *pool);

#endif

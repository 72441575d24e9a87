/* engine.h: internals of syn_engine that tests reach (the public API is in synapse.h). */
#ifndef SYN_ENGINE_ENGINE_H
#define SYN_ENGINE_ENGINE_H

#include "synapse.h"

/* Makes the engine's next step fail as a forward pass would (SYN_ERR_INTERNAL), to test that a
 * failed step fails its requests and leaves the engine usable. */
void syn_engine_fail_next_step(syn_engine *engine);

#endif

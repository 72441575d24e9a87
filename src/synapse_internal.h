/*
 * synapse_internal.h: the library's internal API, the one header of src/ that tools/ may include.
 *
 * What the synapse tool legitimately needs beyond include/synapse.h: the GGUF reader and writer
 * (gen-model, inspect), the weight quantizers (gen-model), the CPU description and the kernel
 * tiers (bench), the model's tensor table (inspect, bench), and the small helpers the library
 * and the tools would otherwise each write (the clock, UTF-8 decoding, tokenizing into a new
 * array). Nothing here is exported from libsynapse.so (hidden visibility): the tools link the
 * static library. Everything here may change with the library.
 */
#ifndef SYNAPSE_INTERNAL_H
#define SYNAPSE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

/* ---- Tokenizing ---- */

/* syn_tokenize into a new malloc'd array sized to fit (*ids; the caller frees it). */
syn_status syn_tokenize_new(const syn_tokenizer *tok, const char *text, size_t len,
                            bool add_special, bool parse_special, int32_t **ids, size_t *n_ids);

#endif

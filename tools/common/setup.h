/*
 * setup.h: model and context set-up for the commands, with one-line errors: the SIGBUS guard of a
 * mapped model file, loading, contexts, tokenizing and chat formatting into new buffers.
 */
#ifndef SYNAPSE_TOOL_SETUP_H
#define SYNAPSE_TOOL_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"
#include "synapse.h"

/* Whether a background weight prefetch helps a run with n_threads compute threads (0: one per
 * core): only when a core is left for it. */
bool prefetch_pays(int32_t n_threads);
/* Makes a SIGBUS from the mapping of the file at path (the file truncated or overwritten in
 * place while mapped) print one error line naming it and exit 1, instead of killing the process
 * without a word. Call before mapping the file. The handler names the file mapped at the faulting
 * address (from /proc/self/maps); where that cannot be read, the last call's path. */
void guard_mapped_file(const char *path);

/* Loads path under guard_mapped_file (prefetching weights in the background when prefetch;
 * syn_model_params.huge_pages and .interleave as given); the error "cannot load 'PATH': <cause>"
 * (exit 1). */
int load_model(const char *path, bool prefetch, bool huge_pages, bool interleave, syn_model **out);

/* Loads the tokenizer of path alone (syn_tokenizer_load: any architecture, or a vocabulary-only
 * file) under guard_mapped_file; the error "cannot load the tokenizer of 'PATH': <cause>". */
int load_tokenizer(const char *path, syn_tokenizer **out);

/* The context for o's backend, tier, KV type and threads, holding n_ctx tokens. */
int new_context(const syn_model *model, const gen_opts *o, uint32_t n_ctx, syn_context **out);

/* syn_tokenize into a malloc'd array sized to fit, as an exit code. Caller frees *ids. */
int tokenize_text(const syn_tokenizer *tok, const char *text, size_t len, bool add_special,
                  bool parse_special, int32_t **ids, size_t *n);

/* syn_chat_format into a malloc'd NUL-terminated string. Caller frees *text. */
int format_chat(const syn_model *model, const char *template_name, const syn_chat_message *msgs,
                size_t n_msgs, char **text, size_t *len);

/* Checks every id against the vocabulary. An id outside it is a runtime error (exit 1), not a
 * usage error: only the loaded file knows its vocabulary size. */
int check_token_ids(const syn_tokenizer *tok, const int32_t *ids, size_t n);

#endif

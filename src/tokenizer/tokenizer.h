/*
 * tokenizer.h: the tokenizer loaded from a GGUF file: byte-level BPE (tokenizer.ggml.model
 * "gpt2") with a pre-tokenizer of the table in pretokenize.c, or SentencePiece ("llama"). The
 * public functions in synapse.h are thin wrappers. struct syn_tokenizer and the helpers shared
 * inside src/tokenizer/ are in tokenizer_internal.h.
 */
#ifndef SYN_TOKENIZER_H
#define SYN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "synapse.h"

typedef struct syn_tokenizer syn_tokenizer;

/* Reads tokenizer.ggml.{model,pre,tokens,token_type,merges or scores,bos/eos/padding ids} from f
 * and builds the vocabulary. n_vocab_model is the embedding's row count: the token list must not
 * exceed it. Errors name the key (unknown model or pre-tokenizer: SYN_ERR_UNSUPPORTED; malformed
 * merges, ids out of range: SYN_ERR_FORMAT). Token strings may point into the mapping: f must
 * outlive the tokenizer. */
syn_status tokenizer_load(const gguf_file *f, int32_t n_vocab_model, syn_tokenizer **out);
void tokenizer_free(syn_tokenizer *tok);

/* Whether id is a control, user-defined or unused token (markup such as <|im_start|> or
 * <tool_call>, not text the model writes byte by byte). */
bool tokenizer_is_special(const syn_tokenizer *tok, int32_t id);

#endif

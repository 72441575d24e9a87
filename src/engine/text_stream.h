/*
 * text_stream.h: the text one engine request streams: its tokens detokenized one at a time, with
 * the text that may be the start of a stop string held back until the next token settles it, so
 * that no part of a stop string is ever handed out.
 *
 * Use: text_stream_push per generated token, text_stream_finish once at the end; each hands out
 * the text ready to stream (NUL-terminated, inside the stream), which stays valid until the
 * text_stream_release that must follow it. Not thread-safe: one owner at a time (the scheduler).
 */
#ifndef SYN_ENGINE_TEXT_STREAM_H
#define SYN_ENGINE_TEXT_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

typedef struct text_stream {
    syn_detok_stream *detok;
    char **stops; /* [n_stops] NUL-terminated copies of the stop strings */
    size_t n_stops;
    char *held; /* [held_len] text not yet streamed (NUL-terminated once allocated) */
    size_t held_len, held_cap;
    size_t handed; /* bytes at the start of held handed out and not yet released */
    char saved;    /* the byte the NUL after the handed-out text replaced */
} text_stream;

/* Copies the stop strings (n_stops of them, each non-empty) and starts a detokenizer over tok.
 * On failure ts may hold part of that: text_stream_free frees it. */
syn_status text_stream_init(text_stream *ts, const syn_tokenizer *tok, const char *const *stops,
                            size_t n_stops);

/* Frees what ts holds and empties it (a zeroed or already freed stream is fine). */
void text_stream_free(text_stream *ts);

/* Adds token id's text. *text / *len: what may now be streamed. Returns true when a stop string is
 * complete: *text is then what comes before it, and nothing after it is ever handed out. */
bool text_stream_push(text_stream *ts, int32_t id, const char **text, size_t *len);

/* The end of the stream: *len bytes at the returned text are all that is left, the detokenizer's
 * held-back bytes included, or nothing when `stopped` (a stop string ended the request). */
const char *text_stream_finish(text_stream *ts, bool stopped, size_t *len);

/* Drops the text the last push or finish handed out. */
void text_stream_release(text_stream *ts);

#endif

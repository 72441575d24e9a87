/* text_stream.c: a request's streamed text: detokenization and the stop-string hold-back. */
#include "engine/text_stream.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { DETOK_PIECE = 1024 }; /* enough for any Qwen2 token (syn_detok_stream_push) */

syn_status text_stream_init(text_stream *ts, const syn_tokenizer *tok, const char *const *stops,
                            size_t n_stops) {
    memset(ts, 0, sizeof *ts);
    ts->stops = calloc(n_stops ? n_stops : 1, sizeof *ts->stops);
    bool ok = ts->stops != NULL;
    for (size_t i = 0; ok && i < n_stops; i++, ts->n_stops++)
        ok = (ts->stops[i] = strdup(stops[i])) != NULL;
    if (!ok) return syn_fail(SYN_ERR_NO_MEMORY, "out of memory for %zu stop strings", n_stops);
    return syn_detok_stream_new(tok, &ts->detok);
}

void text_stream_free(text_stream *ts) {
    syn_detok_stream_free(ts->detok);
    for (size_t i = 0; ts->stops && i < ts->n_stops; i++)
        free(ts->stops[i]);
    free(ts->stops);
    free(ts->held);
    memset(ts, 0, sizeof *ts);
}

/* Appends text to the held-back text, keeping it NUL-terminated (on failure the text is lost,
 * which only a failed allocation of a few bytes can cause). */
static void hold(text_stream *ts, const char *text, size_t len) {
    if (ts->held_len + len + 1 > ts->held_cap) {
        const size_t cap = (ts->held_len + len + 1) * 2;
        char *grown = realloc(ts->held, cap);
        if (!grown) return;
        ts->held = grown;
        ts->held_cap = cap;
    }
    memcpy(ts->held + ts->held_len, text, len);
    ts->held_len += len;
    ts->held[ts->held_len] = '\0';
}

/* Where the earliest stop string starts in the held text, or held_len when none is complete. */
static size_t find_stop(const text_stream *ts) {
    size_t at = ts->held_len;
    for (size_t i = 0; i < ts->n_stops; i++) {
        const char *hit = memmem(ts->held, ts->held_len, ts->stops[i], strlen(ts->stops[i]));
        if (hit && (size_t)(hit - ts->held) < at) at = (size_t)(hit - ts->held);
    }
    return at;
}

/* How many bytes at the end of the held text could begin a stop string: they wait for the next
 * token. */
static size_t stop_prefix_at_end(const text_stream *ts) {
    size_t keep = 0;
    for (size_t i = 0; i < ts->n_stops; i++) {
        const size_t len = strlen(ts->stops[i]);
        for (size_t k = len - 1 < ts->held_len ? len - 1 : ts->held_len; k > keep; k--)
            if (memcmp(ts->held + ts->held_len - k, ts->stops[i], k) == 0) {
                keep = k;
                break;
            }
    }
    return keep;
}

/* Hands out the first n held bytes, NUL-terminated in place until text_stream_release. */
static const char *hand_out(text_stream *ts, size_t n) {
    ts->handed = n;
    if (!ts->held) return ""; /* n is 0: nothing could be held */
    ts->saved = ts->held[n];
    ts->held[n] = '\0';
    return ts->held;
}

bool text_stream_push(text_stream *ts, int32_t id, const char **text, size_t *len) {
    char piece[DETOK_PIECE];
    size_t n = 0;
    if (syn_detok_stream_push(ts->detok, id, piece, sizeof piece, &n) != SYN_OK) n = 0;
    hold(ts, piece, n < sizeof piece ? n : sizeof piece);
    const size_t stop_at = find_stop(ts);
    const bool stopped = stop_at < ts->held_len;
    *len = stopped ? stop_at : ts->held_len - stop_prefix_at_end(ts);
    *text = hand_out(ts, *len);
    return stopped;
}

const char *text_stream_finish(text_stream *ts, bool stopped, size_t *len) {
    char tail[DETOK_PIECE];
    size_t n = 0;
    if (!stopped && syn_detok_stream_flush(ts->detok, tail, sizeof tail, &n) == SYN_OK)
        hold(ts, tail, n);
    if (stopped) ts->held_len = 0; /* the stop string and what followed it */
    hold(ts, "", 0);               /* NUL-terminates */
    *len = ts->held_len;
    return hand_out(ts, ts->held_len);
}

void text_stream_release(text_stream *ts) {
    if (!ts->held) return;
    ts->held[ts->handed] = ts->saved;
    memmove(ts->held, ts->held + ts->handed, ts->held_len - ts->handed + 1);
    ts->held_len -= ts->handed;
    ts->handed = 0;
}

/* generate.c: the sample -> stream -> decode loop behind `synapse run` and `synapse chat`. */
#include "generate.h"

#include "common/args.h"
#include "common/text.h"
#include "synapse_internal.h"
#include <stdlib.h>
#include <string.h>

int tokens_push(token_vec *v, int32_t id) { return tokens_append(v, &id, 1); }

int tokens_append(token_vec *v, const int32_t *ids, size_t n) {
    if (n == 0) return EXIT_OK;
    if (v->n + n > v->cap) {
        size_t cap = v->cap ? v->cap : 64;
        while (cap < v->n + n)
            cap *= 2;
        int32_t *grown = realloc(v->ids, cap * sizeof *grown);
        if (!grown) return fail_runtime("out of memory holding %zu tokens", v->n + n);
        v->ids = grown;
        v->cap = cap;
    }
    memcpy(v->ids + v->n, ids, n * sizeof *ids);
    v->n += n;
    return EXIT_OK;
}

const char *stop_reason_name(stop_reason r) {
    switch (r) {
    case STOP_EOG: return "eog";
    case STOP_CONTEXT: return "context";
    case STOP_LENGTH: break;
    }
    return "length";
}

/* Emits text: to the stream (flushed, so that it appears token by token) and to the result. */
static int emit(const gen_request *req, gen_result *res, const char *s, size_t n) {
    if (n == 0) return EXIT_OK;
    if (req->stream && (fwrite(s, 1, n, req->stream) != n || fflush(req->stream) != 0))
        return fail_runtime("cannot write the generated text");
    return text_append(&res->text, s, n);
}

/* The loop proper. */
static int run_loop(const gen_request *req, token_vec *history, gen_result *res,
                    syn_detok_stream *detok) {
    int32_t n_vocab = syn_tokenizer_n_vocab(req->tok);
    const int32_t *eog = NULL; /* with ignore_eos: the tokens that cannot be drawn */
    const int32_t n_eog = req->ignore_eos ? syn_tokenizer_eog_ids(req->tok, &eog) : 0;
    char piece[1024]; /* enough for any Qwen2 token (see syn_detok_stream_push) */
    size_t n_piece = 0;
    int rc;
    for (int32_t i = 0; i < req->n_predict; i++) {
        const float *logits = syn_context_logits(req->ctx);
        if (!logits) return fail_runtime("no logits to sample from (nothing decoded)");
        int32_t id = -1;
        if (syn_sampler_sample_banned(req->sampler, logits, n_vocab, history->ids, history->n, eog,
                                      (size_t)n_eog, &id) != SYN_OK)
            return fail_lib("sampling failed at generated token %d", i);
        if (i == 0) res->t_first_ms = syn_now_ms();
        if (!req->ignore_eos && syn_tokenizer_is_eog(req->tok, id)) {
            res->stop = STOP_EOG;
            return EXIT_OK;
        }
        if ((rc = tokens_push(history, id)) != EXIT_OK) return rc;
        res->n_generated++;
        if (syn_detok_stream_push(detok, id, piece, sizeof piece, &n_piece) != SYN_OK)
            return fail_lib("cannot decode token %d", id);
        if ((rc = emit(req, res, piece, n_piece)) != EXIT_OK) return rc;
        if (i + 1 == req->n_predict) break; /* the last token need not be decoded */
        if (syn_context_n_past(req->ctx) >= syn_context_n_ctx(req->ctx)) {
            res->stop = STOP_CONTEXT;
            return EXIT_OK;
        }
        if (syn_context_decode(req->ctx, &id, 1, NULL) != SYN_OK)
            return fail_lib("decoding failed at position %u", syn_context_n_past(req->ctx));
        res->n_decode++;
    }
    res->stop = STOP_LENGTH;
    return EXIT_OK;
}

int generate(const gen_request *req, token_vec *history, gen_result *res) {
    memset(res, 0, sizeof *res);
    syn_detok_stream *detok = NULL;
    if (syn_detok_stream_new(req->tok, &detok) != SYN_OK)
        return fail_lib("cannot start the detokenizer");
    int rc = run_loop(req, history, res, detok);
    if (rc == EXIT_OK) {
        /* Whatever the detokenizer still holds (an incomplete character) comes out now. */
        char piece[1024];
        size_t n_piece = 0;
        if (syn_detok_stream_flush(detok, piece, sizeof piece, &n_piece) != SYN_OK)
            rc = fail_lib("cannot flush the detokenizer");
        else
            rc = emit(req, res, piece, n_piece);
    }
    res->t_end_ms = syn_now_ms();
    syn_detok_stream_free(detok);
    return rc;
}

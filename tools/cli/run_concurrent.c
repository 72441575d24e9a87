/* run_concurrent.c: `synapse run --concurrent-requests N`: one request per line of a file, all
 * served by one syn_engine. Lines are read and submitted as the engine gets through them (at most
 * WINDOW_PER_SLOT x N in flight) and reported in file order as they finish, the JSON streamed out
 * too: memory stays the same whatever the file's length. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"
#include "run.h"
#include "synapse_internal.h"

/* Requests in flight per engine slot: submitted (or failed before submission) but not reported
 * yet. Two per slot keep every slot busy while the oldest request is awaited. */
enum { WINDOW_PER_SLOT = 2 };

/* One non-empty line of the file and what became of it. */
typedef struct line_req {
    size_t line;     /* 1-based line number in the file */
    int32_t *prompt; /* [n_prompt] its token ids (BOS first when the model asks for one) */
    size_t n_prompt;
    syn_request *req; /* NULL when it failed before it could be submitted */
    char error[512];  /* why it failed before submission ("" otherwise) */
} line_req;

/* Releases r (cancelling its request when unfinished) and clears it for the next line. */
static void line_req_clear(line_req *r) {
    syn_request_free(r->req);
    free(r->prompt);
    memset(r, 0, sizeof *r);
}

/* The prompt file, read one line at a time. */
typedef struct line_reader {
    const char *path;
    FILE *file;
    char *buf; /* the current line (getline's buffer) */
    size_t cap;
    size_t line; /* lines read so far, empty ones included */
} line_reader;

/* The next non-empty line into *text (valid until the next call) and *len; *len == 0 at the end.
 * '\n' ends a line and a '\r' just before it is dropped, so the final newline adds no line. */
static int next_line(line_reader *rd, const char **text, size_t *len) {
    for (;;) {
        ssize_t n = getline(&rd->buf, &rd->cap, rd->file);
        if (n < 0) {
            *len = 0;
            return feof(rd->file) ? EXIT_OK
                                  : fail_runtime("cannot read '%s': %s", rd->path, strerror(errno));
        }
        rd->line++;
        if (n > 0 && rd->buf[n - 1] == '\n') n--;
        if (n > 0 && rd->buf[n - 1] == '\r') n--;
        if (n > 0) {
            *text = rd->buf;
            *len = (size_t)n;
            return EXIT_OK;
        }
    }
}

/* syn_chat_format of one user turn (after --system, if any) into a malloc'd string. */
static syn_status chat_text(const syn_model *model, const run_opts *o, const char *user,
                            char **text, size_t *len) {
    syn_chat_message msgs[2];
    size_t n = 0;
    if (o->system) msgs[n++] = (syn_chat_message){"system", o->system};
    msgs[n++] = (syn_chat_message){"user", user};
    return syn_chat_format_new(model, o->g.chat_template, msgs, n, true, text, len);
}

/* Builds r's prompt from the line's bytes as `synapse run -p LINE` would (chat wrapping, the
 * model's BOS). A failure is the line's own: false with r->error naming the cause, and the other
 * lines still run. */
static bool build_line_prompt(const syn_model *model, const run_opts *o, const char *line_text,
                              size_t line_len, line_req *r) {
    char *line = NULL, *chat = NULL;
    const char *text = line_text;
    size_t len = line_len;
    bool ok = false;
    if (o->chat) {
        if (memchr(line_text, '\0', line_len)) {
            snprintf(r->error, sizeof r->error,
                     "the line contains a NUL byte, which --chat cannot pass on");
            return false;
        }
        line = malloc(line_len + 1);
        if (!line) goto oom;
        memcpy(line, line_text, line_len);
        line[line_len] = '\0';
        syn_status st = chat_text(model, o, line, &chat, &len);
        if (st == SYN_ERR_NO_MEMORY) goto oom;
        if (st != SYN_OK) {
            snprintf(r->error, sizeof r->error, "cannot format the chat: %s", syn_last_error());
            goto done;
        }
        text = chat;
    }
    if (syn_tokenize_new(syn_model_tokenizer(model), text, len, true, true, &r->prompt,
                         &r->n_prompt) != SYN_OK) {
        snprintf(r->error, sizeof r->error, "cannot tokenize the line: %s", syn_last_error());
        goto done;
    }
    ok = true;
    goto done;
oom:
    snprintf(r->error, sizeof r->error, "out of memory for the prompt of %zu bytes", line_len);
done:
    free(line);
    free(chat);
    return ok;
}

/* The text of ids[n], into *text (malloc'd, NUL-terminated). */
static int detokenize_all(const syn_tokenizer *tok, const int32_t *ids, size_t n, char **text,
                          size_t *len) {
    size_t cap = n * 16 + 16, need = 0;
    for (;;) {
        char *buf = malloc(cap + 1);
        if (!buf) return fail_runtime("out of memory decoding %zu tokens", n);
        syn_status st = syn_detokenize(tok, ids, n, buf, cap, &need);
        if (st == SYN_OK) {
            buf[need] = '\0';
            *text = buf;
            *len = need;
            return EXIT_OK;
        }
        free(buf);
        if (st != SYN_ERR_BUFFER_TOO_SMALL || need <= cap)
            return fail_lib("cannot decode the generated tokens");
        cap = need;
    }
}

/* Prints request i in plain mode: the header line, then the text and a newline (a request that
 * failed before generating anything has only its header). */
static void print_plain(size_t i, const line_req *r, const syn_request_result *res,
                        const char *text, size_t len) {
    if (res->finish == SYN_FINISH_ERROR)
        printf("--- request %zu (line %zu, error: %s)\n", i, r->line, res->error);
    else
        printf("--- request %zu (line %zu, %s, %zu tokens)\n", i, r->line,
               syn_finish_reason_name(res->finish), res->n_tokens);
    if (res->finish == SYN_FINISH_ERROR && len == 0) return; /* nothing was generated */
    fwrite(text, 1, len, stdout);
    putchar('\n');
}

static json_t *request_json(size_t i, const line_req *r, const syn_request_result *res,
                            const char *text, size_t len) {
    bool failed = res->finish == SYN_FINISH_ERROR;
    return json_pack(
        "{s:I, s:I, s:o, s:o, s:o, s:s, s:I, s:f, s:f, s:f, s:o}", "index", (json_int_t)i, "line",
        (json_int_t)r->line, "prompt_ids", json_ids(r->prompt, r->n_prompt), "generated_ids",
        json_ids(res->tokens, res->n_tokens), "text", json_utf8(text, len), "finish",
        syn_finish_reason_name(res->finish), "cached_tokens", (json_int_t)res->n_cached_tokens,
        "queue_ms", res->queue_ms, "ttft_ms", res->ttft_ms, "total_ms", res->total_ms, "error",
        failed ? json_text(res->error) : json_null());
}

/* The totals the aggregate line reports. */
typedef struct run_totals {
    size_t n_requests, n_failed;
    uint64_t n_generated;
    double t_first_submit, t_last_done;
} run_totals;

/* Builds r's prompt from the line and submits it. A failure is the line's own (r->error). */
static void submit_line(const syn_model *model, const run_opts *o, syn_engine *engine,
                        const char *text, size_t len, line_req *r) {
    if (!build_line_prompt(model, o, text, len, r)) return;
    syn_request_params params = syn_request_default_params();
    params.prompt_tokens = r->prompt;
    params.n_prompt_tokens = r->n_prompt;
    params.max_tokens = o->g.n_predict;
    params.sampling = o->g.sampling;
    params.ignore_eos = o->ignore_eos;
    /* One by one rather than with syn_engine_run, so that a request the engine refuses (too long
     * for the context or the budget) fails alone. */
    if (syn_engine_submit(engine, &params, &r->req) != SYN_OK)
        snprintf(r->error, sizeof r->error, "%s", syn_last_error());
}

/* Waits for request i (r) and prints it, plain or as the next element of the JSON array; the
 * caller checks that the output went out. */
static int report_request(const syn_model *model, const run_opts *o, size_t i, const line_req *r,
                          run_totals *t) {
    syn_request_result res = {
        .finish = SYN_FINISH_ERROR, .status = SYN_ERR_INVALID_ARGUMENT, .error = r->error};
    if (r->req) syn_request_wait(r->req, &res);
    t->t_last_done = syn_now_ms();
    t->n_generated += res.n_tokens;
    char *text = NULL;
    size_t len = 0;
    int rc = detokenize_all(syn_model_tokenizer(model), res.tokens, res.n_tokens, &text, &len);
    if (rc != EXIT_OK) return rc;
    if (res.finish == SYN_FINISH_ERROR) {
        t->n_failed++;
        fail_runtime("request %zu (line %zu): %s", i, r->line, res.error);
    }
    if (!o->json) {
        print_plain(i, r, &res, text, len);
    } else {
        json_t *obj = request_json(i, r, &res, text, len);
        if (!obj)
            rc = fail_runtime("out of memory building the JSON output");
        else if (json_dumpf(obj, stdout, JSON_DUMP_FLAGS) != 0)
            rc = fail_runtime("cannot write the JSON output");
        json_decref(obj);
    }
    free(text);
    return rc;
}

/* Runs every line of rd, the first one (text, len) already read: at most window requests in
 * flight, each reported as soon as it and every one before it have finished. */
static int run_lines(const syn_model *model, const run_opts *o, syn_engine *engine, line_reader *rd,
                     const char *text, size_t len, run_totals *t) {
    const size_t window = (size_t)WINDOW_PER_SLOT * (size_t)o->concurrent;
    line_req *ring = calloc(window, sizeof *ring);
    if (!ring) return fail_runtime("out of memory for %zu requests", window);
    size_t head = 0, n_in_flight = 0;
    int rc = EXIT_OK;
    t->t_first_submit = t->t_last_done = syn_now_ms();
    if (o->json) fputs("{\"requests\": [", stdout);
    while (rc == EXIT_OK && (len > 0 || n_in_flight > 0)) {
        for (; rc == EXIT_OK && len > 0 && n_in_flight < window; n_in_flight++) {
            line_req *r = &ring[(head + n_in_flight) % window];
            r->line = rd->line;
            submit_line(model, o, engine, text, len, r);
            rc = next_line(rd, &text, &len);
        }
        if (rc != EXIT_OK) break;
        line_req *r = &ring[head];
        if (o->json && t->n_requests > 0)
            fputs(", ", stdout); /* as jansson separates array elements */
        rc = report_request(model, o, t->n_requests, r, t);
        if (rc == EXIT_OK)
            rc =
                check_stdout(); /* per request: the output streams, and lost output stops the run */
        line_req_clear(r);      /* its result is no longer needed */
        head = (head + 1) % window;
        n_in_flight--;
        t->n_requests++;
    }
    for (size_t k = 0; k < n_in_flight; k++)
        line_req_clear(&ring[(head + k) % window]); /* cancels them */
    free(ring);
    return rc;
}

/* Prints the aggregate figures: on stderr, or as the JSON object's "aggregate" member (closing it).
 */
static int print_aggregate(const run_opts *o, const syn_engine_stats *before,
                           const syn_engine_stats *after, const run_totals *t) {
    /* The same figures as syn_engine_run's syn_run_stats, from the engine's counters. */
    const double wall_ms = t->t_last_done - t->t_first_submit;
    const double tok_s = wall_ms > 0 ? (double)t->n_generated * 1e3 / wall_ms : 0.0;
    const double decode_ms = after->decode_steps_ms - before->decode_steps_ms;
    const uint64_t decode_tokens = after->decode_steps_tokens - before->decode_steps_tokens;
    const double decode_tok_s = decode_ms > 0 ? (double)decode_tokens * 1e3 / decode_ms : 0.0;
    const uint64_t steps = after->n_steps - before->n_steps;
    if (!o->json) {
        fprintf(stderr,
                "synapse: %zu requests (%d at a time): %llu tokens generated in %.1f ms, %.2f "
                "tok/s aggregate, "
                "decode steps %.2f tok/s, %llu steps, %zu failed\n",
                t->n_requests, o->concurrent, (unsigned long long)t->n_generated, wall_ms, tok_s,
                decode_tok_s, (unsigned long long)steps, t->n_failed);
        return EXIT_OK;
    }
    json_t *agg =
        json_pack("{s:I, s:i, s:I, s:f, s:f, s:f, s:I, s:I}", "requests", (json_int_t)t->n_requests,
                  "n_parallel", o->concurrent, "generated_tokens", (json_int_t)t->n_generated,
                  "wall_ms", wall_ms, "tok_s", tok_s, "decode_tok_s", decode_tok_s, "steps",
                  (json_int_t)steps, "failed", (json_int_t)t->n_failed);
    if (!agg) return fail_runtime("out of memory building the JSON output");
    fputs("], \"aggregate\": ", stdout);
    int rc = json_dumpf(agg, stdout, JSON_DUMP_FLAGS);
    json_decref(agg);
    if (rc != 0) return fail_runtime("cannot write the JSON output");
    fputs("}\n", stdout);
    return check_stdout();
}

int run_concurrent(const run_opts *o) {
    line_reader rd = {.path = o->file};
    const char *text = NULL;
    size_t len = 0;
    syn_model *model = NULL;
    syn_engine *engine = NULL;
    int rc = EXIT_OK;
    rd.file = fopen(o->file, "rb");
    if (!rd.file) return fail_runtime("cannot open '%s': %s", o->file, strerror(errno));
    /* The first line is read before the model is loaded: a file with nothing to run fails early. */
    rc = next_line(&rd, &text, &len);
    if (rc == EXIT_OK && len == 0)
        rc = fail_runtime("'%s' has no non-empty line: there is nothing to run", o->file);
    if (rc == EXIT_OK)
        rc = load_model(o->g.model_path, prefetch_pays(o->g.n_threads), o->g.huge_pages,
                        o->g.interleave, &model);
    if (rc == EXIT_OK) {
        syn_engine_params ep = syn_engine_default_params();
        ep.n_parallel = o->concurrent;
        ep.n_threads = o->g.n_threads;
        ep.isa = o->g.isa;
        ep.kv_type = o->g.kv_type;
        ep.n_ctx = o->g.n_ctx;
        if (o->kv_budget_mib) ep.kv_budget_mib = o->kv_budget_mib;
        if (syn_engine_new(model, &ep, &engine) != SYN_OK)
            rc = fail_lib("cannot start an engine with %d slots (isa %s, kv %s)", ep.n_parallel,
                          syn_isa_tier_name(ep.isa), ep.kv_type == SYN_KV_F16 ? "f16" : "f32");
    }
    if (rc == EXIT_OK) {
        syn_engine_stats before, after;
        run_totals totals = {0};
        syn_engine_get_stats(engine, &before);
        rc = run_lines(model, o, engine, &rd, text, len, &totals);
        syn_engine_get_stats(engine, &after);
        if (rc == EXIT_OK) rc = print_aggregate(o, &before, &after, &totals);
        if (rc == EXIT_OK && totals.n_failed) rc = EXIT_RUNTIME;
    }
    syn_engine_free(engine);
    syn_model_free(model);
    free(rd.buf);
    fclose(rd.file);
    return rc;
}

/* run_concurrent.c: `synapse run --concurrent-requests N`: one request per line of a file, all
 * served by one syn_engine; prints each request's output in file order and the aggregate speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* One non-empty line of the file and what became of it. */
typedef struct line_req {
    size_t line;       /* 1-based line number in the file */
    const char *text;  /* the line's bytes, inside the file buffer (not NUL-terminated) */
    size_t len;
    int32_t *prompt;   /* [n_prompt] its token ids (BOS first when the model asks for one) */
    size_t n_prompt;
    syn_request *req;  /* NULL when it failed before it could be submitted */
    char error[512];   /* why it failed before submission ("" otherwise) */
} line_req;

static void free_lines(line_req *lines, size_t n) {
    for (size_t i = 0; lines && i < n; i++) {
        syn_request_free(lines[i].req);
        free(lines[i].prompt);
    }
    free(lines);
}

/* The non-empty lines of data[len]: '\n' ends a line and a '\r' just before it is dropped, so
 * the final newline adds no line. *out is malloc'd (free_lines). */
static int split_lines(const char *data, size_t len, line_req **out, size_t *n_out) {
    size_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += data[i] == '\n';
    line_req *lines = calloc(cap, sizeof *lines);
    if (!lines) return fail_runtime("out of memory for %zu lines", cap);
    size_t n = 0, line = 0;
    for (size_t start = 0; start < len;) {
        const char *nl = memchr(data + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - data) : len, text_end = end;
        if (text_end > start && data[text_end - 1] == '\r') text_end--;
        line++;
        if (text_end > start) lines[n++] = (line_req){.line = line, .text = data + start, .len = text_end - start};
        start = end + 1;
    }
    *out = lines;
    *n_out = n;
    return EXIT_OK;
}

/* syn_chat_format of one user turn (after --system, if any) into a malloc'd string. */
static syn_status chat_text(const syn_model *model, const run_opts *o, const char *user, char **text,
                            size_t *len) {
    syn_chat_message msgs[2];
    size_t n = 0;
    if (o->system) msgs[n++] = (syn_chat_message){"system", o->system};
    msgs[n++] = (syn_chat_message){"user", user};
    size_t cap = strlen(user) + (o->system ? strlen(o->system) : 0) + 4096, need = 0;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf) return SYN_ERR_NO_MEMORY;
        syn_status st = syn_chat_format(model, o->g.chat_template, msgs, n, true, buf, cap, &need);
        if (st == SYN_OK) {
            *text = buf;
            *len = need;
            return SYN_OK;
        }
        free(buf);
        if (st != SYN_ERR_BUFFER_TOO_SMALL || need + 1 <= cap) return st;
        cap = need + 1;
    }
}

/* Builds r's prompt as `synapse run -p LINE` would (chat wrapping, the model's BOS). A failure is
 * the line's own: false with r->error naming the cause, and the other lines still run. */
static bool build_line_prompt(const syn_model *model, const run_opts *o, line_req *r) {
    char *line = NULL, *chat = NULL;
    const char *text = r->text;
    size_t len = r->len;
    bool ok = false;
    if (o->chat) {
        if (memchr(r->text, '\0', r->len)) {
            snprintf(r->error, sizeof r->error, "the line contains a NUL byte, which --chat cannot pass on");
            return false;
        }
        line = malloc(r->len + 1);
        if (!line) goto oom;
        memcpy(line, r->text, r->len);
        line[r->len] = '\0';
        syn_status st = chat_text(model, o, line, &chat, &len);
        if (st == SYN_ERR_NO_MEMORY) goto oom;
        if (st != SYN_OK) {
            snprintf(r->error, sizeof r->error, "cannot format the chat: %s", syn_last_error());
            goto done;
        }
        text = chat;
    }
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    const int32_t bos = prompt_bos(model);
    const size_t first = bos >= 0 ? 1 : 0;
    /* Byte-level BPE yields at most one token per byte: one pass is the norm. */
    size_t cap = len + 1, need = 0;
    for (;;) {
        r->prompt = malloc((first + cap) * sizeof *r->prompt);
        if (!r->prompt) goto oom;
        syn_status st = syn_tokenize(tok, text, len, true, r->prompt + first, cap, &need);
        if (st == SYN_OK) break;
        free(r->prompt);
        r->prompt = NULL;
        if (st != SYN_ERR_BUFFER_TOO_SMALL || need <= cap) {
            snprintf(r->error, sizeof r->error, "cannot tokenize the line: %s", syn_last_error());
            goto done;
        }
        cap = need;
    }
    if (bos >= 0) r->prompt[0] = bos;
    r->n_prompt = first + need;
    ok = true;
    goto done;
oom:
    snprintf(r->error, sizeof r->error, "out of memory for the prompt of %zu bytes", r->len);
done:
    free(line);
    free(chat);
    return ok;
}

/* The text of ids[n], into *text (malloc'd, NUL-terminated). */
static int detokenize_all(const syn_tokenizer *tok, const int32_t *ids, size_t n, char **text, size_t *len) {
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
        if (st != SYN_ERR_BUFFER_TOO_SMALL || need <= cap) return fail_lib("cannot decode the generated tokens");
        cap = need;
    }
}

/* Prints request i in plain mode: the header line, then the text and a newline (a request that
 * failed before generating anything has only its header). */
static int print_plain(size_t i, const line_req *r, const syn_request_result *res, const char *text, size_t len) {
    if (res->finish == SYN_FINISH_ERROR)
        printf("--- request %zu (line %zu, error: %s)\n", i, r->line, res->error);
    else
        printf("--- request %zu (line %zu, %s, %zu tokens)\n", i, r->line, syn_finish_reason_name(res->finish),
               res->n_tokens);
    if (res->finish == SYN_FINISH_ERROR && len == 0) return EXIT_OK; /* nothing was generated */
    if ((len && fwrite(text, 1, len, stdout) != len) || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
        return fail_runtime("cannot write the generated text");
    return EXIT_OK;
}

static json_t *request_json(size_t i, const line_req *r, const syn_request_result *res, const char *text, size_t len) {
    bool failed = res->finish == SYN_FINISH_ERROR;
    return json_pack("{s:I, s:I, s:o, s:o, s:o, s:s, s:I, s:f, s:f, s:f, s:o}", "index", (json_int_t)i, "line",
                     (json_int_t)r->line, "prompt_ids", json_ids(r->prompt, r->n_prompt), "generated_ids",
                     json_ids(res->tokens, res->n_tokens), "text", json_utf8(text, len), "finish",
                     syn_finish_reason_name(res->finish), "cached_tokens", (json_int_t)res->n_cached_tokens,
                     "queue_ms", res->queue_ms, "ttft_ms", res->ttft_ms, "total_ms", res->total_ms, "error",
                     failed ? json_string(res->error) : json_null());
}

/* Waits for every request in file order and reports each; *n_failed counts the failures. */
static int report_requests(const syn_model *model, const run_opts *o, line_req *lines, size_t n, json_t *arr,
                           size_t *n_failed, uint64_t *n_generated, double *t_end) {
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    int rc = EXIT_OK;
    for (size_t i = 0; rc == EXIT_OK && i < n; i++) {
        line_req *r = &lines[i];
        syn_request_result res = {.finish = SYN_FINISH_ERROR, .status = SYN_ERR_INVALID_ARGUMENT, .error = r->error};
        if (r->req) syn_request_wait(r->req, &res);
        *t_end = now_ms();
        *n_generated += res.n_tokens;
        char *text = NULL;
        size_t len = 0;
        if ((rc = detokenize_all(tok, res.tokens, res.n_tokens, &text, &len)) != EXIT_OK) break;
        if (res.finish == SYN_FINISH_ERROR) {
            ++*n_failed;
            fail_runtime("request %zu (line %zu): %s", i, r->line, res.error);
        }
        if (!o->json) {
            rc = print_plain(i, r, &res, text, len);
        } else if (json_array_append_new(arr, request_json(i, r, &res, text, len)) != 0) {
            rc = fail_runtime("out of memory building the JSON output");
        }
        free(text);
        syn_request_free(r->req); /* its result is no longer needed */
        r->req = NULL;
    }
    return rc;
}

static int run_lines(const syn_model *model, const run_opts *o, syn_engine *engine, line_req *lines, size_t n) {
    syn_request_params *params = malloc(n * sizeof *params);
    json_t *arr = o->json ? json_array() : NULL;
    if (!params || (o->json && !arr)) {
        free(params);
        json_decref(arr);
        return fail_runtime("out of memory for %zu requests", n);
    }
    /* Submitted one by one rather than with syn_engine_run, so that a request the engine refuses
     * (too long for the context or the budget) fails alone. */
    syn_engine_stats before, after;
    syn_engine_get_stats(engine, &before);
    const double t0 = now_ms();
    for (size_t i = 0; i < n; i++) {
        line_req *r = &lines[i];
        if (!build_line_prompt(model, o, r)) continue;
        params[i] = syn_request_default_params();
        params[i].prompt_tokens = r->prompt;
        params[i].n_prompt_tokens = r->n_prompt;
        params[i].max_tokens = o->g.n_predict;
        params[i].sampling = o->g.sampling;
        params[i].ignore_eos = o->ignore_eos;
        if (syn_engine_submit(engine, &params[i], &r->req) != SYN_OK)
            snprintf(r->error, sizeof r->error, "%s", syn_last_error());
    }
    size_t n_failed = 0;
    uint64_t n_generated = 0;
    double t_end = t0;
    int rc = report_requests(model, o, lines, n, arr, &n_failed, &n_generated, &t_end);
    free(params);
    if (rc != EXIT_OK) {
        json_decref(arr);
        return rc;
    }
    /* The same figures as syn_engine_run's syn_run_stats, from the engine's counters. */
    syn_engine_get_stats(engine, &after);
    const double wall_ms = t_end - t0;
    const double tok_s = wall_ms > 0 ? (double)n_generated * 1e3 / wall_ms : 0.0;
    const double decode_ms = after.decode_steps_ms - before.decode_steps_ms;
    const uint64_t decode_tokens = after.decode_steps_tokens - before.decode_steps_tokens;
    const double decode_tok_s = decode_ms > 0 ? (double)decode_tokens * 1e3 / decode_ms : 0.0;
    const uint64_t steps = after.n_steps - before.n_steps;
    if (!o->json) {
        fprintf(stderr,
                "synapse: %zu requests (%d at a time): %llu tokens generated in %.1f ms, %.2f tok/s aggregate, "
                "decode steps %.2f tok/s, %llu steps, %zu failed\n",
                n, o->concurrent, (unsigned long long)n_generated, wall_ms, tok_s, decode_tok_s,
                (unsigned long long)steps, n_failed);
    } else {
        json_t *agg = json_pack("{s:I, s:i, s:I, s:f, s:f, s:f, s:I, s:I}", "requests", (json_int_t)n, "n_parallel",
                                o->concurrent, "generated_tokens", (json_int_t)n_generated, "wall_ms", wall_ms,
                                "tok_s", tok_s, "decode_tok_s", decode_tok_s, "steps", (json_int_t)steps,
                                "failed", (json_int_t)n_failed);
        if ((rc = print_json(json_pack("{s:o, s:o}", "requests", arr, "aggregate", agg))) != EXIT_OK) return rc;
        arr = NULL;
    }
    json_decref(arr);
    return n_failed ? EXIT_RUNTIME : EXIT_OK;
}

int run_concurrent(const run_opts *o) {
    syn_model *model = NULL;
    syn_engine *engine = NULL;
    line_req *lines = NULL;
    size_t n = 0;
    char *data = NULL;
    size_t len = 0;
    int rc = read_file(o->file, &data, &len);
    if (rc == EXIT_OK) rc = split_lines(data, len, &lines, &n);
    if (rc == EXIT_OK && n == 0) rc = fail_runtime("'%s' has no non-empty line: there is nothing to run", o->file);
    if (rc == EXIT_OK) rc = load_model(o->g.model_path, prefetch_pays(o->g.n_threads), o->g.huge_pages, &model);
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
    if (rc == EXIT_OK) rc = run_lines(model, o, engine, lines, n);
    free_lines(lines, n); /* cancels what an error left unfinished */
    syn_engine_free(engine);
    syn_model_free(model);
    free(data);
    return rc;
}

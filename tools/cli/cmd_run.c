/* cmd_run.c: `synapse run`: continue a prompt, streamed to stdout or as one JSON object; with
 * --concurrent-requests, hands over to run_concurrent.c. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "common/args.h"
#include "common/options.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"
#include "generate.h"
#include "run.h"
#include "synapse_internal.h"

const char usage_run[] =
    "synapse run -m MODEL (-p TEXT | -f FILE | --tokens 1,2,3) [options]\n"
    "  Continues the prompt; the text streams to stdout as it is generated, and a one-line timing\n"
    "  summary goes to stderr. Generation stops at an end-of-generation token or after -n tokens.\n"
    "  -m, --model FILE        the GGUF model\n"
    "  -p, --prompt TEXT       the prompt; special-token text such as <|im_start|> is parsed\n"
    "  -f, --file FILE         the prompt is FILE's exact bytes (nothing stripped)\n"
    "  --tokens IDS            the prompt as comma-separated token ids\n"
    "  -n, --n-predict N       generate at most N tokens (default 128; 0: only read the prompt)\n"
    "  -t, --threads N         worker threads, 0..256 (default 0: one per core)\n"
    "  -c, --ctx-size N        KV cache size in tokens (default: prompt + N, at most the model's\n"
    "                          training context); generation stops when it is full\n"
    "  --temp T                temperature >= 0 (default 0.8; 0: greedy)\n"
    "  --top-k K               keep the K most likely tokens (default 40; 0: off)\n"
    "  --top-p P               nucleus mass in (0, 1] (default 0.95; 1: off)\n"
    "  --min-p P               drop tokens below P * p(max), P in [0, 1] (default 0.05; 0: off)\n"
    "  --repeat-penalty R      R > 0; above 1 discourages recent tokens (default 1: off)\n"
    "  --repeat-last-n N       tokens the penalty looks back on (default 64)\n"
    "  --seed S                sampler seed (default 0); the same seed gives the same text\n"
    "  --chat                  wrap the prompt as a user turn in the model's chat format\n"
    "  --system TEXT           a system turn before it (needs --chat)\n"
    "  --chat-template-file F  render the chat with the Jinja template in file F instead of the\n"
    "                          model's tokenizer.chat_template\n"
    "  --ignore-eos            never stop at end-of-generation tokens (they are never "
    "sampled)\n" USAGE_BACKEND_OPTS
    "  --json                  no streaming; print one JSON object:\n"
    "                          {\"prompt_ids\", \"generated_ids\", \"text\", \"backend\", \"isa\"\n"
    "                          (the tier that ran: avx512-vnni, ...; none for reference), "
    "\"stop\"\n"
    "                          (\"eog\", \"length\" or \"context\"), \"timings\": {\"load_ms\",\n"
    "                          \"prompt_ms\", \"ttft_ms\", \"decode_ms\", \"prompt_tok_s\", "
    "\"decode_tok_s\"}}\n"
    "                          ttft_ms: from the start of prompt processing to the first sampled\n"
    "                          token; decode_ms: from then to the end (one decode per later "
    "token)\n"
    "  Token ids outside the model's vocabulary are a runtime error (exit 1).\n"
    "\n"
    "synapse run -m MODEL -f FILE --concurrent-requests N [options] [--kv-budget MIB]\n"
    "  Many requests at once on one engine: one request per line of FILE, N of them in the\n"
    "  engine's slots at a time (the rest wait in a FIFO queue), all decoded together in batched\n"
    "  steps. Lines end at '\\n' (a '\\r' before it is dropped); the final newline ends the last\n"
    "  line and adds no request; empty lines are skipped (not requests), so request i is the i-th\n"
    "  non-empty line. Each line is a prompt as with -p (and --chat, --system, -n, the sampling\n"
    "  options, --ignore-eos apply to every request; each request has its own sampler seeded with\n"
    "  --seed, so its tokens are the same as `synapse run -p LINE` with the same options). Lines\n"
    "  are read as the engine gets through them, at most 2 x N requests in flight, and each "
    "result\n"
    "  is printed as soon as those before it are: memory does not grow with FILE's length.\n"
    "  Output, in file order once each request is done: a header line\n"
    "    --- request I (line L, FINISH, K tokens)\n"
    "  (I counts from 0, L from 1; FINISH is eog or length, or error: MESSAGE) then the text and "
    "a\n"
    "  newline (none for a request that failed with no text). The aggregate figures go to stderr "
    "as one line after all requests.\n"
    "  --concurrent-requests N requests active at once, 1..256 (the engine's n_parallel)\n"
    "  --parallel N            the same as --concurrent-requests N\n"
    "  --kv-budget MIB         KV-cache memory of all slots and the prefix cache, in MiB\n"
    "                          (default 1024); a request that cannot fit fails on its own\n"
    "  -c N                    the most positions one request may use, prompt + -n (default: the\n"
    "                          model's training context); a longer request fails on its own\n"
    "  -n N                    must be at least 1 here; --backend must be optimized\n"
    "  --json                  one JSON object: {\"requests\": [{\"index\", \"line\", "
    "\"prompt_ids\",\n"
    "                          \"generated_ids\", \"text\", \"finish\" (eog, length or error),\n"
    "                          \"cached_tokens\" (prompt tokens reused from the prefix cache),\n"
    "                          \"queue_ms\", \"ttft_ms\", \"total_ms\" (from submission), "
    "\"error\"\n"
    "                          (null or the message)}], \"aggregate\": {\"requests\", "
    "\"n_parallel\",\n"
    "                          \"generated_tokens\", \"wall_ms\" (first submission to last\n"
    "                          completion), \"tok_s\" (generated tokens / wall_ms), "
    "\"decode_tok_s\"\n"
    "                          (tokens / time of the steps that only decoded), \"steps\", "
    "\"failed\"}},\n"
    "                          streamed out request by request (an error that stops the run, such\n"
    "                          as an unreadable FILE, leaves it unfinished; exit 1)\n"
    "  A request that fails (a line too long for -c or the KV budget, invalid UTF-8) gets its "
    "error\n"
    "  (also one 'synapse: error: request I (line L): ...' line on stderr); the others still run,\n"
    "  and the exit status is 1 when any request failed.\n";

static int parse_args(int argc, char **argv, run_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_run, stdout);
            return ARGS_HELP;
        }
        rc = parse_gen_opt(&it, arg,
                           GEN_MODEL | GEN_COMPUTE | GEN_CTX | GEN_SAMPLING | GEN_TEMPLATE, &o->g);
        if (rc != OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
        } else if (strcmp(arg, "-p") == 0 || strcmp(arg, "--prompt") == 0) {
            if ((rc = args_value(&it, arg, &o->prompt)) != EXIT_OK) return rc;
            o->n_sources++;
        } else if (strcmp(arg, "-f") == 0 || strcmp(arg, "--file") == 0) {
            if ((rc = args_value(&it, arg, &o->file)) != EXIT_OK) return rc;
            o->n_sources++;
        } else if (strcmp(arg, "--tokens") == 0) {
            const char *v;
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            free(o->tokens);
            o->tokens = NULL;
            if ((rc = parse_token_list(arg, v, &o->tokens, &o->n_tokens)) != EXIT_OK) return rc;
            o->n_sources++;
        } else if (strcmp(arg, "--system") == 0) {
            if ((rc = args_value(&it, arg, &o->system)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "--chat") == 0) {
            o->chat = true;
        } else if (strcmp(arg, "--ignore-eos") == 0) {
            o->ignore_eos = true;
        } else if (strcmp(arg, "--json") == 0) {
            o->json = true;
        } else if (strcmp(arg, "--concurrent-requests") == 0 || strcmp(arg, "--parallel") == 0) {
            const char *v;
            long l = 0;
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if ((rc = parse_long(arg, v, 1, SYN_ENGINE_MAX_PARALLEL, &l)) != EXIT_OK) return rc;
            o->concurrent = (int32_t)l;
        } else if (strcmp(arg, "--kv-budget") == 0) {
            const char *v;
            long l = 0;
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if ((rc = parse_long(arg, v, 1, RUN_MAX_KV_BUDGET_MIB, &l)) != EXIT_OK) return rc;
            o->kv_budget_mib = (uint32_t)l;
        } else {
            return args_unknown(arg);
        }
    }
    if ((rc = require_model(&o->g)) != EXIT_OK) return rc;
    if (o->n_sources != 1)
        return fail_usage("give exactly one of -p TEXT, -f FILE and --tokens IDS");
    if (o->chat && o->tokens)
        return fail_usage("--chat needs a text prompt (-p or -f), not --tokens");
    if (o->system && !o->chat) return fail_usage("--system needs --chat");
    if (o->kv_budget_mib && !o->concurrent)
        return fail_usage("--kv-budget needs --concurrent-requests N");
    if (o->concurrent) {
        if (!o->file)
            return fail_usage("--concurrent-requests reads one prompt per line of -f FILE");
        if (o->g.n_predict < 1) return fail_usage("--concurrent-requests needs -n of at least 1");
        if (o->g.backend != SYN_BACKEND_OPTIMIZED)
            return fail_usage("--concurrent-requests runs on the optimized backend only");
    }
    return EXIT_OK;
}

/* The prompt's token ids, from --tokens, or from text (chat-wrapped with --chat). */
static int build_prompt(const syn_model *model, const run_opts *o, token_vec *prompt) {
    if (o->tokens) {
        int rc = check_token_ids(syn_model_tokenizer(model), o->tokens, o->n_tokens);
        return rc != EXIT_OK ? rc : tokens_append(prompt, o->tokens, o->n_tokens);
    }
    char *file_text = NULL, *chat_text = NULL;
    size_t len = 0;
    int rc = EXIT_OK;
    const char *text = o->prompt;
    if (o->file) {
        if ((rc = read_file(o->file, &file_text, &len)) != EXIT_OK) return rc;
        text = file_text;
    } else {
        len = strlen(text);
    }
    if (o->chat) {
        syn_chat_message msgs[2];
        size_t n = 0;
        if (o->system) msgs[n++] = (syn_chat_message){"system", o->system};
        msgs[n++] = (syn_chat_message){"user", text}; /* content is NUL-terminated either way */
        if (o->file && strlen(text) != len) rc = fail_runtime("'%s' contains a NUL byte", o->file);
        if (rc == EXIT_OK) rc = format_chat(model, o->g.chat_template, msgs, n, &chat_text, &len);
        text = chat_text;
    }
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (rc == EXIT_OK) rc = tokenize_text(tok, text, len, true, true, &ids, &n_ids);
    if (rc == EXIT_OK) rc = tokens_append(prompt, ids, n_ids);
    free(ids);
    free(file_text);
    free(chat_text);
    return rc;
}

static double per_second(double count, double ms) { return ms > 0 ? count * 1000.0 / ms : 0.0; }

static int print_result(const run_opts *o, const syn_context *ctx, const token_vec *prompt,
                        const token_vec *all, const gen_result *res, double load_ms,
                        double t_prompt0, double t_prompt1) {
    double prompt_ms = t_prompt1 - t_prompt0;
    double ttft_ms = res->t_first_ms > 0 ? res->t_first_ms - t_prompt0 : 0.0;
    double decode_ms = res->t_first_ms > 0 ? res->t_end_ms - res->t_first_ms : 0.0;
    double prompt_tok_s = per_second((double)prompt->n, prompt_ms);
    double decode_tok_s = per_second(res->n_decode, decode_ms);
    const char *backend = backend_name(o->g.backend);
    const char *isa = syn_context_isa_name(ctx);
    if (!o->json) {
        if (isatty(fileno(stdout))) fputc('\n', stdout); /* keep a terminal's prompt on its line */
        fprintf(stderr,
                "synapse: %s backend (isa %s): load %.0f ms, prompt %zu tokens in %.1f ms "
                "(%.1f tok/s), ttft %.1f ms, %zu tokens generated, decode %.2f tok/s, stop: %s\n",
                backend, isa, load_ms, prompt->n, prompt_ms, prompt_tok_s, ttft_ms,
                res->n_generated, decode_tok_s, stop_reason_name(res->stop));
        return EXIT_OK;
    }
    json_t *timings = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "load_ms", load_ms, "prompt_ms",
                                prompt_ms, "ttft_ms", ttft_ms, "decode_ms", decode_ms,
                                "prompt_tok_s", prompt_tok_s, "decode_tok_s", decode_tok_s);
    json_t *obj = json_pack(
        "{s:o, s:o, s:o, s:s, s:s, s:s, s:o}", "prompt_ids", json_ids(prompt->ids, prompt->n),
        "generated_ids", json_ids(all->ids + prompt->n, res->n_generated), "text",
        json_utf8(res->text.data ? res->text.data : "", res->text.len), "backend", backend, "isa",
        isa, "stop", stop_reason_name(res->stop), "timings", timings);
    return print_json(obj);
}

static int run(const run_opts *o) {
    syn_model *model = NULL;
    syn_context *ctx = NULL;
    syn_sampler *sampler = NULL;
    token_vec prompt = {0}, all = {0};
    gen_result res = {0};
    double t0 = syn_now_ms();
    int rc = load_model(o->g.model_path, prefetch_pays(o->g.n_threads), o->g.huge_pages,
                        o->g.interleave, &model);
    if (rc != EXIT_OK) return rc;
    double load_ms = syn_now_ms() - t0;

    syn_model_info info;
    syn_model_get_info(model, &info);
    if ((rc = build_prompt(model, o, &prompt)) != EXIT_OK) goto done;
    if (prompt.n == 0) {
        rc = fail_runtime("the prompt is empty: it has no tokens to continue from");
        goto done;
    }
    uint64_t want = o->g.n_ctx ? o->g.n_ctx : (uint64_t)prompt.n + (uint64_t)o->g.n_predict;
    if (!o->g.n_ctx && info.n_ctx_train > 0 && want > (uint64_t)info.n_ctx_train)
        want = (uint64_t)info.n_ctx_train;
    if (prompt.n > want) {
        rc = fail_runtime("the prompt has %zu tokens but the context holds %llu (see -c)", prompt.n,
                          (unsigned long long)want);
        goto done;
    }
    if ((rc = new_context(model, &o->g, (uint32_t)want, &ctx)) != EXIT_OK) goto done;
    if (syn_sampler_new(&o->g.sampling, &sampler) != SYN_OK) {
        rc = fail_lib("invalid sampling options");
        goto done;
    }
    if ((rc = tokens_append(&all, prompt.ids, prompt.n)) != EXIT_OK) goto done;

    double t_prompt0 = syn_now_ms();
    if (syn_context_decode(ctx, prompt.ids, prompt.n, NULL) != SYN_OK) {
        rc = fail_lib("cannot process the prompt (%zu tokens)", prompt.n);
        goto done;
    }
    double t_prompt1 = syn_now_ms();
    gen_request req = {ctx,
                       sampler,
                       syn_model_tokenizer(model),
                       o->g.n_predict,
                       o->ignore_eos,
                       o->json ? NULL : stdout};
    if ((rc = generate(&req, &all, &res)) != EXIT_OK) goto done;
    rc = print_result(o, ctx, &prompt, &all, &res, load_ms, t_prompt0, t_prompt1);
done:
    free(res.text.data);
    free(all.ids);
    free(prompt.ids);
    syn_sampler_free(sampler);
    syn_context_free(ctx);
    syn_model_free(model);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {0};
    gen_opts_init(&o.g, RUN_DEFAULT_N_PREDICT);
    int rc = parse_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = o.concurrent ? run_concurrent(&o) : run(&o);
    free(o.tokens);
    gen_opts_free(&o.g);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}

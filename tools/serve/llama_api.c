/* llama_api.c: llama-server's own routes, for the clients and tools written against it: GET /props
 * (model, context, template), GET /slots (the running requests), POST /apply-template (the rendered
 * prompt), POST /completion (its native completion shape, on completions.c's machinery; the
 * shapes themselves are in llama_json.c) and POST /infill (fill in the middle, the same way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/output.h"
#include "openai_request.h"
#include "server.h"

/* The model a request names (NULL: the only one), held until models_release; NULL with the
 * error sent when there is none. */
static served_model *acquire(http_request *hr, const char *alias, enum MHD_Result *sent) {
    served_model *m = models_acquire(hr->srv, alias);
    if (m) return m;
    char names[1024];
    const size_t n = models_names(hr->srv, names, sizeof names);
    *sent =
        alias
            ? http_send_error(hr, 404, "invalid_request_error", "model", "model_not_found",
                              "the model '%s' is not served here (this node has %s)", alias, names)
            : http_send_error(hr, 400, "invalid_request_error", "model", NULL,
                              "'model' is required: this node serves %zu models (%s)", n, names);
    return NULL;
}

/* The text of token id ("" for none). */
static json_t *token_text(const syn_tokenizer *tok, int32_t id) {
    char buf[256];
    size_t n = 0;
    if (id < 0 || syn_tokenizer_token_bytes(tok, id, buf, sizeof buf, &n) != SYN_OK) n = 0;
    return json_utf8(buf, n);
}

/* The tokens one request may hold: --ctx-size, else the model's training context. */
static json_int_t request_ctx(const server *srv, const served_model *m) {
    syn_model_info info;
    syn_model_get_info(m->model, &info);
    return srv->opts.n_ctx ? (json_int_t)srv->opts.n_ctx : (json_int_t)info.n_ctx_train;
}

/* One slot as llama-server describes it; running: its request (stolen), NULL when idle. */
static json_t *slot_json(int id, json_int_t n_ctx, json_t *running, bool with_prompt) {
    json_t *slot =
        json_pack("{s:i, s:I, s:I, s:b, s:b}", "id", id, "id_task", (json_int_t)-1, "n_ctx", n_ctx,
                  "speculative", false, "is_processing", running != NULL);
    if (!slot) return NULL;
    if (running) {
        json_object_update(slot, running);
        json_decref(running);
    } else {
        json_object_set_new(slot, "params", llama_params_json(NULL));
        json_object_set_new(
            slot, "next_token",
            json_pack("{s:b, s:i, s:i}", "has_next_token", false, "n_decoded", 0, "n_remain", -1));
        if (with_prompt) json_object_set_new(slot, "prompt", json_string(""));
    }
    return slot;
}

enum MHD_Result handle_llama_props(http_request *hr) {
    enum MHD_Result sent = MHD_NO;
    served_model *m =
        acquire(hr, MHD_lookup_connection_value(hr->conn, MHD_GET_ARGUMENT_KIND, "model"), &sent);
    if (!m) return sent;
    const char *tmpl = hr->srv->opts.chat_template ? hr->srv->opts.chat_template
                                                   : syn_tokenizer_chat_template(m->tok);
    char build[48];
    snprintf(build, sizeof build, "synapse %d.%d.%d", SYN_VERSION_MAJOR, SYN_VERSION_MINOR,
             SYN_VERSION_PATCH);
    json_t *body =
        json_pack("{s:o, s:i, s:s, s:s, s:s, s:{s:b, s:b}, s:o, s:o, s:s}",
                  "default_generation_settings", slot_json(0, request_ctx(hr->srv, m), NULL, false),
                  "total_slots", m->n_parallel, "model_alias", m->alias, "model_path", m->path,
                  "chat_template", tmpl ? tmpl : "", "modalities", "vision", false, "audio", false,
                  "bos_token", token_text(m->tok, syn_tokenizer_bos(m->tok)), "eos_token",
                  token_text(m->tok, syn_tokenizer_eos(m->tok)), "build_info", build);
    models_release(hr->srv, m);
    return http_send_json(hr, 200, body);
}

enum MHD_Result handle_llama_slots(http_request *hr) {
    server *srv = hr->srv;
    enum MHD_Result sent = MHD_NO;
    served_model *m =
        acquire(hr, MHD_lookup_connection_value(hr->conn, MHD_GET_ARGUMENT_KIND, "model"), &sent);
    if (!m) return sent;
    const bool prompts = srv->opts.slots_show_prompts;
    syn_engine_stats st;
    syn_engine_get_stats(m->engine, &st);
    /* The engine does not name which slot runs which request: the oldest unfinished requests,
     * as many as are active, fill the slots in order. */
    json_t *running = completions_running(srv, m, prompts), *slots = json_array();
    const size_t n_running =
        st.n_active < json_array_size(running) ? st.n_active : json_array_size(running);
    const json_int_t n_ctx = request_ctx(srv, m);
    for (int i = 0; slots && i < m->n_parallel; i++)
        json_array_append_new(
            slots, slot_json(i, n_ctx,
                             (size_t)i < n_running ? json_incref(json_array_get(running, i)) : NULL,
                             prompts));
    json_decref(running);
    const int n_parallel = m->n_parallel;
    models_release(srv, m);
    const char *fail =
        MHD_lookup_connection_value(hr->conn, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
    if (fail && strcmp(fail, "0") != 0 && n_running >= (size_t)n_parallel) {
        json_decref(slots);
        return http_send_error(hr, 503, "unavailable_error", NULL, "no_slot_available",
                               "no slot available (all %d are processing)", n_parallel);
    }
    return http_send_json(hr, 200, slots);
}

enum MHD_Result handle_llama_apply_template(http_request *hr) {
    oa_error err;
    oa_request req;
    if (oa_request_parse(OA_CHAT, http_body(hr), hr->body.len, &req, &err) != 0)
        return http_send_error(hr, (unsigned)err.http_status, err.type, err.param, err.code, "%s",
                               err.message);
    enum MHD_Result sent = MHD_NO;
    served_model *m = acquire(hr, req.model, &sent);
    if (!m) {
        oa_request_free(&req);
        return sent;
    }
    char *prompt = NULL;
    const syn_status st = completions_render_chat(hr->srv, m, &req, &prompt);
    models_release(hr->srv, m);
    oa_request_free(&req);
    if (st == SYN_ERR_NO_MEMORY)
        return http_send_error(hr, 500, "server_error", NULL, NULL, "%s", syn_last_error());
    if (st != SYN_OK)
        return http_send_error(hr, 400, "invalid_request_error", "messages", NULL,
                               "the chat template cannot render these messages: %s",
                               syn_last_error());
    json_t *body = json_pack("{s:s}", "prompt", prompt);
    free(prompt);
    return http_send_json(hr, 200, body);
}

enum MHD_Result handle_llama_completion(http_request *hr) {
    return handle_completions(hr, OA_LLAMA_COMPLETION);
}

enum MHD_Result handle_llama_infill(http_request *hr) { return handle_completions(hr, OA_INFILL); }

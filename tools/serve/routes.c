/* routes.c: the server's route table, registered with the HTTP transport (http.c) from above:
 * the transport dispatches to these handlers and never names them itself. */
#include "server.h"

static enum MHD_Result chat_completions(http_request *hr) {
    return handle_completions(hr, OA_CHAT);
}
static enum MHD_Result completions(http_request *hr) {
    return handle_completions(hr, OA_COMPLETION);
}
static enum MHD_Result responses(http_request *hr) { return handle_completions(hr, OA_RESPONSES); }
static enum MHD_Result messages(http_request *hr) { return handle_completions(hr, OA_MESSAGES); }

/* The OpenAI paths, and the same without /v1 as llama-server accepts them; Anthropic's Messages
 * API, whose errors take its own shape. */
const http_route serve_routes[] = {
    {"/v1/chat/completions", false, "POST", true, chat_completions, false},
    {"/chat/completions", false, "POST", true, chat_completions, false},
    {"/v1/responses", false, "POST", true, responses, false},
    {"/v1/messages", false, "POST", true, messages, true},
    {"/v1/messages/count_tokens", false, "POST", true, handle_messages_count_tokens, true},
    {"/v1/completions", false, "POST", true, completions, false},
    {"/completions", false, "POST", true, completions, false},
    {"/v1/embeddings", false, "POST", true, handle_embeddings, false},
    {"/v1/models", false, "GET", true, handle_models, false},
    {"/models", false, "GET", true, handle_models, false},
    {"/tokenize", false, "POST", true, handle_tokenize, false},
    {"/detokenize", false, "POST", true, handle_detokenize, false},
    {"/health", false, "GET", false, handle_health, false},
    {"/metrics", false, "GET", false, handle_metrics, false},
    {"/", false, "GET", false, handle_chat_page, false},
    {"/props", false, "GET", true, handle_llama_props, false},
    {"/slots", false, "GET", true, handle_llama_slots, false},
    {"/apply-template", false, "POST", true, handle_llama_apply_template, false},
    {"/completion", false, "POST", true, handle_llama_completion, false},
    {"/infill", false, "POST", true, handle_llama_infill, false},
    {"/admin/models", false, "POST", true, handle_admin_load, false},
    {"/admin/models/", true, "DELETE", true, handle_admin_unload, false},
};

const size_t serve_n_routes = sizeof serve_routes / sizeof serve_routes[0];

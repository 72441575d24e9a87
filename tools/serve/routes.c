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

/* The OpenAI paths, and the same without /v1 as llama-server accepts them. */
const http_route serve_routes[] = {
    {"/v1/chat/completions", false, "POST", true, chat_completions},
    {"/chat/completions", false, "POST", true, chat_completions},
    {"/v1/responses", false, "POST", true, responses},
    {"/v1/completions", false, "POST", true, completions},
    {"/completions", false, "POST", true, completions},
    {"/v1/models", false, "GET", true, handle_models},
    {"/models", false, "GET", true, handle_models},
    {"/tokenize", false, "POST", true, handle_tokenize},
    {"/detokenize", false, "POST", true, handle_detokenize},
    {"/health", false, "GET", false, handle_health},
    {"/metrics", false, "GET", false, handle_metrics},
    {"/", false, "GET", false, handle_chat_page},
    {"/props", false, "GET", true, handle_llama_props},
    {"/slots", false, "GET", true, handle_llama_slots},
    {"/apply-template", false, "POST", true, handle_llama_apply_template},
    {"/completion", false, "POST", true, handle_llama_completion},
    {"/admin/models", false, "POST", true, handle_admin_load},
    {"/admin/models/", true, "DELETE", true, handle_admin_unload},
};

const size_t serve_n_routes = sizeof serve_routes / sizeof serve_routes[0];

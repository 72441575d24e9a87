/*
 * server.h: `synapse serve`, an OpenAI-compatible HTTP server over one syn_engine per served model.
 *
 *   cmd_serve.c     options, start-up (HTTP first, so /health answers 503 while the model loads),
 *                   signals and the graceful stop
 *   http.c          libmicrohttpd glue: one thread per connection, body limits, API key, routing,
 *                   the one log line per request, JSON and error responses
 *   cors.c          which origins' browser pages may call the API; CORS headers and preflights
 *   completions.c   /v1/chat/completions and /v1/completions: engine requests (one per choice
 *                   of n), SSE streaming, logprobs, the response objects
 *   endpoints.c     /v1/models, /health, /metrics, /tokenize, /detokenize, the chat page,
 *                   /v1/messages/count_tokens
 *   embeddings.c    /v1/embeddings: one engine embedding request per input, floats or base64
 *   llama_api.c     llama-server's own routes: /props, /slots, /apply-template, /completion,
 *                   /infill
 *   llama_json.c    llama-server's JSON shapes: sampling parameters, /completion's answer
 *   anthropic_json.c  Anthropic's Messages API shapes: the message, the streamed events, errors
 *                   (the request: anthropic_request.c; /v1/messages runs in completions.c)
 *   admin.c         POST /admin/models and DELETE /admin/models/ALIAS: residency at run time
 *   models.c        the models a node serves, each with its engine, on shared compute threads
 *   openai_request.c  the request body -> oa_request (pure; fuzzed)
 *   anthropic_request.c  an Anthropic Messages body -> the chat body openai_request.c checks
 *
 * Threading: libmicrohttpd runs each connection on its own thread, and a handler may block there
 * (a streaming response waits for the engine's next token). The engine's scheduler thread calls
 * the token callbacks, which only append to a per-choice buffer under its request's mutex.
 */
#ifndef SYNAPSE_SERVE_SERVER_H
#define SYNAPSE_SERVE_SERVER_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/text.h"
#include "openai_request.h"
#include "synapse.h"

/* A model given on the command line: -m PATH [--alias NAME]. */
typedef struct model_arg {
    const char *path;
    const char *alias; /* NULL: the file name without ".gguf" */
} model_arg;

typedef struct server_opts {
    model_arg *models; /* [n_models] (malloc'd) */
    size_t n_models;
    const char *host;
    uint16_t port;
    int32_t n_parallel;
    int32_t n_threads;
    const char *api_key; /* NULL: no authentication */
    uint32_t n_ctx;      /* per request; 0: the model's training context */
    uint32_t kv_budget_mib;
    uint32_t max_queue;    /* requests waiting for a slot before 503 */
    uint32_t timeout_s;    /* idle connection timeout */
    uint32_t grace_s;      /* on SIGINT/SIGTERM: how long running requests may finish */
    size_t max_body_bytes; /* larger bodies get 413 */
    uint32_t max_connections;
    bool huge_pages;
    bool interleave;
    syn_isa_tier isa;
    syn_kv_type kv_type;
    char *chat_template; /* --chat-template-file's source for every model (owned); NULL: each
                          * model's own tokenizer.chat_template */
    char **cors_origins; /* [n_cors_origins] --cors-origin's origins or "*" (owned); none:
                          * any origin without --api-key, no origin with it */
    size_t n_cors_origins;
    bool slots_show_prompts; /* GET /slots shows the running requests' prompts */
    syn_pooling pooling;     /* --pooling for /v1/embeddings; SYN_POOLING_MODEL: each file's */
} server_opts;

/* Running totals for /metrics (the engine keeps the token counts). */
typedef struct server_counters {
    atomic_uint_fast64_t by_status[600]; /* responses by HTTP status */
    atomic_uint_fast64_t cancelled;      /* clients gone before their request finished */
} server_counters;

/* One served model. Fields other than users and draining are fixed once it is listed. */
typedef struct served_model {
    char *alias;
    char *path;
    syn_model *model;
    syn_engine *engine;
    const syn_tokenizer *tok;
    int32_t n_parallel;
    long long created; /* when it was loaded (Unix time), for /v1/models */
    int users;         /* requests holding it (models_lock) */
    bool draining;     /* being removed: found by no lookup (models_lock) */
    struct served_model *next;
} served_model;

struct http_request;

/* One route: requests for path (or, with prefix, below it) and method go to handle. */
typedef struct http_route {
    const char *path; /* the whole path, or with prefix its start */
    bool prefix;
    const char *method;
    bool needs_key; /* answered only with the API key */
    enum MHD_Result (*handle)(struct http_request *hr);
    bool anthropic; /* errors in Anthropic's shape (Messages API paths) */
} http_route;

typedef struct server {
    server_opts opts;
    const http_route *routes; /* [n_routes], what http_start was given */
    size_t n_routes;
    syn_compute_pool *pool; /* the compute threads every model's engine shares */
    pthread_mutex_t models_lock;
    pthread_cond_t models_idle; /* a draining model's last request finished */
    served_model *models;       /* in load order */
    atomic_bool ready;          /* the command line's models are loaded: /health 200 */
    atomic_bool stopping;       /* SIGINT/SIGTERM seen: new completions get 503 */
    atomic_uint active_completions;
    pthread_mutex_t completions_lock;
    struct completion *completions; /* the submitted ones, for the stop (completions_lock) */
    struct MHD_Daemon *daemon;
    server_counters counters;
} server;

/* One HTTP request in flight: what the access handler accumulates and the log line reports. */
typedef struct http_request {
    server *srv;
    struct MHD_Connection *conn;
    char method[8];
    char path[128];
    double start_ms;
    text_buf body; /* the upload so far, NUL-terminated once anything came */
    bool body_too_large;
    bool responded;
    bool anthropic; /* its route answers errors in Anthropic's shape */
    unsigned status;
    uint64_t prompt_tokens, completion_tokens;
} http_request;

/* Loads path as alias and starts its engine; 0, or -1 with err filled. */
int models_load(server *srv, const char *path, const char *alias, char *err, size_t cap);
/* The model named alias (NULL: the only one, when there is exactly one), held until
 * models_release; NULL when there is none or it is being removed. */
served_model *models_acquire(server *srv, const char *alias);
void models_release(server *srv, served_model *m);
/* Stops lookups of alias, waits for its requests to finish, then frees it; -1: no such model. */
int models_unload(server *srv, const char *alias);
/* The served aliases as "'a', 'b'" into buf; returns how many. */
size_t models_names(server *srv, char *buf, size_t cap);
/* Frees every model and its engine, once no connection is left. */
void models_free_all(server *srv);

/* Renders req's messages, tools and chat_template_kwargs through m's chat template (or
 * --chat-template-file's) with the generation prompt into *prompt (malloc'd). */
syn_status completions_render_chat(const server *srv, const served_model *m, const oa_request *req,
                                   char **prompt);
/* m's unfinished requests, oldest first, as llama-server's /slots shows a busy slot's: id_task,
 * params, next_token, and with_prompts their prompts (a new reference). */
json_t *completions_running(server *srv, const served_model *m, bool with_prompts);

/* llama-server's shapes (llama_json.c). A request's sampling parameters (NULL: the defaults); one
 * streamed piece of /completion; its whole answer, or its last event (content ""). */
json_t *llama_params_json(const oa_request *req);
json_t *llama_stream_chunk(const char *content, size_t len);
json_t *llama_completion_json(const served_model *m, const oa_request *req, const char *content,
                              size_t len, const syn_request_result *res);
/* The stop string a finished request ended on (one of req's), or NULL. */
const char *llama_stopping_word(const served_model *m, const oa_request *req,
                                const syn_request_result *res);

/* Anthropic's Messages API (anthropic_json.c). Its error body {"type": "error", "error": {"type",
 * "message"}} for an HTTP status; a reply's stop_reason; the message object of a whole reply from
 * the chat message (content, reasoning_content, tool_calls). */
json_t *anthropic_error_body(unsigned status, const char *message);
const char *anthropic_stop_reason(syn_finish_reason finish, bool calls, const char *stop_word);
json_t *anthropic_message_json(const char *id, const char *model, const json_t *msg,
                               const char *stop_reason, const char *stop_sequence,
                               uint64_t input_tokens, uint64_t output_tokens);
/* A streamed reply's events, appended to sse: message_start and ping; content blocks opened,
 * continued and closed as the chat reader's events come; message_delta and message_stop; or an
 * error event. */
struct syn_chat_event; /* synapse_internal.h */
typedef struct anthropic_stream {
    int block;       /* the open content block: a syn_chat_event_kind, or -1 */
    size_t n_blocks; /* blocks opened (the open one is n_blocks - 1) */
} anthropic_stream;
void anthropic_stream_start(anthropic_stream *s, text_buf *sse, const char *id, const char *model,
                            uint64_t input_tokens);
void anthropic_stream_event(anthropic_stream *s, text_buf *sse, const struct syn_chat_event *ev);
void anthropic_stream_end(anthropic_stream *s, text_buf *sse, const char *stop_reason,
                          const char *stop_sequence, uint64_t input_tokens, uint64_t output_tokens);
void anthropic_stream_error(text_buf *sse, unsigned status, const char *message);

/* Cancels every running completion (the stop, after its grace period); their connections then
 * end at once. */
void completions_cancel_all(server *srv);

/* The request body ("" when none came). */
static inline const char *http_body(const http_request *hr) {
    return hr->body.data ? hr->body.data : "";
}

/* Starts the HTTP daemon on opts.host:opts.port, dispatching to routes (the first whose path
 * matches; 405 for another method, 404 for no path); 0 or an exit status (error printed). */
int http_start(server *srv, const http_route *routes, size_t n_routes);
/* The port listened on (the one the kernel chose for --port 0). */
uint16_t http_port(const server *srv);
void http_stop(server *srv);

/* CORS (cors.c). Parses --cors-origin's value (an origin or a comma list) into o; 0, or -1
 * with err filled. */
int cors_parse_origins(server_opts *o, const char *value, char *err, size_t cap);
/* Adds Access-Control-Allow-Origin (and Vary) for hr's Origin to resp, where it is allowed. */
void cors_add_headers(const http_request *hr, struct MHD_Response *resp);
/* The empty answer to a preflight of a path served with methods ("GET, OPTIONS"): allowing them
 * and the request's Access-Control-Request-Headers when its origin may call (NULL: no memory). */
struct MHD_Response *cors_preflight_response(const http_request *hr, const char *methods);

/* Responses. Each queues the response, records the status and returns MHD's answer. */
enum MHD_Result http_send_json(http_request *hr, unsigned status, json_t *body); /* steals body */
enum MHD_Result http_send_text(http_request *hr, unsigned status, const char *content_type,
                               const char *text, size_t len);
/* An OpenAI-shaped error. */
enum MHD_Result http_send_error(http_request *hr, unsigned status, const char *type,
                                const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Whether the client's connection is still open (a closed one cancels its request). */
bool http_client_alive(http_request *hr);

/* endpoints.c: a POST body as a JSON object, or a 400 sent (NULL returned); the model it names
 * ("model", or the node's only one), held until models_release, or NULL with a 400/404 sent. */
json_t *serve_json_body(http_request *hr);
served_model *serve_body_model(http_request *hr, json_t *body);
/* models.c: whether the server takes generation requests now (its models loaded, not
 * stopping); if not, the 503 to send, naming which. */
bool serve_accepting(const server *srv);
enum MHD_Result serve_send_unavailable(http_request *hr);

/* Endpoint handlers (the body is complete when they run). */
/* The route table (routes.c): every path the server answers. */
extern const http_route serve_routes[];
extern const size_t serve_n_routes;

enum MHD_Result handle_completions(http_request *hr, oa_kind kind);
enum MHD_Result handle_models(http_request *hr);
enum MHD_Result handle_health(http_request *hr);
enum MHD_Result handle_metrics(http_request *hr);
enum MHD_Result handle_tokenize(http_request *hr);
enum MHD_Result handle_embeddings(http_request *hr);
enum MHD_Result handle_detokenize(http_request *hr);
enum MHD_Result handle_chat_page(http_request *hr);
enum MHD_Result handle_admin_load(http_request *hr);
enum MHD_Result handle_llama_props(http_request *hr);
enum MHD_Result handle_llama_slots(http_request *hr);
enum MHD_Result handle_llama_apply_template(http_request *hr);
enum MHD_Result handle_llama_completion(http_request *hr);
enum MHD_Result handle_llama_infill(http_request *hr);
enum MHD_Result handle_admin_unload(http_request *hr); /* path /admin/models/ALIAS */
enum MHD_Result handle_messages_count_tokens(http_request *hr);

#endif

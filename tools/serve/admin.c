/* admin.c: which models a node holds, changed while it serves (behind --api-key when set):
 *   POST /admin/models {"path": FILE, "alias": NAME} loads a GGUF and starts its engine (201);
 *   DELETE /admin/models/ALIAS stops new requests for it, lets running ones finish, then unmaps it.
 * A load blocks only its own connection; requests for other models go on meanwhile. */
#include <stdio.h>
#include <string.h>

#include "server.h"

enum MHD_Result handle_admin_load(http_request *hr) {
    json_error_t jerr;
    json_t *body = json_loadb(http_body(hr), hr->body.len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *path = json_object_get(body, "path"), *alias = json_object_get(body, "alias");
    enum MHD_Result r;
    char err[1024];
    if (!json_is_object(body)) {
        r = http_send_error(hr, 400, "invalid_request_error", NULL, NULL,
                            "the body must be a JSON object%s%s", body ? "" : ": ",
                            body ? "" : jerr.text);
    } else if (!json_is_string(path) || json_string_length(path) == 0 ||
               strlen(json_string_value(path)) != json_string_length(path)) {
        r = http_send_error(hr, 400, "invalid_request_error", "path", NULL,
                            "'path' must name a GGUF file");
    } else if (!json_is_string(alias) || !model_alias_valid(json_string_value(alias))) {
        r = http_send_error(hr, 400, "invalid_request_error", "alias", NULL,
                            "'alias' must be 1..64 letters, digits or -_.:");
    } else if (atomic_load(&hr->srv->stopping)) {
        r = http_send_error(hr, 503, "server_error", NULL, "unavailable",
                            "the server is shutting down");
    } else if (models_load(hr->srv, json_string_value(path), json_string_value(alias), err,
                           sizeof err) != 0) {
        const bool taken = strstr(err, "already served") != NULL;
        r = http_send_error(hr, taken ? 409 : 400, "invalid_request_error",
                            taken ? "alias" : "path", taken ? "model_exists" : "model_load_failed",
                            "%s", err);
    } else {
        fprintf(stderr, "synapse serve: model '%s' loaded from %s\n", json_string_value(alias),
                json_string_value(path));
        r = http_send_json(
            hr, 201, json_pack("{s:s, s:s}", "id", json_string_value(alias), "object", "model"));
    }
    json_decref(body);
    return r;
}

enum MHD_Result handle_admin_unload(http_request *hr) {
    const char *alias = hr->path + strlen("/admin/models/");
    if (models_unload(hr->srv, alias) != 0)
        return http_send_error(hr, 404, "invalid_request_error", "model", "model_not_found",
                               "no model '%s' is served here", alias);
    fprintf(stderr, "synapse serve: model '%s' unloaded\n", alias);
    return http_send_json(
        hr, 200, json_pack("{s:s, s:s, s:b}", "id", alias, "object", "model", "deleted", 1));
}

/* models.c: the models a node serves. Each has its own engine; all engines share the server's
 * compute threads. A request holds its model (a use count) from lookup to its last byte, so a
 * model being removed (DELETE /admin/models/ALIAS) stops taking requests at once and is unmapped
 * when the last one has finished. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/setup.h"
#include "common/text.h"
#include "server.h"

static void model_destroy(served_model *m) {
    if (!m) return;
    syn_engine_free(m->engine);
    syn_model_free(m->model);
    free(m->alias);
    free(m->path);
    free(m);
}

/* The model named alias (models_lock held), draining or not. */
static served_model *find_locked(server *srv, const char *alias) {
    for (served_model *m = srv->models; m; m = m->next)
        if (strcmp(m->alias, alias) == 0) return m;
    return NULL;
}

int models_load(server *srv, const char *path, const char *alias, char *err, size_t cap) {
    if (!model_alias_valid(alias)) {
        snprintf(err, cap, "alias '%s' must be 1..64 letters, digits or -_.:", alias);
        return -1;
    }
    pthread_mutex_lock(&srv->models_lock);
    const bool taken = find_locked(srv, alias) != NULL;
    pthread_mutex_unlock(&srv->models_lock);
    if (taken) {
        snprintf(err, cap, "a model named '%s' is already served", alias);
        return -1;
    }
    served_model *m = calloc(1, sizeof *m);
    if (!m || !(m->alias = strdup(alias)) || !(m->path = strdup(path))) {
        model_destroy(m);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    const server_opts *o = &srv->opts;
    guard_mapped_file(path);
    syn_model_params mp = syn_model_default_params();
    mp.prefetch = prefetch_pays(o->n_threads); /* only when a core is left for it, as run does */
    mp.huge_pages = o->huge_pages;
    mp.interleave = o->interleave;
    if (syn_model_load(path, &mp, &m->model) != SYN_OK) {
        snprintf(err, cap, "cannot load '%s': %s", path, syn_last_error());
        model_destroy(m);
        return -1;
    }
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = o->n_parallel;
    ep.pool = srv->pool;
    ep.isa = o->isa;
    ep.kv_type = o->kv_type;
    ep.n_ctx = o->n_ctx;
    ep.kv_budget_mib = o->kv_budget_mib;
    if (syn_engine_new(m->model, &ep, &m->engine) != SYN_OK) {
        snprintf(err, cap, "cannot start an engine for '%s': %s", alias, syn_last_error());
        model_destroy(m);
        return -1;
    }
    m->tok = syn_model_tokenizer(m->model);
    m->n_parallel = o->n_parallel;
    m->created = (long long)time(NULL);
    pthread_mutex_lock(&srv->models_lock);
    if (find_locked(srv, alias)) { /* loaded twice at once: the first one stays */
        pthread_mutex_unlock(&srv->models_lock);
        model_destroy(m);
        snprintf(err, cap, "a model named '%s' is already served", alias);
        return -1;
    }
    served_model **tail = &srv->models;
    while (*tail)
        tail = &(*tail)->next;
    *tail = m;
    pthread_mutex_unlock(&srv->models_lock);
    return 0;
}

served_model *models_acquire(server *srv, const char *alias) {
    pthread_mutex_lock(&srv->models_lock);
    served_model *m = NULL;
    if (alias) {
        m = find_locked(srv, alias);
    } else if (srv->models && !srv->models->next) { /* no name: the node's only model */
        m = srv->models;
    }
    if (m && m->draining) m = NULL;
    if (m) m->users++;
    pthread_mutex_unlock(&srv->models_lock);
    return m;
}

void models_release(server *srv, served_model *m) {
    if (!m) return;
    pthread_mutex_lock(&srv->models_lock);
    if (--m->users == 0 && m->draining) pthread_cond_broadcast(&srv->models_idle);
    pthread_mutex_unlock(&srv->models_lock);
}

int models_unload(server *srv, const char *alias) {
    pthread_mutex_lock(&srv->models_lock);
    served_model *m = find_locked(srv, alias);
    if (!m || m->draining) {
        pthread_mutex_unlock(&srv->models_lock);
        return -1;
    }
    m->draining = true; /* lookups stop finding it; running requests finish */
    while (m->users > 0)
        pthread_cond_wait(&srv->models_idle, &srv->models_lock);
    served_model **link = &srv->models;
    while (*link != m)
        link = &(*link)->next;
    *link = m->next;
    pthread_mutex_unlock(&srv->models_lock);
    model_destroy(m);
    return 0;
}

size_t models_names(server *srv, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&srv->models_lock);
    for (served_model *m = srv->models; m; m = m->next) {
        if (m->draining) continue;
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s'%s'", n ? ", " : "", m->alias);
        n++;
    }
    pthread_mutex_unlock(&srv->models_lock);
    return n;
}

void models_free_all(server *srv) {
    served_model *m = srv->models;
    srv->models = NULL;
    while (m) {
        served_model *next = m->next;
        model_destroy(m);
        m = next;
    }
}

bool serve_accepting(const server *srv) {
    return atomic_load(&srv->ready) && !atomic_load(&srv->stopping);
}

enum MHD_Result serve_send_unavailable(http_request *hr) {
    return http_send_error(hr, 503, "server_error", NULL, "unavailable",
                           atomic_load(&hr->srv->stopping) ? "the server is shutting down"
                                                           : "the model is loading");
}

/*
 * run.h: what the two modes of `synapse run` share: the parsed options. cmd_run.c runs one prompt
 * on a context; run_concurrent.c runs one request per line of a file on an engine.
 */
#ifndef SYNAPSE_TOOL_RUN_H
#define SYNAPSE_TOOL_RUN_H

#include "common/options.h"
#include "synapse.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --kv-budget's range in MiB: at least one block, at most 1 TiB. */
enum { RUN_MAX_KV_BUDGET_MIB = 1 << 20 };

typedef struct run_opts {
    gen_opts g;
    const char *prompt; /* -p */
    const char *file;   /* -f */
    int32_t *tokens;    /* --tokens, malloc'd */
    size_t n_tokens;
    int n_sources; /* how many of -p, -f, --tokens were given */
    bool chat;
    const char *system;
    bool ignore_eos;
    bool json;
    int32_t concurrent;     /* --concurrent-requests / --parallel: engine slots; 0: single mode */
    uint32_t kv_budget_mib; /* --kv-budget; 0: the engine's default */
} run_opts;

/* `synapse run --concurrent-requests N`: prints everything; returns the exit code. */
int run_concurrent(const run_opts *o);

#endif

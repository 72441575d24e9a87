/* main.c: the synapse command-line tool: dispatches to a subcommand, prints the overall usage, and
 * turns output lost on the way to stdout into an error. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "common/args.h"
#include "common/output.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;
} command;

static const command commands[] = {
    {"run", cmd_run, usage_run},
    {"eval", cmd_eval, usage_eval},
    {"tokenize", cmd_tokenize, usage_tokenize},
    {"detokenize", cmd_detokenize, usage_detokenize},
    {"inspect", cmd_inspect, usage_inspect},
    {"chat", cmd_chat, usage_chat},
    {"template", cmd_template, usage_template},
    {"gen-model", cmd_gen_model, usage_gen_model},
    {"bench", cmd_bench, usage_bench},
    {"serve", cmd_serve, usage_serve},
    {"cluster-config", cmd_cluster_config, usage_cluster_config},
};

static void print_usage(void) {
    fputs("synapse: CPU inference for Qwen2, Qwen3 and Llama 3 GGUF models\n"
          "\n"
          "usage: synapse COMMAND [OPTIONS]     (synapse help COMMAND, or synapse COMMAND --help,\n"
          "                                      for one command)\n"
          "\n",
          stdout);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        fputs(commands[i].usage, stdout);
        fputc('\n', stdout);
    }
    fputs("exit status: 0 success, 1 runtime error (bad model file, context full, ...),\n"
          "2 usage error (unknown command or option, missing or invalid value). Errors are one\n"
          "line on stderr starting 'synapse: error: '.\n",
          stdout);
}

static int dispatch(int argc, char **argv) {
    if (argc < 2)
        return fail_usage("missing command (run, eval, tokenize, detokenize, inspect, chat, "
                          "template, gen-model, bench, serve, cluster-config)");
    const char *name = argv[1];
    bool help = strcmp(name, "help") == 0;
    if (args_is_help(name) || (help && argc == 2)) {
        print_usage();
        return EXIT_OK;
    }
    if (help) name = argv[2]; /* synapse help COMMAND */
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(name, commands[i].name) != 0) continue;
        if (!help) return commands[i].fn(argc - 1, argv + 1);
        fputs(commands[i].usage, stdout);
        return EXIT_OK;
    }
    return fail_usage("unknown command '%s' (try 'synapse --help')", name);
}

int main(int argc, char **argv) { return close_stdout(dispatch(argc, argv)); }

/*
 * commands.h: the synapse subcommands. Each takes the arguments after "synapse" (argv[0] is the
 * command's name) and returns the process exit code: 0 success, 1 runtime error, 2 usage error.
 * Each prints its usage (to stdout, exit 0) on -h/--help.
 */
#ifndef SYNAPSE_TOOL_COMMANDS_H
#define SYNAPSE_TOOL_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_gen_model(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_cluster_config(int argc, char **argv);
int cmd_template(int argc, char **argv);

/* Each command's usage text, printed by "synapse CMD --help" and by "synapse help". */
extern const char usage_run[];
extern const char usage_eval[];
extern const char usage_tokenize[];
extern const char usage_detokenize[];
extern const char usage_inspect[];
extern const char usage_chat[];
extern const char usage_gen_model[];
extern const char usage_bench[];
extern const char usage_serve[];
extern const char usage_cluster_config[];
extern const char usage_template[];

#endif

/* cmd_template.c: `synapse template`: renders a Jinja template with variables from a JSON file,
 * exactly as a chat template is rendered for a model (tests compare it with Jinja2's renders). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common/args.h"
#include "common/text.h"
#include "synapse.h"

const char usage_template[] =
    "synapse template --file TEMPLATE.jinja [--vars VARS.json] [--now SECONDS]\n"
    "  Renders the Jinja template as Hugging Face's apply_chat_template does (trim_blocks,\n"
    "  lstrip_blocks, loop controls, tojson, raise_exception, strftime_now) with the variables\n"
    "  of the JSON object in VARS.json, and writes the text exactly (no newline added).\n"
    "  --now fixes the instant strftime_now formats (seconds since 1970, UTC; default: the\n"
    "  current local time). A template that raises exits 1 with 'template: MESSAGE'.\n";

int cmd_template(int argc, char **argv) {
    const char *file = NULL, *vars_file = NULL, *now_text = NULL;
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_template, stdout);
            return EXIT_OK;
        }
        const char **slot = strcmp(arg, "--file") == 0   ? &file
                            : strcmp(arg, "--vars") == 0 ? &vars_file
                            : strcmp(arg, "--now") == 0  ? &now_text
                                                         : NULL;
        if (!slot) return args_unknown(arg);
        if ((rc = args_value(&it, arg, slot)) != EXIT_OK) return rc;
    }
    if (!file) return fail_usage("missing --file TEMPLATE");
    long now = -1;
    if (now_text && (rc = parse_long("--now", now_text, 0, 253402300799L, &now)) != EXIT_OK)
        return rc;
    char *source = NULL, *vars = NULL, *text = NULL;
    size_t source_len = 0, vars_len = 0, text_len = 0;
    rc = read_file(file, &source, &source_len);
    if (rc == EXIT_OK && vars_file) rc = read_file(vars_file, &vars, &vars_len);
    if (rc == EXIT_OK &&
        syn_template_render_json(source, source_len, vars, now, &text, &text_len) != SYN_OK)
        rc = fail_runtime("%s", syn_last_error()); /* "template: MESSAGE", as the tests read it */
    if (rc == EXIT_OK && fwrite(text, 1, text_len, stdout) != text_len)
        rc = fail_runtime("writing the render: short write");
    free(text);
    free(vars);
    free(source);
    return rc;
}

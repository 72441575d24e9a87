/* header_c.c: include/synapse.h compiles as strict C11 with every warning, and its inline
 * surface links; built and run by tests/cli/test_header.sh. */
#include "synapse.h"

#include <stdio.h>
#include <string.h>

int main(void) {
    syn_model_params mp = syn_model_default_params();
    syn_context_params cp = syn_context_default_params();
    syn_sampler_params sp = syn_sampler_default_params();
    /* A load of a missing file must fail with a message naming the path. */
    syn_model *model = NULL;
    syn_status st = syn_model_load("/nonexistent/model.gguf", &mp, &model);
    if (st >= 0 || model || !strstr(syn_last_error(), "/nonexistent/model.gguf")) {
        printf("unexpected: %s (%s)\n", syn_status_name(st), syn_last_error());
        return 1;
    }
    printf("C: %s, n_ctx %u, temperature %.2f\n", syn_status_name(st), cp.n_ctx, sp.temperature);
    return 0;
}

// header_cxx.cpp: include/synapse.h compiles as C++ (extern "C", no C-only constructs) and its
// functions link from C++; built and run by tests/cli/test_header.sh.
#include "synapse.h"

#include <cstdio>
#include <cstring>

int main() {
    syn_model_params mp = syn_model_default_params();
    syn_model *model = nullptr;
    syn_status st = syn_model_load("/nonexistent/model.gguf", &mp, &model);
    if (st >= 0 || model != nullptr || std::strstr(syn_last_error(), "/nonexistent") == nullptr) {
        std::printf("unexpected: %s\n", syn_status_name(st));
        return 1;
    }
    syn_sampler_params sp = syn_sampler_default_params();
    syn_sampler *s = nullptr;
    if (syn_sampler_new(&sp, &s) != SYN_OK) return 1;
    syn_sampler_free(s);
    std::printf("C++: %s\n", syn_status_name(st));
    return 0;
}

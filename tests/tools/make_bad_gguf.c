/* make_bad_gguf.c: writes the corrupted-GGUF corpus for command-line tests, or the fuzzing seed.
 *   make_bad_gguf VALID.gguf OUT_DIR   writes OUT_DIR/<case>.gguf and OUT_DIR/expected.tsv
 *                                      ("file<TAB>substring of the expected error" per line)
 *   make_bad_gguf --seed OUT.gguf      writes the small valid fuzzing seed */
#include <stdio.h>
#include <string.h>

#include "../support/bad_gguf.h"

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--seed") == 0)
        return bad_gguf_write_seed(argv[2]) == 0 ? 0 : 1;
    if (argc != 3) {
        fprintf(stderr, "usage: %s VALID.gguf OUT_DIR | --seed OUT.gguf\n", argv[0]);
        return 2;
    }
    if (bad_gguf_write_corpus(argv[1], argv[2]) != 0) return 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.tsv", argv[2]);
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "make_bad_gguf: cannot create '%s'\n", path);
        return 1;
    }
    for (size_t i = 0; i < bad_gguf_case_count(); i++)
        fprintf(fp, "%s\t%s\n", bad_gguf_case_at(i)->file, bad_gguf_case_at(i)->expect);
    return fclose(fp) == 0 ? 0 : 1;
}

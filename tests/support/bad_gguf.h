/* bad_gguf.h: a corpus of corrupted GGUF files, each paired with a substring its load error must
 * contain, plus the small valid files they start from. Used by tests/unit/test_bad_files.c and
 * tests/tools/make_bad_gguf.c (which lets command-line tests run `synapse inspect` on each file).
 *
 * The corpus is derived from tests/data/qwen2-tiny-synth-q8_0.gguf: its metadata and layer
 * tensors are kept byte for byte, its vocabulary cut to the first 1024 tokens plus the special
 * tokens (and the merges among them), so that each file is ~170 KB instead of 16 MB.
 */
#ifndef SYN_TEST_BAD_GGUF_H
#define SYN_TEST_BAD_GGUF_H

#include <stddef.h>

typedef struct bad_gguf_case {
    const char *file;   /* file name inside the corpus folder, e.g. "version-1.gguf" */
    const char *expect; /* substring of the error message (syn_last_error()) on loading it */
} bad_gguf_case;

size_t bad_gguf_case_count(void);
const bad_gguf_case *bad_gguf_case_at(size_t i);

/* Writes every case into out_dir (which must exist), plus "valid-base.gguf": the reduced, valid
 * model the cases are mutations of. Returns 0, or -1 after printing the reason to stderr. */
int bad_gguf_write_corpus(const char *valid_path, const char *out_dir);

/* Name of the valid reduced model inside the corpus folder. */
#define BAD_GGUF_VALID_BASE "valid-base.gguf"

/* Writes the fuzzing seed: a ~20 KB valid qwen2 model built from scratch (1 block, width 32,
 * 2 heads, 1 KV head, FFN 32, the 256 byte-level tokens, 3 merges, 3 special tokens, F16/BF16/
 * F32/Q8_0 tensors). Returns 0, or -1 after printing the reason to stderr. */
int bad_gguf_write_seed(const char *path);

#endif

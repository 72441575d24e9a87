/*
 * cmd_gen_model.c: `synapse gen-model`: writes a random-weight Qwen2 GGUF with the tensor names,
 * shapes, types, tensor order and metadata layout of a real Qwen2.5 file, and the tokenizer and
 * chat template copied from another GGUF. The weights come from a seeded generator and are
 * streamed tensor by tensor through the GGUF writer, so the model never sits in memory at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"
#include "core/error.h"
#include "gen_quantize.h"
#include "gguf/gguf.h"

const char usage_gen_model[] =
    "synapse gen-model --preset qwen2.5-0.5b|tiny --seed S [--type q8_0|f32] --tokenizer-from GGUF -o OUT\n"
    "  Writes a random-weight Qwen2 model: qwen2.5-0.5b has exactly Qwen2.5-0.5B-Instruct's tensors\n"
    "  (24 blocks, width 896, 14 heads, 2 KV heads, FFN 4864, vocab 151936, tied embeddings,\n"
    "  context 32768); tiny has 2 blocks, width 64, 4 heads, 2 KV heads, FFN 128. With q8_0\n"
    "  (default) matrices are Q8_0 and norms and biases F32, as in the real file; f32 makes every\n"
    "  tensor F32. Every tokenizer.* key (vocabulary, merges, chat template) is copied from the\n"
    "  --tokenizer-from GGUF. The same seed gives the same file. OUT appears whole or not at all:\n"
    "  the model is written to a new hidden file beside it (.OUT.XXXXXXXX), synced, then renamed\n"
    "  over it; an OUT that exists as anything but a regular file (a symbolic link, FIFO, device\n"
    "  or directory) is refused (exit 1) and left as it is.\n";

typedef struct preset {
    const char *name;
    const char *model_name; /* general.name prefix */
    uint32_t n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_freq_base, rms_norm_eps;
} preset;

static const preset presets[] = {
    {"qwen2.5-0.5b", "Qwen2.5 0.5B Instruct shape synthetic random", 24, 896, 14, 2, 4864, 151936, 32768,
     1e6f, 1e-6f},
    {"tiny", "Qwen2.5 0.5B Instruct shape synthetic random (tiny)", 2, 64, 4, 2, 128, 151936, 32768, 1e6f,
     1e-6f},
};

typedef struct gen_model_opts {
    const preset *preset;
    uint64_t seed;
    bool seed_set;
    uint32_t type; /* GGML_TYPE_Q8_0 or GGML_TYPE_F32: the matrices' type */
    const char *tokenizer_from;
    const char *out;
} gen_model_opts;

/* How a tensor's values are drawn. */
typedef enum init_kind {
    INIT_MATRIX, /* normal, std 1/sqrt(fan_in): keeps activations of order 1 */
    INIT_NORM,   /* 1 + normal * 0.1: RMS-norm gains near 1 */
    INIT_BIAS    /* normal * 0.02 */
} init_kind;

typedef struct tensor_spec {
    char name[48];
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[2]; /* ne[0]: row length (fan-in for matrices); ne[1]: rows */
    init_kind init;
    uint64_t seed;
    float *row; /* [ne[0]] scratch shared by every tensor (largest row) */
} tensor_spec;

/* ---------------------------------------------------------------------------------------------
 * Random numbers: splitmix64, and an approximate normal from four 16-bit uniforms of one draw
 * (Irwin-Hall: mean 0, variance 1, bounded at +-3.46). One multiply-xorshift chain per value keeps
 * half a billion weights to a couple of seconds; the weights only need to be random-looking.
 * ------------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float normal01(uint64_t *state) {
    uint64_t r = splitmix64(state);
    uint32_t sum = (uint32_t)(r & 0xFFFF) + (uint32_t)((r >> 16) & 0xFFFF) + (uint32_t)((r >> 32) & 0xFFFF) +
                   (uint32_t)(r >> 48);
    /* Four uniforms on 0..65535: mean 131070, standard deviation sqrt((65536^2 - 1) / 3). */
    return ((float)sum - 131070.0f) * (1.0f / 37837.2f);
}

/* A per-tensor seed, so that each tensor's values do not depend on the others' order. */
static uint64_t tensor_seed(uint64_t seed, const char *name) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001B3ull;
    uint64_t state = seed ^ h;
    return splitmix64(&state);
}

/* The writer's fill callback: draws the tensor row by row into dst. */
static syn_status fill_tensor(void *user, const char *name, void *dst, uint64_t nbytes) {
    const tensor_spec *t = user;
    uint64_t row_bytes = ggml_row_size(t->type, t->ne[0]);
    if (row_bytes * t->ne[1] != nbytes)
        return syn_fail(SYN_ERR_INTERNAL, "gen-model: tensor '%s': %llu bytes expected, writer asks %llu",
                        name, (unsigned long long)(row_bytes * t->ne[1]), (unsigned long long)nbytes);
    float scale = t->init == INIT_MATRIX ? 1.0f / sqrtf((float)t->ne[0]) : t->init == INIT_NORM ? 0.1f : 0.02f;
    float mean = t->init == INIT_NORM ? 1.0f : 0.0f;
    uint64_t state = t->seed;
    uint8_t *out = dst;
    for (uint64_t r = 0; r < t->ne[1]; r++, out += row_bytes) {
        for (uint64_t j = 0; j < t->ne[0]; j++) t->row[j] = mean + scale * normal01(&state);
        if (!gen_quantize_row(t->type, t->row, (int64_t)t->ne[0], out))
            return syn_fail(SYN_ERR_INTERNAL, "gen-model: tensor '%s': no quantizer for type %s", name,
                            ggml_type_name(t->type));
    }
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The model's layout
 * ------------------------------------------------------------------------------------------- */

/* Appends one tensor spec; the order is the real file's (token_embd, blocks, output_norm). */
static void add_spec(tensor_spec *specs, size_t *n, const char *name, uint32_t type, uint64_t ne0,
                     uint64_t ne1, init_kind init) {
    tensor_spec *t = &specs[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = ne1 > 1 || init == INIT_MATRIX ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->init = init;
}

/* Fills specs (room for 2 + 12 * n_layer) and returns the count. */
static size_t build_specs(const preset *p, uint32_t mat_type, tensor_spec *specs) {
    size_t n = 0;
    uint64_t kv_dim = (uint64_t)p->n_embd / p->n_head * p->n_head_kv;
    char name[48];
    add_spec(specs, &n, "token_embd.weight", mat_type, p->n_embd, p->n_vocab, INIT_MATRIX);
    for (uint32_t l = 0; l < p->n_layer; l++) {
#define BLK(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
        add_spec(specs, &n, BLK("attn_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
        add_spec(specs, &n, BLK("attn_q.weight"), mat_type, p->n_embd, p->n_embd, INIT_MATRIX);
        add_spec(specs, &n, BLK("attn_q.bias"), GGML_TYPE_F32, p->n_embd, 1, INIT_BIAS);
        add_spec(specs, &n, BLK("attn_k.weight"), mat_type, p->n_embd, kv_dim, INIT_MATRIX);
        add_spec(specs, &n, BLK("attn_k.bias"), GGML_TYPE_F32, kv_dim, 1, INIT_BIAS);
        add_spec(specs, &n, BLK("attn_v.weight"), mat_type, p->n_embd, kv_dim, INIT_MATRIX);
        add_spec(specs, &n, BLK("attn_v.bias"), GGML_TYPE_F32, kv_dim, 1, INIT_BIAS);
        add_spec(specs, &n, BLK("attn_output.weight"), mat_type, p->n_embd, p->n_embd, INIT_MATRIX);
        add_spec(specs, &n, BLK("ffn_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
        add_spec(specs, &n, BLK("ffn_gate.weight"), mat_type, p->n_embd, p->n_ff, INIT_MATRIX);
        add_spec(specs, &n, BLK("ffn_up.weight"), mat_type, p->n_embd, p->n_ff, INIT_MATRIX);
        add_spec(specs, &n, BLK("ffn_down.weight"), mat_type, p->n_ff, p->n_embd, INIT_MATRIX);
#undef BLK
    }
    add_spec(specs, &n, "output_norm.weight", GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
    return n;
}

/* general.* and qwen2.* keys, in the real file's order, then the tokenizer's keys. */
static syn_status write_metadata(gguf_writer *w, const gen_model_opts *o, const gguf_file *tok_file) {
    const preset *p = o->preset;
    char name[160];
    snprintf(name, sizeof name, "%s (seed %llu)", p->model_name, (unsigned long long)o->seed);
    syn_status st = SYN_OK;
#define SET(call) \
    if (st == SYN_OK) st = (call)
    SET(gguf_writer_set_str(w, "general.architecture", "qwen2"));
    SET(gguf_writer_set_str(w, "general.type", "model"));
    SET(gguf_writer_set_str(w, "general.name", name));
    SET(gguf_writer_set_str(w, "general.description",
                            "Synthetic random weights, real Qwen2.5 tokenizer; for benchmarking/correctness only"));
    SET(gguf_writer_set_u32(w, "qwen2.context_length", p->n_ctx));
    SET(gguf_writer_set_u32(w, "qwen2.embedding_length", p->n_embd));
    SET(gguf_writer_set_u32(w, "qwen2.block_count", p->n_layer));
    SET(gguf_writer_set_u32(w, "qwen2.feed_forward_length", p->n_ff));
    SET(gguf_writer_set_u32(w, "qwen2.attention.head_count", p->n_head));
    SET(gguf_writer_set_u32(w, "qwen2.attention.head_count_kv", p->n_head_kv));
    SET(gguf_writer_set_f32(w, "qwen2.rope.freq_base", p->rope_freq_base));
    SET(gguf_writer_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", p->rms_norm_eps));
    /* llama_ftype: 7 = mostly Q8_0, 0 = all F32. Placed where llama.cpp's converter (F32) and
     * quantizer (Q8_0) put it. */
    if (o->type == GGML_TYPE_F32) SET(gguf_writer_set_u32(w, "general.file_type", 0));
    for (uint64_t i = 0; i < tok_file->n_kv; i++) {
        const gguf_kv *kv = &tok_file->kvs[i];
        if (kv->key.len > 10 && memcmp(kv->key.data, "tokenizer.", 10) == 0) SET(gguf_writer_copy_kv(w, kv));
    }
    if (o->type == GGML_TYPE_Q8_0) {
        SET(gguf_writer_set_u32(w, "general.quantization_version", 2));
        SET(gguf_writer_set_u32(w, "general.file_type", 7));
    }
#undef SET
    return st;
}

/* The tokenizer file must carry a vocabulary of the preset's size. */
static int check_tokenizer(const gen_model_opts *o, const gguf_file *f) {
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GGUF_TYPE_ARRAY || tokens->value.arr.type != GGUF_TYPE_STRING)
        return fail_runtime("--tokenizer-from '%s': no tokenizer.ggml.tokens string array", o->tokenizer_from);
    if (tokens->value.arr.count != o->preset->n_vocab)
        return fail_runtime("--tokenizer-from '%s': %llu tokens, but preset %s has a vocabulary of %u",
                            o->tokenizer_from, (unsigned long long)tokens->value.arr.count, o->preset->name,
                            o->preset->n_vocab);
    return EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The output file
 * ------------------------------------------------------------------------------------------- */

static const char *file_kind(mode_t mode) {
    if (S_ISLNK(mode)) return "symbolic link";
    if (S_ISDIR(mode)) return "directory";
    if (S_ISFIFO(mode)) return "FIFO";
    if (S_ISCHR(mode)) return "character device";
    if (S_ISBLK(mode)) return "block device";
    if (S_ISSOCK(mode)) return "socket";
    return "special file";
}

/* -o may name a new file or a regular one to replace; anything else (a link, whose target would
 * be replaced by a file; a FIFO or a device, which would stop being one) is refused as it is. */
static int check_output(const char *out) {
    struct stat st;
    if (lstat(out, &st) != 0 || S_ISREG(st.st_mode)) return EXIT_OK; /* a missing folder fails later */
    return fail_runtime("-o '%s' is a %s, not a regular file: refusing to replace it", out, file_kind(st.st_mode));
}

/* Creates the temporary file the model is written to, beside out (the final rename must stay on
 * one file system), as ".NAME.XXXXXXXX" with a fresh hex suffix. Exclusive creation neither
 * follows nor reuses anything already there: a link planted under a guessed name, or another
 * run's temporary file. */
static int create_temporary(const char *out, char *tmp, size_t cap, int *fd) {
    const char *slash = strrchr(out, '/');
    const int dir_len = slash ? (int)(slash + 1 - out) : 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t state = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 42);
    for (int attempt = 0; attempt < 64; attempt++) {
        snprintf(tmp, cap, "%.*s.%s.%08x", dir_len, out, out + dir_len, (unsigned)splitmix64(&state));
        *fd = open(tmp, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
        if (*fd >= 0) return EXIT_OK;
        if (errno != EEXIST) break;
    }
    return fail_runtime("cannot create a temporary file beside '%s': %s", out, strerror(errno));
}

/* Writes the model into a fresh temporary file, makes it durable, then renames it over out: out
 * is the old file or the whole new one, never a partial model (`make run` reuses the file when it
 * exists), and concurrent runs each write their own file (the last rename wins). */
static int write_output(gguf_writer *w, const char *out) {
    char *tmp = malloc(strlen(out) + 16);
    if (!tmp) return fail_runtime("out of memory");
    int fd = -1;
    int rc = create_temporary(out, tmp, strlen(out) + 16, &fd);
    if (rc != EXIT_OK) {
        free(tmp);
        return rc;
    }
    /* The writer opens the file by name: it is the one just created, as no one else may remove
     * or replace it where the folder is shared (sticky, as /tmp is). */
    if (gguf_writer_write(w, tmp) != SYN_OK) rc = fail_lib("cannot write '%s'", out);
    else if (fsync(fd) != 0) rc = fail_runtime("cannot write '%s': %s", tmp, strerror(errno));
    else if (rename(tmp, out) != 0) rc = fail_runtime("cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
    close(fd);
    if (rc != EXIT_OK) unlink(tmp);
    free(tmp);
    return rc;
}

static int gen_model(const gen_model_opts *o) {
    const preset *p = o->preset;
    int rc = check_output(o->out);
    if (rc != EXIT_OK) return rc;
    gguf_file *tok_file = NULL;
    guard_mapped_file(o->tokenizer_from);
    if (gguf_open(o->tokenizer_from, &tok_file) != SYN_OK) return fail_lib("cannot read '%s'", o->tokenizer_from);
    rc = check_tokenizer(o, tok_file);
    size_t n_specs_max = 2 + 12 * (size_t)p->n_layer;
    tensor_spec *specs = calloc(n_specs_max, sizeof *specs);
    uint64_t max_row = p->n_ff > p->n_embd ? p->n_ff : p->n_embd;
    float *row = malloc(max_row * sizeof *row);
    gguf_writer *w = gguf_writer_new();
    if (rc == EXIT_OK && (!specs || !row || !w)) rc = fail_runtime("out of memory");
    if (rc == EXIT_OK && write_metadata(w, o, tok_file) != SYN_OK) rc = fail_lib("cannot build the metadata");
    size_t n_specs = rc == EXIT_OK ? build_specs(p, o->type, specs) : 0;
    for (size_t i = 0; rc == EXIT_OK && i < n_specs; i++) {
        tensor_spec *t = &specs[i];
        t->seed = tensor_seed(o->seed, t->name);
        t->row = row;
        if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, fill_tensor, t) != SYN_OK)
            rc = fail_lib("cannot declare tensor '%s'", t->name);
    }
    double t0 = now_ms();
    if (rc == EXIT_OK) rc = write_output(w, o->out);
    if (rc == EXIT_OK)
        printf("wrote %s: preset %s, %s, seed %llu, %zu tensors, in %.1f s\n", o->out, p->name,
               o->type == GGML_TYPE_Q8_0 ? "q8_0" : "f32", (unsigned long long)o->seed, n_specs,
               (now_ms() - t0) / 1000.0);
    gguf_writer_free(w);
    free(row);
    free(specs);
    gguf_close(tok_file);
    return rc;
}

static int parse_args(int argc, char **argv, gen_model_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg, *v;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_gen_model, stdout);
            return ARGS_HELP;
        }
        if (strcmp(arg, "--preset") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            o->preset = NULL;
            for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
                if (strcmp(v, presets[i].name) == 0) o->preset = &presets[i];
            if (!o->preset) return fail_usage("--preset: unknown preset '%s' (expected qwen2.5-0.5b or tiny)", v);
        } else if (strcmp(arg, "--seed") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if ((rc = parse_u64(arg, v, &o->seed)) != EXIT_OK) return rc;
            o->seed_set = true;
        } else if (strcmp(arg, "--type") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if (strcmp(v, "q8_0") == 0) o->type = GGML_TYPE_Q8_0;
            else if (strcmp(v, "f32") == 0) o->type = GGML_TYPE_F32;
            else return fail_usage("--type: unknown type '%s' (expected q8_0 or f32)", v);
        } else if (strcmp(arg, "--tokenizer-from") == 0) {
            if ((rc = args_value(&it, arg, &o->tokenizer_from)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            if ((rc = args_value(&it, arg, &o->out)) != EXIT_OK) return rc;
        } else {
            return args_unknown(arg);
        }
    }
    if (!o->preset) return fail_usage("missing --preset (qwen2.5-0.5b or tiny)");
    if (!o->seed_set) return fail_usage("missing --seed S");
    if (!o->tokenizer_from) return fail_usage("missing --tokenizer-from GGUF");
    if (!o->out) return fail_usage("missing -o OUT");
    return EXIT_OK;
}

int cmd_gen_model(int argc, char **argv) {
    gen_model_opts o = {0};
    o.type = GGML_TYPE_Q8_0;
    int rc = parse_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = gen_model(&o);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}

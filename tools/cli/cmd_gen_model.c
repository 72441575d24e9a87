/*
 * cmd_gen_model.c: `synapse gen-model`: writes a random-weight Qwen2, Qwen3, Llama, Gemma 3 or
 * Phi-3 or Qwen3.5 GGUF with the tensor names, shapes, types (llama-quantize's per-tensor choices
 * for the mix asked for), tensor order and metadata layout of a real file, and the tokenizer and
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
#include "common/args.h"
#include "common/setup.h"
#include "common/text.h"
#include "synapse_internal.h"

const char usage_gen_model[] =
    "synapse gen-model --preset NAME --seed S [--type TYPE] --tokenizer-from GGUF\n"
    "                  [--add-bos-token true|false] [--pooling-type N] [--fim-keys] -o OUT\n"
    "  Writes a random-weight model with the tensors, shapes, types and metadata layout of a real\n"
    "  one. Presets (all with tied embeddings unless said):\n"
    "    qwen2.5-0.5b  qwen2: 24 blocks, width 896, 14 heads, 2 KV heads, FFN 4864, vocab 151936,\n"
    "                  context 32768 (exactly Qwen2.5-0.5B-Instruct's tensors)\n"
    "    qwen3-0.6b    qwen3: 28 blocks, width 1024, 16 heads of 128 (query width 2048), 8 KV\n"
    "                  heads, FFN 3072, vocab 151936, Q/K norms, context 40960\n"
    "    llama3.2-1b   llama: 16 blocks, width 2048, 32 heads, 8 KV heads, FFN 8192, vocab "
    "128256,\n"
    "                  Llama 3 RoPE frequency factors, context 131072, pre-tokenizer llama-bpe\n"
    "    gemma3-1b     gemma3: 26 blocks, width 1152, 4 heads of 256, 1 KV head, FFN 6912, vocab\n"
    "                  262144, sliding window 512 on 5 layers of 6, context 32768\n"
    "    qwen3.5-0.8b  qwen35: 24 blocks (every 4th full attention, the rest gated delta nets),\n"
    "                  width 1024, 8 heads of 256 (RoPE on 64), 2 KV heads, FFN 3584, delta net\n"
    "                  16 Q/K and 16 V heads of 128, conv 4, vocab 248320, context 262144 (no\n"
    "                  MTP block), pre-tokenizer qwen35\n"
    "    tiny          qwen2: 2 blocks, width 64, 4 heads, 2 KV heads, FFN 128, vocab 151936\n"
    "    phi4-mini     phi3: 32 blocks, width 3072, 24 heads of 128, 8 KV heads, FFN 8192, vocab\n"
    "                  200064, rotary on 96 of 128 dims, LongRoPE factors (original context\n"
    "                  4096), context 131072 (Phi-4-mini-instruct's tensors), pre-tokenizer "
    "gpt-4o\n"
    "    test-qwen2, test-qwen3, test-llama: the shape of tests/data/arch's llama.cpp files\n"
    "                  (3 blocks, width 256, FFN 768, context 4096, head size 64; test-llama's\n"
    "                  output.weight untied), with the tokenizer's vocabulary size\n"
    "    test-phi3     the shape of tests/data/arch2's phi3 files (3 blocks, width 256, 4 heads,\n"
    "                  2 KV heads, FFN 768, rotary on 48 of 64 dims, untied output)\n"
    "  Types: q8_0 (default), q4_0, q4_k_m, q5_k_m, q6_k: each matrix gets the type llama.cpp's\n"
    "  llama-quantize picks for it in that mix (Q6_K output, more bits for some attn_v and\n"
    "  ffn_down in the _m mixes, Q5_0 / Q5_1 / Q8_0 for rows not a multiple of 256), norms and\n"
    "  biases F32; f32 makes every tensor F32. Every tokenizer.* key (vocabulary, merges, chat\n"
    "  template) is copied from the --tokenizer-from GGUF; a vocabulary smaller than the preset's\n"
    "  is padded with unused tokens [PADn] (as llama.cpp's converters pad one), a larger one is\n"
    "  refused. --add-bos-token writes tokenizer.ggml.add_bos_token over the copied value (the\n"
    "  prompt policy: whether prompts start with BOS). --pooling-type N (0 none, 1 mean, 2 cls,\n"
    "  3 last, 4 rank) writes ARCH.pooling_type, as an embedding model carries it (a qwen3-0.6b\n"
    "  with 3 has Qwen3-Embedding-0.6B's layout). --fim-keys writes the fill-in-the-middle keys\n"
    "  of a Qwen2.5-Coder file, tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id, with the\n"
    "  ids of <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>, <|fim_pad|>, <|repo_name|> and\n"
    "  <|file_sep|> in the copied vocabulary (each must be there; the source's own fim keys are\n"
    "  left out). The same seed gives the same file. OUT "
    "appears whole or not at all: the model is\n"
    "  written to a new hidden file beside it (.OUT.XXXXXXXX), synced, then renamed over it; an\n"
    "  OUT that exists as anything but a regular file (a symbolic link, FIFO, device or\n"
    "  directory) is refused (exit 1) and left as it is.\n";

typedef enum gen_arch {
    ARCH_QWEN2,
    ARCH_QWEN3,
    ARCH_LLAMA,
    ARCH_GEMMA3,
    ARCH_PHI3,
    ARCH_QWEN35
} gen_arch;

static const char *const arch_names[] = {"qwen2", "qwen3", "llama", "gemma3", "phi3", "qwen35"};

/* Gemma 3 1B's attention.sliding_window (the larger Gemma 3 have 1024); its files have no
 * sliding_window_pattern key (the loader's default, 6, is theirs) and no RoPE scaling. */
enum { GEMMA3_1B_WINDOW = 512 };

typedef struct preset {
    const char *name;
    const char *model_name; /* general.name prefix */
    gen_arch arch;
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    uint32_t n_vocab; /* 0: the tokenizer's */
    uint32_t n_ctx;
    float rope_freq_base, rms_norm_eps;
    bool tied;        /* no output.weight: the output projection is token_embd */
    bool llama3_rope; /* rope_freqs.weight: Llama 3.2's frequency factors (llama3_rope_factors) */
    const char *pre;  /* tokenizer.ggml.pre written over the copied one; NULL: copied as it is */
} preset;

static const preset presets[] = {
    {"qwen2.5-0.5b", "Qwen2.5 0.5B Instruct shape synthetic random", ARCH_QWEN2, 24, 896, 14, 2, 64,
     4864, 151936, 32768, 1e6f, 1e-6f, true, false, NULL},
    {"qwen3-0.6b", "Qwen3 0.6B shape synthetic random", ARCH_QWEN3, 28, 1024, 16, 8, 128, 3072,
     151936, 40960, 1e6f, 1e-6f, true, false, NULL},
    {"llama3.2-1b", "Llama 3.2 1B Instruct shape synthetic random", ARCH_LLAMA, 16, 2048, 32, 8, 64,
     8192, 128256, 131072, 500000.0f, 1e-5f, true, true, "llama-bpe"},
    {"gemma3-1b", "Gemma 3 1B shape synthetic random", ARCH_GEMMA3, 26, 1152, 4, 1, 256, 6912,
     262144, 32768, 1e6f, 1e-6f, true, false, NULL},
    {"qwen3.5-0.8b", "Qwen3.5 0.8B shape synthetic random", ARCH_QWEN35, 24, 1024, 8, 2, 256, 3584,
     248320, 262144, 1e7f, 1e-6f, true, false, "qwen35"},
    {"tiny", "Qwen2.5 0.5B Instruct shape synthetic random (tiny)", ARCH_QWEN2, 2, 64, 4, 2, 16,
     128, 151936, 32768, 1e6f, 1e-6f, true, false, NULL},
    /* The llama.cpp-quantized files of tests/data/arch (see its README), type for type. */
    {"test-qwen2", "qwen2 test shape synthetic random", ARCH_QWEN2, 3, 256, 4, 2, 64, 768, 0, 4096,
     1e6f, 1e-6f, true, false, NULL},
    {"test-qwen3", "qwen3 test shape synthetic random", ARCH_QWEN3, 3, 256, 8, 2, 64, 768, 0, 4096,
     1e6f, 1e-6f, true, false, NULL},
    {"test-llama", "llama test shape synthetic random", ARCH_LLAMA, 3, 256, 4, 2, 64, 768, 0, 4096,
     500000.0f, 1e-6f, false, true, "llama-bpe"},
    /* Phi-4-mini-instruct ties its embeddings; its tokenizer is gpt2 with pre-tokenizer gpt-4o. */
    {"phi4-mini", "Phi 4 mini instruct shape synthetic random", ARCH_PHI3, 32, 3072, 24, 8, 128,
     8192, 200064, 131072, 10000.0f, 1e-5f, true, false, "gpt-4o"},
    {"test-phi3", "phi3 test shape synthetic random", ARCH_PHI3, 3, 256, 4, 2, 64, 768, 0, 4096,
     10000.0f, 1e-5f, false, false, NULL},
};

/* What a phi3 preset adds to its presets[] entry. */
typedef struct phi3_preset {
    const char *name;        /* of the presets[] entry */
    uint32_t n_rot;          /* rope.dimension_count: partial rotary (Phi-4-mini: 0.75 of a head) */
    uint32_t n_ctx_orig;     /* rope.scaling.original_context_length */
    float attn_factor;       /* rope.scaling.attn_factor */
    uint32_t sliding_window; /* attention.sliding_window, which llama.cpp ignores for phi3 */
} phi3_preset;

/* attn_factor: the converter's sqrt(1 + ln(131072 / 4096) / ln 4096) = sqrt(17 / 12) for
 * Phi-4-mini; the test files write Phi-3.5's same value although their context is 4096. */
static const phi3_preset phi3_presets[] = {
    {"phi4-mini", 96, 4096, 1.19023807f, 262144},
    {"test-phi3", 48, 4096, 1.19023807f, 262144},
};

static const phi3_preset *phi3_of(const preset *p) {
    for (size_t i = 0; i < sizeof phi3_presets / sizeof phi3_presets[0]; i++)
        if (strcmp(phi3_presets[i].name, p->name) == 0) return &phi3_presets[i];
    return NULL;
}
#define PRESET_NAMES                                                                               \
    "qwen2.5-0.5b, qwen3-0.6b, llama3.2-1b, gemma3-1b, phi4-mini, qwen3.5-0.8b, tiny, "            \
    "test-qwen2, "                                                                                 \
    "test-qwen3, test-llama or test-phi3"

/* A qwen35 preset's hybrid shape (the ARCH.ssm.* keys, the layer pattern, partial RoPE). */
typedef struct hybrid_shape {
    const char *preset;
    uint32_t full_attn_interval; /* block il is full attention iff (il + 1) % interval == 0 */
    uint32_t conv_kernel, head_k, n_k_heads, n_v_heads, head_v;
    uint32_t n_rot;      /* rope.dimension_count */
    int32_t sections[4]; /* rope.dimension_sections (M-RoPE; one position for text) */
} hybrid_shape;

static const hybrid_shape hybrids[] = {
    {"qwen3.5-0.8b", 4, 4, 128, 16, 16, 128, 64, {11, 11, 10, 0}},
};

/* The hybrid shape of preset p; NULL for the other architectures. */
static const hybrid_shape *hybrid_of(const preset *p) {
    for (size_t i = 0; i < sizeof hybrids / sizeof hybrids[0]; i++)
        if (strcmp(hybrids[i].preset, p->name) == 0) return &hybrids[i];
    return NULL;
}

/* A --type: the matrices' type and general.file_type (llama.cpp's llama_ftype); more_bits: the _M
 * mixes' Q6_K for some attn_v and ffn_down. */
typedef struct type_mix {
    const char *name;
    uint32_t type;
    uint32_t file_type;
    bool more_bits;
} type_mix;

static const type_mix mixes[] = {
    {"q8_0", GGML_TYPE_Q8_0, 7, false},   {"f32", GGML_TYPE_F32, 0, false},
    {"q4_0", GGML_TYPE_Q4_0, 2, false},   {"q4_k_m", GGML_TYPE_Q4_K, 15, true},
    {"q5_k_m", GGML_TYPE_Q5_K, 17, true}, {"q6_k", GGML_TYPE_Q6_K, 18, false},
};
#define TYPE_NAMES "q8_0, f32, q4_0, q4_k_m, q5_k_m or q6_k"

typedef struct gen_model_opts {
    const preset *preset;
    uint64_t seed;
    bool seed_set;
    const type_mix *mix;
    const char *tokenizer_from;
    const char *out;
    int add_bos_token; /* -1: copied from the tokenizer's file; 0 / 1: written as false / true */
    int pooling_type;  /* -1: no ARCH.pooling_type key; 0..4: written (llama.cpp's numbers) */
    bool fim_keys;     /* write Qwen2.5-Coder's tokenizer.ggml.fim_* keys */
} gen_model_opts;

/* How a tensor's values are drawn. */
typedef enum init_kind {
    INIT_MATRIX,         /* normal, std 1/sqrt(fan_in): keeps activations of order 1 */
    INIT_NORM,           /* 1 + normal * 0.1: RMS-norm gains near 1 */
    INIT_BIAS,           /* normal * 0.02 */
    INIT_ROPE_FREQS,     /* not random: Llama 3.2's frequency factors */
    INIT_LONGROPE_SHORT, /* not random: LongRoPE divisors rising from 1 to 2.5 (phi3) */
    INIT_LONGROPE_LONG,  /* not random: LongRoPE divisors rising from 1 to 40 (phi3) */
    INIT_SSM_A,          /* -exp(A_log) in [-16, -1]: the delta net's decay rates */
    INIT_DT_BIAS,        /* the inverse softplus of dt ~ logU(1e-3, 1e-1), as Hugging Face's init */
} init_kind;

typedef struct tensor_spec {
    char name[48];
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[2]; /* ne[0]: row length (fan-in for matrices); ne[1]: rows */
    init_kind init;
    uint64_t seed;
    float rope_freq_base; /* INIT_ROPE_FREQS */
    float *row;           /* [ne[0]] scratch shared by every tensor (largest row) */
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
    uint32_t sum = (uint32_t)(r & 0xFFFF) + (uint32_t)((r >> 16) & 0xFFFF) +
                   (uint32_t)((r >> 32) & 0xFFFF) + (uint32_t)(r >> 48);
    /* Four uniforms on 0..65535: mean 131070, standard deviation sqrt((65536^2 - 1) / 3). */
    return ((float)sum - 131070.0f) * (1.0f / 37837.2f);
}

/* A per-tensor seed, so that each tensor's values do not depend on the others' order. */
static uint64_t tensor_seed(uint64_t seed, const char *name) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001B3ull;
    uint64_t state = seed ^ h;
    return splitmix64(&state);
}

/* Llama 3.2 1B's RoPE scaling ("llama3": factor 32, where Llama 3.1 has 8; low_freq_factor 1,
 * high_freq_factor 4, an original context of 8192) as the frequency divisors the file stores:
 * pair i, of wavelength 2 pi base^(2i / head_dim), is kept under 8192 / 4 positions, divided by 32
 * over 8192 / 1, and blended in between. */
static void llama3_rope_factors(float base, uint64_t n_pairs, float *dst) {
    const double factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
                 original_ctx = 8192.0;
    for (uint64_t i = 0; i < n_pairs; i++) {
        const double wavelen = 2.0 * M_PI * pow(base, (double)i / (double)n_pairs);
        if (wavelen < original_ctx / high_freq_factor) {
            dst[i] = 1.0f;
        } else if (wavelen > original_ctx / low_freq_factor) {
            dst[i] = (float)factor;
        } else {
            const double smooth =
                (original_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
            dst[i] = (float)(1.0 / ((1.0 - smooth) / factor + smooth));
        }
    }
}

/* Synthetic LongRoPE divisors of the real files' shape and range (the arch2 test files': short
 * ones from 1 to about 2.5, long ones from 1 to about 40): geometric from 1 to top over the pairs,
 * the high-frequency pairs least divided as in Phi-3.5's and Phi-4-mini's factors. */
static void longrope_factors(double top, uint64_t n_pairs, float *dst) {
    for (uint64_t i = 0; i < n_pairs; i++)
        dst[i] = (float)pow(top, n_pairs > 1 ? (double)i / (double)(n_pairs - 1) : 0.0);
}

/* The writer's fill callback: draws the tensor row by row into dst. */
static syn_status fill_tensor(void *user, const char *name, void *dst, uint64_t nbytes) {
    const tensor_spec *t = user;
    uint64_t row_bytes = ggml_row_size(t->type, t->ne[0]);
    if (row_bytes * t->ne[1] != nbytes)
        return syn_fail(SYN_ERR_INTERNAL,
                        "gen-model: tensor '%s': %llu bytes expected, writer asks %llu", name,
                        (unsigned long long)(row_bytes * t->ne[1]), (unsigned long long)nbytes);
    float scale = t->init == INIT_MATRIX ? 1.0f / sqrtf((float)t->ne[0])
                  : t->init == INIT_NORM ? 0.1f
                                         : 0.02f;
    float mean = t->init == INIT_NORM ? 1.0f : 0.0f;
    uint64_t state = t->seed;
    uint8_t *out = dst;
    for (uint64_t r = 0; r < t->ne[1]; r++, out += row_bytes) {
        if (t->init == INIT_ROPE_FREQS) {
            llama3_rope_factors(t->rope_freq_base, t->ne[0], t->row);
        } else if (t->init == INIT_LONGROPE_SHORT || t->init == INIT_LONGROPE_LONG) {
            longrope_factors(t->init == INIT_LONGROPE_LONG ? 40.0 : 2.5, t->ne[0], t->row);
        } else if (t->init == INIT_SSM_A || t->init == INIT_DT_BIAS) {
            for (uint64_t j = 0; j < t->ne[0]; j++) {
                const double u = (double)(splitmix64(&state) >> 11) * 0x1.0p-53;
                const double dt = exp(log(1e-3) + u * (log(1e-1) - log(1e-3)));
                t->row[j] =
                    t->init == INIT_SSM_A ? (float)(-1.0 - 15.0 * u) : (float)log(expm1(dt));
            }
        } else {
            for (uint64_t j = 0; j < t->ne[0]; j++)
                t->row[j] = mean + scale * normal01(&state);
        }
        if (!syn_quantize_weight_row(t->type, t->row, (int64_t)t->ne[0], out))
            return syn_fail(SYN_ERR_INTERNAL, "gen-model: tensor '%s': no quantizer for type %s",
                            name, ggml_type_name(t->type));
    }
    return SYN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The model's layout
 * ------------------------------------------------------------------------------------------- */

/* What llama-quantize's type choice (llama_tensor_get_type, llama.cpp 8984c5b0) tells apart. */
typedef enum matrix_role {
    ROLE_PLAIN,    /* attn_q, attn_k, attn_output, ffn_gate, ffn_up, an untied token_embd */
    ROLE_OUTPUT,   /* output.weight, or token_embd.weight when tied */
    ROLE_ATTN_V,   /* per layer */
    ROLE_FFN_DOWN, /* per layer */
} matrix_role;

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between. */
static bool use_more_bits(uint32_t layer, uint32_t n_layer) {
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

/* The type llama-quantize gives a matrix of the mix with rows of ne0 values. */
static uint32_t matrix_type(const type_mix *mix, matrix_role role, uint32_t layer, uint32_t n_layer,
                            uint64_t ne0) {
    uint32_t type = mix->type;
    if (type == GGML_TYPE_F32) return type;
    if (role == ROLE_OUTPUT && type != GGML_TYPE_Q8_0)
        type = GGML_TYPE_Q6_K;
    else if ((role == ROLE_ATTN_V || role == ROLE_FFN_DOWN) && mix->more_bits &&
             use_more_bits(layer, n_layer))
        type = GGML_TYPE_Q6_K;
    /* A k-quant needs rows of whole 256-value super-blocks; llama.cpp falls back to a type of
     * 32-value blocks with about as many bits. */
    if (ne0 % ggml_block_size(GGML_TYPE_Q4_K) != 0) {
        if (type == GGML_TYPE_Q4_K)
            type = GGML_TYPE_Q5_0;
        else if (type == GGML_TYPE_Q5_K)
            type = GGML_TYPE_Q5_1;
        else if (type == GGML_TYPE_Q6_K)
            type = GGML_TYPE_Q8_0;
    }
    return type;
}

/* Appends one tensor spec; the order is the converter's (rope_freqs, token_embd, blocks,
 * output_norm, output). */
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

enum { MAX_TENSORS_OUTSIDE_BLOCKS = 5, MAX_TENSORS_PER_BLOCK = 14 };

/* Block l of a phi3 preset: q | k | v and gate | up fused. llama-quantize gives attn_qkv the
 * attn_v rule (Q6_K in the layers use_more_bits picks, in the _M mixes), as its phi3 test files
 * show. */
static size_t add_phi3_block(tensor_spec *specs, size_t n, const preset *p, const type_mix *mix,
                             uint32_t l) {
    const uint64_t q_dim = (uint64_t)p->n_head * p->head_dim,
                   qkv_rows = q_dim + 2 * (uint64_t)p->n_head_kv * p->head_dim;
    const uint32_t L = p->n_layer;
    char name[48];
#define BLK(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
    add_spec(specs, &n, BLK("attn_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
    add_spec(specs, &n, BLK("attn_qkv.weight"), matrix_type(mix, ROLE_ATTN_V, l, L, p->n_embd),
             p->n_embd, qkv_rows, INIT_MATRIX);
    add_spec(specs, &n, BLK("attn_output.weight"), matrix_type(mix, ROLE_PLAIN, l, L, q_dim), q_dim,
             p->n_embd, INIT_MATRIX);
    add_spec(specs, &n, BLK("ffn_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
    add_spec(specs, &n, BLK("ffn_up.weight"), matrix_type(mix, ROLE_PLAIN, l, L, p->n_embd),
             p->n_embd, 2 * (uint64_t)p->n_ff, INIT_MATRIX);
    add_spec(specs, &n, BLK("ffn_down.weight"), matrix_type(mix, ROLE_FFN_DOWN, l, L, p->n_ff),
             p->n_ff, p->n_embd, INIT_MATRIX);
#undef BLK
    return n;
}

/* Block l of a qwen35 preset, its tensors in name order: a gated delta net (attn_qkv | z, the
 * F32 convolution, the decay and gate projections), or every interval-th a full-attention block
 * whose attn_q also yields a gate per head. llama-quantize gives attn_qkv attn_v's extra bits. */
static void add_qwen35_block(const preset *p, const hybrid_shape *hy, const type_mix *mix,
                             uint32_t l, tensor_spec *specs, size_t *n) {
    const uint32_t L = p->n_layer;
    const uint64_t q_dim = (uint64_t)p->n_head * p->head_dim,
                   kv_dim = (uint64_t)p->n_head_kv * p->head_dim,
                   inner = (uint64_t)hy->n_v_heads * hy->head_v,
                   conv_dim = 2 * (uint64_t)hy->n_k_heads * hy->head_k + inner;
    char name[48];
#define BLK(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
#define MAT(role, ne0) matrix_type(mix, role, l, L, ne0)
    const bool attention = (l + 1) % hy->full_attn_interval == 0;
    if (!attention) {
        add_spec(specs, n, BLK("attn_gate.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, inner,
                 INIT_MATRIX);
    } else {
        add_spec(specs, n, BLK("attn_k.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, kv_dim,
                 INIT_MATRIX);
        add_spec(specs, n, BLK("attn_k_norm.weight"), GGML_TYPE_F32, p->head_dim, 1, INIT_NORM);
    }
    add_spec(specs, n, BLK("attn_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
    if (attention) {
        add_spec(specs, n, BLK("attn_output.weight"), MAT(ROLE_PLAIN, q_dim), q_dim, p->n_embd,
                 INIT_MATRIX);
        add_spec(specs, n, BLK("attn_q.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, 2 * q_dim,
                 INIT_MATRIX);
        add_spec(specs, n, BLK("attn_q_norm.weight"), GGML_TYPE_F32, p->head_dim, 1, INIT_NORM);
        add_spec(specs, n, BLK("attn_v.weight"), MAT(ROLE_ATTN_V, p->n_embd), p->n_embd, kv_dim,
                 INIT_MATRIX);
    } else {
        add_spec(specs, n, BLK("attn_qkv.weight"), MAT(ROLE_ATTN_V, p->n_embd), p->n_embd, conv_dim,
                 INIT_MATRIX);
    }
    add_spec(specs, n, BLK("ffn_down.weight"), MAT(ROLE_FFN_DOWN, p->n_ff), p->n_ff, p->n_embd,
             INIT_MATRIX);
    add_spec(specs, n, BLK("ffn_gate.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, p->n_ff,
             INIT_MATRIX);
    add_spec(specs, n, BLK("ffn_up.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, p->n_ff,
             INIT_MATRIX);
    add_spec(specs, n, BLK("post_attention_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
    if (!attention) {
        add_spec(specs, n, BLK("ssm_a"), GGML_TYPE_F32, hy->n_v_heads, 1, INIT_SSM_A);
        add_spec(specs, n, BLK("ssm_alpha.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd,
                 hy->n_v_heads, INIT_MATRIX);
        add_spec(specs, n, BLK("ssm_beta.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd,
                 hy->n_v_heads, INIT_MATRIX);
        add_spec(specs, n, BLK("ssm_conv1d.weight"), GGML_TYPE_F32, hy->conv_kernel, conv_dim,
                 INIT_MATRIX);
        add_spec(specs, n, BLK("ssm_dt.bias"), GGML_TYPE_F32, hy->n_v_heads, 1, INIT_DT_BIAS);
        add_spec(specs, n, BLK("ssm_norm.weight"), GGML_TYPE_F32, hy->head_v, 1, INIT_NORM);
        add_spec(specs, n, BLK("ssm_out.weight"), MAT(ROLE_PLAIN, inner), inner, p->n_embd,
                 INIT_MATRIX);
    }
#undef MAT
#undef BLK
}

/* Fills specs (room for MAX_TENSORS_OUTSIDE_BLOCKS + MAX_TENSORS_PER_BLOCK * n_layer) and returns
 * the count. */
static size_t build_specs(const preset *p, const type_mix *mix, uint64_t n_vocab,
                          tensor_spec *specs) {
    size_t n = 0;
    const uint64_t q_dim = (uint64_t)p->n_head * p->head_dim,
                   kv_dim = (uint64_t)p->n_head_kv * p->head_dim;
    const uint32_t L = p->n_layer;
    char name[48];
    if (p->llama3_rope) {
        add_spec(specs, &n, "rope_freqs.weight", GGML_TYPE_F32, p->head_dim / 2, 1,
                 INIT_ROPE_FREQS);
        specs[n - 1].rope_freq_base = p->rope_freq_base;
    }
    const phi3_preset *phi3 = phi3_of(p);
    if (phi3) {
        add_spec(specs, &n, "rope_factors_long.weight", GGML_TYPE_F32, phi3->n_rot / 2, 1,
                 INIT_LONGROPE_LONG);
        add_spec(specs, &n, "rope_factors_short.weight", GGML_TYPE_F32, phi3->n_rot / 2, 1,
                 INIT_LONGROPE_SHORT);
    }
    add_spec(specs, &n, "token_embd.weight",
             matrix_type(mix, p->tied ? ROLE_OUTPUT : ROLE_PLAIN, 0, L, p->n_embd), p->n_embd,
             n_vocab, INIT_MATRIX);
    for (uint32_t l = 0; phi3 && l < L; l++)
        n = add_phi3_block(specs, n, p, mix, l);
    const hybrid_shape *hy = hybrid_of(p);
    for (uint32_t l = 0; hy && l < L; l++)
        add_qwen35_block(p, hy, mix, l, specs, &n);
    for (uint32_t l = 0; !phi3 && !hy && l < L; l++) {
#define BLK(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
#define MAT(role, ne0) matrix_type(mix, role, l, L, ne0)
        const bool biases = p->arch == ARCH_QWEN2,
                   qk_norms = p->arch == ARCH_QWEN3 || p->arch == ARCH_GEMMA3,
                   post_norms = p->arch == ARCH_GEMMA3;
        add_spec(specs, &n, BLK("attn_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
        add_spec(specs, &n, BLK("attn_q.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, q_dim,
                 INIT_MATRIX);
        if (biases) add_spec(specs, &n, BLK("attn_q.bias"), GGML_TYPE_F32, q_dim, 1, INIT_BIAS);
        if (qk_norms)
            add_spec(specs, &n, BLK("attn_q_norm.weight"), GGML_TYPE_F32, p->head_dim, 1,
                     INIT_NORM);
        add_spec(specs, &n, BLK("attn_k.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, kv_dim,
                 INIT_MATRIX);
        if (biases) add_spec(specs, &n, BLK("attn_k.bias"), GGML_TYPE_F32, kv_dim, 1, INIT_BIAS);
        if (qk_norms)
            add_spec(specs, &n, BLK("attn_k_norm.weight"), GGML_TYPE_F32, p->head_dim, 1,
                     INIT_NORM);
        add_spec(specs, &n, BLK("attn_v.weight"), MAT(ROLE_ATTN_V, p->n_embd), p->n_embd, kv_dim,
                 INIT_MATRIX);
        if (biases) add_spec(specs, &n, BLK("attn_v.bias"), GGML_TYPE_F32, kv_dim, 1, INIT_BIAS);
        add_spec(specs, &n, BLK("attn_output.weight"), MAT(ROLE_PLAIN, q_dim), q_dim, p->n_embd,
                 INIT_MATRIX);
        if (post_norms)
            add_spec(specs, &n, BLK("post_attention_norm.weight"), GGML_TYPE_F32, p->n_embd, 1,
                     INIT_NORM);
        add_spec(specs, &n, BLK("ffn_norm.weight"), GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
        add_spec(specs, &n, BLK("ffn_gate.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, p->n_ff,
                 INIT_MATRIX);
        add_spec(specs, &n, BLK("ffn_up.weight"), MAT(ROLE_PLAIN, p->n_embd), p->n_embd, p->n_ff,
                 INIT_MATRIX);
        add_spec(specs, &n, BLK("ffn_down.weight"), MAT(ROLE_FFN_DOWN, p->n_ff), p->n_ff, p->n_embd,
                 INIT_MATRIX);
        if (post_norms)
            add_spec(specs, &n, BLK("post_ffw_norm.weight"), GGML_TYPE_F32, p->n_embd, 1,
                     INIT_NORM);
#undef MAT
#undef BLK
    }
    add_spec(specs, &n, "output_norm.weight", GGML_TYPE_F32, p->n_embd, 1, INIT_NORM);
    if (!p->tied)
        add_spec(specs, &n, "output.weight", matrix_type(mix, ROLE_OUTPUT, 0, L, p->n_embd),
                 p->n_embd, n_vocab, INIT_MATRIX);
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * Metadata
 * ------------------------------------------------------------------------------------------- */

/* The source's tokenizer, checked: a tokens array of at most n_vocab strings (n_vocab 0: any),
 * and, when it must be padded, the per-token arrays that padding extends. Sets *n_tokens. */
static int check_tokenizer(const gen_model_opts *o, const gguf_file *f, uint64_t *n_tokens) {
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GGUF_TYPE_ARRAY || tokens->value.arr.type != GGUF_TYPE_STRING)
        return fail_runtime("--tokenizer-from '%s': no tokenizer.ggml.tokens string array",
                            o->tokenizer_from);
    *n_tokens = tokens->value.arr.count;
    const uint32_t n_vocab = o->preset->n_vocab;
    if (n_vocab != 0 && *n_tokens > n_vocab)
        return fail_runtime(
            "--tokenizer-from '%s': %llu tokens, more than preset %s's vocabulary of %u",
            o->tokenizer_from, (unsigned long long)*n_tokens, o->preset->name, n_vocab);
    if (n_vocab == 0 || *n_tokens == n_vocab) return EXIT_OK;
    const gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    if (!types || types->type != GGUF_TYPE_ARRAY || types->value.arr.type != GGUF_TYPE_INT32 ||
        types->value.arr.count != *n_tokens)
        return fail_runtime("--tokenizer-from '%s': padding its %llu tokens to %u needs a "
                            "tokenizer.ggml.token_type "
                            "int32 array of one type per token",
                            o->tokenizer_from, (unsigned long long)*n_tokens, n_vocab);
    const gguf_kv *scores = gguf_find_kv(f, "tokenizer.ggml.scores");
    if (scores && (scores->type != GGUF_TYPE_ARRAY || scores->value.arr.type != GGUF_TYPE_FLOAT32 ||
                   scores->value.arr.count != *n_tokens))
        return fail_runtime(
            "--tokenizer-from '%s': tokenizer.ggml.scores is not a float32 array of one score per "
            "token: cannot pad it",
            o->tokenizer_from);
    return EXIT_OK;
}

enum { TOKEN_TYPE_UNUSED = 5 }; /* llama.cpp's LLAMA_TOKEN_TYPE_UNUSED */

/* tokenizer.ggml.tokens padded to n_vocab with "[PADi]" (i the token id). */
static syn_status write_padded_tokens(gguf_writer *w, const gguf_kv *kv, uint64_t n_vocab) {
    const uint64_t n = kv->value.arr.count;
    const char **strs = malloc(n_vocab * sizeof *strs);
    char *text = malloc(kv->value.arr.nbytes + n_vocab * 24); /* each string NUL-terminated */
    syn_status st = strs && text
                        ? SYN_OK
                        : syn_fail(SYN_ERR_NO_MEMORY, "gen-model: out of memory padding tokens");
    const uint8_t *cursor = kv->value.arr.data;
    char *at = text;
    for (uint64_t i = 0; st == SYN_OK && i < n_vocab; i++) {
        strs[i] = at;
        if (i < n) {
            gguf_str s = gguf_array_next_str(&cursor);
            if (memchr(s.data, '\0', s.len))
                st = syn_fail(SYN_ERR_UNSUPPORTED,
                              "gen-model: tokenizer.ggml.tokens[%llu] holds a NUL byte",
                              (unsigned long long)i);
            memcpy(at, s.data, s.len);
            at[s.len] = '\0';
            at += s.len + 1;
        } else {
            at += snprintf(at, 24, "[PAD%llu]", (unsigned long long)i) + 1;
        }
    }
    if (st == SYN_OK) st = gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", strs, n_vocab);
    free(text);
    free(strs);
    return st;
}

/* A per-token array of 4-byte elements (token types, scores) padded to n_vocab with pad. */
static syn_status write_padded_array(gguf_writer *w, const char *key, const gguf_kv *kv,
                                     uint64_t n_vocab, const void *pad) {
    uint8_t *elems = malloc(n_vocab * 4);
    if (!elems) return syn_fail(SYN_ERR_NO_MEMORY, "gen-model: out of memory padding %s", key);
    memcpy(elems, kv->value.arr.data, kv->value.arr.count * 4);
    for (uint64_t i = kv->value.arr.count; i < n_vocab; i++)
        memcpy(elems + 4 * i, pad, 4);
    syn_status st = gguf_writer_set_array(w, key, kv->value.arr.type, elems, n_vocab);
    free(elems);
    return st;
}

/* Qwen2.5-Coder's fill-in-the-middle keys and the token texts they name. */
static const struct fim_key {
    const char *key, *text;
} fim_keys[] = {
    {"tokenizer.ggml.fim_pre_token_id", "<|fim_prefix|>"},
    {"tokenizer.ggml.fim_suf_token_id", "<|fim_suffix|>"},
    {"tokenizer.ggml.fim_mid_token_id", "<|fim_middle|>"},
    {"tokenizer.ggml.fim_pad_token_id", "<|fim_pad|>"},
    {"tokenizer.ggml.fim_rep_token_id", "<|repo_name|>"},
    {"tokenizer.ggml.fim_sep_token_id", "<|file_sep|>"},
};

/* Each fim_keys[] key with the id of its text in the source's tokens (the checked array). */
static syn_status write_fim_keys(gguf_writer *w, const gguf_file *f) {
    const gguf_kv *tokens = gguf_find_kv(f, "tokenizer.ggml.tokens");
    syn_status st = SYN_OK;
    for (size_t k = 0; st == SYN_OK && k < sizeof fim_keys / sizeof fim_keys[0]; k++) {
        const uint8_t *cursor = tokens->value.arr.data;
        const size_t len = strlen(fim_keys[k].text);
        uint64_t id = 0;
        for (; id < tokens->value.arr.count; id++) {
            gguf_str s = gguf_array_next_str(&cursor);
            if (s.len == len && memcmp(s.data, fim_keys[k].text, len) == 0) break;
        }
        st = id < tokens->value.arr.count
                 ? gguf_writer_set_u32(w, fim_keys[k].key, (uint32_t)id)
                 : syn_fail(SYN_ERR_UNSUPPORTED, "--fim-keys: the vocabulary has no token %s",
                            fim_keys[k].text);
    }
    return st;
}

/* Every tokenizer.* key of the source, in its order. Its n_tokens, when fewer than n_vocab, are
 * padded as llama.cpp's converters pad a vocabulary smaller than the embedding: tokens "[PADi]"
 * of type UNUSED (and score -1000 where there are scores); check_tokenizer has checked the arrays
 * padded. The preset's pre-tokenizer name replaces the source's (or follows its keys where it has
 * none). */
static syn_status write_tokenizer(gguf_writer *w, const gguf_file *f, uint64_t n_tokens,
                                  uint64_t n_vocab, const char *pre, int add_bos_token,
                                  bool with_fim_keys) {
    const int32_t unused = TOKEN_TYPE_UNUSED;
    const float pad_score = -1000.0f;
    syn_status st = SYN_OK;
    bool wrote_pre = false;
    for (uint64_t i = 0; st == SYN_OK && i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        if (!(kv->key.len > 10 && memcmp(kv->key.data, "tokenizer.", 10) == 0)) continue;
        const bool pad = n_tokens < n_vocab;
        if (add_bos_token >= 0 && gguf_str_eq(kv->key, "tokenizer.ggml.add_bos_token")) {
            continue; /* written below */
        } else if (with_fim_keys && kv->key.len > 19 &&
                   memcmp(kv->key.data, "tokenizer.ggml.fim_", 19) == 0) {
            continue; /* written below */
        } else if (pre && gguf_str_eq(kv->key, "tokenizer.ggml.pre")) {
            st = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
            wrote_pre = true;
        } else if (pad && gguf_str_eq(kv->key, "tokenizer.ggml.tokens")) {
            st = write_padded_tokens(w, kv, n_vocab);
        } else if (pad && gguf_str_eq(kv->key, "tokenizer.ggml.token_type")) {
            st = write_padded_array(w, "tokenizer.ggml.token_type", kv, n_vocab, &unused);
        } else if (pad && gguf_str_eq(kv->key, "tokenizer.ggml.scores")) {
            st = write_padded_array(w, "tokenizer.ggml.scores", kv, n_vocab, &pad_score);
        } else {
            st = gguf_writer_copy_kv(w, kv);
        }
    }
    if (st == SYN_OK && pre && !wrote_pre) st = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (st == SYN_OK && add_bos_token >= 0)
        st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos_token == 1);
    if (st == SYN_OK && with_fim_keys) st = write_fim_keys(w, f);
    return st;
}

/* general.* and ARCH.* keys in the order of the files they mirror, then the tokenizer's keys. */
static syn_status write_metadata(gguf_writer *w, const gen_model_opts *o, const gguf_file *tok_file,
                                 uint64_t n_tokens, uint64_t n_vocab) {
    const preset *p = o->preset;
    const char *arch = arch_names[p->arch];
    char name[160], key[64];
    snprintf(name, sizeof name, "%s (seed %llu)", p->model_name, (unsigned long long)o->seed);
    syn_status st = SYN_OK;
#define SET(call)                                                                                  \
    if (st == SYN_OK) st = (call)
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    SET(gguf_writer_set_str(w, "general.architecture", arch));
    SET(gguf_writer_set_str(w, "general.type", "model"));
    SET(gguf_writer_set_str(w, "general.name", name));
    /* Qwen2's text is tests/data's tiny reference files', which their layout test compares to the
     * byte. */
    SET(gguf_writer_set_str(
        w, "general.description",
        p->arch == ARCH_QWEN2
            ? "Synthetic random weights, real Qwen2.5 tokenizer; for benchmarking/correctness only"
            : "Synthetic random weights, tokenizer copied from another model; for "
              "benchmarking/correctness only"));
    SET(gguf_writer_set_u32(w, KEY("context_length"), p->n_ctx));
    SET(gguf_writer_set_u32(w, KEY("embedding_length"), p->n_embd));
    SET(gguf_writer_set_u32(w, KEY("block_count"), p->n_layer));
    SET(gguf_writer_set_u32(w, KEY("feed_forward_length"), p->n_ff));
    SET(gguf_writer_set_u32(w, KEY("attention.head_count"), p->n_head));
    SET(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), p->n_head_kv));
    /* Qwen2.5's file has the RoPE base first; tests/data/arch's qwen3 and llama files the epsilon.
     */
    if (p->arch == ARCH_QWEN2)
        SET(gguf_writer_set_f32(w, KEY("rope.freq_base"), p->rope_freq_base));
    SET(gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), p->rms_norm_eps));
    if (p->arch != ARCH_QWEN2)
        SET(gguf_writer_set_f32(w, KEY("rope.freq_base"), p->rope_freq_base));
    if (p->arch == ARCH_QWEN3 || p->arch == ARCH_GEMMA3) {
        /* The head size is not width / heads in Qwen3 and Gemma 3: the loader reads it here. */
        SET(gguf_writer_set_u32(w, KEY("attention.key_length"), p->head_dim));
        SET(gguf_writer_set_u32(w, KEY("attention.value_length"), p->head_dim));
    }
    if (p->arch == ARCH_GEMMA3)
        SET(gguf_writer_set_u32(w, KEY("attention.sliding_window"), GEMMA3_1B_WINDOW));
    const hybrid_shape *hy = hybrid_of(p);
    if (hy) { /* in the order of tests/data/arch2's qwen35 files */
        SET(gguf_writer_set_u32(w, KEY("attention.key_length"), p->head_dim));
        SET(gguf_writer_set_u32(w, KEY("attention.value_length"), p->head_dim));
        SET(gguf_writer_set_u32(w, KEY("rope.dimension_count"), hy->n_rot));
        SET(gguf_writer_set_array(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, hy->sections,
                                  4));
        SET(gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), hy->conv_kernel));
        SET(gguf_writer_set_u32(w, KEY("ssm.state_size"), hy->head_k));
        SET(gguf_writer_set_u32(w, KEY("ssm.group_count"), hy->n_k_heads));
        SET(gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), hy->n_v_heads));
        SET(gguf_writer_set_u32(w, KEY("ssm.inner_size"), hy->n_v_heads * hy->head_v));
        SET(gguf_writer_set_u32(w, KEY("full_attention_interval"), hy->full_attn_interval));
    }
    if (p->arch == ARCH_LLAMA) {
        SET(gguf_writer_set_u32(w, KEY("rope.dimension_count"), p->head_dim));
        SET(gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)n_vocab));
    }
    const phi3_preset *phi3 = phi3_of(p);
    if (phi3) { /* the same keys as llama.cpp's converter writes, in another order */
        SET(gguf_writer_set_u32(w, KEY("rope.dimension_count"), phi3->n_rot));
        SET(gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), phi3->n_ctx_orig));
        SET(gguf_writer_set_u32(w, KEY("attention.sliding_window"), phi3->sliding_window));
        SET(gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), phi3->attn_factor));
    }
    /* an embedding model's pooling (Qwen3-Embedding: a qwen3 file with 3, last) */
    if (o->pooling_type >= 0)
        SET(gguf_writer_set_u32(w, KEY("pooling_type"), (uint32_t)o->pooling_type));
    /* general.file_type where llama.cpp's converter (F32) and quantizer (the rest) put it. */
    if (o->mix->type == GGML_TYPE_F32)
        SET(gguf_writer_set_u32(w, "general.file_type", o->mix->file_type));
    SET(write_tokenizer(w, tok_file, n_tokens, n_vocab, p->pre, o->add_bos_token, o->fim_keys));
    if (o->mix->type != GGML_TYPE_F32) {
        SET(gguf_writer_set_u32(w, "general.quantization_version", 2));
        SET(gguf_writer_set_u32(w, "general.file_type", o->mix->file_type));
    }
#undef KEY
#undef SET
    return st;
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
    if (lstat(out, &st) != 0 || S_ISREG(st.st_mode))
        return EXIT_OK; /* a missing folder fails later */
    return fail_runtime("-o '%s' is a %s, not a regular file: refusing to replace it", out,
                        file_kind(st.st_mode));
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
    uint64_t state =
        (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 42);
    for (int attempt = 0; attempt < 64; attempt++) {
        snprintf(tmp, cap, "%.*s.%s.%08x", dir_len, out, out + dir_len,
                 (unsigned)splitmix64(&state));
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
    if (gguf_writer_write(w, tmp) != SYN_OK)
        rc = fail_lib("cannot write '%s'", out);
    else if (fsync(fd) != 0)
        rc = fail_runtime("cannot write '%s': %s", tmp, strerror(errno));
    else if (rename(tmp, out) != 0)
        rc = fail_runtime("cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
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
    if (gguf_open(o->tokenizer_from, &tok_file) != SYN_OK)
        return fail_lib("cannot read '%s'", o->tokenizer_from);
    uint64_t n_tokens = 0;
    rc = check_tokenizer(o, tok_file, &n_tokens);
    const uint64_t n_vocab = p->n_vocab ? p->n_vocab : n_tokens;
    size_t n_specs_max = MAX_TENSORS_OUTSIDE_BLOCKS + MAX_TENSORS_PER_BLOCK * (size_t)p->n_layer;
    tensor_spec *specs = calloc(n_specs_max, sizeof *specs);
    uint64_t max_row = p->n_embd;
    if (p->n_ff > max_row) max_row = p->n_ff;
    if ((uint64_t)p->n_head * p->head_dim > max_row) max_row = (uint64_t)p->n_head * p->head_dim;
    const hybrid_shape *hy = hybrid_of(p); /* ssm_out's rows */
    if (hy && (uint64_t)hy->n_v_heads * hy->head_v > max_row)
        max_row = (uint64_t)hy->n_v_heads * hy->head_v;
    float *row = malloc(max_row * sizeof *row);
    gguf_writer *w = gguf_writer_new();
    if (rc == EXIT_OK && (!specs || !row || !w)) rc = fail_runtime("out of memory");
    if (rc == EXIT_OK && write_metadata(w, o, tok_file, n_tokens, n_vocab) != SYN_OK)
        rc = fail_lib("cannot build the metadata");
    size_t n_specs = rc == EXIT_OK ? build_specs(p, o->mix, n_vocab, specs) : 0;
    for (size_t i = 0; rc == EXIT_OK && i < n_specs; i++) {
        tensor_spec *t = &specs[i];
        t->seed = tensor_seed(o->seed, t->name);
        t->row = row;
        if (gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, fill_tensor, t) != SYN_OK)
            rc = fail_lib("cannot declare tensor '%s'", t->name);
    }
    double t0 = syn_now_ms();
    if (rc == EXIT_OK) rc = write_output(w, o->out);
    if (rc == EXIT_OK)
        printf("wrote %s: preset %s, %s, seed %llu, %zu tensors%s, in %.1f s\n", o->out, p->name,
               o->mix->name, (unsigned long long)o->seed, n_specs,
               n_tokens < n_vocab ? ", vocabulary padded" : "", (syn_now_ms() - t0) / 1000.0);
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
            if (!o->preset)
                return fail_usage("--preset: unknown preset '%s' (expected " PRESET_NAMES ")", v);
        } else if (strcmp(arg, "--seed") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if ((rc = parse_u64(arg, v, &o->seed)) != EXIT_OK) return rc;
            o->seed_set = true;
        } else if (strcmp(arg, "--type") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            o->mix = NULL;
            for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
                if (strcmp(v, mixes[i].name) == 0) o->mix = &mixes[i];
            if (!o->mix)
                return fail_usage("--type: unknown type '%s' (expected " TYPE_NAMES ")", v);
        } else if (strcmp(arg, "--tokenizer-from") == 0) {
            if ((rc = args_value(&it, arg, &o->tokenizer_from)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "--add-bos-token") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
                return fail_usage("--add-bos-token: expected true or false, got '%s'", v);
            o->add_bos_token = strcmp(v, "true") == 0;
        } else if (strcmp(arg, "--pooling-type") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if (strlen(v) != 1 || v[0] < '0' || v[0] > '4')
                return fail_usage("--pooling-type: expected 0..4 (none, mean, cls, last, rank), "
                                  "got '%s'",
                                  v);
            o->pooling_type = v[0] - '0';
        } else if (strcmp(arg, "--fim-keys") == 0) {
            o->fim_keys = true;
        } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            if ((rc = args_value(&it, arg, &o->out)) != EXIT_OK) return rc;
        } else {
            return args_unknown(arg);
        }
    }
    if (!o->preset) return fail_usage("missing --preset (" PRESET_NAMES ")");
    if (!o->seed_set) return fail_usage("missing --seed S");
    if (!o->tokenizer_from) return fail_usage("missing --tokenizer-from GGUF");
    if (!o->out) return fail_usage("missing -o OUT");
    return EXIT_OK;
}

int cmd_gen_model(int argc, char **argv) {
    gen_model_opts o = {0};
    o.mix = &mixes[0]; /* q8_0 */
    o.add_bos_token = -1;
    o.pooling_type = -1;
    int rc = parse_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = gen_model(&o);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}

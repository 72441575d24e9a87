/* cmd_inspect.c: `synapse inspect`: a model's hyperparameters, GGUF metadata and tensor table. */
#include <inttypes.h>
#include <string.h>

#include "commands.h"
#include "common/args.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"
#include "synapse_internal.h"

const char usage_inspect[] =
    "synapse inspect -m MODEL [--json]\n"
    "  Loads and validates the model (a malformed or unsupported file is refused, exit 1), then\n"
    "  prints its hyperparameters, the ids of its special tokens (bos, eos, eot, eom, pad and the\n"
    "  fill-in-the-middle fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep: from their\n"
    "  tokenizer.ggml.*_token_id keys, else recognised by text), every metadata key (arrays\n"
    "  summarised as [type x count]) and the tensor table (name, type, shape, bytes). With "
    "--json:\n"
    "  {\"file\", \"file_bytes\", \"gguf_version\", \"alignment\", \"hparams\": {...},\n"
    "  \"special_tokens\": {role: id} (the roles the vocabulary has), \"metadata\": {key: value "
    "or\n"
    "  {\"array\": type, \"count\": n}}, \"tensors\": [{\"name\", \"type\", \"shape\", \"bytes\", "
    "\"offset\"}],\n"
    "  \"type_mix\": [{\"type\", \"tensors\", \"bytes\"}]} (the file's tensor types, by count and "
    "bytes).\n";

typedef struct inspect_opts {
    const char *model_path;
    bool json;
} inspect_opts;

static int parse_args(int argc, char **argv, inspect_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_inspect, stdout);
            return ARGS_HELP;
        }
        if (strcmp(arg, "-m") == 0 || strcmp(arg, "--model") == 0) {
            if ((rc = args_value(&it, arg, &o->model_path)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "--json") == 0) {
            o->json = true;
        } else {
            return args_unknown(arg);
        }
    }
    return o->model_path ? EXIT_OK : fail_usage("missing -m MODEL");
}

/* A metadata value as JSON: scalars natively, arrays summarised. */
static json_t *kv_to_json(const gguf_kv *kv) {
    switch (kv->type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64:
        return kv->value.u64 <= INT64_MAX ? json_integer((json_int_t)kv->value.u64)
                                          : json_real((double)kv->value.u64);
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64: return json_integer((json_int_t)kv->value.i64);
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: return json_real(kv->value.f64);
    case GGUF_TYPE_BOOL: return json_boolean(kv->value.u64 != 0);
    case GGUF_TYPE_STRING: return json_utf8(kv->value.str.data, kv->value.str.len);
    case GGUF_TYPE_ARRAY:
        return json_pack("{s:s, s:I}", "array", gguf_type_name(kv->value.arr.type), "count",
                         (json_int_t)kv->value.arr.count);
    default: return json_null();
    }
}

/* llama.cpp's name of a pooling_type value. */
static const char *pooling_type_name(int32_t t) {
    static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
    return t >= 0 && t < 5 ? names[t] : "unknown";
}

static json_t *hparams_json(const syn_model_info *in) {
    json_t *h = json_pack(
        "{s:s, s:o, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:I, s:I}", "architecture",
        in->architecture, "name", json_text(in->name), "n_vocab", in->n_vocab, "n_ctx_train",
        in->n_ctx_train, "n_embd", in->n_embd, "n_layer", in->n_layer, "n_head", in->n_head,
        "n_head_kv", in->n_head_kv, "n_ff", in->n_ff, "rope_freq_base", (double)in->rope_freq_base,
        "rms_norm_eps", (double)in->rms_norm_eps, "tied_output", in->tied_output, "n_params",
        (json_int_t)in->n_params, "weight_bytes", (json_int_t)in->weight_bytes);
    if (h && in->rope_freq_scale != 1.0f)
        json_object_set_new(h, "rope_freq_scale", json_real((double)in->rope_freq_scale));
    if (h && in->swa_window > 0) {
        json_object_set_new(h, "sliding_window", json_integer(in->swa_window));
        json_object_set_new(h, "sliding_window_pattern", json_integer(in->swa_pattern));
        json_object_set_new(h, "rope_freq_base_swa", json_real((double)in->rope_freq_base_swa));
    }
    if (h && in->pooling_type >= 0) {
        json_object_set_new(h, "pooling_type", json_integer(in->pooling_type));
        json_object_set_new(h, "pooling", json_string(pooling_type_name(in->pooling_type)));
    }
    return h;
}

static json_t *tensor_json(const gguf_tensor *t) {
    json_t *shape = json_array();
    for (uint32_t d = 0; shape && d < t->n_dims; d++)
        json_array_append_new(shape, json_integer((json_int_t)t->ne[d]));
    return json_pack("{s:o, s:s, s:o, s:I, s:I}", "name", json_utf8(t->name.data, t->name.len),
                     "type", ggml_type_name(t->type), "shape", shape, "bytes",
                     (json_int_t)t->nbytes, "offset", (json_int_t)t->offset);
}

/* The file's mix of tensor types: count and bytes per type id, in id order. */
typedef struct type_mix {
    uint64_t count[GGML_TYPE_COUNT], bytes[GGML_TYPE_COUNT];
} type_mix;

static void count_types(const gguf_file *f, type_mix *mix) {
    memset(mix, 0, sizeof *mix);
    for (uint64_t i = 0; i < f->n_tensors; i++) { /* the reader admits known type ids only */
        mix->count[f->tensors[i].type]++;
        mix->bytes[f->tensors[i].type] += f->tensors[i].nbytes;
    }
}

static json_t *mix_json(const gguf_file *f) {
    type_mix mix;
    count_types(f, &mix);
    json_t *arr = json_array();
    for (uint32_t t = 0; arr && t < GGML_TYPE_COUNT; t++)
        if (mix.count[t] &&
            json_array_append_new(arr, json_pack("{s:s, s:I, s:I}", "type", ggml_type_name(t),
                                                 "tensors", (json_int_t)mix.count[t], "bytes",
                                                 (json_int_t)mix.bytes[t])) != 0) {
            json_decref(arr);
            return NULL;
        }
    return arr;
}

/* The ids of the roles the vocabulary has ({"bos": 151643, "fim_pre": 151659, ...}). */
static json_t *roles_json(const syn_tokenizer *tok) {
    json_t *roles = json_object();
    for (int r = 0; roles && r < SYN_TOKEN_ROLE_COUNT; r++) {
        const int32_t id = syn_tokenizer_role(tok, (syn_token_role)r);
        if (id >= 0)
            json_object_set_new(roles, syn_token_role_name((syn_token_role)r), json_integer(id));
    }
    return roles;
}

static int print_inspect_json(const char *path, const syn_model *model,
                              const syn_model_info *info) {
    const gguf_file *f = syn_model_gguf(model);
    json_t *meta = json_object();
    json_t *tensors = json_array();
    int ok = meta && tensors;
    for (uint64_t i = 0; ok && i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        /* Keys may hold any bytes: the object key is the key made valid UTF-8. */
        json_t *key = json_utf8(kv->key.data, kv->key.len);
        ok = key && json_object_set_new(meta, json_string_value(key), kv_to_json(kv)) == 0;
        json_decref(key);
    }
    for (uint64_t i = 0; ok && i < f->n_tensors; i++)
        ok = json_array_append_new(tensors, tensor_json(&f->tensors[i])) == 0;
    if (!ok) {
        json_decref(meta);
        json_decref(tensors);
        return fail_runtime("out of memory building the JSON output");
    }
    return print_json(json_pack(
        "{s:o, s:I, s:i, s:i, s:o, s:o, s:o, s:o, s:o}", "file", json_text(path), "file_bytes",
        (json_int_t)f->size, "gguf_version", (int)f->version, "alignment", (int)f->alignment,
        "hparams", hparams_json(info), "special_tokens", roles_json(syn_model_tokenizer(model)),
        "metadata", meta, "tensors", tensors, "type_mix", mix_json(f)));
}

/* Writes at most max bytes of the file's text s[len] (then "..." if cut) so that none of it can
 * act on a terminal: control characters escaped (\n, \t, \x1b; C1 ones as \u009b) and each byte
 * that is not valid UTF-8 as \xNN. Returns the bytes written, for padding. */
static size_t print_escaped(const char *s, size_t len, size_t max) {
    size_t written = 0;
    for (size_t i = 0; i < len;) {
        const unsigned char *c = (const unsigned char *)s + i;
        size_t n = utf8_seq_len(c, len - i);
        if (i + (n ? n : 1) > max) {
            fputs("...", stdout);
            return written + 3;
        }
        if (n == 1 && *c == '\n')
            written += (size_t)printf("\\n");
        else if (n == 1 && *c == '\t')
            written += (size_t)printf("\\t");
        else if (n == 0 || (n == 1 && (*c < 0x20 || *c == 0x7F)))
            written += (size_t)printf("\\x%02x", *c);
        else if (n == 2 && c[0] == 0xC2 && c[1] < 0xA0)
            written += (size_t)printf("\\u%04x", c[1]);
        else
            written += fwrite(c, 1, n, stdout);
        i += n ? n : 1;
    }
    return written;
}

/* Spaces after written bytes up to width, as printf's "%-*s" would pad. */
static void pad(size_t written, size_t width) {
    for (; written < width; written++)
        putchar(' ');
}

static int print_inspect_text(const char *path, const syn_model *model, const syn_model_info *in) {
    const gguf_file *f = syn_model_gguf(model);
    printf("file: %s (%zu bytes, GGUF v%u, alignment %u)\n", path, f->size, f->version,
           f->alignment);
    printf("model: %s '", in->architecture);
    print_escaped(in->name, strlen(in->name), SIZE_MAX);
    fputs("'\n", stdout);
    printf(
        "  n_vocab %d, n_ctx_train %d, n_embd %d, n_layer %d, n_head %d, n_head_kv %d, n_ff %d\n",
        in->n_vocab, in->n_ctx_train, in->n_embd, in->n_layer, in->n_head, in->n_head_kv, in->n_ff);
    printf("  rope_freq_base %g, rms_norm_eps %g, tied_output %s\n", (double)in->rope_freq_base,
           (double)in->rms_norm_eps, in->tied_output ? "yes" : "no");
    if (in->rope_freq_scale != 1.0f) printf("  rope_freq_scale %g\n", (double)in->rope_freq_scale);
    if (in->swa_window > 0) {
        int32_t n_local = 0; /* the rule of syn_model_info */
        for (int32_t il = 0; il < in->n_layer; il++)
            n_local += il % in->swa_pattern < in->swa_pattern - 1;
        printf("  sliding window %d on %d of %d layers (pattern %d), rope_freq_base_swa %g\n",
               in->swa_window, n_local, in->n_layer, in->swa_pattern,
               (double)in->rope_freq_base_swa);
    }
    if (in->pooling_type >= 0)
        printf("  pooling_type %d (%s)\n", in->pooling_type, pooling_type_name(in->pooling_type));
    printf("  %" PRIu64 " weights, %" PRIu64 " bytes of tensor data\n", in->n_params,
           in->weight_bytes);
    type_mix mix;
    count_types(f, &mix);
    fputs("  type mix:", stdout);
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        if (mix.count[t])
            printf(" %s %" PRIu64 " tensors %" PRIu64 " bytes;", ggml_type_name(t), mix.count[t],
                   mix.bytes[t]);
    putchar('\n');
    const syn_tokenizer *tok = syn_model_tokenizer(model);
    fputs("  special tokens:", stdout);
    int n_roles = 0;
    for (int r = 0; r < SYN_TOKEN_ROLE_COUNT; r++) {
        const int32_t id = syn_tokenizer_role(tok, (syn_token_role)r);
        char text[256];
        size_t n = 0;
        if (id < 0) continue;
        n_roles++;
        if (syn_tokenizer_token_bytes(tok, id, text, sizeof text, &n) != SYN_OK) n = 0;
        printf(" %s %d '", syn_token_role_name((syn_token_role)r), id);
        print_escaped(text, n, 64);
        fputs("';", stdout);
    }
    puts(n_roles ? "" : " none");
    printf("metadata (%" PRIu64 " keys):\n", f->n_kv);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        char key[256], value[256];
        size_t klen = kv->key.len < sizeof key - 1 ? kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.data, klen);
        key[klen] = '\0';
        size_t vlen = 0;
        syn_status vst = syn_model_meta_str(model, key, value, sizeof value, &vlen);
        fputs("  ", stdout);
        pad(print_escaped(kv->key.data, kv->key.len, sizeof key - 1), 42);
        printf(" %-8s ", gguf_type_name(kv->type));
        if (vst == SYN_OK || vst == SYN_ERR_BUFFER_TOO_SMALL)
            print_escaped(value, strlen(value), 96);
        putchar('\n');
    }
    printf("tensors (%" PRIu64 "):\n", f->n_tensors);
    printf("  %-32s %-6s %-22s %12s\n", "name", "type", "shape", "bytes");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char shape[96];
        int len = 0;
        for (uint32_t d = 0; d < t->n_dims && len < (int)sizeof shape; d++)
            len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%" PRIu64, d ? " x " : "",
                            t->ne[d]);
        fputs("  ", stdout);
        pad(print_escaped(t->name.data, t->name.len, SIZE_MAX), 32);
        printf(" %-6s %-22s %12" PRIu64 "\n", ggml_type_name(t->type), shape, t->nbytes);
    }
    return check_stdout();
}

int cmd_inspect(int argc, char **argv) {
    inspect_opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc != EXIT_OK) return rc == ARGS_HELP ? EXIT_OK : rc;
    syn_model *model = NULL;
    if ((rc = load_model(o.model_path, false, false, false, &model)) != EXIT_OK) return rc;
    syn_model_info info;
    syn_model_get_info(model, &info);
    rc = o.json ? print_inspect_json(o.model_path, model, &info)
                : print_inspect_text(o.model_path, model, &info);
    syn_model_free(model);
    return rc;
}

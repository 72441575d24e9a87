/* fuzz_gguf.c: libFuzzer target: parse any bytes as GGUF, walk everything the parser accepted,
 * and run the Qwen2 binding and tokenizer load on it. Built by `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/model.h"

/* Reads every byte the parser vouched for, so ASan catches any range it got wrong. */
static uint8_t touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint8_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc ^= b[i];
    return acc;
}

static uint8_t walk(const gguf_file *f) {
    uint8_t acc = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        acc ^= touch(kv->key.data, kv->key.len);
        if (kv->type == GGUF_TYPE_STRING) acc ^= touch(kv->value.str.data, kv->value.str.len);
        if (kv->type != GGUF_TYPE_ARRAY) continue;
        const gguf_array *a = &kv->value.arr;
        if (a->type == GGUF_TYPE_STRING) {
            const uint8_t *cur = a->data;
            for (uint64_t j = 0; j < a->count; j++) {
                gguf_str s = gguf_array_next_str(&cur);
                acc ^= touch(s.data, s.len);
            }
        } else {
            acc ^= touch(a->data, a->nbytes);
            if (a->count > 0) acc ^= (uint8_t)gguf_array_get_int(a, a->count - 1);
        }
        /* Lookups by name find this very entry (names are unique). */
        char key[64];
        if (kv->key.len < sizeof key && !memchr(kv->key.data, 0, kv->key.len)) {
            memcpy(key, kv->key.data, kv->key.len);
            key[kv->key.len] = '\0';
            if (gguf_find_kv(f, key) != kv) __builtin_trap();
        }
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        acc ^= touch(t->name.data, t->name.len);
        if (t->nbytes > 0)
            acc ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
    }
    return acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    if (gguf_open_memory(data, size, &f) != SYN_OK) return 0;
    volatile uint8_t sink = walk(f);
    (void)sink;
    syn_model_params p = syn_model_default_params();
    p.prefetch = false;
    syn_model *m = NULL;
    if (syn_model_load_gguf(f, &p, &m) != SYN_OK) return 0; /* f is closed either way */
    /* Dequantize the first and last embedding rows and one layer row through the bound views. */
    float row[4096];
    if (m->hp.n_embd <= 4096) {
        syn_tensor_row(&m->tok_embd, 0, row);
        syn_tensor_row(&m->tok_embd, m->hp.n_vocab - 1, row);
        syn_tensor_row(&m->layers[0].wq, 0, row);
    }
    syn_model_free(m);
    return 0;
}

/*
 * gguf.h: reading and writing GGUF files (versions 2 and 3).
 *
 * File layout (all integers little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value_type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   padding to general.alignment (default 32) | tensor data (offsets relative to this point)
 * string = u64 length + bytes (no NUL); array = u32 element type + u64 count + elements.
 * ne[0] is the innermost (contiguous) dimension: a matrix [ne1 rows][ne0 columns] has ne = {ne0,
 * ne1}.
 *
 * The reader maps the file read-only and never copies tensor data or strings: every gguf_str and
 * tensor data pointer points into the mapping, valid until gguf_close(). Every count, length,
 * offset and size is checked against the file before use; errors go through syn_fail() and name
 * the key, tensor or byte offset at fault.
 */
#ifndef SYN_GGUF_H
#define SYN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "synapse.h"

enum gguf_value_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

/* Tensor element types, numbered as ggml numbers them. Only the ones Synapse computes with, plus
 * the names of the others so that refusals can name them. */
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_COUNT = 40 /* type ids at or above this are unknown */
};

enum { GGUF_MAX_DIMS = 4, GGUF_DEFAULT_ALIGNMENT = 32 };

/* A string inside the mapping: not NUL-terminated. */
typedef struct gguf_str {
    uint64_t len;
    const char *data;
} gguf_str;

typedef struct gguf_array {
    uint32_t type; /* enum gguf_value_type of the elements (never ARRAY) */
    uint64_t count;
    const uint8_t *data; /* first element inside the mapping; strings are variable-length */
    uint64_t nbytes;     /* bytes the elements occupy */
} gguf_array;

typedef struct gguf_kv {
    gguf_str key;
    uint32_t type; /* enum gguf_value_type */
    union {
        uint64_t u64; /* UINT8/16/32/64 and BOOL, zero-extended */
        int64_t i64;  /* INT8/16/32/64, sign-extended */
        double f64;   /* FLOAT32/64 */
        gguf_str str;
        gguf_array arr;
    } value;
    uint64_t file_offset; /* where the key starts, for messages */
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
    uint32_t type;              /* enum ggml_type */
    uint64_t offset;            /* relative to the data section */
    uint64_t n_elements;
    uint64_t nbytes;
    const void *data; /* inside the mapping */
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *base; /* the whole file, mapped read-only (or caller memory) */
    size_t size;
    bool owns_mapping;
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv;
    gguf_kv *kvs;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t data_offset;            /* start of the tensor data section */
    struct gguf_index *kv_index;     /* private: name -> kvs[i] hash table */
    struct gguf_index *tensor_index; /* private: name -> tensors[i] hash table */
} gguf_file;

/* Maps and parses path. Errors: SYN_ERR_IO, SYN_ERR_FORMAT, SYN_ERR_UNSUPPORTED (version, type),
 * SYN_ERR_NO_MEMORY. On error *out is NULL. */
syn_status gguf_open(const char *path, gguf_file **out);

enum {
    /* Map in 2 MiB pages and make the file's page cache hold 2 MiB folios, dropping a cache of
     * small pages once (core/file_map.h): for files whose weights will be streamed. Without it
     * the mapping uses 4 KiB pages and the cache is left alone. */
    GGUF_OPEN_HUGE_PAGES = 1,
};

/* gguf_open (which passes no flags) with flags GGUF_OPEN_*. */
syn_status gguf_open_ex(const char *path, unsigned flags, gguf_file **out);

/* Parses a caller-owned buffer (fuzzing, tests); the buffer must outlive the gguf_file. */
syn_status gguf_open_memory(const void *data, size_t size, gguf_file **out);

void gguf_close(gguf_file *f);

/* Lookups: NULL when absent. Key and tensor names are unique (checked at open). */
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters. A missing key returns SYN_ERR_FORMAT "missing key 'k'" unless the getter is the
 * _opt form (which leaves *out unchanged and returns SYN_OK). A present key of the wrong type or
 * out of the target's range returns SYN_ERR_FORMAT naming the key, its type and the expected one.
 * Any integer type is accepted where the value fits. */
syn_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
syn_status gguf_get_u32_opt(const gguf_file *f, const char *key, uint32_t *out);
syn_status gguf_get_f32(const gguf_file *f, const char *key, float *out); /* FLOAT32/64 */
syn_status gguf_get_f32_opt(const gguf_file *f, const char *key, float *out);
syn_status gguf_get_bool_opt(const gguf_file *f, const char *key, bool *out);
syn_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
syn_status gguf_get_str_opt(const gguf_file *f, const char *key, gguf_str *out);
/* An array whose elements have exactly elem_type (no widening: check kv->value.arr.type via
 * gguf_find_kv to accept several). */
syn_status gguf_get_array(const gguf_file *f, const char *key, uint32_t elem_type, gguf_array *out);

/* Walks a string array element by element: *cursor starts at arr->data (validated at open, so
 * every length is known to lie inside the array). */
gguf_str gguf_array_next_str(const uint8_t **cursor);

/* Integer element i of a numeric array, widened (arrays of INT8..INT64, UINT8..UINT64, BOOL). */
int64_t gguf_array_get_int(const gguf_array *arr, uint64_t i);

bool gguf_str_eq(gguf_str s, const char *cstr);

const char *gguf_type_name(uint32_t value_type); /* "uint32", ... or "invalid" */
uint32_t
gguf_type_size(uint32_t value_type); /* bytes of a fixed-size value; 0: string, array, invalid */
const char *ggml_type_name(uint32_t ggml_type); /* "f32", "q8_0", ... or "unknown" */
/* Bytes of a row of n elements of type, 0 when the type is unknown or n not a block multiple. */
uint64_t ggml_row_size(uint32_t ggml_type, uint64_t n);
/* Elements per block (32 for Q8_0, 1 for floats), 0 when unknown. */
uint32_t ggml_block_size(uint32_t ggml_type);
/* Bytes per block (34 for Q8_0, 4 for F32), 0 when unknown. */
uint32_t ggml_type_size(uint32_t ggml_type);

/* ---------------------------------------------------------------------------------------------
 * Writer: collects metadata and tensors in memory, then writes a version 3 file.
 * ------------------------------------------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void); /* NULL when out of memory */
void gguf_writer_free(gguf_writer *w);

/* Each setter copies key and value; adding a key twice is an error (SYN_ERR_INVALID_ARGUMENT). */
syn_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
syn_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
syn_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
syn_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* Copies a value (scalar, string or array) from a parsed file's kv, under the same key; a kv
 * filled in by hand gives the scalar types that have no setter of their own (int32, ...). */
syn_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);
/* Raw array of fixed-size elements (not strings). */
syn_status gguf_writer_set_array(gguf_writer *w, const char *key, uint32_t elem_type,
                                 const void *elems, uint64_t count);
syn_status gguf_writer_set_str_array(gguf_writer *w, const char *key, const char *const *strs,
                                     uint64_t count);

/* Declares a tensor; its data are produced later by the fill callback when the file is written,
 * so that a 500 MB model never sits in memory at once. fill writes exactly nbytes into dst. */
typedef syn_status (*gguf_fill_fn)(void *user, const char *name, void *dst, uint64_t nbytes);
syn_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t ggml_type,
                                  uint32_t n_dims, const uint64_t *ne, gguf_fill_fn fill,
                                  void *user);

/* Writes the file (alignment 32 unless general.alignment was set). */
syn_status gguf_writer_write(gguf_writer *w, const char *path);

#endif

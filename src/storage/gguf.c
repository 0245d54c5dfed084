/* GGUF header reader: see gguf.h. */
#define _GNU_SOURCE
#include "storage/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strbuf.h"
#include "common/strmap.h"
#include "common/utf8.h"

/* ggml tensor types: id, name, elements per block, bytes per block.  Ids that ggml
 * retired (4, 5, 31-33, 36-38) are absent and refused. */
static const struct {
    uint32_t id;
    const char *name;
    uint32_t block;
    uint32_t bytes;
} ggml_types[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},       {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},    {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},   {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},          {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},         {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},        {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};

static int find_type(uint32_t id)
{
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == id)
            return (int)i;
    return -1;
}

const char *llmr_ggml_type_name(uint32_t type)
{
    int i = find_type(type);
    return i < 0 ? NULL : ggml_types[i].name;
}

/* Fixed sizes of scalar value types; 0 for STRING and ARRAY. */
static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case LLMR_GGUF_UINT8:
    case LLMR_GGUF_INT8:
    case LLMR_GGUF_BOOL:
        return 1;
    case LLMR_GGUF_UINT16:
    case LLMR_GGUF_INT16:
        return 2;
    case LLMR_GGUF_UINT32:
    case LLMR_GGUF_INT32:
    case LLMR_GGUF_FLOAT32:
        return 4;
    case LLMR_GGUF_UINT64:
    case LLMR_GGUF_INT64:
    case LLMR_GGUF_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

typedef struct reader {
    const uint8_t *buf;
    size_t len;
    size_t pos;
    const char *file;
    llmr_problems *problems;
    bool failed; /* a problem was reported; stop reading */
} reader;

static void fail(reader *r, llmr_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(reader *r, llmr_status code, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = true;
    va_list ap;
    va_start(ap, fmt);
    llmr_problems_vadd(r->problems, code, r->file, fmt, ap);
    va_end(ap);
}

static bool need(reader *r, size_t n, const char *what)
{
    if (r->failed)
        return false;
    if (n <= r->len - r->pos)
        return true;
    fail(r, LLMR_MODEL_CORRUPT,
         "file is truncated inside its header: %s needs %zu bytes at offset %zu, the file "
         "has %zu",
         what, n, r->pos, r->len);
    return false;
}

static uint64_t read_le(reader *r, size_t n, const char *what)
{
    if (!need(r, n, what))
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->buf[r->pos + i] << (8 * i);
    r->pos += n;
    return v;
}

/* Reads a GGUF string (u64 length + bytes) without copying: *s points into buf. */
static bool read_string(reader *r, uint64_t max, const char *what, const char **s, size_t *n)
{
    uint64_t len = read_le(r, 8, what);
    if (r->failed)
        return false;
    if (len > max) {
        fail(r, LLMR_LIMIT_EXCEEDED, "%s is %llu bytes long, more than the limit of %llu", what,
             (unsigned long long)len, (unsigned long long)max);
        return false;
    }
    if (!need(r, (size_t)len, what))
        return false;
    *s = (const char *)r->buf + r->pos;
    *n = (size_t)len;
    r->pos += (size_t)len;
    return true;
}

static char *copy_string(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = '\0';
    }
    return c;
}

/* A key or tensor name: valid UTF-8 with no control characters (so it can be quoted
 * in messages as it is). */
static bool check_name(reader *r, const char *s, size_t n, const char *what)
{
    bool ok = llmr_utf8_valid(s, n, NULL);
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)s[i] >= 0x20 && s[i] != 0x7f;
    if (!ok)
        fail(r, LLMR_MODEL_CORRUPT, "%s at offset %zu holds control characters or invalid UTF-8",
             what, r->pos - n);
    return ok;
}

static const char *value_type_name(uint32_t t)
{
    static const char *const names[] = {"uint8", "int8",  "uint16", "int16", "uint32",
                                        "int32", "float32", "bool", "string", "array",
                                        "uint64", "int64", "float64"};
    return t < LLMR_GGUF_VALUE_TYPE_COUNT ? names[t] : "unknown";
}

static void read_scalar(reader *r, uint32_t type, llmr_gguf_kv *kv)
{
    size_t size = scalar_size(type);
    uint64_t raw = read_le(r, size, "a metadata value");
    switch (type) {
    case LLMR_GGUF_INT8:
        kv->num.i64 = (int8_t)raw;
        break;
    case LLMR_GGUF_INT16:
        kv->num.i64 = (int16_t)raw;
        break;
    case LLMR_GGUF_INT32:
        kv->num.i64 = (int32_t)raw;
        break;
    case LLMR_GGUF_INT64:
        kv->num.i64 = (int64_t)raw;
        break;
    case LLMR_GGUF_FLOAT32: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, sizeof f);
        kv->num.f64 = f;
        break;
    }
    case LLMR_GGUF_FLOAT64:
        memcpy(&kv->num.f64, &raw, sizeof raw);
        break;
    case LLMR_GGUF_BOOL:
        if (raw > 1)
            fail(r, LLMR_MODEL_CORRUPT, "metadata %s: bool value %llu is neither 0 nor 1", kv->key,
                 (unsigned long long)raw);
        kv->num.b = raw == 1;
        break;
    default:
        kv->num.u64 = raw;
        break;
    }
}

static void read_value(reader *r, llmr_gguf_kv *kv)
{
    uint32_t type = (uint32_t)read_le(r, 4, "a metadata value type");
    if (r->failed)
        return;
    if (type >= LLMR_GGUF_VALUE_TYPE_COUNT) {
        fail(r, LLMR_MODEL_CORRUPT, "metadata %s has unknown value type %u", kv->key, type);
        return;
    }
    kv->type = (llmr_gguf_value_type)type;
    if (type == LLMR_GGUF_STRING) {
        const char *s;
        size_t n;
        if (read_string(r, LLMR_GGUF_MAX_STRING_BYTES, "a metadata string", &s, &n)) {
            kv->str = copy_string(s, n);
            kv->str_len = n;
            if (!kv->str)
                fail(r, LLMR_OOM_RAM, "out of memory reading metadata %s", kv->key);
        }
        return;
    }
    if (type != LLMR_GGUF_ARRAY) {
        read_scalar(r, type, kv);
        return;
    }
    uint32_t elem = (uint32_t)read_le(r, 4, "an array element type");
    uint64_t count = read_le(r, 8, "an array length");
    if (r->failed)
        return;
    if (elem >= LLMR_GGUF_VALUE_TYPE_COUNT || elem == LLMR_GGUF_ARRAY) {
        fail(r, elem == LLMR_GGUF_ARRAY ? LLMR_UNSUPPORTED : LLMR_MODEL_CORRUPT,
             "metadata %s is an array of %s, which GGUF readers do not support", kv->key,
             elem == LLMR_GGUF_ARRAY ? "arrays" : "an unknown type");
        return;
    }
    kv->array_type = (llmr_gguf_value_type)elem;
    kv->array_count = count;
    /* Every element takes at least one byte (strings eight): the count cannot exceed
     * what is left, which bounds the loop below by the file size. */
    size_t min = elem == LLMR_GGUF_STRING ? 8 : scalar_size(elem);
    if (count > (r->len - r->pos) / min) {
        fail(r, LLMR_MODEL_CORRUPT,
             "metadata %s claims %llu elements of %s, more than the %zu bytes left in the file hold",
             kv->key, (unsigned long long)count, value_type_name(elem), r->len - r->pos);
        return;
    }
    if (elem != LLMR_GGUF_STRING) {
        r->pos += (size_t)count * min;
        return;
    }
    for (uint64_t i = 0; i < count && !r->failed; i++) {
        const char *s;
        size_t n;
        read_string(r, LLMR_GGUF_MAX_STRING_BYTES, "an array string", &s, &n);
    }
}

static void read_kvs(reader *r, llmr_gguf_header *h, uint64_t n, llmr_strmap *seen)
{
    for (uint64_t i = 0; i < n && !r->failed; i++) {
        const char *key;
        size_t key_len;
        if (!read_string(r, LLMR_GGUF_MAX_KEY_BYTES, "a metadata key", &key, &key_len) ||
            !check_name(r, key, key_len, "a metadata key"))
            return;
        llmr_gguf_kv *kv = &h->kvs[h->kv_count];
        memset(kv, 0, sizeof *kv);
        if (!(kv->key = copy_string(key, key_len))) {
            fail(r, LLMR_OOM_RAM, "out of memory reading metadata");
            return;
        }
        h->kv_count++;
        llmr_strmap_put_result put = llmr_strmap_put(seen, kv->key, h->kv_count - 1);
        if (put != LLMR_STRMAP_ADDED) {
            llmr_strbuf sb = LLMR_STRBUF_INIT;
            llmr_strbuf_put_display(&sb, kv->key, key_len);
            fail(r, put == LLMR_STRMAP_NOMEM ? LLMR_OOM_RAM : LLMR_MODEL_CORRUPT,
                 "metadata key %s appears twice", llmr_strbuf_cstr(&sb));
            llmr_strbuf_free(&sb);
            return;
        }
        read_value(r, kv);
    }
}

static void read_tensor_infos(reader *r, llmr_gguf_header *h, uint64_t n, llmr_strmap *seen)
{
    for (uint64_t i = 0; i < n && !r->failed; i++) {
        const char *name;
        size_t name_len;
        if (!read_string(r, LLMR_GGUF_MAX_NAME_BYTES, "a tensor name", &name, &name_len) ||
            !check_name(r, name, name_len, "a tensor name"))
            return;
        llmr_gguf_tensor *t = &h->tensors[h->tensor_count];
        memset(t, 0, sizeof *t);
        if (!(t->name = copy_string(name, name_len))) {
            fail(r, LLMR_OOM_RAM, "out of memory reading tensor infos");
            return;
        }
        h->tensor_count++;
        llmr_strmap_put_result put = llmr_strmap_put(seen, t->name, 0);
        if (put != LLMR_STRMAP_ADDED) {
            fail(r, put == LLMR_STRMAP_NOMEM ? LLMR_OOM_RAM : LLMR_MODEL_CORRUPT,
                 "tensor %s appears twice", t->name);
            return;
        }
        t->n_dims = (uint32_t)read_le(r, 4, "a tensor's dimension count");
        if (r->failed)
            return;
        if (t->n_dims == 0 || t->n_dims > LLMR_GGUF_MAX_DIMS) {
            fail(r, LLMR_MODEL_CORRUPT, "tensor %s has %u dimensions; GGUF allows 1 to %u",
                 t->name, t->n_dims, LLMR_GGUF_MAX_DIMS);
            return;
        }
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            t->dims[d] = read_le(r, 8, "a tensor dimension");
            if (!r->failed && (t->dims[d] > INT64_MAX ||
                               __builtin_mul_overflow(elements, t->dims[d], &elements))) {
                fail(r, LLMR_MODEL_CORRUPT, "tensor %s: its element count overflows", t->name);
                return;
            }
        }
        t->type = (uint32_t)read_le(r, 4, "a tensor type");
        t->offset = read_le(r, 8, "a tensor offset");
        if (r->failed)
            return;
        int ti = find_type(t->type);
        if (ti < 0) {
            fail(r, LLMR_UNSUPPORTED, "tensor %s has ggml type %u, which is not a current ggml type",
                 t->name, t->type);
            return;
        }
        uint32_t block = ggml_types[ti].block;
        if (t->dims[0] % block != 0) {
            fail(r, LLMR_MODEL_CORRUPT,
                 "tensor %s: first dimension %llu is not a multiple of %s's block of %u",
                 t->name, (unsigned long long)t->dims[0], ggml_types[ti].name, block);
            return;
        }
        uint64_t bytes = (t->dims[0] / block) * ggml_types[ti].bytes;
        for (uint32_t d = 1; d < t->n_dims; d++) {
            if (__builtin_mul_overflow(bytes, t->dims[d], &bytes)) {
                fail(r, LLMR_MODEL_CORRUPT, "tensor %s: its byte size overflows", t->name);
                return;
            }
        }
        t->bytes = bytes;
    }
}

static int compare_offsets(const void *a, const void *b)
{
    const llmr_gguf_tensor *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static void check_alignment_key(reader *r, llmr_gguf_header *h)
{
    h->alignment = LLMR_GGUF_DEFAULT_ALIGNMENT;
    const llmr_gguf_kv *kv = llmr_gguf_find(h, "general.alignment");
    if (!kv)
        return;
    if (kv->type != LLMR_GGUF_UINT32 || kv->num.u64 == 0 || (kv->num.u64 & (kv->num.u64 - 1))) {
        fail(r, LLMR_MODEL_CORRUPT, "general.alignment must be a uint32 power of two");
        return;
    }
    h->alignment = kv->num.u64;
}

static void check_data(reader *r, llmr_gguf_header *h)
{
    uint64_t a = h->alignment;
    uint64_t start = ((uint64_t)r->pos + a - 1) / a * a;
    h->data_offset = start;
    if (h->tensor_count > 0 && start > r->len) {
        fail(r, LLMR_MODEL_CORRUPT,
             "file is truncated: it ends at byte %zu, before its data section starts at %llu",
             r->len, (unsigned long long)start);
        return;
    }
    uint64_t available = r->len - start;
    qsort(h->tensors, h->tensor_count, sizeof *h->tensors, compare_offsets);
    uint64_t covered = 0;
    for (size_t i = 0; i < h->tensor_count && !r->failed; i++) {
        const llmr_gguf_tensor *t = &h->tensors[i];
        uint64_t end;
        if (t->offset % a != 0) {
            fail(r, LLMR_MODEL_CORRUPT, "tensor %s: offset %llu is not a multiple of the alignment %llu",
                 t->name, (unsigned long long)t->offset, (unsigned long long)a);
        } else if (__builtin_add_overflow(t->offset, t->bytes, &end)) {
            fail(r, LLMR_MODEL_CORRUPT, "tensor %s: offset + size overflows", t->name);
        } else if (i > 0 && t->offset < covered) {
            fail(r, LLMR_MODEL_CORRUPT, "tensor %s overlaps tensor %s", t->name, h->tensors[i - 1].name);
        } else if (end > covered) {
            covered = end;
        }
    }
    h->data_bytes = covered;
    if (!r->failed && covered > available)
        fail(r, LLMR_MODEL_CORRUPT,
             "file is truncated: its tensors need %llu bytes of data after offset %llu but the "
             "file holds %llu (%llu bytes missing; was the download interrupted?)",
             (unsigned long long)covered, (unsigned long long)start, (unsigned long long)available,
             (unsigned long long)(covered - available));
}

static void check_architecture(reader *r, llmr_gguf_header *h)
{
    const llmr_gguf_kv *kv = llmr_gguf_find(h, "general.architecture");
    if (!kv) {
        fail(r, LLMR_MODEL_CORRUPT, "no general.architecture key: cannot tell which model this is");
        return;
    }
    if (kv->type != LLMR_GGUF_STRING || kv->str_len == 0 || strlen(kv->str) != kv->str_len ||
        !llmr_utf8_valid(kv->str, kv->str_len, NULL)) {
        fail(r, LLMR_MODEL_CORRUPT, "general.architecture is not a non-empty UTF-8 string");
        return;
    }
    h->architecture = kv->str;
}

void llmr_gguf_header_free(llmr_gguf_header *h)
{
    for (size_t i = 0; i < h->kv_count; i++) {
        free(h->kvs[i].key);
        free(h->kvs[i].str);
    }
    for (size_t i = 0; i < h->tensor_count; i++)
        free(h->tensors[i].name);
    free(h->kvs);
    free(h->tensors);
    memset(h, 0, sizeof *h);
}

const llmr_gguf_kv *llmr_gguf_find(const llmr_gguf_header *h, const char *key)
{
    for (size_t i = 0; i < h->kv_count; i++)
        if (strcmp(h->kvs[i].key, key) == 0)
            return &h->kvs[i];
    return NULL;
}

llmr_status llmr_gguf_parse(const uint8_t *buf, size_t len, const char *file,
                            llmr_gguf_header *out, llmr_problems *problems)
{
    memset(out, 0, sizeof *out);
    size_t before = llmr_problems_total(problems);
    reader r = {buf, len, 0, file, problems, false};
    llmr_strmap *kv_names = NULL, *tensor_names = NULL;

    if (len < 4 || memcmp(buf, "GGUF", 4) != 0) {
        fail(&r, LLMR_MODEL_CORRUPT, "does not start with the GGUF magic: this is not a GGUF file");
        goto done;
    }
    r.pos = 4;
    out->version = (uint32_t)read_le(&r, 4, "the version");
    if (r.failed)
        goto done;
    if (out->version == 1) {
        fail(&r, LLMR_UNSUPPORTED, "GGUF version 1 is not supported; convert the model again "
                                   "with a current llama.cpp");
        goto done;
    }
    if (out->version != 2 && out->version != 3) {
        bool swapped = out->version == 0x02000000u || out->version == 0x03000000u;
        fail(&r, swapped ? LLMR_UNSUPPORTED : LLMR_MODEL_CORRUPT,
             swapped ? "big-endian GGUF is not supported" : "unknown GGUF version %u",
             out->version);
        goto done;
    }
    uint64_t n_tensors = read_le(&r, 8, "the tensor count");
    uint64_t n_kvs = read_le(&r, 8, "the metadata count");
    if (r.failed)
        goto done;
    if (n_tensors > LLMR_GGUF_MAX_TENSORS || n_kvs > LLMR_GGUF_MAX_KVS) {
        fail(&r, LLMR_LIMIT_EXCEEDED,
             "header claims %llu tensors and %llu metadata keys; the limits are %u and %u",
             (unsigned long long)n_tensors, (unsigned long long)n_kvs, LLMR_GGUF_MAX_TENSORS,
             LLMR_GGUF_MAX_KVS);
        goto done;
    }
    /* Each key/value takes at least 13 bytes and each tensor info at least 29: counts the
     * file cannot hold are refused before anything is allocated for them. */
    if (n_kvs > (len - r.pos) / 13 || n_tensors > (len - r.pos) / 29) {
        fail(&r, LLMR_MODEL_CORRUPT,
             "header claims %llu metadata keys and %llu tensors, more than its %zu bytes can hold",
             (unsigned long long)n_kvs, (unsigned long long)n_tensors, len);
        goto done;
    }
    out->kvs = calloc(n_kvs ? n_kvs : 1, sizeof *out->kvs);
    out->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *out->tensors);
    kv_names = llmr_strmap_create(n_kvs);
    tensor_names = llmr_strmap_create(n_tensors);
    if (!out->kvs || !out->tensors || !kv_names || !tensor_names) {
        fail(&r, LLMR_OOM_RAM, "out of memory reading the header");
        goto done;
    }
    read_kvs(&r, out, n_kvs, kv_names);
    if (!r.failed)
        check_alignment_key(&r, out);
    if (!r.failed)
        read_tensor_infos(&r, out, n_tensors, tensor_names);
    if (!r.failed)
        check_data(&r, out);
    if (!r.failed)
        check_architecture(&r, out);

done:
    llmr_strmap_free(kv_names);
    llmr_strmap_free(tensor_names);
    llmr_status status = llmr_problems_code_since(problems, before);
    if (status != LLMR_OK)
        llmr_gguf_header_free(out);
    return status;
}

llmr_status llmr_gguf_file_open(const char *path, const char *label, llmr_gguf_file *f,
                                llmr_problems *problems)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        bool missing = errno == ENOENT;
        llmr_problems_add(problems, missing ? LLMR_NOT_FOUND : LLMR_IO, label, "cannot open: %s",
                          strerror(errno));
        return missing ? LLMR_NOT_FOUND : LLMR_IO;
    }
    llmr_status status = LLMR_OK;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        llmr_problems_add(problems, LLMR_IO, label, "not a regular file");
        status = LLMR_IO;
        goto close_fd;
    }
    if (st.st_size < 8) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, label,
                          "file is %lld bytes, too short for a GGUF header", (long long)st.st_size);
        status = LLMR_MODEL_CORRUPT;
        goto close_fd;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        llmr_problems_add(problems, LLMR_IO, label, "mmap failed: %s", strerror(errno));
        status = LLMR_IO;
        goto close_fd;
    }
    status = llmr_gguf_parse(m, (size_t)st.st_size, label, &f->header, problems);
    if (status != LLMR_OK) {
        munmap(m, (size_t)st.st_size);
        goto close_fd;
    }
    f->fd = fd;
    f->map = m;
    f->size = (uint64_t)st.st_size;
    return LLMR_OK;

close_fd:
    close(fd);
    return status;
}

void llmr_gguf_file_close(llmr_gguf_file *f)
{
    if (f->map)
        munmap((void *)f->map, (size_t)f->size);
    if (f->fd >= 0)
        close(f->fd);
    llmr_gguf_header_free(&f->header);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

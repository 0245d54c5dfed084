/* safetensors reader: see safetensors.h. */
#define _GNU_SOURCE
#include "storage/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs_util.h"
#include "common/json_scan.h"
#include "common/json_util.h"

/* How many names one overlap/gap report quotes before it stops listing. */
#define MAX_LAYOUT_REPORTS 5

static void put_name(llmr_strbuf *sb, const char *name)
{
    size_t n = strlen(name);
    llmr_strbuf_put_display(sb, name, n > 200 ? 200 : n);
    if (n > 200)
        llmr_strbuf_puts(sb, "...");
}

/* Adds "tensor NAME: <message>" to the problems. */
static void tensor_problem(llmr_problems *p, llmr_status code, const char *file,
                           const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void tensor_problem(llmr_problems *p, llmr_status code, const char *file,
                           const char *name, const char *fmt, ...)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_puts(&sb, "tensor ");
    put_name(&sb, name);
    llmr_strbuf_puts(&sb, ": ");
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    llmr_problems_add(p, code, file, "%s", llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
}

static bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

static bool parse_u64_array(const json_t *arr, size_t max_items, uint64_t *out, size_t *n)
{
    if (!json_is_array(arr) || json_array_size(arr) > max_items)
        return false;
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return false;
        out[i] = (uint64_t)json_integer_value(v);
    }
    *n = json_array_size(arr);
    return true;
}

/* Checks one tensor entry; fills t (name not set) or adds problems and returns false. */
static bool parse_tensor(const char *name, const json_t *entry, const char *file,
                         llmr_st_tensor *t, llmr_problems *p)
{
    if (name[0] == '\0') {
        llmr_problems_add(p, LLMR_MODEL_CORRUPT, file, "a tensor has an empty name");
        return false;
    }
    if (strlen(name) > LLMR_ST_MAX_NAME_BYTES) {
        tensor_problem(p, LLMR_LIMIT_EXCEEDED, file, name, "name is longer than %u bytes",
                       LLMR_ST_MAX_NAME_BYTES);
        return false;
    }
    if (!json_is_object(entry)) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name,
                       "entry is not an object with dtype, shape and data_offsets");
        return false;
    }
    const json_t *dtype = json_object_get(entry, "dtype");
    if (!json_is_string(dtype)) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name, "dtype is missing or not a string");
        return false;
    }
    if (!llmr_dtype_parse(json_string_value(dtype), &t->dtype)) {
        llmr_strbuf got = LLMR_STRBUF_INIT;
        llmr_json_describe(&got, dtype);
        tensor_problem(p, LLMR_UNSUPPORTED, file, name,
                       "unknown dtype %s (known: BOOL, U8, I8, I16, U16, I32, U32, I64, U64, "
                       "F4, F6_E2M3, F6_E3M2, F8_E5M2, F8_E4M3, F8_E8M0, F16, BF16, F32, F64, C64)",
                       llmr_strbuf_cstr(&got));
        llmr_strbuf_free(&got);
        return false;
    }
    const json_t *shape = json_object_get(entry, "shape");
    size_t rank;
    if (json_is_array(shape) && json_array_size(shape) > LLMR_ST_MAX_RANK) {
        tensor_problem(p, LLMR_LIMIT_EXCEEDED, file, name, "shape has %zu dimensions, more than %u",
                       json_array_size(shape), LLMR_ST_MAX_RANK);
        return false;
    }
    if (!parse_u64_array(shape, LLMR_ST_MAX_RANK, t->shape, &rank)) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name,
                       "shape is missing or not an array of non-negative integers");
        return false;
    }
    t->rank = (uint32_t)rank;
    uint64_t offsets[2];
    size_t n_offsets;
    if (!parse_u64_array(json_object_get(entry, "data_offsets"), 2, offsets, &n_offsets) ||
        n_offsets != 2) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name,
                       "data_offsets is missing or not two non-negative integers");
        return false;
    }
    t->begin = offsets[0];
    t->end = offsets[1];
    if (t->end < t->begin) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name, "data_offsets [%llu, %llu] end before they begin",
                       (unsigned long long)t->begin, (unsigned long long)t->end);
        return false;
    }

    uint64_t elements = 1, bits;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (mul_overflows(elements, t->shape[i], &elements)) {
            tensor_problem(p, LLMR_MODEL_CORRUPT, file, name, "shape's element count overflows 64 bits");
            return false;
        }
    }
    if (mul_overflows(elements, llmr_dtype_bits(t->dtype), &bits)) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name, "shape's byte size overflows 64 bits");
        return false;
    }
    llmr_strbuf desc = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&desc, "%s ", llmr_dtype_name(t->dtype));
    llmr_shape_format(&desc, t->rank, t->shape);
    bool ok = true;
    if (bits % 8 != 0) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name,
                       "%s is %llu bits, not a whole number of bytes", llmr_strbuf_cstr(&desc),
                       (unsigned long long)bits);
        ok = false;
    } else if (t->end - t->begin != bits / 8) {
        tensor_problem(p, LLMR_MODEL_CORRUPT, file, name,
                       "header says %s, which is %llu bytes, but its data_offsets [%llu, %llu] "
                       "span %llu bytes",
                       llmr_strbuf_cstr(&desc), (unsigned long long)(bits / 8),
                       (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)(t->end - t->begin));
        ok = false;
    }
    llmr_strbuf_free(&desc);
    return ok;
}

static int compare_offsets(const void *a, const void *b)
{
    const llmr_st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* The ranges must tile [0, data_size) exactly: no overlap, no gap, nothing after. */
static void check_layout(const llmr_st_header *h, uint64_t data_size, const char *file,
                         llmr_problems *p)
{
    uint64_t covered = 0;
    unsigned reports = 0;
    for (size_t i = 0; i < h->count; i++) {
        const llmr_st_tensor *t = &h->tensors[i];
        if (t->begin < covered && reports++ < MAX_LAYOUT_REPORTS) {
            llmr_strbuf sb = LLMR_STRBUF_INIT;
            put_name(&sb, h->tensors[i - 1].name);
            tensor_problem(p, LLMR_MODEL_CORRUPT, file, t->name,
                           "bytes [%llu, %llu) overlap those of tensor %s",
                           (unsigned long long)t->begin, (unsigned long long)t->end,
                           llmr_strbuf_cstr(&sb));
            llmr_strbuf_free(&sb);
        } else if (t->begin > covered && reports++ < MAX_LAYOUT_REPORTS) {
            llmr_problems_add(p, LLMR_MODEL_CORRUPT, file,
                              "bytes [%llu, %llu) of the data section belong to no tensor",
                              (unsigned long long)covered, (unsigned long long)t->begin);
        }
        if (t->end > covered)
            covered = t->end;
    }
    if (covered > data_size) {
        llmr_problems_add(p, LLMR_MODEL_CORRUPT, file,
                          "file is truncated: its header describes %llu bytes of tensor data but "
                          "only %llu follow the header (%llu bytes missing; was the download "
                          "interrupted?)",
                          (unsigned long long)covered, (unsigned long long)data_size,
                          (unsigned long long)(covered - data_size));
    } else if (covered < data_size) {
        llmr_problems_add(p, LLMR_MODEL_CORRUPT, file,
                          "file has %llu bytes after the last tensor its header describes",
                          (unsigned long long)(data_size - covered));
    }
}

static bool check_metadata(const json_t *meta, const char *file, llmr_problems *p)
{
    const char *key;
    const json_t *v;
    if (!json_is_object(meta)) {
        llmr_problems_add(p, LLMR_MODEL_CORRUPT, file, "__metadata__ is not an object");
        return false;
    }
    json_object_foreach((json_t *)meta, key, v) {
        if (!json_is_string(v)) {
            llmr_strbuf sb = LLMR_STRBUF_INIT;
            put_name(&sb, key);
            llmr_problems_add(p, LLMR_MODEL_CORRUPT, file,
                              "__metadata__ value of %s is not a string", llmr_strbuf_cstr(&sb));
            llmr_strbuf_free(&sb);
            return false;
        }
    }
    return true;
}

void llmr_st_header_free(llmr_st_header *h)
{
    for (size_t i = 0; i < h->count; i++)
        free(h->tensors[i].name);
    free(h->tensors);
    json_decref(h->metadata);
    llmr_strmap_free(h->by_name);
    memset(h, 0, sizeof *h);
}

/* Headers this large may hold more tensors than the limit: their top-level members are
 * counted by a streaming pass first, since building the JSON tree of a hostile 100 MB
 * header costs seconds and gigabytes before the count could be checked.  A smaller
 * header cannot hold that many members (each takes at least 6 bytes). */
#define PRECOUNT_FROM_BYTES ((size_t)4 << 20)

/* The tensors a header lists (its top-level members but __metadata__), counting only
 * up to the limit plus one; false when the text is not a JSON object (the full parse
 * reports why). */
static bool count_tensors(const char *text, size_t len, size_t *tensors)
{
    llmr_jscan s;
    llmr_jscan_init(&s, text, len);
    llmr_strbuf key = LLMR_STRBUF_INIT;
    size_t n = 0;
    bool ok = llmr_jscan_object_begin(&s);
    while (ok && n <= LLMR_ST_MAX_TENSORS && llmr_jscan_object_next(&s, &key)) {
        if (strcmp(llmr_strbuf_cstr(&key), "__metadata__") != 0)
            n++;
        ok = llmr_jscan_skip(&s);
    }
    llmr_strbuf_free(&key);
    *tensors = n;
    return ok && !s.failed;
}

static void too_many_tensors(llmr_problems *problems, const char *file, size_t tensors, bool at_least)
{
    llmr_problems_add(problems, LLMR_LIMIT_EXCEEDED, file,
                      "header lists %s%zu tensors, more than the limit of %u",
                      at_least ? "at least " : "", tensors, LLMR_ST_MAX_TENSORS);
}

llmr_status llmr_st_header_parse(const char *text, size_t len, uint64_t data_size,
                                 const char *file, llmr_st_header *out,
                                 llmr_problems *problems)
{
    memset(out, 0, sizeof *out);
    size_t before = llmr_problems_total(problems);
    if (len == 0 || text[0] != '{') {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file,
                          "header does not start with '{': this is not a safetensors file");
        return LLMR_MODEL_CORRUPT;
    }
    size_t counted;
    if (len >= PRECOUNT_FROM_BYTES && count_tensors(text, len, &counted) && counted > LLMR_ST_MAX_TENSORS) {
        too_many_tensors(problems, file, counted, true);
        return LLMR_LIMIT_EXCEEDED;
    }
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *root = llmr_json_parse(text, len, &err);
    if (!root) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file, "header is not valid JSON: %s",
                          llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return LLMR_MODEL_CORRUPT;
    }
    llmr_strbuf_free(&err);
    llmr_status status = LLMR_OK;
    if (!json_is_object(root)) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file, "header is not a JSON object");
        status = LLMR_MODEL_CORRUPT;
        goto done;
    }
    size_t entries = json_object_size(root);
    size_t tensors = entries - (json_object_get(root, "__metadata__") ? 1 : 0);
    if (tensors > LLMR_ST_MAX_TENSORS) {
        too_many_tensors(problems, file, tensors, false);
        status = LLMR_LIMIT_EXCEEDED;
        goto done;
    }
    out->tensors = calloc(entries ? entries : 1, sizeof *out->tensors);
    out->by_name = llmr_strmap_create(entries);
    if (!out->tensors || !out->by_name) {
        llmr_problems_add(problems, LLMR_OOM_RAM, file, "out of memory reading the header");
        status = LLMR_OOM_RAM;
        goto done;
    }

    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            if (check_metadata(value, file, problems))
                out->metadata = json_incref(value);
            continue;
        }
        llmr_st_tensor t;
        memset(&t, 0, sizeof t);
        if (!parse_tensor(key, value, file, &t, problems))
            continue;
        t.name = strdup(key);
        if (!t.name) {
            llmr_problems_add(problems, LLMR_OOM_RAM, file, "out of memory reading the header");
            break;
        }
        out->tensors[out->count++] = t;
    }
    if (llmr_problems_total(problems) != before)
        goto done;

    qsort(out->tensors, out->count, sizeof *out->tensors, compare_offsets);
    for (size_t i = 0; i < out->count; i++) {
        /* Keys are unique (duplicates are refused by the JSON parser). */
        if (llmr_strmap_put(out->by_name, out->tensors[i].name, i) == LLMR_STRMAP_NOMEM) {
            llmr_problems_add(problems, LLMR_OOM_RAM, file, "out of memory reading the header");
            goto done;
        }
        if (out->tensors[i].end > out->data_bytes)
            out->data_bytes = out->tensors[i].end;
    }
    check_layout(out, data_size, file, problems);

done:
    json_decref(root);
    if (llmr_problems_total(problems) != before) {
        status = llmr_problems_code_since(problems, before);
        llmr_st_header_free(out);
    }
    return status;
}

const llmr_st_tensor *llmr_st_header_find(const llmr_st_header *h, const char *name)
{
    size_t i;
    if (!h->by_name || !llmr_strmap_get(h->by_name, name, &i))
        return NULL;
    return &h->tensors[i];
}

static uint64_t read_le64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

/* Checks the 8-byte length against the limits and the file size. */
static llmr_status check_prefix(uint64_t header_len, uint64_t file_size, const char *file,
                                llmr_problems *p)
{
    if (header_len > LLMR_ST_MAX_HEADER_BYTES) {
        llmr_problems_add(p, LLMR_LIMIT_EXCEEDED, file,
                          "header claims %llu bytes, more than the limit of %u",
                          (unsigned long long)header_len, LLMR_ST_MAX_HEADER_BYTES);
        return LLMR_LIMIT_EXCEEDED;
    }
    if (header_len > file_size - 8) {
        llmr_problems_add(p, LLMR_MODEL_CORRUPT, file,
                          "file is truncated inside its header: the header claims %llu bytes but "
                          "only %llu follow the length",
                          (unsigned long long)header_len, (unsigned long long)(file_size - 8));
        return LLMR_MODEL_CORRUPT;
    }
    return LLMR_OK;
}

static llmr_status check_size(uint64_t file_size, const char *file, llmr_problems *p)
{
    if (file_size >= 8)
        return LLMR_OK;
    llmr_problems_add(p, LLMR_MODEL_CORRUPT, file,
                      "file is %llu bytes, too short for a safetensors header (8 bytes at least)",
                      (unsigned long long)file_size);
    return LLMR_MODEL_CORRUPT;
}

llmr_status llmr_st_parse_buffer(const uint8_t *buf, size_t len, const char *file,
                                 llmr_st_header *out, llmr_problems *problems)
{
    memset(out, 0, sizeof *out);
    llmr_status status = check_size(len, file, problems);
    if (status != LLMR_OK)
        return status;
    uint64_t n = read_le64(buf);
    status = check_prefix(n, len, file, problems);
    if (status != LLMR_OK)
        return status;
    return llmr_st_header_parse((const char *)buf + 8, (size_t)n, len - 8 - n, file, out,
                                problems);
}

llmr_status llmr_st_file_open(const char *path, const char *label, llmr_st_file *f,
                              llmr_problems *problems)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    llmr_status status;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        bool missing = errno == ENOENT;
        llmr_problems_add(problems, missing ? LLMR_NOT_FOUND : LLMR_IO, label, "cannot open: %s",
                          strerror(errno));
        return missing ? LLMR_NOT_FOUND : LLMR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        llmr_problems_add(problems, LLMR_IO, label, "not a regular file");
        status = LLMR_IO;
        goto close_fd;
    }
    f->file_size = (uint64_t)st.st_size;
    status = check_size(f->file_size, label, problems);
    if (status != LLMR_OK)
        goto close_fd;
    uint8_t prefix[8];
    if (!llmr_pread_all(fd, prefix, 8, 0)) {
        llmr_problems_add(problems, LLMR_IO, label, "cannot read the header length: %s",
                          strerror(errno));
        status = LLMR_IO;
        goto close_fd;
    }
    uint64_t n = read_le64(prefix);
    status = check_prefix(n, f->file_size, label, problems);
    if (status != LLMR_OK)
        goto close_fd;
    char *text = malloc(n ? n : 1);
    if (!text) {
        llmr_problems_add(problems, LLMR_OOM_RAM, label, "out of memory for a %llu-byte header",
                          (unsigned long long)n);
        status = LLMR_OOM_RAM;
        goto close_fd;
    }
    if (!llmr_pread_all(fd, text, n, 8)) {
        llmr_problems_add(problems, LLMR_IO, label, "cannot read the header: %s", strerror(errno));
        status = LLMR_IO;
        free(text);
        goto close_fd;
    }
    status = llmr_st_header_parse(text, n, f->file_size - 8 - n, label, &f->header, problems);
    free(text);
    if (status != LLMR_OK)
        goto close_fd;
    f->path = strdup(path);
    f->label = strdup(label);
    if (!f->path || !f->label) {
        free(f->path);
        free(f->label);
        f->path = f->label = NULL;
        llmr_problems_add(problems, LLMR_OOM_RAM, label, "out of memory");
        status = LLMR_OOM_RAM;
        llmr_st_header_free(&f->header);
        goto close_fd;
    }
    f->fd = fd;
    f->data_offset = 8 + n;
    return LLMR_OK;

close_fd:
    close(fd);
    return status;
}

llmr_status llmr_st_file_map(llmr_st_file *f, llmr_strbuf *err)
{
    if (f->map)
        return LLMR_OK;
    if (f->file_size > SIZE_MAX) {
        llmr_strbuf_puts(err, "file is larger than the address space");
        return LLMR_OOM_RAM;
    }
    void *m = mmap(NULL, (size_t)f->file_size, PROT_READ, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED) {
        llmr_strbuf_printf(err, "mmap of %llu bytes failed: %s", (unsigned long long)f->file_size,
                           strerror(errno));
        return errno == ENOMEM ? LLMR_OOM_RAM : LLMR_IO;
    }
    f->map = m;
    return LLMR_OK;
}

const uint8_t *llmr_st_file_tensor_data(const llmr_st_file *f, const llmr_st_tensor *t)
{
    return f->map ? f->map + f->data_offset + t->begin : NULL;
}

void llmr_st_file_close(llmr_st_file *f)
{
    if (f->map)
        munmap((void *)f->map, (size_t)f->file_size);
    if (f->fd >= 0)
        close(f->fd);
    llmr_st_header_free(&f->header);
    free(f->path);
    free(f->label);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

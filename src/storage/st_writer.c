/* safetensors writer: see st_writer.h. */
#define _GNU_SOURCE
#include "storage/st_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs_util.h"

#define FILL_CHUNK (4u << 20)

bool llmr_st_tensor_bytes(const llmr_st_write_tensor *t, uint64_t *bytes)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(n, t->shape[i], &n))
            return false;
    if (__builtin_mul_overflow(n, (uint64_t)llmr_dtype_bits(t->dtype), &n) || n % 8)
        return false;
    *bytes = n / 8;
    return true;
}

/* The header JSON, padded; its data size in *data_bytes. */
static char *build_header(const llmr_st_write_tensor *t, size_t n, const json_t *metadata,
                          uint64_t *data_bytes, size_t *len, llmr_strbuf *err)
{
    json_t *root = json_object();
    if (metadata)
        json_object_set(root, "__metadata__", (json_t *)metadata);
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes;
        if (!llmr_st_tensor_bytes(&t[i], &bytes)) {
            llmr_strbuf_printf(err, "tensor %s: size overflows or is not whole bytes", t[i].name);
            json_decref(root);
            return NULL;
        }
        json_t *shape = json_array();
        for (uint32_t d = 0; d < t[i].rank; d++)
            json_array_append_new(shape, json_integer((json_int_t)t[i].shape[d]));
        json_t *entry = json_pack("{s:s, s:o, s:[I,I]}", "dtype", llmr_dtype_name(t[i].dtype),
                                  "shape", shape, "data_offsets", (json_int_t)offset,
                                  (json_int_t)(offset + bytes));
        if (!entry || json_object_set_new(root, t[i].name, entry) != 0) {
            llmr_strbuf_printf(err, "tensor %s: cannot encode its header entry", t[i].name);
            json_decref(root);
            return NULL;
        }
        offset += bytes;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) {
        llmr_strbuf_puts(err, "cannot encode the header");
        return NULL;
    }
    size_t raw = strlen(text);
    size_t padded = (raw + 7) / 8 * 8;
    char *out = realloc(text, padded);
    if (!out) {
        free(text);
        llmr_strbuf_puts(err, "out of memory");
        return NULL;
    }
    memset(out + raw, ' ', padded - raw);
    *len = padded;
    *data_bytes = offset;
    return out;
}

llmr_status llmr_st_write_file(const char *path, const llmr_st_write_tensor *t, size_t n,
                               const json_t *metadata, llmr_st_fill_fn fill, void *ctx,
                               llmr_strbuf *err)
{
    uint64_t data_bytes;
    size_t header_len;
    char *header = build_header(t, n, metadata, &data_bytes, &header_len, err);
    if (!header)
        return LLMR_INVALID_ARGUMENT;
    llmr_status status = LLMR_OK;
    uint8_t *chunk = NULL;
    llmr_strbuf tmp = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&tmp, "%s.partial", path);
    int fd = open(llmr_strbuf_cstr(&tmp), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        llmr_strbuf_printf(err, "cannot create %s: %s", llmr_strbuf_cstr(&tmp), strerror(errno));
        status = LLMR_IO;
        goto free_header;
    }
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (uint8_t)((uint64_t)header_len >> (8 * i));
    uint64_t data_start = 8 + header_len;
    if (!llmr_pwrite_all(fd, prefix, 8, 0) || !llmr_pwrite_all(fd, header, header_len, 8) ||
        ftruncate(fd, (off_t)(data_start + data_bytes)) != 0) {
        llmr_strbuf_printf(err, "writing %s failed: %s", path, strerror(errno));
        status = LLMR_IO;
        goto remove_tmp;
    }
    if (fill) {
        chunk = malloc(FILL_CHUNK);
        if (!chunk) {
            llmr_strbuf_puts(err, "out of memory");
            status = LLMR_OOM_RAM;
            goto remove_tmp;
        }
        uint64_t at = data_start;
        for (size_t i = 0; i < n; i++) {
            uint64_t bytes = 0; /* build_header already checked every size */
            llmr_st_tensor_bytes(&t[i], &bytes);
            for (uint64_t off = 0; off < bytes; off += FILL_CHUNK) {
                size_t len = bytes - off < FILL_CHUNK ? (size_t)(bytes - off) : FILL_CHUNK;
                status = fill(ctx, i, off, chunk, len);
                if (status != LLMR_OK) {
                    llmr_strbuf_printf(err, "filling tensor %s failed", t[i].name);
                    goto remove_tmp;
                }
                if (!llmr_pwrite_all(fd, chunk, len, at + off)) {
                    llmr_strbuf_printf(err, "writing %s failed: %s", path, strerror(errno));
                    status = LLMR_IO;
                    goto remove_tmp;
                }
            }
            at += bytes;
        }
    }
    if (close(fd) != 0) {
        fd = -1;
        llmr_strbuf_printf(err, "closing %s failed: %s", path, strerror(errno));
        status = LLMR_IO;
        goto remove_tmp;
    }
    fd = -1;
    if (rename(llmr_strbuf_cstr(&tmp), path) != 0) {
        llmr_strbuf_printf(err, "cannot rename to %s: %s", path, strerror(errno));
        status = LLMR_IO;
        goto remove_tmp;
    }
    goto free_header;

remove_tmp:
    if (fd >= 0)
        close(fd);
    unlink(llmr_strbuf_cstr(&tmp));
free_header:
    free(chunk);
    free(header);
    llmr_strbuf_free(&tmp);
    return status;
}

/* safetensors writer: see st_writer.h. */
#define _GNU_SOURCE
#include "storage/st_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs_util.h"

#define DEFAULT_CHUNK (4u << 20)
#define MAX_THREADS 1024u

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

/* The data of one file being filled: the chunks, which threads take by number, and
 * the first failure. */
typedef struct fill_job {
    int fd;
    const llmr_st_write_tensor *t;
    size_t n;
    llmr_st_fill_fn fill;
    void *ctx;
    const llmr_st_write_options *o;
    uint64_t chunk;        /* bytes per chunk */
    uint64_t *first_chunk; /* [n + 1]: the number of tensor i's first chunk */
    uint64_t *at;          /* [n]: tensor i's offset in the file */
    uint64_t total;        /* data bytes */
    atomic_uint_fast64_t next; /* the next chunk to take */
    atomic_uint_fast64_t done; /* bytes written */
    atomic_bool stop;
    pthread_mutex_t lock; /* guards the first failure, below */
    llmr_status status;
    bool failed_fill;     /* true: the fill of failed_tensor returned status */
    size_t failed_tensor;
    int failed_errno;     /* status IO, not in a fill: pwrite's errno */
} fill_job;

static void job_fail(fill_job *j, llmr_status st, size_t tensor, bool in_fill, int errnum)
{
    pthread_mutex_lock(&j->lock);
    if (j->status == LLMR_OK) {
        j->status = st;
        j->failed_tensor = tensor;
        j->failed_fill = in_fill;
        j->failed_errno = errnum;
    }
    pthread_mutex_unlock(&j->lock);
    atomic_store(&j->stop, true);
}

static bool all_zero(const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i])
            return false;
    return true;
}

/* Takes chunks until none is left or something failed. */
static void *fill_worker(void *arg)
{
    fill_job *j = arg;
    uint8_t *buf = malloc(j->chunk);
    if (!buf) {
        job_fail(j, LLMR_OOM_RAM, 0, false, 0);
        return NULL;
    }
    uint64_t chunks = j->first_chunk[j->n];
    size_t i = 0; /* chunks are taken in rising order: the tensor search goes forward */
    while (!atomic_load(&j->stop)) {
        uint64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= chunks)
            break;
        while (j->first_chunk[i + 1] <= k)
            i++;
        uint64_t bytes = 0;
        llmr_st_tensor_bytes(&j->t[i], &bytes);
        uint64_t off = (k - j->first_chunk[i]) * j->chunk;
        size_t len = (size_t)(bytes - off < j->chunk ? bytes - off : j->chunk);
        llmr_status st = j->fill(j->ctx, i, off, buf, len);
        if (st != LLMR_OK) {
            job_fail(j, st, i, true, 0);
            break;
        }
        /* A chunk of zeros stays a hole: the file was sized first, so it reads as zeros
         * and takes no disk (a sparse snapshot with a few filled tensors). */
        if (!all_zero(buf, len) && !llmr_pwrite_all(j->fd, buf, len, j->at[i] + off)) {
            job_fail(j, LLMR_IO, i, false, errno);
            break;
        }
        uint64_t done = atomic_fetch_add(&j->done, len) + len;
        if (j->o->progress)
            j->o->progress(j->o->progress_ctx, done, j->total);
    }
    free(buf);
    return NULL;
}

/* Fills the data region with o->threads threads, the calling one among them. */
static llmr_status fill_data(int fd, const llmr_st_write_tensor *t, size_t n, uint64_t data_start,
                             llmr_st_fill_fn fill, void *ctx, const llmr_st_write_options *o,
                             const char *path, llmr_strbuf *err)
{
    fill_job j = {.fd = fd, .t = t, .n = n, .fill = fill, .ctx = ctx, .o = o,
                  .status = LLMR_OK};
    j.chunk = o->chunk_bytes ? (o->chunk_bytes + 7) / 8 * 8 : DEFAULT_CHUNK;
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    atomic_init(&j.stop, false);
    j.first_chunk = calloc(n + 1, sizeof *j.first_chunk);
    j.at = calloc(n ? n : 1, sizeof *j.at);
    if (!j.first_chunk || !j.at) {
        free(j.first_chunk);
        free(j.at);
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    uint64_t at = data_start, largest = 8;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = 0; /* build_header already checked every size */
        llmr_st_tensor_bytes(&t[i], &bytes);
        largest = bytes > largest ? bytes : largest;
    }
    if (j.chunk > largest) /* no buffer larger than the largest tensor */
        j.chunk = (largest + 7) / 8 * 8;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = 0;
        llmr_st_tensor_bytes(&t[i], &bytes);
        j.at[i] = at;
        at += bytes;
        j.first_chunk[i + 1] = j.first_chunk[i] + (bytes + j.chunk - 1) / j.chunk;
    }
    j.total = at - data_start;
    pthread_mutex_init(&j.lock, NULL);

    uint64_t chunks = j.first_chunk[n];
    unsigned want = o->threads > MAX_THREADS ? MAX_THREADS : o->threads;
    if (want > chunks)
        want = (unsigned)chunks;
    pthread_t *threads = want > 1 ? calloc(want - 1, sizeof *threads) : NULL;
    unsigned started = 0;
    while (threads && started < want - 1 &&
           pthread_create(&threads[started], NULL, fill_worker, &j) == 0)
        started++; /* fewer threads when the system refuses more: still correct */
    fill_worker(&j);
    for (unsigned i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    pthread_mutex_destroy(&j.lock);

    if (j.status == LLMR_OOM_RAM && !j.failed_fill)
        llmr_strbuf_puts(err, "out of memory");
    else if (j.failed_fill)
        llmr_strbuf_printf(err, "filling tensor %s failed: %s", t[j.failed_tensor].name,
                           llmr_status_message(j.status));
    else if (j.status != LLMR_OK)
        llmr_strbuf_printf(err, "writing %s failed: %s", path, strerror(j.failed_errno));
    free(j.first_chunk);
    free(j.at);
    return j.status;
}

llmr_status llmr_st_write_file(const char *path, const llmr_st_write_tensor *t, size_t n,
                               const json_t *metadata, llmr_st_fill_fn fill, void *ctx,
                               llmr_strbuf *err)
{
    return llmr_st_write_file_parallel(path, t, n, metadata, fill, ctx, NULL, err);
}

llmr_status llmr_st_write_file_parallel(const char *path, const llmr_st_write_tensor *t, size_t n,
                                        const json_t *metadata, llmr_st_fill_fn fill, void *ctx,
                                        const llmr_st_write_options *options, llmr_strbuf *err)
{
    static const llmr_st_write_options one_thread = {0};
    if (!options)
        options = &one_thread;
    uint64_t data_bytes;
    size_t header_len;
    char *header = build_header(t, n, metadata, &data_bytes, &header_len, err);
    if (!header)
        return LLMR_INVALID_ARGUMENT;
    llmr_status status = LLMR_OK;
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
    if (fill && (status = fill_data(fd, t, n, data_start, fill, ctx, options, path, err)) != LLMR_OK)
        goto remove_tmp;
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
    free(header);
    llmr_strbuf_free(&tmp);
    return status;
}

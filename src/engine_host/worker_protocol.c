/* The node <-> engine worker wire: see worker_protocol.h. */
#include "engine_host/worker_protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/json_util.h"

#define HEADER_BYTES 16u /* u32 length, u16 type, u16 zero, u64 request id */

/* ---- frames ------------------------------------------------------------------ */

void llmr_wire_reader_init(llmr_wire_reader *r, int fd)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
}

void llmr_wire_reader_free(llmr_wire_reader *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

/* Makes room for `need` bytes from start. */
static bool reserve(llmr_wire_reader *r, size_t need)
{
    if (r->start > 0 && r->cap - r->start < need) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->cap - r->start >= need)
        return true;
    size_t cap = r->cap ? r->cap : 65536;
    while (cap < need)
        cap *= 2;
    uint8_t *b = realloc(r->buf, cap);
    if (!b)
        return false;
    r->buf = b;
    r->cap = cap;
    return true;
}

/* Reads until `need` bytes are buffered from start. */
static llmr_status fill(llmr_wire_reader *r, size_t need, bool at_boundary, llmr_strbuf *err)
{
    if (!reserve(r, need)) {
        llmr_strbuf_printf(err, "out of memory for a frame of %zu bytes", need);
        return LLMR_OOM_RAM;
    }
    while (r->end - r->start < need) {
        ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            llmr_strbuf_printf(err, "read error: %s", strerror(errno));
            return LLMR_IO;
        }
        if (n == 0) {
            if (at_boundary && r->end == r->start)
                llmr_strbuf_puts(err, "closed");
            else
                llmr_strbuf_printf(err, "closed in the middle of a frame (%zu of %zu bytes)",
                                   r->end - r->start, need);
            return LLMR_IO;
        }
        r->end += (size_t)n;
    }
    return LLMR_OK;
}

llmr_status llmr_wire_read(llmr_wire_reader *r, llmr_wire_frame *out, llmr_strbuf *err)
{
    llmr_status st = fill(r, HEADER_BYTES, true, err);
    if (st != LLMR_OK)
        return st;
    uint32_t rest;
    uint16_t type, zero;
    memcpy(&rest, r->buf + r->start, 4);
    memcpy(&type, r->buf + r->start + 4, 2);
    memcpy(&zero, r->buf + r->start + 6, 2);
    if (rest < HEADER_BYTES - 4 || rest > LLMR_WIRE_MAX_FRAME || zero != 0) {
        llmr_strbuf_printf(err, "a frame with a broken header (length %u, type %u)", rest, type);
        return LLMR_INTERNAL;
    }
    st = fill(r, 4 + (size_t)rest, false, err);
    if (st != LLMR_OK)
        return st;
    const uint8_t *f = r->buf + r->start;
    out->type = type;
    memcpy(&out->request_id, f + 8, 8);
    out->payload = f + HEADER_BYTES;
    out->len = 4 + (size_t)rest - HEADER_BYTES;
    r->start += 4 + (size_t)rest;
    if (r->start == r->end)
        r->start = r->end = 0;
    return LLMR_OK;
}

llmr_status llmr_wire_write(int fd, uint16_t type, uint64_t request_id, const void *payload,
                            size_t len, llmr_strbuf *err)
{
    if (len > LLMR_WIRE_MAX_FRAME - HEADER_BYTES) {
        llmr_strbuf_printf(err, "a message of %zu bytes is over the limit of %u", len,
                           LLMR_WIRE_MAX_FRAME);
        return LLMR_LIMIT_EXCEEDED;
    }
    uint8_t header[HEADER_BYTES];
    uint32_t rest = (uint32_t)(len + HEADER_BYTES - 4);
    uint16_t zero = 0;
    memcpy(header, &rest, 4);
    memcpy(header + 4, &type, 2);
    memcpy(header + 6, &zero, 2);
    memcpy(header + 8, &request_id, 8);
    struct iovec iov[2] = {{header, HEADER_BYTES}, {(void *)payload, len}};
    int n_iov = len ? 2 : 1;
    struct iovec *v = iov;
    while (n_iov > 0) {
        /* MSG_NOSIGNAL: a worker that has gone is an error here, not a SIGPIPE that
         * would end the node. */
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = v;
        msg.msg_iovlen = (size_t)n_iov;
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            llmr_strbuf_printf(err, "write error: %s", strerror(errno));
            return LLMR_IO;
        }
        size_t done = (size_t)n;
        while (n_iov > 0 && done >= v->iov_len) {
            done -= v->iov_len;
            v++;
            n_iov--;
        }
        if (n_iov > 0) {
            v->iov_base = (uint8_t *)v->iov_base + done;
            v->iov_len -= done;
        }
    }
    return LLMR_OK;
}

llmr_status llmr_wire_write_json(int fd, uint16_t type, uint64_t request_id, const json_t *value,
                                 llmr_strbuf *err)
{
    char *text = json_dumps(value, JSON_COMPACT);
    if (!text) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = llmr_wire_write(fd, type, request_id, text, strlen(text), err);
    free(text);
    return st;
}

json_t *llmr_wire_json(const llmr_wire_frame *f, llmr_strbuf *err)
{
    json_t *v = llmr_json_parse((const char *)f->payload, f->len, err);
    if (v && !json_is_object(v)) {
        json_decref(v);
        llmr_strbuf_puts(err, "a control message that is not a JSON object");
        return NULL;
    }
    return v;
}

/* ---- a cursor over a payload --------------------------------------------------- */

typedef struct cursor {
    const uint8_t *p;
    size_t left;
    bool bad;
} cursor;

static bool take(cursor *c, void *out, size_t n)
{
    if (c->bad || c->left < n) {
        c->bad = true;
        return false;
    }
    if (n)
        memcpy(out, c->p, n);
    c->p += n;
    c->left -= n;
    return true;
}

static const void *take_ref(cursor *c, size_t n)
{
    if (c->bad || c->left < n) {
        c->bad = true;
        return NULL;
    }
    const void *at = c->p;
    c->p += n;
    c->left -= n;
    return at;
}

#define PUT(sb, v) llmr_strbuf_append(sb, &(v), sizeof(v))
#define GET(c, v) take(c, &(v), sizeof(v))

/* ---- SUBMIT ------------------------------------------------------------------ */

bool llmr_wire_submit_encode(const llmr_engine_request_params *p, const char *const *stop_strings,
                             const size_t *stop_lens, uint32_t stop_count, bool skip_special,
                             llmr_strbuf *out)
{
    uint32_t flags = skip_special ? 1u : 0u;
    PUT(out, p->prompt_len);
    PUT(out, p->max_tokens);
    PUT(out, p->temperature);
    PUT(out, p->top_p);
    PUT(out, p->top_k);
    PUT(out, p->min_p);
    PUT(out, p->repetition_penalty);
    PUT(out, p->presence_penalty);
    PUT(out, p->frequency_penalty);
    PUT(out, p->seed);
    PUT(out, p->stop_id_count);
    PUT(out, p->logprobs);
    PUT(out, p->top_logprobs);
    PUT(out, stop_count);
    PUT(out, flags);
    llmr_strbuf_append(out, p->prompt, (size_t)p->prompt_len * sizeof(int32_t));
    llmr_strbuf_append(out, p->stop_ids, (size_t)p->stop_id_count * sizeof(int32_t));
    for (uint32_t i = 0; i < stop_count; i++) {
        uint32_t n = (uint32_t)stop_lens[i];
        PUT(out, n);
        llmr_strbuf_append(out, stop_strings[i], n);
    }
    return !llmr_strbuf_failed(out);
}

void llmr_wire_submit_free(llmr_wire_submit *s)
{
    free((void *)s->params.prompt);
    free((void *)s->params.stop_ids);
    for (uint32_t i = 0; i < s->stop_string_count; i++)
        free(s->stop_strings[i]);
    free(s->stop_strings);
    free(s->stop_string_lens);
    memset(s, 0, sizeof *s);
}

static int32_t *copy_ids(cursor *c, uint32_t n)
{
    if ((uint64_t)n * sizeof(int32_t) > c->left) {
        c->bad = true;
        return NULL;
    }
    int32_t *ids = malloc(n ? (size_t)n * sizeof *ids : 1);
    if (ids)
        take(c, ids, (size_t)n * sizeof *ids);
    return ids;
}

llmr_status llmr_wire_submit_decode(const uint8_t *payload, size_t len, uint64_t request_id,
                                    llmr_wire_submit *out, llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    llmr_engine_request_params *p = &out->params;
    *p = llmr_engine_request_default_params();
    p->request_id = request_id;
    cursor c = {payload, len, false};
    uint32_t stop_count = 0, flags = 0;
    GET(&c, p->prompt_len);
    GET(&c, p->max_tokens);
    GET(&c, p->temperature);
    GET(&c, p->top_p);
    GET(&c, p->top_k);
    GET(&c, p->min_p);
    GET(&c, p->repetition_penalty);
    GET(&c, p->presence_penalty);
    GET(&c, p->frequency_penalty);
    GET(&c, p->seed);
    GET(&c, p->stop_id_count);
    GET(&c, p->logprobs);
    GET(&c, p->top_logprobs);
    GET(&c, stop_count);
    GET(&c, flags);
    out->skip_special = flags & 1u;
    if (!c.bad) {
        p->prompt = copy_ids(&c, p->prompt_len);
        p->stop_ids = copy_ids(&c, p->stop_id_count);
    }
    if (!c.bad && stop_count > c.left / 4)
        c.bad = true;
    if (!c.bad && stop_count) {
        out->stop_strings = calloc(stop_count, sizeof *out->stop_strings);
        out->stop_string_lens = calloc(stop_count, sizeof *out->stop_string_lens);
        if (!out->stop_strings || !out->stop_string_lens) {
            llmr_wire_submit_free(out);
            llmr_strbuf_puts(err, "out of memory");
            return LLMR_OOM_RAM;
        }
        for (uint32_t i = 0; i < stop_count && !c.bad; i++) {
            uint32_t n = 0;
            GET(&c, n);
            const void *s = take_ref(&c, n);
            if (!s)
                break;
            out->stop_strings[i] = malloc(n ? n : 1);
            if (!out->stop_strings[i])
                break;
            memcpy(out->stop_strings[i], s, n);
            out->stop_string_lens[i] = n;
            out->stop_string_count = i + 1;
        }
        if (out->stop_string_count != stop_count)
            c.bad = true;
    }
    if (c.bad || c.left != 0 || !p->prompt || !p->stop_ids) {
        llmr_wire_submit_free(out);
        llmr_strbuf_printf(err, "a submit message of %zu bytes that does not add up", len);
        return LLMR_INTERNAL;
    }
    return LLMR_OK;
}

/* ---- EVENT ------------------------------------------------------------------- */

bool llmr_wire_event_encode(const llmr_wire_event *ev, llmr_strbuf *out)
{
    uint32_t top = ev->top_count > LLMR_WIRE_MAX_TOP ? LLMR_WIRE_MAX_TOP : ev->top_count;
    PUT(out, ev->index);
    PUT(out, ev->id);
    PUT(out, ev->logprob);
    PUT(out, ev->finish);
    PUT(out, ev->status);
    PUT(out, ev->prompt_tokens);
    PUT(out, ev->completion_tokens);
    PUT(out, ev->time_ns);
    PUT(out, ev->sent_ns);
    PUT(out, ev->text_len);
    PUT(out, ev->message_len);
    PUT(out, top);
    llmr_strbuf_append(out, ev->top_ids, top * sizeof(int32_t));
    llmr_strbuf_append(out, ev->top_logprobs, top * sizeof(float));
    llmr_strbuf_append(out, ev->text, ev->text_len);
    llmr_strbuf_append(out, ev->message, ev->message_len);
    return !llmr_strbuf_failed(out);
}

llmr_status llmr_wire_event_decode(const uint8_t *payload, size_t len, llmr_wire_event *out,
                                   llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    cursor c = {payload, len, false};
    GET(&c, out->index);
    GET(&c, out->id);
    GET(&c, out->logprob);
    GET(&c, out->finish);
    GET(&c, out->status);
    GET(&c, out->prompt_tokens);
    GET(&c, out->completion_tokens);
    GET(&c, out->time_ns);
    GET(&c, out->sent_ns);
    GET(&c, out->text_len);
    GET(&c, out->message_len);
    GET(&c, out->top_count);
    if (!c.bad && out->top_count > LLMR_WIRE_MAX_TOP)
        c.bad = true;
    if (!c.bad) {
        take(&c, out->top_ids, out->top_count * sizeof(int32_t));
        take(&c, out->top_logprobs, out->top_count * sizeof(float));
        out->text = take_ref(&c, out->text_len);
        out->message = take_ref(&c, out->message_len);
    }
    if (c.bad || c.left != 0 || out->finish > LLMR_ENGINE_FINISH_ERROR) {
        llmr_strbuf_printf(err, "an event message of %zu bytes that does not add up", len);
        return LLMR_INTERNAL;
    }
    return LLMR_OK;
}

/* ---- PONG -------------------------------------------------------------------- */

void llmr_wire_pong_encode(const llmr_wire_pong *p, uint8_t out[48])
{
    memcpy(out, &p->vram_bytes, 8);
    memcpy(out + 8, &p->ram_bytes, 8);
    memcpy(out + 16, &p->rss_bytes, 8);
    memcpy(out + 24, &p->host_alloc_bytes, 8);
    memcpy(out + 32, &p->in_flight, 4);
    memcpy(out + 36, &p->has_memory, 4);
    memcpy(out + 40, &p->kv_used_tokens, 8);
}

llmr_status llmr_wire_pong_decode(const uint8_t *payload, size_t len, llmr_wire_pong *out,
                                  llmr_strbuf *err)
{
    if (len != 48) {
        llmr_strbuf_printf(err, "a pong of %zu bytes (48 expected)", len);
        return LLMR_INTERNAL;
    }
    memcpy(&out->vram_bytes, payload, 8);
    memcpy(&out->ram_bytes, payload + 8, 8);
    memcpy(&out->rss_bytes, payload + 16, 8);
    memcpy(&out->host_alloc_bytes, payload + 24, 8);
    memcpy(&out->in_flight, payload + 32, 4);
    memcpy(&out->has_memory, payload + 36, 4);
    memcpy(&out->kv_used_tokens, payload + 40, 8);
    return LLMR_OK;
}

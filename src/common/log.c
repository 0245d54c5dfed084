/* Logging: see log.h. */
#define _GNU_SOURCE
#include "common/log.h"

#include "common/random.h"
#include "common/utf8.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 2048

static atomic_int current_level = LLMR_LOG_INFO;
static atomic_int current_format = LLMR_LOG_FORMAT_TEXT;
static _Thread_local char request_id[LLMR_REQUEST_ID_MAX + 1];

static llmr_log_sink sink_fn;
static void *sink_ctx;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};
static const char *const level_tags[] = {"DEBUG", "INFO ", "WARN ", "ERROR", "OFF  "};

void llmr_log_set_level(llmr_log_level level)
{
    atomic_store(&current_level, (int)level);
}

llmr_log_level llmr_log_get_level(void)
{
    return (llmr_log_level)atomic_load(&current_level);
}

bool llmr_log_level_parse(const char *text, llmr_log_level *out)
{
    if (!text)
        return false;
    for (int i = 0; i <= LLMR_LOG_OFF; i++) {
        if (strcasecmp(text, level_names[i]) == 0) {
            *out = (llmr_log_level)i;
            return true;
        }
    }
    if (strcasecmp(text, "warning") == 0) {
        *out = LLMR_LOG_WARN;
        return true;
    }
    return false;
}

const char *llmr_log_level_name(llmr_log_level level)
{
    if ((unsigned)level > LLMR_LOG_OFF)
        return "unknown";
    return level_names[level];
}

bool llmr_request_id_valid(const char *id)
{
    if (!id || !*id)
        return false;
    size_t n = 0;
    for (const char *p = id; *p; p++, n++) {
        unsigned char c = (unsigned char)*p;
        if (n >= LLMR_REQUEST_ID_MAX || c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return false;
    }
    return true;
}

void llmr_request_id_new(char *out, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    if (!llmr_random_bytes(b, sizeof b)) { /* no kernel randomness: time and a counter */
        static atomic_uint counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v[2] = {(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                         atomic_fetch_add(&counter, 1) + ((uint64_t)getpid() << 32)};
        memcpy(b, v, sizeof b);
    }
    size_t i = 0;
    for (; i < sizeof b && 2 * i + 2 < size; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    if (size)
        out[2 * i < size ? 2 * i : size - 1] = '\0';
}

void llmr_log_set_format(llmr_log_format format)
{
    atomic_store(&current_format, (int)format);
}

llmr_log_format llmr_log_get_format(void)
{
    return (llmr_log_format)atomic_load(&current_format);
}

bool llmr_log_format_parse(const char *text, llmr_log_format *out)
{
    if (text && strcasecmp(text, "text") == 0)
        *out = LLMR_LOG_FORMAT_TEXT;
    else if (text && strcasecmp(text, "json") == 0)
        *out = LLMR_LOG_FORMAT_JSON;
    else
        return false;
    return true;
}

void llmr_log_set_request_id(const char *id)
{
    if (!id) {
        request_id[0] = '\0';
        return;
    }
    snprintf(request_id, sizeof request_id, "%s", id);
}

const char *llmr_log_request_id(void)
{
    return request_id;
}

void llmr_log_set_sink(llmr_log_sink sink, void *ctx)
{
    sink_fn = sink;
    sink_ctx = ctx;
}

/* A line being built: cut at its size (and the cut marked) rather than overflowing. */
typedef struct line_buf {
    char data[LINE_MAX_BYTES];
    size_t len;
} line_buf;

static void put_vf(line_buf *b, const char *fmt, va_list ap)
{
    if (b->len >= sizeof b->data - 1)
        return;
    int n = vsnprintf(b->data + b->len, sizeof b->data - b->len, fmt, ap);
    if (n < 0)
        return;
    b->len += (size_t)n;
    if (b->len > sizeof b->data - 1)
        b->len = sizeof b->data - 1;
}

static void put_f(line_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_f(line_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    put_vf(b, fmt, ap);
    va_end(ap);
}

/* text as the inside of a JSON string; bytes that are not UTF-8 (a path decoded from
 * the request line may hold any) become U+FFFD, so the line stays valid JSON. */
/* Room kept at the end of a JSON line for the fields after a text and the closing
 * brace: a text that would reach into it is cut ("...") at a character's end. */
#define JSON_TAIL_ROOM 320

static void put_json_text(line_buf *b, const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t left = strlen(text);
    while (left) {
        if (b->len + 8 > sizeof b->data - JSON_TAIL_ROOM) {
            put_f(b, "...");
            return;
        }
        if (*p >= 0x80) {
            size_t n = llmr_utf8_char_len(p, left);
            if (n) {
                put_f(b, "%.*s", (int)n, (const char *)p);
            } else {
                n = llmr_utf8_invalid_len(p, left);
                put_f(b, "\\ufffd");
            }
            p += n;
            left -= n;
            continue;
        }
        if (*p == '"' || *p == '\\')
            put_f(b, "\\%c", *p);
        else if (*p == '\n')
            put_f(b, "\\n");
        else if (*p < 0x20 || *p == 0x7f)
            put_f(b, "\\u%04x", *p);
        else
            put_f(b, "%c", *p);
        p++;
        left--;
    }
}

/* A message of a text line: control bytes (a newline in a model name a client sent, say)
 * as \n, \r or \xNN, so that no text forges a line of its own; a tab stays. */
static void put_text_line(line_buf *b, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n')
            put_f(b, "\\n");
        else if (*p == '\r')
            put_f(b, "\\r");
        else if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            put_f(b, "\\x%02x", *p);
        else
            put_f(b, "%c", *p);
    }
}

/* A word of a text line from a client (a path, a model name): a space, a control byte
 * or a percent sign as %XX, so the line stays one line of words. */
static void put_text_token(line_buf *b, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        put_f(b, *p <= 0x20 || *p == 0x7f || *p == '%' ? "%%%02X" : "%c", *p);
}

static void put_json_field(line_buf *b, const char *name, const char *value)
{
    put_f(b, ",\"%s\":\"", name);
    put_json_text(b, value);
    put_f(b, "\"");
}

static void put_time(line_buf *b)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    put_f(b, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
          tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* The start of a line: time, level, component and request id. */
static void put_head(line_buf *b, bool json, llmr_log_level level, const char *component,
                     const char *rid)
{
    if (json) {
        put_f(b, "{\"time\":\"");
        put_time(b);
        put_f(b, "\",\"level\":\"%s\"", level_names[level]);
        put_json_field(b, "component", component ? component : "-");
        if (rid && *rid)
            put_json_field(b, "request_id", rid);
    } else {
        put_time(b);
        put_f(b, " %s %s ", level_tags[level], component ? component : "-");
        if (rid && *rid)
            put_f(b, "[req=%s] ", rid);
    }
}

/* Ends the line and writes it.  A JSON line's texts were cut to fit (put_json_text), so
 * it always closes. */
static void emit(line_buf *b, bool json, llmr_log_level level)
{
    if (!json && b->len == sizeof b->data - 1) {
        /* A line longer than the buffer is cut; mark the cut so nobody mistakes it. */
        memcpy(b->data + b->len - 3, "...", 3);
    }
    if (sink_fn) {
        sink_fn(sink_ctx, level, b->data);
        return;
    }
    b->data[b->len] = '\n';
    ssize_t ignored = write(STDERR_FILENO, b->data, b->len + 1);
    (void)ignored;
}

void llmr_log_write(llmr_log_level level, const char *component, const char *fmt, ...)
{
    if (level >= LLMR_LOG_OFF || (int)level < atomic_load(&current_level))
        return;
    bool json = atomic_load(&current_format) == LLMR_LOG_FORMAT_JSON;
    line_buf b;
    b.len = 0;
    b.data[0] = '\0';
    put_head(&b, json, level, component, request_id);
    va_list ap;
    va_start(ap, fmt);
    if (json) {
        char msg[LINE_MAX_BYTES];
        vsnprintf(msg, sizeof msg, fmt, ap);
        put_f(&b, ",\"message\":\"");
        put_json_text(&b, msg);
        put_f(&b, "\"}");
    } else {
        char msg[LINE_MAX_BYTES];
        vsnprintf(msg, sizeof msg, fmt, ap);
        put_text_line(&b, msg);
    }
    va_end(ap);
    emit(&b, json, level);
}

void llmr_log_access(const llmr_log_access_entry *e)
{
    llmr_log_level level = e->quiet ? LLMR_LOG_DEBUG : LLMR_LOG_INFO;
    if ((int)level < atomic_load(&current_level))
        return;
    bool json = atomic_load(&current_format) == LLMR_LOG_FORMAT_JSON;
    line_buf b;
    b.len = 0;
    b.data[0] = '\0';
    put_head(&b, json, level, "access", e->request_id);
    const char *service = e->service ? e->service : "-";
    const char *method = e->method ? e->method : "-", *path = e->path ? e->path : "-";
    if (json) {
        put_json_field(&b, "service", service);
        put_json_field(&b, "method", method);
        put_json_field(&b, "path", path);
        put_f(&b, ",\"status\":%u", e->status);
        if (e->model)
            put_json_field(&b, "model", e->model);
        if (e->node)
            put_json_field(&b, "node", e->node);
        if (e->response_id)
            put_json_field(&b, "response_id", e->response_id);
        put_f(&b, ",\"prompt_tokens\":%u,\"completion_tokens\":%u", e->prompt_tokens,
              e->completion_tokens);
        if (e->ttft_ms >= 0)
            put_f(&b, ",\"ttft_ms\":%.3f", e->ttft_ms);
        else
            put_f(&b, ",\"ttft_ms\":null");
        put_f(&b, ",\"duration_ms\":%.3f}", e->duration_ms >= 0 ? e->duration_ms : 0.0);
    } else {
        put_f(&b, "%s %s ", service, method);
        put_text_token(&b, path);
        put_f(&b, " %u model=", e->status);
        put_text_token(&b, e->model ? e->model : "-");
        if (e->node)
            put_f(&b, " node=%s", e->node);
        if (e->response_id)
            put_f(&b, " id=%s", e->response_id);
        put_f(&b, " prompt_tokens=%u completion_tokens=%u", e->prompt_tokens, e->completion_tokens);
        if (e->ttft_ms >= 0)
            put_f(&b, " ttft_ms=%.1f", e->ttft_ms);
        else
            put_f(&b, " ttft_ms=-");
        put_f(&b, " duration_ms=%.1f", e->duration_ms >= 0 ? e->duration_ms : 0.0);
    }
    emit(&b, json, level);
}

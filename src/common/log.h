/* Logging: levels, a component name, and the request id of the calling thread.
 *
 * A line looks like
 *   2026-11-21T09:30:00.123Z WARN  storage [req=3f2a] shard model-00001... is short
 * or, in the JSON format (llmr_log_set_format), one JSON object per line:
 *   {"time":"2026-11-21T09:30:00.123Z","level":"warn","component":"storage",
 *    "request_id":"3f2a","message":"shard model-00001... is short"}
 * and goes to stderr (or to the sink a test installs) in one write, so lines from
 * several threads never interleave.  The level and format are process-wide; the
 * request id is per thread (set it when a thread starts work on a request, clear it
 * after).
 *
 * An access line (llmr_log_access) tells of one answered HTTP request: component
 * "access", the service, method, path, status, model, tokens, TTFT and duration; in
 * the JSON format each of those is a field of its own. */
#ifndef LLMR_COMMON_LOG_H
#define LLMR_COMMON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum llmr_log_level {
    LLMR_LOG_DEBUG,
    LLMR_LOG_INFO,
    LLMR_LOG_WARN,
    LLMR_LOG_ERROR,
    LLMR_LOG_OFF
} llmr_log_level;

void llmr_log_set_level(llmr_log_level level);
llmr_log_level llmr_log_get_level(void);
/* "debug", "info", "warn"/"warning", "error", "off" (any case).  False otherwise. */
bool llmr_log_level_parse(const char *text, llmr_log_level *out);
const char *llmr_log_level_name(llmr_log_level level);

/* Request ids: what a client may send in x-request-id (1 to LLMR_REQUEST_ID_MAX
 * visible ASCII characters, no space, quote or backslash), and new ones (32 hex
 * digits). */
#define LLMR_REQUEST_ID_MAX 64
bool llmr_request_id_valid(const char *id);
/* A new id into out (at least 33 bytes). */
void llmr_request_id_new(char *out, size_t size);

typedef enum llmr_log_format { LLMR_LOG_FORMAT_TEXT, LLMR_LOG_FORMAT_JSON } llmr_log_format;
void llmr_log_set_format(llmr_log_format format);
llmr_log_format llmr_log_get_format(void);
/* "text" or "json" (any case).  False otherwise. */
bool llmr_log_format_parse(const char *text, llmr_log_format *out);

/* Sets the calling thread's request id (copied; at most LLMR_REQUEST_ID_MAX bytes
 * kept); NULL or "" clears it. */
void llmr_log_set_request_id(const char *id);
/* The calling thread's request id, "" when none. */
const char *llmr_log_request_id(void);

/* Where lines go: NULL restores stderr.  The sink gets each finished line without
 * its newline; it must be thread-safe if the program logs from several threads. */
typedef void (*llmr_log_sink)(void *ctx, llmr_log_level level, const char *line);
void llmr_log_set_sink(llmr_log_sink sink, void *ctx);

void llmr_log_write(llmr_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One answered HTTP request. */
typedef struct llmr_log_access_entry {
    const char *service;     /* "router", "node" */
    const char *request_id;
    const char *method, *path;
    unsigned status;
    const char *model;       /* NULL when none */
    const char *node;        /* the router's: the node that answered, or NULL */
    const char *response_id; /* the node's: chatcmpl-..., cmpl-..., resp_..., or NULL */
    uint32_t prompt_tokens, completion_tokens;
    double ttft_ms;          /* < 0: no token came */
    double duration_ms;
    bool quiet;              /* at debug level, not info */
} llmr_log_access_entry;
/* Writes the access line (at info level, or debug when quiet). */
void llmr_log_access(const llmr_log_access_entry *e);

#define llmr_log_debug(component, ...) llmr_log_write(LLMR_LOG_DEBUG, component, __VA_ARGS__)
#define llmr_log_info(component, ...) llmr_log_write(LLMR_LOG_INFO, component, __VA_ARGS__)
#define llmr_log_warn(component, ...) llmr_log_write(LLMR_LOG_WARN, component, __VA_ARGS__)
#define llmr_log_error(component, ...) llmr_log_write(LLMR_LOG_ERROR, component, __VA_ARGS__)

#endif

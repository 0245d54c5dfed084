/* Logging: levels, a component name, and the request id of the calling thread.
 *
 * A line looks like
 *   2026-11-21T09:30:00.123Z WARN  storage [req=3f2a] shard model-00001... is short
 * and goes to stderr (or to the sink a test installs) in one write, so lines from
 * several threads never interleave.  The level is process-wide; the request id is
 * per thread (set it when a thread starts work on a request, clear it after). */
#ifndef LLMR_COMMON_LOG_H
#define LLMR_COMMON_LOG_H

#include <stdbool.h>

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

/* Sets the calling thread's request id (copied; at most 63 bytes kept); NULL or ""
 * clears it. */
void llmr_log_set_request_id(const char *id);
/* The calling thread's request id, "" when none. */
const char *llmr_log_request_id(void);

/* Where lines go: NULL restores stderr.  The sink gets each finished line without
 * its newline; it must be thread-safe if the program logs from several threads. */
typedef void (*llmr_log_sink)(void *ctx, llmr_log_level level, const char *line);
void llmr_log_set_sink(llmr_log_sink sink, void *ctx);

void llmr_log_write(llmr_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define llmr_log_debug(component, ...) llmr_log_write(LLMR_LOG_DEBUG, component, __VA_ARGS__)
#define llmr_log_info(component, ...) llmr_log_write(LLMR_LOG_INFO, component, __VA_ARGS__)
#define llmr_log_warn(component, ...) llmr_log_write(LLMR_LOG_WARN, component, __VA_ARGS__)
#define llmr_log_error(component, ...) llmr_log_write(LLMR_LOG_ERROR, component, __VA_ARGS__)

#endif

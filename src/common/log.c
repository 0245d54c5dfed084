/* Logging: see log.h. */
#define _GNU_SOURCE
#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static atomic_int current_level = LLMR_LOG_INFO;
static _Thread_local char request_id[64];

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

void llmr_log_write(llmr_log_level level, const char *component, const char *fmt, ...)
{
    if (level >= LLMR_LOG_OFF || (int)level < atomic_load(&current_level))
        return;

    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_tags[level],
                     component ? component : "-");
    if (request_id[0] && n >= 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "[req=%s] ", request_id);
    if (n >= 0 && (size_t)n < sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
    }
    /* A line longer than the buffer is cut; mark the cut so nobody mistakes it. */
    size_t len = strlen(line);
    if (len == sizeof line - 1)
        memcpy(line + len - 3, "...", 3);

    if (sink_fn) {
        sink_fn(sink_ctx, level, line);
        return;
    }
    line[len] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, len + 1);
    (void)ignored;
}

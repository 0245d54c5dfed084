/* llama.cpp's log lines into the host's log, the reason of the last failure per
 * thread, and the clock: see lc_engine.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lc_engine.h"

static const llmr_host_api *host;

static _Thread_local char thread_error[LC_ERROR_MAX];
static _Thread_local char llama_error[LC_ERROR_MAX]; /* the first ERROR line since a clear */
static _Thread_local char line[LC_ERROR_MAX];        /* a line being assembled */
static _Thread_local size_t line_len;
static _Thread_local int line_level;

static void emit(int level, const char *text)
{
    if (host && host->log)
        host->log(host->ctx, level, text);
}

/* llama.cpp logs in pieces (GGML_LOG_LEVEL_CONT continues a line); a line goes to the
 * host once it ends.  Its chatter (INFO) is the host's DEBUG. */
static void on_llama_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level != GGML_LOG_LEVEL_CONT) {
        line_level = level == GGML_LOG_LEVEL_ERROR  ? LLMR_ENGINE_LOG_ERROR
                     : level == GGML_LOG_LEVEL_WARN ? LLMR_ENGINE_LOG_WARN
                                                    : LLMR_ENGINE_LOG_DEBUG;
    }
    for (const char *p = text; *p; p++) {
        if (*p != '\n') {
            if (line_len + 1 < sizeof line)
                line[line_len++] = *p;
            continue;
        }
        line[line_len] = '\0';
        if (line_len) {
            emit(line_level, line);
            if (line_level == LLMR_ENGINE_LOG_ERROR && !llama_error[0]) {
                /* the first error is the specific one; later ones only say "failed" */
                static const char prefix[] = "llama_model_load: error loading model: ";
                const char *why = strncmp(line, prefix, sizeof prefix - 1) == 0
                                      ? line + sizeof prefix - 1
                                      : line;
                snprintf(llama_error, sizeof llama_error, "%s", why);
            }
        }
        line_len = 0;
    }
}

void lc_log_init(const llmr_host_api *h)
{
    host = h;
    llama_log_set(on_llama_log, NULL);
}

void lc_log(int level, const char *fmt, ...)
{
    char text[LC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    emit(level, text);
}

void lc_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_error, sizeof thread_error, fmt, ap);
    va_end(ap);
}

const char *lc_error(void)
{
    return thread_error;
}

const char *lc_llama_error(void)
{
    return llama_error;
}

void lc_llama_error_clear(void)
{
    llama_error[0] = '\0';
}

uint64_t lc_now_ns(void)
{
    if (host && host->now_ns)
        return host->now_ns(host->ctx);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

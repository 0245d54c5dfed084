/* Stop strings: see stop_strings.h. */
#include "engine_host/stop_strings.h"

#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

llmr_status llmr_stop_matcher_init(llmr_stop_matcher *m, const char *const *stops,
                                   const size_t *lens, size_t count, llmr_strbuf *err)
{
    memset(m, 0, sizeof *m);
    llmr_strbuf_init(&m->held);
    if (count > LLMR_STOP_STRINGS_MAX) {
        llmr_strbuf_printf(err, "%zu stop strings given; at most %d are allowed", count,
                           LLMR_STOP_STRINGS_MAX);
        return LLMR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < count; i++) {
        const char *why = NULL;
        if (lens[i] == 0)
            why = "is empty";
        else if (lens[i] > LLMR_STOP_STRING_MAX_BYTES)
            why = "is longer than 1024 bytes";
        else if (!llmr_utf8_valid(stops[i], lens[i], NULL))
            why = "is not valid UTF-8";
        if (why) {
            llmr_strbuf_printf(err, "stop string %zu %s", i, why);
            llmr_stop_matcher_free(m);
            return LLMR_INVALID_ARGUMENT;
        }
        m->stops[i] = malloc(lens[i]);
        if (!m->stops[i]) {
            llmr_stop_matcher_free(m);
            llmr_strbuf_puts(err, "out of memory");
            return LLMR_OOM_RAM;
        }
        memcpy(m->stops[i], stops[i], lens[i]);
        m->lens[i] = lens[i];
        m->count = i + 1;
    }
    return LLMR_OK;
}

void llmr_stop_matcher_free(llmr_stop_matcher *m)
{
    for (size_t i = 0; i < m->count; i++)
        free(m->stops[i]);
    llmr_strbuf_free(&m->held);
    memset(m, 0, sizeof *m);
}

/* Where the first stop string begins in text, or -1. */
static long first_stop(const llmr_stop_matcher *m, const char *text, size_t len)
{
    long best = -1;
    for (size_t i = 0; i < m->count; i++) {
        if (m->lens[i] > len)
            continue;
        for (size_t at = 0; at + m->lens[i] <= len; at++) {
            if (best >= 0 && (long)at >= best)
                break;
            if (memcmp(text + at, m->stops[i], m->lens[i]) == 0) {
                best = (long)at;
                break;
            }
        }
    }
    return best;
}

/* The longest tail of text that is a proper beginning of some stop string. */
static size_t tail_to_hold(const llmr_stop_matcher *m, const char *text, size_t len)
{
    size_t hold = 0;
    for (size_t i = 0; i < m->count; i++) {
        size_t most = m->lens[i] - 1 < len ? m->lens[i] - 1 : len;
        for (size_t k = most; k > hold; k--) {
            if (memcmp(text + len - k, m->stops[i], k) == 0) {
                hold = k;
                break;
            }
        }
    }
    return hold;
}

bool llmr_stop_matcher_push(llmr_stop_matcher *m, const char *text, size_t len, llmr_strbuf *out)
{
    if (m->stopped)
        return true;
    if (m->count == 0) {
        llmr_strbuf_append(out, text, len);
        return false;
    }
    llmr_strbuf_append(&m->held, text, len);
    const char *h = m->held.data ? m->held.data : "";
    long at = first_stop(m, h, m->held.len);
    if (at >= 0) {
        llmr_strbuf_append(out, h, (size_t)at);
        llmr_strbuf_reset(&m->held);
        m->stopped = true;
        return true;
    }
    size_t keep = tail_to_hold(m, h, m->held.len);
    size_t release = m->held.len - keep;
    llmr_strbuf_append(out, h, release);
    if (release) {
        memmove(m->held.data, h + release, keep);
        m->held.len = keep;
        m->held.data[keep] = '\0';
    }
    return false;
}

void llmr_stop_matcher_flush(llmr_stop_matcher *m, llmr_strbuf *out)
{
    if (!m->stopped && m->held.len)
        llmr_strbuf_append(out, m->held.data, m->held.len);
    llmr_strbuf_reset(&m->held);
}

/* The step loop's development trace: see step_trace.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "step_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t now_ns(const gpt_step_trace *t)
{
    return t->host->now_ns(t->host->ctx);
}

void gpt_step_trace_open(gpt_step_trace *t, const llmr_host_api *host)
{
    memset(t, 0, sizeof *t);
    t->host = host;
    const char *path = getenv("LLMR_STEP_TRACE");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || !(t->out = fdopen(fd, "a"))) {
        fprintf(stderr, "gpt-oss: LLMR_STEP_TRACE: cannot open %s (%s); no step trace\n", path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    setvbuf(t->out, NULL, _IOLBF, 0); /* a line a step: whole lines if the process dies */
    fprintf(t->out, "# start_us items decode_items tokens waiting running step_us\n");
    t->origin_ns = now_ns(t);
}

void gpt_step_trace_begin(gpt_step_trace *t, const llmr_sched *s, const llmr_sched_step *step)
{
    if (!t->out)
        return;
    t->items = step->n_items;
    t->decode_items = t->tokens = 0;
    for (uint32_t i = 0; i < step->n_items; i++) {
        const llmr_sched_item *it = &step->items[i];
        t->decode_items += it->count == 1 && it->sample;
        t->tokens += it->count;
    }
    t->waiting = s->n_waiting;
    t->running = s->n_running;
    t->step_ns = now_ns(t);
}

void gpt_step_trace_end(gpt_step_trace *t)
{
    if (!t->out)
        return;
    uint64_t end = now_ns(t);
    fprintf(t->out, "%llu %u %u %u %u %u %llu\n",
            (unsigned long long)((t->step_ns - t->origin_ns) / 1000), t->items, t->decode_items,
            t->tokens, t->waiting, t->running, (unsigned long long)((end - t->step_ns) / 1000));
}

void gpt_step_trace_close(gpt_step_trace *t)
{
    if (t->out)
        fclose(t->out);
    t->out = NULL;
}

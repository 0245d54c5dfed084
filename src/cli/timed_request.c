/* A request run and timed in this process: see timed_request.h. */
#include "cli/timed_request.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    int status;
    char message[512];
    llmr_timed_request *t;
} waiter;

/* Events of one request come in order and never at once, so only the end is locked. */
static int on_token(void *user, const llmr_engine_token *ev)
{
    waiter *w = user;
    llmr_timed_request *t = w->t;
    if (ev->id >= 0) {
        if (t->tokens++ == 0)
            t->first_ns = ev->time_ns;
        t->last_ns = ev->time_ns;
    }
    if (ev->finish != LLMR_ENGINE_FINISH_NONE) {
        pthread_mutex_lock(&w->lock);
        t->finish = ev->finish;
        w->status = ev->status;
        snprintf(w->message, sizeof w->message, "%s", ev->message ? ev->message : "");
        w->done = true;
        pthread_cond_broadcast(&w->done_cond);
        pthread_mutex_unlock(&w->lock);
    }
    return 0;
}

llmr_status llmr_timed_request_run(llmr_local_engine *e, const llmr_engine_request_params *p,
                                   llmr_timed_request *out, llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    waiter w = {.t = out};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.done_cond, NULL);
    out->submit_ns = llmr_now_ns();
    llmr_status st = llmr_plugin_status(e->plugin.api->submit(e->model, p, on_token, &w));
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "the engine refused the request: %s",
                           e->plugin.api->last_error(e->model));
    } else {
        pthread_mutex_lock(&w.lock);
        while (!w.done)
            pthread_cond_wait(&w.done_cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        if (out->finish == LLMR_ENGINE_FINISH_ERROR) {
            st = w.status != LLMR_OK ? (llmr_status)w.status : LLMR_INTERNAL;
            llmr_strbuf_printf(err, "the request failed (%s): %s", llmr_status_name(st),
                               w.message);
        } else if (out->finish == LLMR_ENGINE_FINISH_CANCELLED) {
            st = LLMR_CANCELLED;
            llmr_strbuf_printf(err, "the engine cancelled the request%s%s",
                               w.message[0] ? ": " : "", w.message);
        }
    }
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.done_cond);
    return st;
}

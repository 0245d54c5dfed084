/* EngineHost requests: the outbox, dispatch from a model's queue to its worker, and
 * what comes back from workers (token events, pongs, the end of a worker).  See
 * host_internal.h for the locking rules. */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine_host/host_internal.h"

/* ---- the outbox ------------------------------------------------------------------ */

static bool grow(void **items, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 8;
    void *p = realloc(*items, n * size);
    if (!p)
        return false;
    *items = p;
    *cap = n;
    return true;
}

void outbox_send(outbox *ob, hworker *hw, uint16_t type, uint64_t request_id,
                 llmr_strbuf *payload)
{
    if (!grow((void **)&ob->items, &ob->cap, ob->count, sizeof *ob->items)) {
        llmr_log_error(HOST_COMPONENT, "out of memory queueing a frame for a worker");
        return;
    }
    outbox_item *it = &ob->items[ob->count++];
    memset(it, 0, sizeof *it);
    it->hw = hw;
    it->type = type;
    it->request_id = request_id;
    llmr_strbuf_init(&it->payload);
    if (payload) {
        it->payload = *payload;
        llmr_strbuf_init(payload);
    }
    hw->refs++;
}

void outbox_kill(outbox *ob, hworker *hw)
{
    outbox_send(ob, hw, 0, 0, NULL);
    if (ob->count && ob->items[ob->count - 1].hw == hw)
        ob->items[ob->count - 1].kill = true;
}

/* Takes r out of its queue or its worker. */
static void detach(hreq *r)
{
    if (r->detached)
        return;
    r->detached = true;
    if (r->worker) {
        hworker *hw = r->worker;
        for (hreq **pp = &hw->running; *pp; pp = &(*pp)->next) {
            if (*pp == r) {
                *pp = r->next;
                hw->in_flight--;
                if (hw->in_flight == 0)
                    hw->check_idle_memory = true;
                break;
            }
        }
        r->worker = NULL;
    } else {
        hmodel *m = r->model;
        hreq *prev = NULL;
        for (hreq *q = m->queue_head; q; prev = q, q = q->next) {
            if (q == r) {
                if (prev)
                    prev->next = r->next;
                else
                    m->queue_head = r->next;
                if (m->queue_tail == r)
                    m->queue_tail = prev;
                m->queued--;
                break;
            }
        }
    }
    r->next = NULL;
}

void outbox_final(outbox *ob, hreq *r, llmr_status status, uint32_t finish, const char *fmt, ...)
{
    detach(r);
    if (!grow((void **)&ob->finals, &ob->final_cap, ob->final_count, sizeof *ob->finals)) {
        llmr_log_error(HOST_COMPONENT, "out of memory ending request %llu",
                       (unsigned long long)r->id);
        return;
    }
    final_event *f = &ob->finals[ob->final_count++];
    f->r = r;
    f->status = status;
    f->finish = finish;
    llmr_strbuf msg = LLMR_STRBUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(&msg, fmt, ap);
    va_end(ap);
    f->message = llmr_strbuf_take(&msg);
    r->refs++;
    if (status != LLMR_OK && status != LLMR_CANCELLED)
        r->model->failed_requests++;
}

/* Delivers one event of r, unless its final event went out already. */
static void deliver(hreq *r, const llmr_gen_event *ev)
{
    pthread_mutex_lock(&r->deliver);
    if (!r->finished) {
        if (ev->finish)
            r->finished = true;
        r->cb(r->user, ev);
    }
    pthread_mutex_unlock(&r->deliver);
}

static void free_request(hreq *r)
{
    llmr_strbuf_free(&r->payload);
    pthread_mutex_destroy(&r->deliver);
    free(r);
}

void request_unref(llmr_engine_host *h, hreq *r)
{
    pthread_mutex_lock(&h->lock);
    bool last = --r->refs == 0 && r->detached;
    pthread_mutex_unlock(&h->lock);
    if (last)
        free_request(r);
}

void outbox_flush(llmr_engine_host *h, outbox *ob)
{
    for (size_t i = 0; i < ob->count; i++) {
        outbox_item *it = &ob->items[i];
        if (it->kill)
            llmr_worker_kill(it->hw->w);
        else if (llmr_worker_send(it->hw->w, it->type, it->request_id, it->payload.data,
                                  it->payload.len) != LLMR_OK)
            llmr_log_debug(HOST_COMPONENT, "a frame for worker %d was not sent: it has ended",
                           llmr_worker_pid(it->hw->w));
        llmr_strbuf_free(&it->payload);
    }
    for (size_t i = 0; i < ob->final_count; i++) {
        final_event *f = &ob->finals[i];
        llmr_gen_event ev;
        memset(&ev, 0, sizeof ev);
        ev.request_id = f->r->id;
        ev.id = -1;
        ev.finish = f->finish;
        ev.status = f->status;
        ev.message = f->message ? f->message : llmr_status_message(f->status);
        ev.prompt_tokens = f->r->prompt_len;
        ev.time_ns = llmr_now_ns();
        deliver(f->r, &ev);
        free(f->message);
    }
    if (ob->count || ob->final_count) {
        pthread_mutex_lock(&h->lock);
        for (size_t i = 0; i < ob->count; i++)
            ob->items[i].hw->refs--;
        for (size_t i = 0; i < ob->final_count; i++)
            ob->finals[i].r->refs--;
        pthread_cond_broadcast(&h->changed);
        pthread_mutex_unlock(&h->lock);
        for (size_t i = 0; i < ob->final_count; i++) {
            hreq *r = ob->finals[i].r;
            pthread_mutex_lock(&h->lock);
            bool last = r->refs == 0 && r->detached;
            pthread_mutex_unlock(&h->lock);
            if (last)
                free_request(r);
        }
    }
    free(ob->items);
    free(ob->finals);
    memset(ob, 0, sizeof *ob);
}

/* ---- dispatch ------------------------------------------------------------------ */

void requests_dispatch(llmr_engine_host *h, hmodel *m, outbox *ob)
{
    hworker *hw = m->current;
    if (!hw || hw->phase != WORKER_SERVING)
        return;
    uint64_t now = host_now_ms();
    while (m->queue_head && hw->in_flight < hw->max_batch) {
        hreq *r = m->queue_head;
        m->queue_head = r->next;
        if (!m->queue_head)
            m->queue_tail = NULL;
        m->queued--;
        r->next = hw->running;
        hw->running = r;
        hw->in_flight++;
        hw->check_idle_memory = false;
        r->worker = hw;
        r->started_ms = r->progress_ms = now;
        m->last_used_ms = now;
        outbox_send(ob, hw, LLMR_WIRE_SUBMIT, r->id, &r->payload);
    }
    (void)h;
}

void requests_fail_queue(hmodel *m, outbox *ob, llmr_status status, const char *message)
{
    while (m->queue_head)
        outbox_final(ob, m->queue_head, status, LLMR_ENGINE_FINISH_ERROR, "%s", message);
}

/* ---- from the workers ------------------------------------------------------------ */

static hreq *find_running(hworker *hw, uint64_t id)
{
    for (hreq *r = hw->running; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

static void on_event(void *ctx, llmr_worker *w, uint64_t request_id, const llmr_wire_event *wev)
{
    llmr_engine_host *h = ctx;
    hworker *hw = llmr_worker_tag(w);
    outbox ob = {0};
    pthread_mutex_lock(&h->lock);
    hreq *r = find_running(hw, request_id);
    if (!r) {
        pthread_mutex_unlock(&h->lock);
        return; /* ended by the host already */
    }
    r->refs++;
    uint64_t now = host_now_ms();
    r->progress_ms = now;
    hmodel *m = r->model;
    if (wev->id >= 0) {
        m->tokens++;
        r->got_token = true;
        hw->token_ms = now;
    }
    llmr_status status = wev->finish ? (llmr_status)wev->status : LLMR_OK;
    const char *why = NULL;
    char why_buf[384];
    if (wev->finish == LLMR_ENGINE_FINISH_CANCELLED && r->timing_out) {
        status = LLMR_TIMEOUT;
        char setting[256];
        host_request_timeout_words(h, hw, setting, sizeof setting);
        snprintf(why_buf, sizeof why_buf, "the request made no progress for %s and was stopped", setting);
        why = why_buf;
        m->timeouts++;
    } else if (wev->finish == LLMR_ENGINE_FINISH_CANCELLED) {
        status = LLMR_CANCELLED;
    }
    if (wev->finish) {
        detach(r);
        if (status != LLMR_OK && status != LLMR_CANCELLED)
            m->failed_requests++;
        m->last_used_ms = now;
        requests_dispatch(h, m, &ob);
        if (hw->in_flight == 0 && hw->phase == WORKER_DRAINING) {
            hw->phase = WORKER_EXITING;
            outbox_send(&ob, hw, LLMR_WIRE_EXIT, 0, NULL);
        } else if (hw->in_flight == 0 && hw->check_idle_memory) {
            outbox_send(&ob, hw, LLMR_WIRE_PING, 0, NULL); /* the idle memory check */
        }
    }
    pthread_mutex_unlock(&h->lock);

    llmr_gen_event ev;
    memset(&ev, 0, sizeof ev);
    ev.request_id = request_id;
    ev.index = wev->index;
    ev.id = wev->id;
    ev.text = wev->text;
    ev.text_len = wev->text_len;
    ev.logprob = wev->logprob;
    ev.top_count = wev->top_count;
    ev.top_ids = wev->top_ids;
    ev.top_logprobs = wev->top_logprobs;
    ev.time_ns = wev->time_ns;
    ev.sent_ns = wev->sent_ns;
    ev.finish = wev->finish;
    ev.status = status;
    ev.prompt_tokens = wev->prompt_tokens;
    ev.completion_tokens = wev->completion_tokens;
    char *message = NULL;
    if (why)
        ev.message = why;
    else if (wev->message_len)
        ev.message = message = strndup(wev->message, wev->message_len);
    else if (status != LLMR_OK)
        ev.message = llmr_status_message(status);
    deliver(r, &ev);
    free(message);
    outbox_flush(h, &ob);
    request_unref(h, r);
}

static void on_pong(void *ctx, llmr_worker *w, const llmr_wire_pong *p)
{
    llmr_engine_host *h = ctx;
    hworker *hw = llmr_worker_tag(w);
    pthread_mutex_lock(&h->lock);
    hw->pong_ms = host_now_ms();
    hw->vram = p->vram_bytes;
    hw->ram = p->ram_bytes;
    hw->host_alloc = p->host_alloc_bytes;
    hw->kv_used = p->kv_used_tokens;
    hw->has_memory = p->has_memory != 0;
    if (p->in_flight == 0 && hw->in_flight == 0 && hw->phase == WORKER_SERVING) {
        if (!hw->have_base) {
            hw->base_vram = p->vram_bytes;
            hw->base_ram = p->ram_bytes;
            hw->base_alloc = p->host_alloc_bytes;
            hw->have_base = true;
        } else if (hw->check_idle_memory && !hw->replacing) {
            /* Idle again: what it holds now it should have held after the load.  A
             * little slack for allocator rounding; more is a leak. */
            uint64_t grown = 0, base = 0;
            if (p->vram_bytes > hw->base_vram) {
                grown = p->vram_bytes - hw->base_vram;
                base = hw->base_vram;
            }
            if (p->host_alloc_bytes > hw->base_alloc &&
                p->host_alloc_bytes - hw->base_alloc > grown) {
                grown = p->host_alloc_bytes - hw->base_alloc;
                base = hw->base_alloc;
            }
            if (p->ram_bytes > hw->base_ram && p->ram_bytes - hw->base_ram > grown) {
                grown = p->ram_bytes - hw->base_ram;
                base = hw->base_ram;
            }
            if (grown > (1u << 20) + base / 100) {
                hmodel *m = hw->model;
                llmr_log_warn(HOST_COMPONENT,
                              "model %s: engine %s %s holds %llu bytes more than after its "
                              "load with no request running (requests must release their "
                              "memory when they end); replacing its worker",
                              m->name, hw->plugin.id, hw->plugin.version,
                              (unsigned long long)grown);
                h->leaks++;
                hw->replacing = true;
                if (m->current == hw && !m->loading)
                    load_start(h, m, true);
            }
        }
        hw->check_idle_memory = false;
    }
    pthread_mutex_unlock(&h->lock);
}

static void on_exit_cb(void *ctx, llmr_worker *w, int wait_status)
{
    llmr_engine_host *h = ctx;
    hworker *hw = llmr_worker_tag(w);
    outbox ob = {0};
    llmr_strbuf how = LLMR_STRBUF_INIT;
    llmr_worker_describe_exit(wait_status, &how);
    pthread_mutex_lock(&h->lock);
    hw->exited = true;
    hw->wait_status = wait_status;
    hw->exited_ms = host_now_ms();
    hmodel *m = hw->model;
    bool planned = hw->phase == WORKER_EXITING && !hw->kill_reason[0];
    /* The memory a loaded worker held is free now, though a reading may not show it
     * yet.  (One that never finished loading is not counted: its estimate was.) */
    if (hw->loaded_ms) {
        if (h->release_count == RELEASES_KEPT) {
            memmove(h->releases, h->releases + 1, (RELEASES_KEPT - 1) * sizeof *h->releases);
            h->release_count--;
        }
        h->releases[h->release_count++] = (release){hw->gpu, worker_vram(hw), worker_ram(hw),
                                                    llmr_now_ns()};
    }
    while (hw->running) {
        hreq *r = hw->running;
        if (hw->kill_reason[0])
            outbox_final(&ob, r, hw->kill_status, LLMR_ENGINE_FINISH_ERROR, "%s",
                         hw->kill_reason);
        else
            outbox_final(&ob, r, LLMR_INTERNAL, LLMR_ENGINE_FINISH_ERROR,
                         "the engine worker of model %s %s while running the request", m->name,
                         llmr_strbuf_cstr(&how));
    }
    if (m->current == hw) {
        m->current = NULL;
        if (hw->kill_reason[0]) {
            /* Killed by the host (watchdog, health): load again for the next request. */
            m->state = MODEL_IDLE;
            m->restarts++;
            if (m->queue_head && !m->loading)
                load_start(h, m, false);
        } else if (!planned) {
            /* A crash: start again after the backoff; requests wait for it. */
            h->crashes++;
            m->failures++;
            m->restarts++;
            uint64_t delay = host_backoff_ms(h, m->failures);
            m->retry_at_ms = host_now_ms() + delay;
            model_set_reason(m, MODEL_IDLE, LLMR_INTERNAL,
                             "its engine worker (%s %s) %s; restarting in %.1f s", hw->plugin.id,
                             hw->plugin.version, llmr_strbuf_cstr(&how), (double)delay / 1000.0);
            llmr_log_error(HOST_COMPONENT, "model %s: %s", m->name, m->reason);
        } else {
            m->state = MODEL_IDLE;
        }
    }
    hw->phase = WORKER_EXITING;
    pthread_cond_broadcast(&h->changed);
    pthread_mutex_unlock(&h->lock);
    llmr_strbuf_free(&how);
    outbox_flush(h, &ob);
}

const llmr_worker_callbacks host_worker_callbacks = {NULL, on_event, on_pong, on_exit_cb};

/* EngineHost loading: the choice of engine and GPU for a model, and a load in its
 * own thread: start a worker, open the plugin and the model there, ask the engine
 * what the load needs, check that against the memory readings and the plugin's VRAM
 * budget (unloading idle models when that makes room), load, and put the worker in
 * service.  A replacement load (reload, leak) swaps workers only when the new one is
 * ready. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine_host/host_internal.h"
#include "models/runtime.h"

#define EVICT_WAIT_MS 30000u

/* ---- engine choice --------------------------------------------------------------- */

void model_choose_engine(llmr_engine_host *h, hmodel *m)
{
    llmr_resource_snapshot snap;
    llmr_resource_monitor_latest(h->monitor, &snap);
    llmr_engine_query q = {m->format, m->runtime, m->architecture, -1, 0};
    llmr_strbuf why = LLMR_STRBUF_INIT;
    int best_score = 0, best_gpu = -1;
    const llmr_plugin_manifest *best = NULL;
    uint64_t best_free = 0;
    for (uint32_t g = 0; snap.have_gpus && g < snap.gpu_count; g++) {
        q.cc_major = snap.gpus[g].cc_major;
        q.cc_minor = snap.gpus[g].cc_minor;
        int score = 0;
        const llmr_plugin_manifest *p = llmr_engine_registry_select(h->registry, &q, &score, NULL);
        uint64_t free_bytes = snap.gpus[g].free_bytes;
        if (p && (score > best_score || (score == best_score && free_bytes > best_free))) {
            best = p;
            best_score = score;
            best_gpu = (int)g;
            best_free = free_bytes;
        }
    }
    if (!best) { /* no GPU, or none that a plugin runs on: CPU plugins */
        q.cc_major = -1;
        q.cc_minor = 0;
        best = llmr_engine_registry_select(h->registry, &q, &best_score, &why);
        best_gpu = -1;
    }
    if (m->has_engine)
        plugin_ref_free(&m->engine);
    m->has_engine = false;
    const char *limitation = llmr_runtime_limitation(m->runtime);
    if (!best && limitation) {
        model_set_reason(m, MODEL_NOT_READY, LLMR_UNSUPPORTED, "%s (%s)", limitation, llmr_strbuf_cstr(&why));
    } else if (!best) {
        model_set_reason(m, MODEL_NOT_READY, LLMR_UNSUPPORTED, "%s", llmr_strbuf_cstr(&why));
    } else if (plugin_ref_copy(&m->engine, best)) {
        m->has_engine = true;
        m->gpu = best_score >= 2 ? best_gpu : -1;
        if (m->state == MODEL_NOT_READY)
            model_set_reason(m, MODEL_IDLE, LLMR_OK, "%s", "");
    }
    llmr_strbuf_free(&why);
}

/* ---- memory ------------------------------------------------------------------------ */

uint64_t worker_vram(const hworker *hw)
{
    return hw->has_memory && hw->vram > hw->est_vram ? hw->vram : hw->est_vram;
}

uint64_t worker_ram(const hworker *hw)
{
    uint64_t ram = hw->has_memory ? hw->ram : hw->host_alloc;
    return ram > hw->est_ram ? ram : hw->est_ram;
}

static double gb(uint64_t bytes)
{
    return (double)bytes / 1e9;
}

/* What a resource holds now, as far as the host can tell: the reading, plus what
 * loads since then took (estimates), less what workers that ended since then held. */
uint64_t host_predicted_use(llmr_engine_host *h, const llmr_resource_snapshot *snap, bool vram,
                            int gpu, const hworker *self)
{
    uint64_t used = vram ? snap->gpus[gpu].used_bytes : snap->ram.used_bytes;
    for (hworker *w = h->workers; w; w = w->next) {
        if (w == self || w->exited || (vram && w->gpu != gpu))
            continue;
        bool after = w->phase == WORKER_LOADING || w->loaded_ms * 1000000u > snap->taken_ns;
        if (after)
            used += vram ? w->est_vram : w->est_ram;
    }
    for (size_t i = 0; i < h->release_count; i++) {
        const release *r = &h->releases[i];
        if (r->at_ns <= snap->taken_ns || (vram && r->gpu != gpu))
            continue;
        uint64_t b = vram ? r->vram : r->ram;
        used = used > b ? used - b : 0;
    }
    return used;
}

size_t host_pick_idle(llmr_engine_host *h, const hmodel *for_model, bool vram, int gpu,
                      uint64_t used, uint64_t need, uint64_t limit, bool partial, hworker **out,
                      size_t cap)
{
    size_t n = 0;
    uint64_t freed = 0;
    while (used - freed + need > limit && n < cap) {
        hworker *pick = NULL;
        for (hmodel *m = h->models; m; m = m->next) {
            hworker *w = m->current;
            if (m == for_model || !w || w->phase != WORKER_SERVING || w->in_flight || m->queued ||
                m->loading || (vram && w->gpu != gpu))
                continue;
            bool taken = false;
            for (size_t i = 0; i < n; i++)
                taken |= out[i] == w;
            if (!taken && (!pick || m->last_used_ms < pick->model->last_used_ms))
                pick = w;
        }
        if (!pick)
            break;
        out[n++] = pick;
        freed += vram ? worker_vram(pick) : worker_ram(pick);
        if (freed > used)
            freed = used;
    }
    return partial || used - freed + need <= limit ? n : 0;
}

void host_unload_idle(llmr_engine_host *h, hworker *w, const char *why, outbox *ob)
{
    hmodel *m = w->model;
    llmr_log_info(HOST_COMPONENT, "unloading idle model %s (last used %.1f s ago): %s", m->name,
                  (double)(host_now_ms() - m->last_used_ms) / 1000.0, why);
    m->current = NULL;
    m->keep_loaded = false;
    model_set_reason(m, MODEL_IDLE, LLMR_OK, "unloaded: %s", why);
    worker_retire(h, w, ob);
    h->lru_unloads++;
}

static uint64_t budget_of(const llmr_engine_host *h, const char *plugin_id)
{
    for (size_t i = 0; i < h->budget_count; i++)
        if (strcmp(h->budgets[i].plugin_id, plugin_id) == 0)
            return h->budgets[i].bytes;
    return 0;
}

/* Checks that hw's estimate fits, choosing idle models to unload when that makes it
 * fit.  On refusal the status and a sentence with the numbers. */
static llmr_status fit(llmr_engine_host *h, hworker *hw, outbox *ob, hworker **evicted,
                       size_t *n_evicted, llmr_strbuf *why)
{
    hmodel *m = hw->model;
    llmr_resource_snapshot snap;
    llmr_resource_monitor_latest(h->monitor, &snap);
    double thr = llmr_resource_monitor_threshold(h->monitor);
    *n_evicted = 0;
    if (hw->est_vram && hw->gpu >= 0) {
        uint64_t cap = budget_of(h, hw->plugin.id);
        if (cap) {
            uint64_t held = 0;
            for (hworker *w = h->workers; w; w = w->next)
                if (w != hw && !w->exited && w->phase != WORKER_EXITING &&
                    strcmp(w->plugin.id, hw->plugin.id) == 0 && !(m->current == w && hw->model == m))
                    held += worker_vram(w);
            if (held + hw->est_vram > cap) {
                llmr_strbuf_printf(why, "engine %s has a GPU memory budget of %.2f GB; its "
                                        "models hold %.2f GB and model %s needs %.2f GB",
                                   hw->plugin.id, gb(cap), gb(held), m->name, gb(hw->est_vram));
                return LLMR_OOM_VRAM;
            }
        }
        if (snap.have_gpus && (uint32_t)hw->gpu < snap.gpu_count) {
            const llmr_gpu_reading *g = &snap.gpus[hw->gpu];
            uint64_t limit = (uint64_t)(thr * (double)g->total_bytes);
            uint64_t used = host_predicted_use(h, &snap, true, hw->gpu, hw);
            if (used + hw->est_vram > limit) {
                size_t n = host_pick_idle(h, m, true, hw->gpu, used, hw->est_vram, limit, false,
                                          evicted, 32);
                if (n == 0) {
                    llmr_strbuf_printf(
                        why, "model %s needs %.2f GB of GPU memory (estimate of engine %s); GPU "
                             "%d (%s) has %.2f of %.2f GB in use and the node keeps it under "
                             "%.0f%%, which leaves %.2f GB, and no idle model's unloading would "
                             "make room",
                        m->name, gb(hw->est_vram), hw->plugin.id, hw->gpu, g->name, gb(used),
                        gb(g->total_bytes), thr * 100, gb(used < limit ? limit - used : 0));
                    return LLMR_OOM_VRAM;
                }
                *n_evicted = n;
            }
        }
    }
    if (hw->est_ram && snap.have_ram) {
        uint64_t limit = (uint64_t)(thr * (double)snap.ram.total_bytes);
        uint64_t used = host_predicted_use(h, &snap, false, -1, hw);
        if (used + hw->est_ram > limit) {
            size_t n = host_pick_idle(h, m, false, -1, used, hw->est_ram, limit, false,
                                      evicted + *n_evicted, 32 - *n_evicted);
            if (n == 0) {
                *n_evicted = 0;
                llmr_strbuf_printf(
                    why, "model %s needs %.2f GB of host memory (estimate of engine %s); %.2f of "
                         "%.2f GB are in use and the node keeps it under %.0f%%, which leaves "
                         "%.2f GB, and no idle model's unloading would make room",
                    m->name, gb(hw->est_ram), hw->plugin.id, gb(used), gb(snap.ram.total_bytes),
                    thr * 100, gb(used < limit ? limit - used : 0));
                return LLMR_OOM_RAM;
            }
            *n_evicted += n;
        }
    }
    char why_unload[200];
    snprintf(why_unload, sizeof why_unload, "to make room for %s", m->name);
    for (size_t i = 0; i < *n_evicted; i++) {
        host_unload_idle(h, evicted[i], why_unload, ob);
        evicted[i]->refs++;
    }
    return LLMR_OK;
}

void worker_retire(llmr_engine_host *h, hworker *hw, outbox *ob)
{
    (void)h;
    if (hw->phase == WORKER_DRAINING || hw->phase == WORKER_EXITING)
        return;
    if (hw->in_flight == 0) {
        hw->phase = WORKER_EXITING;
        outbox_send(ob, hw, LLMR_WIRE_EXIT, 0, NULL);
    } else {
        hw->phase = WORKER_DRAINING;
    }
}

/* ---- the load thread ------------------------------------------------------------- */

typedef struct load_job {
    llmr_engine_host *h;
    hworker *hw;
    bool replace;
} load_job;

static json_t *load_params_json(const hmodel *m, const hworker *hw, uint64_t vram_budget)
{
    json_t *o = json_object();
    if (m->context_length)
        json_object_set_new(o, "context_length", json_integer(m->context_length));
    json_object_set_new(o, "gpu_index", json_integer(hw->gpu));
    if (vram_budget)
        json_object_set_new(o, "vram_budget", json_integer((json_int_t)vram_budget));
    if (m->options_json)
        json_object_set_new(o, "options", json_loads(m->options_json, 0, NULL));
    return o;
}

/* The end of a load, good or bad.  Under the lock. */
static void load_finished(llmr_engine_host *h, load_job *job, llmr_status st, const char *why,
                          outbox *ob)
{
    hworker *hw = job->hw;
    hmodel *m = hw->model;
    if (m->loading == hw)
        m->loading = NULL;
    h->loads_running--;
    if (m->unload_asked) { /* llmr stop while it loaded: nothing to keep, nothing failed */
        m->unload_asked = false;
        m->keep_loaded = false;
        if (st == LLMR_OK) {
            hw->phase = WORKER_SERVING;
            worker_retire(h, hw, ob);
        } else {
            hw->phase = WORKER_EXITING;
            if (hw->w && !hw->exited)
                outbox_send(ob, hw, LLMR_WIRE_EXIT, 0, NULL);
        }
        if (!m->current)
            m->state = m->has_engine ? MODEL_IDLE : MODEL_NOT_READY;
        requests_fail_queue(m, ob, LLMR_LOAD_FAILED,
                            "the model was unloaded (llmr stop) while it loaded: send the request "
                            "again to load it");
        llmr_log_info(HOST_COMPONENT, "model %s: load cancelled (unloaded while it loaded)", m->name);
        hw->refs--;
        pthread_cond_broadcast(&h->changed);
        return;
    }
    if (st == LLMR_OK) {
        hworker *old = m->current;
        hw->phase = WORKER_SERVING;
        hw->loaded_ms = host_now_ms();
        m->current = hw;
        m->state = MODEL_READY;
        free(m->reason);
        m->reason = NULL;
        m->reason_code = LLMR_OK;
        m->failures = 0;
        m->keep_loaded = true;
        m->loads++;
        if (old && old != hw) {
            old->replacing = false;
            worker_retire(h, old, ob);
            llmr_log_info(HOST_COMPONENT, "model %s now runs on %s %s (worker %d); worker %d "
                                          "finishes its %u running request(s) and exits",
                          m->name, hw->plugin.id, hw->plugin.version, llmr_worker_pid(hw->w),
                          llmr_worker_pid(old->w), old->in_flight);
        } else {
            llmr_log_info(HOST_COMPONENT, "model %s loaded by %s %s in %.0f ms (worker %d)",
                          m->name, hw->plugin.id, hw->plugin.version, m->last_load_ms,
                          llmr_worker_pid(hw->w));
        }
        m->loaded_since = (int64_t)time(NULL);
        requests_dispatch(h, m, ob);
        outbox_send(ob, hw, LLMR_WIRE_PING, 0, NULL); /* its idle memory: the baseline */
        if (m->removed) { /* taken off while it loaded: nothing will use it */
            m->current = NULL;
            m->keep_loaded = false;
            worker_retire(h, hw, ob);
        }
    } else {
        hw->phase = WORKER_EXITING;
        if (hw->w && !hw->exited)
            outbox_send(ob, hw, LLMR_WIRE_EXIT, 0, NULL);
        if (job->replace && m->current) {
            m->current->replacing = false;
            llmr_log_error(HOST_COMPONENT, "model %s: the new worker (%s %s) failed to load, "
                                           "so the model stays on %s %s: %s",
                           m->name, hw->plugin.id, hw->plugin.version, m->current->plugin.id,
                           m->current->plugin.version, why);
        } else {
            m->failures++;
            uint64_t delay = host_backoff_ms(h, m->failures);
            m->retry_at_ms = host_now_ms() + delay;
            m->keep_loaded = false;
            model_set_reason(m, MODEL_FAILED, st, "loading failed (%s %s): %s; the next request "
                                                  "tries again after %.1f s",
                             hw->plugin.id, hw->plugin.version, why, (double)delay / 1000.0);
            llmr_log_error(HOST_COMPONENT, "model %s: %s", m->name, m->reason);
            requests_fail_queue(m, ob, st, m->reason);
        }
    }
    hw->refs--;
    pthread_cond_broadcast(&h->changed);
}

/* Waits until the evicted workers have ended (their memory is back), or the time is up. */
static void wait_for_exits(llmr_engine_host *h, hworker **evicted, size_t n)
{
    uint64_t until = host_now_ms() + EVICT_WAIT_MS;
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < n; i++) {
        while (!evicted[i]->exited && host_now_ms() < until && !h->stopping) {
            pthread_mutex_unlock(&h->lock);
            llmr_sleep_ms(5);
            pthread_mutex_lock(&h->lock);
        }
        evicted[i]->refs--;
    }
    pthread_mutex_unlock(&h->lock);
}

static void *load_main(void *arg)
{
    load_job *job = arg;
    llmr_engine_host *h = job->h;
    hworker *hw = job->hw;
    hmodel *m = hw->model;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    outbox ob = {0};
    json_t *reply = NULL, *params = NULL;
    uint64_t t0 = llmr_now_ns();

    pthread_mutex_lock(&h->lock);
    char *name = strdup(m->name);
    json_t *open = json_pack("{s:s, s:s, s:s, s:s, s:s?}", "plugin", hw->plugin.library_path,
                             "model_dir", m->dir, "model_name", m->name, "format", m->format,
                             "gguf_file", m->gguf_file);
    pthread_mutex_unlock(&h->lock);

    llmr_worker_callbacks cb = host_worker_callbacks;
    cb.ctx = h;
    llmr_worker *w = NULL;
    llmr_status st = LLMR_OK;
    if (h->opt.check_files) { /* files changed on disk since their sync fail the load by name */
        const char *dir = json_string_value(json_object_get(open, "model_dir"));
        st = h->opt.check_files(h->opt.check_files_user, dir, &err);
    }
    if (st == LLMR_OK)
        st = llmr_worker_start(h->worker_exe, name, &cb, hw, &w, &err);
    pthread_mutex_lock(&h->lock);
    hw->w = w;
    hw->started_ms = host_now_ms();
    if (st == LLMR_OK && m->unload_asked) { /* unloaded before the worker was there to kill */
        llmr_strbuf_puts(&err, "cancelled: the model was unloaded");
        st = LLMR_CANCELLED;
    }
    pthread_mutex_unlock(&h->lock);
    if (st == LLMR_OK) {
        st = llmr_worker_call(w, LLMR_WIRE_OPEN, open, h->opt.load_timeout_ms, &reply, &err);
        const char *tok_err = json_string_value(json_object_get(reply, "tokenizer_error"));
        if (st == LLMR_OK && tok_err)
            llmr_log_warn(HOST_COMPONENT, "model %s: its tokenizer.json does not load, so tokens "
                                          "come without text: %s",
                          name, tok_err);
        json_decref(reply);
        reply = NULL;
    }
    if (st == LLMR_OK) {
        pthread_mutex_lock(&h->lock);
        params = load_params_json(m, hw, 0);
        pthread_mutex_unlock(&h->lock);
        st = llmr_worker_call(w, LLMR_WIRE_ESTIMATE, params, h->opt.load_timeout_ms, &reply, &err);
    }
    if (st == LLMR_OK) {
        hworker *evicted[32];
        size_t n_evicted = 0;
        pthread_mutex_lock(&h->lock);
        json_t *v = json_object_get(reply, "vram_bytes"), *r = json_object_get(reply, "ram_bytes");
        hw->est_vram = json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
        hw->est_ram = json_is_integer(r) ? (uint64_t)json_integer_value(r) : 0;
        st = fit(h, hw, &ob, evicted, &n_evicted, &err);
        hworker *old = m->current;
        if ((st == LLMR_OOM_VRAM || st == LLMR_OOM_RAM) && job->replace && old) {
            /* No room for both: the old worker drains first, new requests wait in the
             * queue, and the load goes on once its memory is back. */
            llmr_log_info(HOST_COMPONENT, "model %s: no room to load %s %s beside the running "
                                          "worker (%s); draining that one first",
                          m->name, hw->plugin.id, hw->plugin.version, llmr_strbuf_cstr(&err));
            llmr_strbuf_reset(&err);
            m->current = NULL;
            m->state = MODEL_LOADING;
            old->replacing = false;
            worker_retire(h, old, &ob);
            old->refs++;
            evicted[0] = old;
            n_evicted = 1;
            st = LLMR_OK;
        }
        uint64_t cap = budget_of(h, hw->plugin.id);
        json_decref(params);
        params = load_params_json(m, hw, cap);
        pthread_mutex_unlock(&h->lock);
        outbox_flush(h, &ob);
        if (n_evicted)
            wait_for_exits(h, evicted, n_evicted);
        if (st == LLMR_OK && old && !m->current) { /* drained first: check again */
            pthread_mutex_lock(&h->lock);
            st = fit(h, hw, &ob, evicted, &n_evicted, &err);
            pthread_mutex_unlock(&h->lock);
            outbox_flush(h, &ob);
            if (n_evicted)
                wait_for_exits(h, evicted, n_evicted);
        }
    }
    json_decref(reply);
    reply = NULL;
    if (st == LLMR_OK) {
        st = llmr_worker_call(w, LLMR_WIRE_LOAD, params, h->opt.load_timeout_ms, &reply, &err);
        if (st == LLMR_OK) {
            pthread_mutex_lock(&h->lock);
            json_t *b = json_object_get(reply, "max_batch"), *c = json_object_get(reply,
                                                                                   "context_length");
            hw->max_batch = json_is_integer(b) && json_integer_value(b) > 0
                                ? (uint32_t)json_integer_value(b)
                                : 1;
            hw->context_length = json_is_integer(c) ? (uint32_t)json_integer_value(c) : 0;
            json_t *kv = json_object_get(reply, "kv_capacity_tokens");
            hw->kv_capacity = json_is_integer(kv) && json_integer_value(kv) > 0
                                  ? (uint64_t)json_integer_value(kv)
                                  : 0;
            m->last_load_ms = (double)(llmr_now_ns() - t0) / 1e6;
            pthread_mutex_unlock(&h->lock);
        }
    }
    if (st == LLMR_TIMEOUT)
        llmr_worker_kill(w);
    else if (st == LLMR_INTERNAL && w && llmr_worker_exited(w))
        st = LLMR_LOAD_FAILED; /* the engine took its worker down while loading */
    json_decref(reply);
    json_decref(params);
    json_decref(open);

    pthread_mutex_lock(&h->lock);
    if (st != LLMR_OK && st != LLMR_OOM_VRAM && st != LLMR_OOM_RAM && st != LLMR_TIMEOUT &&
        st > LLMR_LOAD_FAILED)
        st = LLMR_LOAD_FAILED; /* node-side codes do not leave the engine layer */
    load_finished(h, job, st, llmr_strbuf_cstr(&err), &ob);
    pthread_mutex_unlock(&h->lock);
    outbox_flush(h, &ob);
    llmr_strbuf_free(&err);
    free(name);
    free(job);
    return NULL;
}

void load_start(llmr_engine_host *h, hmodel *m, bool replace)
{
    if (m->loading || !m->has_engine || h->stopping)
        return;
    hworker *hw = calloc(1, sizeof *hw);
    load_job *job = calloc(1, sizeof *job);
    if (!hw || !job || !plugin_ref_dup(&hw->plugin, &m->engine)) {
        free(hw);
        free(job);
        llmr_log_error(HOST_COMPONENT, "out of memory starting a load of %s", m->name);
        return;
    }
    hw->host = h;
    hw->model = m;
    hw->gpu = m->gpu;
    hw->phase = WORKER_LOADING;
    hw->refs = 1; /* the load thread's */
    hw->next = h->workers;
    h->workers = hw;
    m->loading = hw;
    if (!replace) {
        m->state = MODEL_LOADING;
        free(m->reason);
        m->reason = NULL;
    }
    h->loads_running++;
    job->h = h;
    job->hw = hw;
    job->replace = replace;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, load_main, job) != 0) {
        load_finished(h, job, LLMR_INTERNAL, "cannot start a thread for the load", &h->deferred);
        free(job);
    }
    pthread_attr_destroy(&attr);
}

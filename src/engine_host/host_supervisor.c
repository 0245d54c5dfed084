/* The EngineHost supervisor: a thread that looks at every worker and model a few
 * times a second.
 *
 *   watchdog   a request with no token for request_timeout_ms (cpu_request_timeout_ms
 *              on a worker on the CPU) is cancelled, the messages naming the setting; if it
 *              has not ended cancel_grace_ms later its worker is killed (the driver
 *              frees its GPU memory with the process) and its requests end TIMEOUT.
 *              A request still waiting for its first token while the same worker
 *              streams tokens for others is waiting its turn inside the engine (a
 *              continuous-batching engine admits requests as its KV cache allows), not
 *              stuck: it is let be
 *   health     serving workers are pinged every health_interval_ms; one silent for
 *              health_timeout_ms is killed
 *   draining   a retired worker exits when its last request is done
 *   restarts   a model whose worker crashed is loaded again after its backoff, and
 *              so is one that has requests waiting
 *   reaping    ended workers are freed once nothing refers to them
 *
 * and, called by the resource monitor, the memory pressure handler that unloads idle
 * models, least recently used first, while RAM or a GPU is above the threshold. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "engine_host/host_internal.h"

#define TICK_MS 25u

unsigned host_request_timeout_ms(const llmr_engine_host *h, const hworker *hw)
{
    return hw->gpu < 0 ? h->opt.cpu_request_timeout_ms : h->opt.request_timeout_ms;
}

void host_request_timeout_words(const llmr_engine_host *h, const hworker *hw, char *buf, size_t size)
{
    llmr_config_key key = hw->gpu < 0 ? LLMR_CONFIG_CPU_REQUEST_TIMEOUT : LLMR_CONFIG_REQUEST_TIMEOUT;
    llmr_strbuf flag = LLMR_STRBUF_INIT, env = LLMR_STRBUF_INIT;
    llmr_config_flag_name(key, &flag);
    llmr_config_env_name(key, &env);
    /* "--cpu-request-timeout" without its dashes, with underscores: the setting's name */
    char name[64];
    snprintf(name, sizeof name, "%s", llmr_strbuf_cstr(&flag) + (flag.len > 2 ? 2 : 0));
    for (char *c = name; *c; c++)
        *c = *c == '-' ? '_' : *c;
    snprintf(buf, size, "%s = %g s, the limit for a model on %s; raise it with %s or %s", name,
             (double)host_request_timeout_ms(h, hw) / 1000.0, hw->gpu < 0 ? "the CPU" : "a GPU",
             llmr_strbuf_cstr(&flag), llmr_strbuf_cstr(&env));
    llmr_strbuf_free(&flag);
    llmr_strbuf_free(&env);
}

static void watch_requests(llmr_engine_host *h, hworker *hw, uint64_t now, outbox *ob)
{
    const llmr_engine_host_options *o = &h->opt;
    unsigned limit_ms = host_request_timeout_ms(h, hw);
    bool streaming = hw->token_ms && now - hw->token_ms <= limit_ms;
    char setting[256];
    for (hreq *r = hw->running; r; r = r->next) {
        bool waiting_its_turn = !r->got_token && streaming;
        if (!r->timing_out && !waiting_its_turn && now - r->progress_ms > limit_ms) {
            r->timing_out = true;
            r->cancel_sent_ms = now;
            outbox_send(ob, hw, LLMR_WIRE_CANCEL, r->id, NULL);
            host_request_timeout_words(h, hw, setting, sizeof setting);
            llmr_log_warn(HOST_COMPONENT, "request %llu on model %s: no token for %.1f s (%s); "
                                          "cancelling it",
                          (unsigned long long)r->id, hw->model->name,
                          (double)(now - r->progress_ms) / 1000.0, setting);
        } else if (r->timing_out && now - r->cancel_sent_ms > o->cancel_grace_ms &&
                   !hw->kill_reason[0]) {
            host_request_timeout_words(h, hw, setting, sizeof setting);
            snprintf(hw->kill_reason, sizeof hw->kill_reason,
                     "request %llu made no progress for %.1f s (%s) and did not stop within %.1f s "
                     "of its cancel, so the engine worker of model %s (%s %s) was stopped",
                     (unsigned long long)r->id, (double)limit_ms / 1000.0, setting,
                     (double)o->cancel_grace_ms / 1000.0, hw->model->name, hw->plugin.id,
                     hw->plugin.version);
            hw->kill_status = LLMR_TIMEOUT;
            hw->model->timeouts++;
            h->watchdog_kills++;
            llmr_log_error(HOST_COMPONENT, "%s (worker %d)", hw->kill_reason,
                           llmr_worker_pid(hw->w));
            outbox_kill(ob, hw);
        }
    }
}

static void watch_health(llmr_engine_host *h, hworker *hw, uint64_t now, outbox *ob)
{
    const llmr_engine_host_options *o = &h->opt;
    if (hw->kill_reason[0])
        return;
    uint64_t heard = hw->pong_ms > hw->loaded_ms ? hw->pong_ms : hw->loaded_ms;
    if (now - heard > o->health_timeout_ms) {
        snprintf(hw->kill_reason, sizeof hw->kill_reason,
                 "the engine worker of model %s (%s %s) did not answer health checks for %.1f s "
                 "and was stopped",
                 hw->model->name, hw->plugin.id, hw->plugin.version,
                 (double)(now - heard) / 1000.0);
        hw->kill_status = LLMR_INTERNAL;
        llmr_log_error(HOST_COMPONENT, "%s (worker %d)", hw->kill_reason, llmr_worker_pid(hw->w));
        outbox_kill(ob, hw);
        return;
    }
    if (now - hw->ping_sent_ms >= o->health_interval_ms) {
        hw->ping_sent_ms = now;
        outbox_send(ob, hw, LLMR_WIRE_PING, 0, NULL);
    }
}

/* One pass; returns workers to free (unlinked), which the caller frees unlocked. */
static hworker *tick(llmr_engine_host *h, outbox *ob)
{
    uint64_t now = host_now_ms();
    for (hworker *hw = h->workers; hw; hw = hw->next) {
        if (hw->exited || !hw->w)
            continue;
        if (hw->phase == WORKER_SERVING || hw->phase == WORKER_DRAINING) {
            watch_requests(h, hw, now, ob);
            watch_health(h, hw, now, ob);
        }
        if (hw->phase == WORKER_DRAINING && hw->in_flight == 0) {
            hw->phase = WORKER_EXITING;
            outbox_send(ob, hw, LLMR_WIRE_EXIT, 0, NULL);
        }
    }
    for (hmodel *m = h->models; m; m = m->next) {
        if (m->loading || m->current || !m->has_engine || now < m->retry_at_ms)
            continue;
        if ((m->state == MODEL_IDLE || m->state == MODEL_FAILED) && (m->keep_loaded || m->queue_head))
            load_start(h, m, false);
    }
    hworker *dead = NULL;
    for (hworker **pp = &h->workers; *pp;) {
        hworker *hw = *pp;
        bool gone = hw->exited || (!hw->w && hw->phase == WORKER_EXITING);
        if (gone && hw->refs == 0) {
            *pp = hw->next;
            hw->next = dead;
            dead = hw;
        } else {
            pp = &hw->next;
        }
    }
    return dead;
}

void *supervisor_main(void *arg)
{
    llmr_engine_host *h = arg;
    pthread_mutex_lock(&h->lock);
    while (!h->stopping) {
        outbox ob = h->deferred;
        memset(&h->deferred, 0, sizeof h->deferred);
        hworker *dead = tick(h, &ob);
        pthread_mutex_unlock(&h->lock);
        outbox_flush(h, &ob);
        while (dead) {
            hworker *next = dead->next;
            llmr_worker_free(dead->w, 0);
            plugin_ref_free(&dead->plugin);
            free(dead);
            dead = next;
        }
        llmr_sleep_ms(TICK_MS);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

void host_on_pressure(void *ctx, const llmr_resource_snapshot *snap, llmr_resource_kind kind,
                      int gpu, double used_fraction)
{
    llmr_engine_host *h = ctx;
    bool vram = kind == LLMR_RESOURCE_VRAM;
    if (vram && (gpu < 0 || gpu >= LLMR_MAX_GPUS))
        return;
    size_t slot = vram ? 1u + (size_t)gpu : 0u;
    outbox ob = {0};
    pthread_mutex_lock(&h->lock);
    uint64_t now = host_now_ms();
    if (now < h->pressure_quiet_until_ms[slot]) {
        pthread_mutex_unlock(&h->lock);
        return;
    }
    double thr = llmr_resource_monitor_threshold(h->monitor);
    uint64_t total = vram ? snap->gpus[gpu].total_bytes : snap->ram.total_bytes;
    uint64_t limit = (uint64_t)(thr * (double)total);
    uint64_t used = host_predicted_use(h, snap, vram, gpu, NULL);
    char where[64];
    if (vram)
        snprintf(where, sizeof where, "GPU %d memory", gpu);
    else
        snprintf(where, sizeof where, "host memory");
    if (used > limit) {
        hworker *pick[32];
        size_t n = host_pick_idle(h, NULL, vram, gpu, used, 0, limit, true, pick, 32);
        char why[160];
        snprintf(why, sizeof why, "%s is at %.1f%%, above the %.0f%% threshold", where,
                 used_fraction * 100, thr * 100);
        for (size_t i = 0; i < n; i++)
            host_unload_idle(h, pick[i], why, &ob);
        if (n == 0)
            llmr_log_warn(HOST_COMPONENT, "%s is at %.1f%%, above the %.0f%% threshold, and no "
                                          "idle model is left to unload",
                          where, used_fraction * 100, thr * 100);
        /* Give the workers time to end and a new reading to show it. */
        h->pressure_quiet_until_ms[slot] = now + 2u * h->opt.monitor_interval_ms;
    }
    pthread_mutex_unlock(&h->lock);
    outbox_flush(h, &ob);
}

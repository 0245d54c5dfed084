/* EngineHost status and metrics: the JSON `llmr node status` shows (plugins, refused
 * plugins, models with their state, reason, engine, worker and memory, and the memory
 * readings) and the Prometheus text of its counters. */
#include <stdlib.h>
#include <string.h>

#include "engine_host/host_internal.h"


static json_t *model_json(llmr_engine_host *h, const hmodel *m, uint64_t now)
{
    /* A failed load whose backoff is over is idle again: the next request loads it
     * (the reason stays, saying what went wrong last time). */
    model_state state = m->state == MODEL_FAILED && now >= m->retry_at_ms ? MODEL_IDLE : m->state;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:I, s:s}", "name", m->name, "state",
                          model_state_name(state), "format", m->format, "runtime", m->runtime,
                          "architecture", m->architecture, "weight_bytes",
                          (json_int_t)m->total_bytes, "dir", m->dir);
    if (m->reason) {
        json_object_set_new(o, "reason", json_string(m->reason));
        json_object_set_new(o, "reason_code", json_string(llmr_status_name(m->reason_code)));
        if (m->state == MODEL_FAILED)
            json_object_set_new(o, "retry_in_s", json_real(now >= m->retry_at_ms ? 0.0
                                                           : (double)(m->retry_at_ms - now) / 1000.0));
    }
    if (m->has_engine) {
        json_object_set_new(o, "engine", json_sprintf("%s %s", m->engine.id, m->engine.version));
        json_object_set_new(o, "gpu", m->gpu >= 0 ? json_integer(m->gpu) : json_null());
    }
    const hworker *w = m->current;
    if (w) {
        json_t *wj = json_pack("{s:i, s:I, s:I, s:I, s:i, s:i, s:i}", "pid",
                               llmr_worker_pid(w->w), "vram_bytes", (json_int_t)worker_vram(w),
                               "ram_bytes", (json_int_t)worker_ram(w), "estimate_vram_bytes",
                               (json_int_t)w->est_vram, "in_flight", (int)w->in_flight,
                               "max_batch", (int)w->max_batch, "context_length",
                               (int)w->context_length);
        json_object_set_new(wj, "engine", json_sprintf("%s %s", w->plugin.id, w->plugin.version));
        json_object_set_new(o, "worker", wj);
        json_object_set_new(o, "loaded_since", json_integer((json_int_t)m->loaded_since));
    }
    json_object_set_new(o, "queued", json_integer(m->queued));
    json_object_set_new(o, "last_used_s_ago",
                        m->last_used_ms ? json_real((double)(now - m->last_used_ms) / 1000.0)
                                        : json_null());
    json_object_set_new(o, "loads", json_integer((json_int_t)m->loads));
    json_object_set_new(o, "restarts", json_integer((json_int_t)m->restarts));
    json_object_set_new(o, "last_load_ms", json_real(m->last_load_ms));
    (void)h;
    return o;
}

json_t *llmr_engine_host_status(llmr_engine_host *h)
{
    json_t *o = json_object(), *plugins = json_array(), *models = json_array();
    pthread_mutex_lock(&h->lock);
    uint64_t now = host_now_ms();
    for (size_t i = 0; i < llmr_engine_registry_count(h->registry); i++) {
        const llmr_plugin_manifest *m = llmr_engine_registry_get(h->registry, i);
        json_t *p = llmr_plugin_manifest_json(m);
        json_object_set(p, "engine", json_object_get(h->engines, m->id));
        json_array_append_new(plugins, p);
    }
    for (const hmodel *m = h->models; m; m = m->next)
        json_array_append_new(models, model_json(h, m, now));
    json_object_set_new(o, "plugins", plugins);
    json_object_set(o, "refused_plugins", h->refused);
    json_object_set_new(o, "models", models);
    pthread_mutex_unlock(&h->lock);
    llmr_resource_snapshot snap;
    llmr_resource_monitor_latest(h->monitor, &snap);
    json_t *res = json_object();
    if (snap.have_ram)
        json_object_set_new(res, "ram", json_pack("{s:I, s:I}", "total_bytes",
                                                  (json_int_t)snap.ram.total_bytes, "used_bytes",
                                                  (json_int_t)snap.ram.used_bytes));
    json_t *gpus = json_array();
    for (uint32_t g = 0; snap.have_gpus && g < snap.gpu_count; g++) {
        json_t *gj = json_pack("{s:i, s:s, s:I, s:I}", "index", (int)g, "name", snap.gpus[g].name,
                               "total_bytes", (json_int_t)snap.gpus[g].total_bytes, "used_bytes",
                               (json_int_t)snap.gpus[g].used_bytes);
        json_object_set_new(gj, "compute_capability",
                            json_sprintf("%d.%d", snap.gpus[g].cc_major, snap.gpus[g].cc_minor));
        json_array_append_new(gpus, gj);
    }
    json_object_set_new(res, "gpus", gpus);
    if (snap.gpu_note[0])
        json_object_set_new(res, "gpu_note", json_string(snap.gpu_note));
    json_object_set_new(res, "threshold", json_real(llmr_resource_monitor_threshold(h->monitor)));
    json_object_set_new(o, "resources", res);
    return o;
}

static void metric_escape(llmr_strbuf *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            llmr_strbuf_putc(out, '\\');
        if (*s == '\n')
            llmr_strbuf_puts(out, "\\n");
        else
            llmr_strbuf_putc(out, *s);
    }
}

void llmr_engine_host_metrics(llmr_engine_host *h, llmr_strbuf *out)
{
    static const struct {
        const char *name, *help;
    } per_model[] = {
        {"llmr_model_requests_total", "Requests submitted to the model."},
        {"llmr_model_tokens_total", "Tokens the model generated."},
        {"llmr_model_failed_requests_total", "Requests that ended with an error."},
        {"llmr_model_timeouts_total", "Requests the watchdog ended."},
        {"llmr_model_loads_total", "Successful loads."},
        {"llmr_model_restarts_total", "Worker restarts after a crash, hang or kill."},
        {"llmr_model_queued_requests", "Requests waiting for the model."},
        {"llmr_model_ready", "1 when the model is loaded and serving."},
        {"llmr_kv_cache_used_tokens",
         "Positions of the model's KV cache in use (engines that report it, at the last "
         "health check)."},
        {"llmr_kv_cache_capacity_tokens",
         "Positions the model's KV cache holds for all requests together (engines that "
         "report it)."},
    };
    pthread_mutex_lock(&h->lock);
    for (size_t k = 0; k < sizeof per_model / sizeof per_model[0]; k++) {
        bool gauge = strstr(per_model[k].name, "_total") == NULL;
        llmr_strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", per_model[k].name,
                           per_model[k].help, per_model[k].name, gauge ? "gauge" : "counter");
        for (const hmodel *m = h->models; m; m = m->next) {
            uint64_t v = k == 0   ? m->requests
                         : k == 1 ? m->tokens
                         : k == 2 ? m->failed_requests
                         : k == 3 ? m->timeouts
                         : k == 4 ? m->loads
                         : k == 5 ? m->restarts
                         : k == 6 ? m->queued
                         : k == 7 ? (m->state == MODEL_READY)
                         : k == 8 ? (m->current ? m->current->kv_used : 0)
                                  : (m->current ? m->current->kv_capacity : 0);
            if (k >= 8 && !(m->current && m->current->kv_capacity))
                continue; /* the engine does not say */
            llmr_strbuf_printf(out, "%s{model=\"", per_model[k].name);
            metric_escape(out, m->name);
            llmr_strbuf_printf(out, "\"} %llu\n", (unsigned long long)v);
        }
    }
    /* the names dashboards built for vLLM look for (docs/node.md, "Metrics") */
    llmr_strbuf_puts(out, "# HELP llmr_num_requests_running Requests the model's engine is generating now.\n"
                          "# TYPE llmr_num_requests_running gauge\n");
    for (const hmodel *m = h->models; m; m = m->next) {
        llmr_strbuf_puts(out, "llmr_num_requests_running{model=\"");
        metric_escape(out, m->name);
        llmr_strbuf_printf(out, "\"} %u\n", m->current ? m->current->in_flight : 0u);
    }
    llmr_strbuf_puts(out, "# HELP llmr_num_requests_waiting Requests waiting for the model.\n"
                          "# TYPE llmr_num_requests_waiting gauge\n");
    for (const hmodel *m = h->models; m; m = m->next) {
        llmr_strbuf_puts(out, "llmr_num_requests_waiting{model=\"");
        metric_escape(out, m->name);
        llmr_strbuf_printf(out, "\"} %u\n", m->queued);
    }
    llmr_strbuf_puts(out, "# HELP llmr_kv_cache_usage_ratio Fraction of the model's KV cache in use, 0 to 1 "
                          "(engines that report it).\n# TYPE llmr_kv_cache_usage_ratio gauge\n");
    for (const hmodel *m = h->models; m; m = m->next) {
        if (!(m->current && m->current->kv_capacity))
            continue;
        llmr_strbuf_puts(out, "llmr_kv_cache_usage_ratio{model=\"");
        metric_escape(out, m->name);
        llmr_strbuf_printf(out, "\"} %.6g\n", (double)m->current->kv_used / (double)m->current->kv_capacity);
    }
    llmr_strbuf_printf(out,
                       "# HELP llmr_engine_watchdog_kills_total Workers killed for a stuck "
                       "request.\n# TYPE llmr_engine_watchdog_kills_total counter\n"
                       "llmr_engine_watchdog_kills_total %llu\n"
                       "# HELP llmr_engine_crashes_total Workers that ended unasked.\n"
                       "# TYPE llmr_engine_crashes_total counter\nllmr_engine_crashes_total %llu\n"
                       "# HELP llmr_engine_lru_unloads_total Idle models unloaded for memory.\n"
                       "# TYPE llmr_engine_lru_unloads_total counter\n"
                       "llmr_engine_lru_unloads_total %llu\n"
                       "# HELP llmr_engine_leaks_total Workers replaced for holding memory "
                       "while idle.\n# TYPE llmr_engine_leaks_total counter\n"
                       "llmr_engine_leaks_total %llu\n",
                       (unsigned long long)h->watchdog_kills, (unsigned long long)h->crashes,
                       (unsigned long long)h->lru_unloads, (unsigned long long)h->leaks);
    pthread_mutex_unlock(&h->lock);
    llmr_resource_monitor_metrics(h->monitor, out);
}

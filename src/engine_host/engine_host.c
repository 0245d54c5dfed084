/* The EngineHost API: creating and freeing the host, its models, submitting and
 * cancelling requests, status and metrics.  See engine_host.h; the internals are in
 * host_internal.h. */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/byte_size.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/fs_util.h"
#include "engine_host/host_internal.h"
#include "engine_host/model_desc.h"
#include "engine_host/stop_strings.h"
#include "storage/model_storage.h"

#define MODEL_NAME_MAX 128

/* ---- small shared helpers ------------------------------------------------------- */

uint64_t host_now_ms(void)
{
    return llmr_now_ms();
}

hmodel *host_find_model(llmr_engine_host *h, const char *name)
{
    for (hmodel *m = h->models; m; m = m->next)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

void plugin_ref_free(plugin_ref *p)
{
    free(p->id);
    free(p->version);
    free(p->library_path);
    memset(p, 0, sizeof *p);
}

/* Fills dst with copies of the strings and the given identity. */
static bool plugin_ref_set(plugin_ref *dst, const char *id, const char *version, const char *lib,
                           const plugin_ref *identity)
{
    *dst = *identity;
    dst->id = strdup(id);
    dst->version = strdup(version);
    dst->library_path = strdup(lib ? lib : "");
    if (dst->id && dst->version && dst->library_path)
        return true;
    plugin_ref_free(dst);
    return false;
}

bool plugin_ref_copy(plugin_ref *dst, const llmr_plugin_manifest *m)
{
    plugin_ref identity = {NULL, NULL, NULL, m->has_lib_identity, m->lib_dev, m->lib_ino,
                           m->lib_size, m->lib_mtime_ns};
    return plugin_ref_set(dst, m->id, m->version, m->library_path, &identity);
}

bool plugin_ref_dup(plugin_ref *dst, const plugin_ref *src)
{
    return plugin_ref_set(dst, src->id, src->version, src->library_path, src);
}

bool plugin_ref_same_build(const plugin_ref *p, const llmr_plugin_manifest *m)
{
    return p->has_identity && m->has_lib_identity && strcmp(p->id, m->id) == 0 &&
           strcmp(p->version, m->version) == 0 && p->dev == m->lib_dev && p->ino == m->lib_ino &&
           p->size == m->lib_size && p->mtime_ns == m->lib_mtime_ns;
}

const char *model_state_name(model_state s)
{
    switch (s) {
    case MODEL_NOT_READY:
        return "not_ready";
    case MODEL_IDLE:
        return "idle";
    case MODEL_LOADING:
        return "loading";
    case MODEL_READY:
        return "ready";
    case MODEL_FAILED:
        return "failed";
    }
    return "?";
}

void model_set_reason(hmodel *m, model_state state, llmr_status code, const char *fmt, ...)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    free(m->reason);
    m->reason = sb.len ? llmr_strbuf_take(&sb) : NULL;
    llmr_strbuf_free(&sb);
    m->state = state;
    m->reason_code = code;
}

uint64_t host_backoff_ms(const llmr_engine_host *h, unsigned failures)
{
    uint64_t d = h->opt.restart_backoff_ms;
    for (unsigned i = 1; i < failures && d < h->opt.restart_backoff_max_ms; i++)
        d *= 2;
    return d < h->opt.restart_backoff_max_ms ? d : h->opt.restart_backoff_max_ms;
}

/* ---- VRAM budgets ------------------------------------------------------------------ */

static llmr_status add_budget(void *ctx, const char *name, size_t name_len, uint64_t bytes)
{
    llmr_engine_host *h = ctx;
    budget *b = realloc(h->budgets, (h->budget_count + 1) * sizeof *b);
    if (!b)
        return LLMR_OOM_RAM;
    h->budgets = b;
    b[h->budget_count].plugin_id = strndup(name, name_len);
    b[h->budget_count].bytes = bytes;
    if (!b[h->budget_count].plugin_id)
        return LLMR_OOM_RAM;
    h->budget_count++;
    return LLMR_OK;
}

/* ---- create and free ---------------------------------------------------------------- */

void llmr_engine_host_options_default(llmr_engine_host_options *o)
{
    memset(o, 0, sizeof *o);
    o->request_timeout_ms = 30000;
    o->cpu_request_timeout_ms = 600000;
    o->cancel_grace_ms = 5000;
    o->load_timeout_ms = 600000;
    o->health_interval_ms = 1000;
    o->health_timeout_ms = 10000;
    o->restart_backoff_ms = 1000;
    o->restart_backoff_max_ms = 60000;
    o->max_queue = 256;
    o->memory_threshold = 0.90;
    o->monitor_interval_ms = 1000;
}

static char *own_executable(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

llmr_status llmr_engine_host_create(const llmr_engine_host_options *o, llmr_engine_host **out,
                                    llmr_problems *problems, llmr_strbuf *err)
{
    *out = NULL;
    llmr_engine_host *h = calloc(1, sizeof *h);
    if (!h) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    h->opt = *o;
    h->opt.vram_budgets = NULL;
    h->opt.plugin_dirs = NULL;
    h->next_request_id = 1;
    pthread_mutex_init(&h->lock, NULL);
    llmr_cond_init_monotonic(&h->changed);
    llmr_status st = llmr_byte_size_list_parse(o->vram_budgets, add_budget, h, err);
    h->worker_exe = o->worker_exe ? strdup(o->worker_exe) : own_executable();
    h->plugin_dirs = calloc(o->plugin_dir_count + 1, sizeof *h->plugin_dirs);
    if (st == LLMR_OK && (!h->worker_exe || !h->plugin_dirs)) {
        llmr_strbuf_puts(err, "cannot tell where the llmr binary is (for engine workers)");
        st = LLMR_INTERNAL;
    }
    for (size_t i = 0; st == LLMR_OK && i < o->plugin_dir_count; i++)
        if (!(h->plugin_dirs[i] = strdup(o->plugin_dirs[i])))
            st = LLMR_OOM_RAM;
    if (st == LLMR_OK) {
        llmr_resource_monitor_options mo;
        llmr_resource_monitor_options_default(&mo);
        mo.interval_ms = o->monitor_interval_ms;
        mo.threshold = o->memory_threshold;
        mo.reader = o->reader;
        mo.nvml_library = o->nvml_library;
        mo.on_pressure = host_on_pressure;
        mo.pressure_ctx = h;
        mo.no_thread = o->monitor_no_thread;
        st = llmr_resource_monitor_start(&mo, &h->monitor, err);
    }
    if (st == LLMR_OK) {
        h->registry = plugins_scan(h, problems, &h->refused, &h->engines);
        if (!h->registry) {
            llmr_strbuf_puts(err, "out of memory scanning plugins");
            st = LLMR_OOM_RAM;
        }
    }
    if (st == LLMR_OK && pthread_create(&h->supervisor, NULL, supervisor_main, h) != 0) {
        llmr_strbuf_puts(err, "cannot start the supervisor thread");
        st = LLMR_INTERNAL;
        h->stopping = true; /* so free does not join it */
    }
    if (st != LLMR_OK) {
        h->stopping = true;
        llmr_engine_host_free(h);
        return st;
    }
    *out = h;
    return LLMR_OK;
}

static void free_model(hmodel *m)
{
    free(m->name);
    free(m->dir);
    free(m->format);
    free(m->gguf_file);
    free(m->options_json);
    free(m->runtime);
    free(m->architecture);
    free(m->reason);
    if (m->has_engine)
        plugin_ref_free(&m->engine);
    free(m);
}

void llmr_engine_host_free(llmr_engine_host *h)
{
    if (!h)
        return;
    outbox ob = {0};
    pthread_mutex_lock(&h->lock);
    bool had_supervisor = !h->stopping;
    h->stopping = true;
    for (hmodel *m = h->models; m; m = m->next)
        requests_fail_queue(m, &ob, LLMR_CANCELLED, "the node is shutting down");
    for (hworker *hw = h->workers; hw; hw = hw->next) {
        while (hw->running)
            outbox_final(&ob, hw->running, LLMR_CANCELLED, LLMR_ENGINE_FINISH_CANCELLED,
                         "the node is shutting down");
        if (hw->w && !hw->exited && hw->phase == WORKER_LOADING) {
            outbox_kill(&ob, hw); /* a load may take minutes: do not wait for it */
        } else if (hw->w && !hw->exited) {
            hw->phase = WORKER_EXITING;
            outbox_send(&ob, hw, LLMR_WIRE_EXIT, 0, NULL);
        }
    }
    pthread_mutex_unlock(&h->lock);
    outbox_flush(h, &ob);
    if (had_supervisor)
        pthread_join(h->supervisor, NULL);
    /* Loads still running see `stopping`; wait for them to finish. */
    pthread_mutex_lock(&h->lock);
    while (h->loads_running)
        pthread_cond_wait(&h->changed, &h->lock);
    outbox late = h->deferred;
    memset(&h->deferred, 0, sizeof h->deferred);
    pthread_mutex_unlock(&h->lock);
    outbox_flush(h, &late);
    llmr_resource_monitor_stop(h->monitor);
    while (h->workers) {
        hworker *hw = h->workers;
        h->workers = hw->next;
        if (hw->w)
            llmr_worker_free(hw->w, 5000);
        plugin_ref_free(&hw->plugin);
        free(hw);
    }
    while (h->models) {
        hmodel *m = h->models;
        h->models = m->next;
        free_model(m);
    }
    while (h->removed) {
        hmodel *m = h->removed;
        h->removed = m->next;
        free_model(m);
    }
    for (size_t i = 0; i < h->budget_count; i++)
        free(h->budgets[i].plugin_id);
    free(h->budgets);
    llmr_engine_registry_free(h->registry);
    json_decref(h->refused);
    json_decref(h->engines);
    for (size_t i = 0; h->plugin_dirs && h->plugin_dirs[i]; i++)
        free(h->plugin_dirs[i]);
    free(h->plugin_dirs);
    free(h->worker_exe);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->changed);
    free(h);
}

llmr_resource_monitor *llmr_engine_host_monitor(llmr_engine_host *h)
{
    return h->monitor;
}

/* ---- models --------------------------------------------------------------------- */

static bool valid_model_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > MODEL_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && !strchr("._:/-", c))
            return false;
    }
    return true;
}

static char *dup_opt(const char *s)
{
    return s ? strdup(s) : NULL;
}

llmr_status llmr_engine_host_add_model(llmr_engine_host *h, const llmr_model_spec *spec,
                                       llmr_strbuf *err)
{
    if (!spec->name || !valid_model_name(spec->name)) {
        llmr_strbuf_puts(err, "a model name is 1 to 128 characters of letters, digits and ._:/-");
        return LLMR_INVALID_ARGUMENT;
    }
    if (spec->options_json) {
        json_t *o = json_loads(spec->options_json, 0, NULL);
        bool ok = json_is_object(o);
        json_decref(o);
        if (!ok) {
            llmr_strbuf_printf(err, "the engine options of model %s are not a JSON object",
                               spec->name);
            return LLMR_INVALID_ARGUMENT;
        }
    }
    llmr_model_options mo;
    llmr_model_options_default(&mo);
    mo.gguf_file = spec->gguf_file;
    bool directml = spec->format && strcmp(spec->format, "directml") == 0;
    if (spec->format && !directml && !llmr_model_format_parse(spec->format, &mo.format)) {
        llmr_strbuf_printf(err, "unknown format \"%.32s\" (safetensors, gguf, directml)",
                           spec->format);
        return LLMR_INVALID_ARGUMENT;
    }
    hmodel *m = calloc(1, sizeof *m);
    if (!m) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_model *files = NULL;
    llmr_status st = LLMR_OK;
    if (directml) {
        /* DirectML models are files for the DirectML runtime; nothing here reads them,
         * but one of them must be there. */
        bool found = false;
        for (size_t i = 0; llmr_directml_model_files[i] && !found; i++) {
            char *path = llmr_path_join(spec->dir, llmr_directml_model_files[i]);
            found = path && access(path, R_OK) == 0;
            free(path);
        }
        if (!found) {
            llmr_strbuf_printf(err, "model %s: %s holds neither model.directml.bin nor "
                                    "model.dml.bin, the files of a DirectML model",
                               spec->name, spec->dir);
            llmr_problems_free(&problems);
            free(m);
            return LLMR_NOT_FOUND;
        }
        m->runtime = strdup("gpt_oss");
        m->format = strdup("directml");
    } else {
        st = llmr_model_open(spec->dir, &mo, &files, &problems);
        if (st != LLMR_OK) {
            llmr_strbuf_printf(err, "model %s: ", spec->name);
            for (size_t i = 0; i < problems.count; i++)
                llmr_strbuf_printf(err, "%s%s%s%s", i ? "; " : "",
                                   problems.items[i].file ? problems.items[i].file : "",
                                   problems.items[i].file ? ": " : "", problems.items[i].message);
            llmr_problems_free(&problems);
            free(m);
            return st;
        }
        m->format = strdup(llmr_model_format_name(files->format));
        m->runtime = dup_opt(llmr_runtime_name(files->runtime));
        m->architecture = dup_opt(files->architecture);
        m->total_bytes = files->total_bytes;
    }
    llmr_problems_free(&problems);
    m->name = strdup(spec->name);
    m->dir = strdup(files ? files->dir : spec->dir);
    m->gguf_file = dup_opt(spec->gguf_file);
    m->options_json = dup_opt(spec->options_json);
    m->context_length = spec->context_length;
    m->gpu = -1;
    if (!m->runtime)
        model_set_reason(m, MODEL_NOT_READY, LLMR_UNSUPPORTED, "%s",
                         files && files->unsupported_reason ? files->unsupported_reason
                                                            : "no engine runs this model");
    llmr_model_close(files);
    if (!m->name || !m->dir || !m->format) {
        free_model(m);
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    pthread_mutex_lock(&h->lock);
    if (host_find_model(h, spec->name)) {
        pthread_mutex_unlock(&h->lock);
        llmr_strbuf_printf(err, "a model named %s is registered already", spec->name);
        free_model(m);
        return LLMR_INVALID_ARGUMENT;
    }
    if (m->runtime) {
        m->state = MODEL_IDLE;
        model_choose_engine(h, m);
    }
    m->next = h->models;
    h->models = m;
    if (m->state == MODEL_NOT_READY)
        llmr_log_warn(HOST_COMPONENT, "model %s is not ready: %s", m->name, m->reason);
    pthread_mutex_unlock(&h->lock);
    return LLMR_OK;
}

llmr_status llmr_engine_host_load(llmr_engine_host *h, const char *name, llmr_strbuf *err)
{
    pthread_mutex_lock(&h->lock);
    hmodel *m = host_find_model(h, name);
    llmr_status st = LLMR_OK;
    if (!m) {
        llmr_strbuf_printf(err, "no model named %s", name);
        st = LLMR_NOT_FOUND;
    } else if (m->state == MODEL_NOT_READY) {
        llmr_strbuf_printf(err, "model %s is not ready: %s", name, m->reason);
        st = m->reason_code;
    } else {
        if (!m->current && !m->loading)
            load_start(h, m, false);
        while (m->loading && !m->current)
            pthread_cond_wait(&h->changed, &h->lock);
        if (!m->current) {
            llmr_strbuf_printf(err, "%s", m->reason ? m->reason : "the load failed");
            st = m->reason_code != LLMR_OK ? m->reason_code : LLMR_LOAD_FAILED;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return st;
}

llmr_status llmr_engine_host_unload(llmr_engine_host *h, const char *name, llmr_strbuf *err)
{
    outbox ob = {0};
    pthread_mutex_lock(&h->lock);
    hmodel *m = host_find_model(h, name);
    llmr_status st = LLMR_OK;
    hworker *loading = NULL;
    llmr_worker *kill_w = NULL;
    if (m && m->loading) { /* cancel the load: its worker goes (killed after the lock) */
        m->unload_asked = true;
        loading = m->loading;
        loading->refs++;
        kill_w = loading->w;
        llmr_log_info(HOST_COMPONENT, "model %s: unloading while it loads: the load is cancelled", name);
    }
    if (!m) {
        llmr_strbuf_printf(err, "no model named %s", name);
        st = LLMR_NOT_FOUND;
    } else if (m->current) {
        hworker *hw = m->current;
        m->current = NULL;
        m->keep_loaded = false;
        m->state = m->has_engine ? MODEL_IDLE : MODEL_NOT_READY;
        worker_retire(h, hw, &ob);
        llmr_log_info(HOST_COMPONENT, "model %s unloaded (its worker ends after %u running "
                                      "request(s))",
                      name, hw->in_flight);
    }
    pthread_mutex_unlock(&h->lock);
    outbox_flush(h, &ob);
    if (loading) {
        if (kill_w) /* (not started yet: the load sees unload_asked before its first call) */
            llmr_worker_kill(kill_w);
        pthread_mutex_lock(&h->lock);
        loading->refs--;
        pthread_mutex_unlock(&h->lock);
    }
    return st;
}

llmr_status llmr_engine_host_remove_model(llmr_engine_host *h, const char *name, llmr_strbuf *err)
{
    outbox ob = {0};
    pthread_mutex_lock(&h->lock);
    hmodel **pp = &h->models;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    hmodel *m = *pp;
    llmr_status st = LLMR_OK;
    if (!m) {
        llmr_strbuf_printf(err, "no model named %s", name);
        st = LLMR_NOT_FOUND;
    } else {
        *pp = m->next;
        m->next = h->removed;
        h->removed = m;
        m->removed = true;
        m->keep_loaded = false;
        requests_fail_queue(m, &ob, LLMR_NOT_FOUND, "the model was removed from this node");
        if (m->current) {
            hworker *hw = m->current;
            m->current = NULL;
            worker_retire(h, hw, &ob);
        }
        m->state = MODEL_IDLE;
        llmr_log_info(HOST_COMPONENT, "model %s removed from this node", name);
    }
    pthread_mutex_unlock(&h->lock);
    outbox_flush(h, &ob);
    return st;
}

/* ---- requests ------------------------------------------------------------------- */

llmr_status llmr_engine_host_submit(llmr_engine_host *h, const llmr_gen_request *req,
                                    llmr_gen_event_fn on_event, void *user,
                                    uint64_t *request_id, llmr_strbuf *err)
{
    const llmr_engine_request_params *p = &req->params;
    if (!req->model || !on_event) {
        llmr_strbuf_puts(err, "a request needs a model and an event callback");
        return LLMR_INVALID_ARGUMENT;
    }
    if (!p->prompt || p->prompt_len == 0) {
        llmr_strbuf_puts(err, "the prompt is empty: it needs at least one token");
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_stop_matcher check;
    llmr_status st = llmr_stop_matcher_init(&check, req->stop_strings, req->stop_lens,
                                            req->stop_count, err);
    llmr_stop_matcher_free(&check);
    if (st != LLMR_OK)
        return st;
    hreq *r = calloc(1, sizeof *r);
    if (!r) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    pthread_mutex_init(&r->deliver, NULL);
    llmr_strbuf_init(&r->payload);
    r->cb = on_event;
    r->user = user;
    r->prompt_len = p->prompt_len;
    if (!llmr_wire_submit_encode(p, req->stop_strings, req->stop_lens, req->stop_count,
                                 req->skip_special, &r->payload)) {
        llmr_strbuf_free(&r->payload);
        pthread_mutex_destroy(&r->deliver);
        free(r);
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    outbox ob = {0};
    pthread_mutex_lock(&h->lock);
    hmodel *m = host_find_model(h, req->model);
    uint64_t now = host_now_ms();
    if (!m) {
        llmr_strbuf_printf(err, "no model named \"%.128s\"", req->model);
        st = LLMR_NOT_FOUND;
    } else if (m->state == MODEL_NOT_READY) {
        llmr_strbuf_printf(err, "model %s is not ready: %s", m->name, m->reason);
        st = m->reason_code != LLMR_OK ? m->reason_code : LLMR_UNSUPPORTED;
    } else if (m->state == MODEL_FAILED && now < m->retry_at_ms) {
        llmr_strbuf_printf(err, "model %s: %s", m->name, m->reason);
        st = m->reason_code != LLMR_OK ? m->reason_code : LLMR_LOAD_FAILED;
    } else if (m->current && m->current->context_length &&
               p->prompt_len >= m->current->context_length) {
        llmr_strbuf_printf(err, "the prompt has %u tokens; model %s holds %u in all", p->prompt_len,
                           m->name, m->current->context_length);
        st = LLMR_INVALID_ARGUMENT;
    } else if (m->queued >= h->opt.max_queue) {
        llmr_strbuf_printf(err, "model %s has %u requests waiting, the most it queues", m->name,
                           m->queued);
        st = LLMR_LIMIT_EXCEEDED;
    } else if (h->stopping) {
        llmr_strbuf_puts(err, "the node is shutting down");
        st = LLMR_CANCELLED;
    }
    if (st == LLMR_OK) {
        r->id = h->next_request_id++;
        r->model = m;
        r->queued_ms = now;
        r->refs = 0;
        if (m->queue_tail)
            m->queue_tail->next = r;
        else
            m->queue_head = r;
        m->queue_tail = r;
        m->queued++;
        m->requests++;
        m->last_used_ms = now;
        if (request_id)
            *request_id = r->id;
        if (!m->current && !m->loading && now >= m->retry_at_ms)
            load_start(h, m, false);
        requests_dispatch(h, m, &ob);
    }
    pthread_mutex_unlock(&h->lock);
    if (st != LLMR_OK) {
        llmr_strbuf_free(&r->payload);
        pthread_mutex_destroy(&r->deliver);
        free(r);
        return st;
    }
    outbox_flush(h, &ob);
    return LLMR_OK;
}

llmr_status llmr_engine_host_cancel(llmr_engine_host *h, uint64_t request_id)
{
    outbox ob = {0};
    llmr_status st = LLMR_NOT_FOUND;
    pthread_mutex_lock(&h->lock);
    for (hmodel *m = h->models; m && st == LLMR_NOT_FOUND; m = m->next) {
        for (hreq *r = m->queue_head; r; r = r->next) {
            if (r->id == request_id) {
                outbox_final(&ob, r, LLMR_CANCELLED, LLMR_ENGINE_FINISH_CANCELLED,
                             "cancelled before it started");
                st = LLMR_OK;
                break;
            }
        }
    }
    for (hworker *hw = h->workers; hw && st == LLMR_NOT_FOUND; hw = hw->next) {
        for (hreq *r = hw->running; r; r = r->next) {
            if (r->id == request_id) {
                r->cancel_requested = true;
                outbox_send(&ob, hw, LLMR_WIRE_CANCEL, r->id, NULL);
                st = LLMR_OK;
                break;
            }
        }
    }
    pthread_mutex_unlock(&h->lock);
    outbox_flush(h, &ob);
    return st;
}

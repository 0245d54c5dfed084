/* EngineHost plugins: scanning the plugin directories, probing every plugin in a
 * worker process (dlopen and negotiation happen there, so a plugin that crashes,
 * refuses the ABI or lacks its entry point costs a worker, never the node), and the
 * hot reload that moves loaded models to changed plugins. */
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "common/log.h"
#include "engine_host/host_internal.h"

#define PROBE_TIMEOUT_MS 30000u

static void refuse(json_t *refused, const char *where, llmr_status st, const char *message)
{
    json_array_append_new(refused, json_pack("{s:s, s:s, s:s}", "manifest", where ? where : "",
                                             "status", llmr_status_name(st), "message", message));
    llmr_log_warn(HOST_COMPONENT, "plugin %s refused (%s): %s", where ? where : "?",
                  llmr_status_name(st), message);
}

/* Opens the plugin in a worker of its own and returns what describe() said. */
static llmr_status probe(llmr_engine_host *h, const llmr_plugin_manifest *m, json_t **engine,
                         llmr_strbuf *err)
{
    llmr_worker_callbacks cb = {NULL, NULL, NULL, NULL};
    llmr_worker *w = NULL;
    char name[96];
    snprintf(name, sizeof name, "probe:%s", m->id);
    llmr_status st = llmr_worker_start(h->worker_exe, name, &cb, NULL, &w, err);
    if (st != LLMR_OK)
        return st;
    json_t *open = json_pack("{s:s, s:s}", "plugin", m->library_path, "model_name", name);
    json_t *reply = NULL;
    st = llmr_worker_call(w, LLMR_WIRE_OPEN, open, PROBE_TIMEOUT_MS, &reply, err);
    json_decref(open);
    if (st == LLMR_OK) {
        *engine = json_incref(json_object_get(reply, "engine"));
        const char *name_said = json_string_value(json_object_get(*engine, "name"));
        const char *version_said = json_string_value(json_object_get(*engine, "version"));
        if (name_said && strcmp(name_said, m->id) != 0)
            llmr_log_warn(HOST_COMPONENT, "plugin %s calls itself \"%s\" in describe()", m->id,
                          name_said);
        if (version_said && strcmp(version_said, m->version) != 0)
            llmr_log_warn(HOST_COMPONENT, "plugin %s: its manifest says version %s, its "
                                          "describe() %s",
                          m->id, m->version, version_said);
    } else if (st == LLMR_INTERNAL && strstr(llmr_strbuf_cstr(err), "engine worker")) {
        st = LLMR_LOAD_FAILED; /* it took its worker down while loading */
    }
    json_decref(reply);
    llmr_worker_send(w, LLMR_WIRE_EXIT, 0, NULL, 0);
    llmr_worker_free(w, 5000);
    return st;
}

llmr_engine_registry *plugins_scan(llmr_engine_host *h, llmr_problems *problems,
                                   json_t **refused_out, json_t **engines_out)
{
    llmr_engine_registry *scanned = llmr_engine_registry_create();
    llmr_engine_registry *accepted = llmr_engine_registry_create();
    json_t *refused = json_array(), *engines = json_object();
    llmr_problems found;
    llmr_problems_init(&found);
    if (!scanned || !accepted || !refused || !engines) {
        llmr_engine_registry_free(scanned);
        llmr_engine_registry_free(accepted);
        json_decref(refused);
        json_decref(engines);
        return NULL;
    }
    llmr_engine_registry_scan(scanned, (const char *const *)h->plugin_dirs,
                              h->opt.plugin_dir_count, &found);
    for (size_t i = 0; i < found.count; i++) {
        const llmr_problem *p = &found.items[i];
        if (p->code == LLMR_NOT_FOUND && p->file && !strstr(p->file, "manifest.json")) {
            /* a plugin directory that does not exist: worth a line, not a refusal */
            llmr_log_info(HOST_COMPONENT, "no plugins in %s: %s", p->file, p->message);
            continue;
        }
        refuse(refused, p->file, p->code, p->message);
        if (problems)
            llmr_problems_add(problems, p->code, p->file, "%s", p->message);
    }
    for (size_t i = 0; i < llmr_engine_registry_count(scanned); i++) {
        const llmr_plugin_manifest *m = llmr_engine_registry_get(scanned, i);
        llmr_strbuf err = LLMR_STRBUF_INIT;
        json_t *engine = NULL;
        char *where = llmr_path_join(m->dir, LLMR_PLUGIN_MANIFEST_FILE);
        llmr_status st = probe(h, m, &engine, &err);
        llmr_plugin_manifest *copy = NULL;
        if (st == LLMR_OK) /* the registry owns its manifests: add a fresh copy */
            st = llmr_plugin_manifest_load(m->dir, &copy, &err);
        if (st == LLMR_OK && llmr_engine_registry_add(accepted, copy, &err) != LLMR_OK) {
            llmr_plugin_manifest_free(copy);
            st = LLMR_LOAD_FAILED;
        }
        if (st == LLMR_OK) {
            json_object_set_new(engines, m->id, engine);
            llmr_log_info(HOST_COMPONENT, "plugin %s %s ready (%s)", m->id, m->version, m->dir);
        } else {
            json_decref(engine);
            refuse(refused, where, st, llmr_strbuf_cstr(&err));
            if (problems)
                llmr_problems_add(problems, st, where, "%s", llmr_strbuf_cstr(&err));
        }
        free(where);
        llmr_strbuf_free(&err);
    }
    llmr_problems_free(&found);
    llmr_engine_registry_free(scanned);
    *refused_out = refused;
    *engines_out = engines;
    return accepted;
}

static json_t *plugin_list(const llmr_engine_registry *r)
{
    json_t *a = json_array();
    for (size_t i = 0; r && i < llmr_engine_registry_count(r); i++) {
        const llmr_plugin_manifest *m = llmr_engine_registry_get(r, i);
        json_array_append_new(a, json_sprintf("%s %s", m->id, m->version));
    }
    return a;
}

llmr_status llmr_engine_host_reload_plugins(llmr_engine_host *h, json_t **report, llmr_strbuf *err)
{
    json_t *refused = NULL, *engines = NULL;
    llmr_engine_registry *reg = plugins_scan(h, NULL, &refused, &engines);
    if (!reg) {
        llmr_strbuf_puts(err, "out of memory scanning plugins");
        return LLMR_OOM_RAM;
    }
    json_t *out = json_object(), *models = json_array();
    pthread_mutex_lock(&h->lock);
    llmr_engine_registry *old = h->registry;
    json_object_set_new(out, "before", plugin_list(old));
    json_object_set_new(out, "after", plugin_list(reg));
    json_object_set_new(out, "refused", json_incref(refused));
    h->registry = reg;
    json_decref(h->refused);
    json_decref(h->engines);
    h->refused = refused;
    h->engines = engines;
    /* Models whose best engine is now another build move to it. */
    for (hmodel *m = h->models; m; m = m->next) {
        if (!m->runtime)
            continue; /* its files need no engine choice: none runs it */
        hworker *cur = m->current;
        model_choose_engine(h, m);
        json_t *entry = json_pack("{s:s}", "model", m->name);
        if (m->has_engine)
            json_object_set_new(entry, "engine", json_sprintf("%s %s", m->engine.id,
                                                              m->engine.version));
        if (cur && cur->phase == WORKER_SERVING) {
            const llmr_plugin_manifest *now =
                m->has_engine ? llmr_engine_registry_find(reg, m->engine.id) : NULL;
            json_object_set_new(entry, "from", json_sprintf("%s %s", cur->plugin.id,
                                                            cur->plugin.version));
            if (!m->has_engine) {
                m->state = MODEL_READY; /* it keeps running where it is */
                json_object_set_new(entry, "result",
                                    json_string("kept: no installed plugin runs it now; it stays "
                                                "on its worker until unloaded"));
            } else if (strcmp(cur->plugin.id, m->engine.id) == 0 && now &&
                       plugin_ref_same_build(&cur->plugin, now)) {
                json_object_set_new(entry, "result", json_string("unchanged"));
            } else if (m->loading) {
                json_object_set_new(entry, "result", json_string("busy: a load is running"));
            } else {
                cur->replacing = true;
                load_start(h, m, true);
                json_object_set_new(entry, "result", json_string("switching"));
            }
        }
        json_array_append_new(models, entry);
    }
    pthread_mutex_unlock(&h->lock);
    llmr_engine_registry_free(old);

    /* Wait for the switches. */
    for (size_t i = 0; i < json_array_size(models); i++) {
        json_t *entry = json_array_get(models, i);
        const char *result = json_string_value(json_object_get(entry, "result"));
        if (!result || strcmp(result, "switching") != 0)
            continue;
        const char *name = json_string_value(json_object_get(entry, "model"));
        uint64_t until = host_now_ms() + h->opt.load_timeout_ms;
        pthread_mutex_lock(&h->lock);
        hmodel *m = host_find_model(h, name);
        while (m && m->loading && host_now_ms() < until)
            pthread_cond_wait(&h->changed, &h->lock);
        bool switched = m && m->current && m->has_engine &&
                        strcmp(m->current->plugin.id, m->engine.id) == 0 &&
                        strcmp(m->current->plugin.version, m->engine.version) == 0 &&
                        m->current->plugin.ino == m->engine.ino;
        json_object_set_new(entry, "result",
                            json_string(switched      ? "switched"
                                        : m && m->loading ? "still loading"
                                                          : "failed: it stays on its old engine "
                                                            "(the log says why)"));
        pthread_mutex_unlock(&h->lock);
    }
    json_object_set_new(out, "models", models);
    *report = out;
    return LLMR_OK;
}

/* The router's live view of its nodes: see node_registry.h. */
#include "router/node_registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 4096

typedef struct rnode {
    char id[32];
    char *name, *url;
    json_t *info;       /* the registration */
    json_t *models;     /* the last heartbeat's models */
    json_t *metrics;    /* the last heartbeat, without models */
    uint64_t last_seen_ms;
    bool drained;
    unsigned outstanding; /* requests this router sent and that are not done */
    double ttft_ms;       /* moving average of recent first tokens; 0: none yet */
    uint64_t unreachable_until_ms; /* llmr_node_registry_mark_unreachable */
} rnode;

struct llmr_node_registry {
    pthread_mutex_t lock;
    rnode *nodes;
    size_t n;
    uint64_t offline_after_ms;
    uint64_t next_id;
    unsigned max_outstanding; /* 0: none */
};

llmr_node_registry *llmr_node_registry_new(uint64_t offline_after_ms)
{
    llmr_node_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->lock, NULL);
    r->offline_after_ms = offline_after_ms;
    r->next_id = 1;
    return r;
}

static void node_clear(rnode *n)
{
    free(n->name);
    free(n->url);
    json_decref(n->info);
    json_decref(n->models);
    json_decref(n->metrics);
}

void llmr_node_registry_free(llmr_node_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        node_clear(&r->nodes[i]);
    free(r->nodes);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static rnode *find(llmr_node_registry *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->nodes[i].id, id) == 0)
            return &r->nodes[i];
    return NULL;
}

static bool online(const llmr_node_registry *r, const rnode *n, uint64_t now_ms)
{
    return now_ms - n->last_seen_ms <= r->offline_after_ms;
}

void llmr_node_registry_add(llmr_node_registry *r, const json_t *registration, uint64_t now_ms,
                            char *id_out, size_t id_size)
{
    pthread_mutex_lock(&r->lock);
    const char *url = json_string_value(json_object_get(registration, "url"));
    /* A node that registers again under the same URL (it restarted, or this router
     * did) replaces its old entry. */
    for (size_t i = 0; url && i < r->n; i++) {
        if (r->nodes[i].url && strcmp(r->nodes[i].url, url) == 0) {
            node_clear(&r->nodes[i]);
            r->nodes[i] = r->nodes[--r->n];
            break;
        }
    }
    rnode *grown = r->n < MAX_NODES ? realloc(r->nodes, (r->n + 1) * sizeof *grown) : NULL;
    if (grown) {
        r->nodes = grown;
        rnode *n = &r->nodes[r->n++];
        memset(n, 0, sizeof *n);
        snprintf(n->id, sizeof n->id, "n-%llu", (unsigned long long)r->next_id++);
        const char *name = json_string_value(json_object_get(registration, "name"));
        n->name = strdup(name ? name : n->id);
        n->url = strdup(url ? url : "");
        n->info = json_deep_copy(registration);
        n->models = json_array();
        n->metrics = json_object();
        n->last_seen_ms = now_ms;
        snprintf(id_out, id_size, "%s", n->id);
    } else {
        snprintf(id_out, id_size, "%s", "");
    }
    pthread_mutex_unlock(&r->lock);
}

bool llmr_node_registry_heartbeat(llmr_node_registry *r, const char *id, const json_t *body,
                                  uint64_t now_ms)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n) {
        n->last_seen_ms = now_ms;
        json_t *models = json_object_get(body, "models");
        if (json_is_array(models)) {
            json_decref(n->models);
            n->models = json_deep_copy(models);
        }
        json_decref(n->metrics);
        n->metrics = json_deep_copy(body);
        json_object_del(n->metrics, "models");
    }
    pthread_mutex_unlock(&r->lock);
    return n != NULL;
}

bool llmr_node_registry_remove(llmr_node_registry *r, const char *id)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n) {
        node_clear(n);
        *n = r->nodes[--r->n];
    }
    pthread_mutex_unlock(&r->lock);
    return n != NULL;
}

bool llmr_node_registry_drain(llmr_node_registry *r, const char *id, bool drained)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n)
        n->drained = drained;
    pthread_mutex_unlock(&r->lock);
    return n != NULL;
}

json_t *llmr_node_registry_list(llmr_node_registry *r, uint64_t now_ms)
{
    json_t *out = json_array();
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n; i++) {
        const rnode *n = &r->nodes[i];
        json_t *o = json_pack("{s:s, s:s, s:s, s:b, s:b, s:I, s:i, s:O, s:O, s:O}", "id", n->id, "name",
                              n->name, "url", n->url, "online", online(r, n, now_ms), "drained",
                              n->drained, "last_seen_ms_ago", (json_int_t)(now_ms - n->last_seen_ms),
                              "outstanding", (int)n->outstanding, "models", n->models, "metrics",
                              n->metrics, "info", n->info);
        json_object_set_new(o, "ttft_ms", n->ttft_ms > 0 ? json_real(n->ttft_ms) : json_null());
        json_array_append_new(out, o);
    }
    pthread_mutex_unlock(&r->lock);
    return out;
}

/* The node's entry for the model, or NULL. */
static const json_t *model_entry(const rnode *n, const char *model)
{
    size_t i;
    json_t *m;
    json_array_foreach(n->models, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (name && strcmp(name, model) == 0)
            return m;
    }
    return NULL;
}

static bool ready_on(const llmr_node_registry *r, const rnode *n, const char *model, uint64_t now_ms)
{
    const json_t *m = model_entry(n, model);
    const char *state = json_string_value(json_object_get(m, "state"));
    return online(r, n, now_ms) && !n->drained && state && strcmp(state, "ready") == 0;
}

json_t *llmr_node_registry_model_states(llmr_node_registry *r, const char *model, uint64_t now_ms)
{
    json_t *out = json_array();
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n; i++) {
        const rnode *n = &r->nodes[i];
        const json_t *m = model_entry(n, model);
        json_t *o = json_pack("{s:s, s:s, s:b}", "node", n->id, "node_name", n->name, "online",
                              online(r, n, now_ms));
        if (m) {
            json_object_update(o, (json_t *)m);
            json_object_del(o, "name");
        } else {
            json_object_set_new(o, "state", json_string("absent"));
        }
        json_array_append_new(out, o);
    }
    pthread_mutex_unlock(&r->lock);
    return out;
}

static bool excluded(const char *id, const char *const *exclude, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(exclude[i], id) == 0)
            return true;
    return false;
}

bool llmr_node_registry_model_ready_except(llmr_node_registry *r, const char *model, uint64_t now_ms,
                                           const char *const *exclude, size_t n_exclude)
{
    bool ready = false;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n && !ready; i++)
        ready = ready_on(r, &r->nodes[i], model, now_ms) && !excluded(r->nodes[i].id, exclude, n_exclude);
    pthread_mutex_unlock(&r->lock);
    return ready;
}

bool llmr_node_registry_model_ready(llmr_node_registry *r, const char *model, uint64_t now_ms)
{
    return llmr_node_registry_model_ready_except(r, model, now_ms, NULL, 0);
}

void llmr_node_registry_set_max_outstanding(llmr_node_registry *r, unsigned max)
{
    pthread_mutex_lock(&r->lock);
    r->max_outstanding = max;
    pthread_mutex_unlock(&r->lock);
}

/* Whether n is a better choice than best: reachable first, then the fewest
 * outstanding, then the lowest TTFT. */
static bool better(const rnode *n, const rnode *best, uint64_t now_ms)
{
    bool n_marked = n->unreachable_until_ms > now_ms, best_marked = best->unreachable_until_ms > now_ms;
    if (n_marked != best_marked)
        return best_marked;
    return n->outstanding < best->outstanding ||
           (n->outstanding == best->outstanding && n->ttft_ms < best->ttft_ms);
}

bool llmr_node_registry_pick(llmr_node_registry *r, const char *model, uint64_t now_ms,
                             const char *const *exclude, size_t n_exclude, char *id, size_t id_size,
                             char *url, size_t url_size)
{
    pthread_mutex_lock(&r->lock);
    /* A node marked unreachable is tried only when no other could take the request,
     * even later: a request waits for a busy good node rather than try a dead one. */
    bool healthy = false;
    for (size_t i = 0; i < r->n && !healthy; i++) {
        const rnode *n = &r->nodes[i];
        healthy = ready_on(r, n, model, now_ms) && !excluded(n->id, exclude, n_exclude) &&
                  n->unreachable_until_ms <= now_ms;
    }
    rnode *best = NULL;
    for (size_t i = 0; i < r->n; i++) {
        rnode *n = &r->nodes[i];
        if (!ready_on(r, n, model, now_ms) || excluded(n->id, exclude, n_exclude) ||
            (r->max_outstanding && n->outstanding >= r->max_outstanding) ||
            (healthy && n->unreachable_until_ms > now_ms))
            continue;
        if (!best || better(n, best, now_ms))
            best = n;
    }
    if (best) {
        best->outstanding++;
        snprintf(id, id_size, "%s", best->id);
        snprintf(url, url_size, "%s", best->url);
    }
    pthread_mutex_unlock(&r->lock);
    return best != NULL;
}

void llmr_node_registry_done(llmr_node_registry *r, const char *id, double ttft_ms)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n) {
        if (n->outstanding)
            n->outstanding--;
        if (ttft_ms >= 0)
            n->ttft_ms = n->ttft_ms > 0 ? 0.8 * n->ttft_ms + 0.2 * ttft_ms : ttft_ms;
    }
    pthread_mutex_unlock(&r->lock);
}

void llmr_node_registry_mark_unreachable(llmr_node_registry *r, const char *id, uint64_t now_ms)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n)
        n->unreachable_until_ms = now_ms + LLMR_NODE_UNREACHABLE_MS;
    pthread_mutex_unlock(&r->lock);
}

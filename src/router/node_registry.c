/* The router's live view of its nodes: see node_registry.h. */
#include "router/node_registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/random.h"

#define MAX_NODES 4096
#define MAX_OWNERS 4096 /* keys whose registrations of the last minute are counted */

typedef struct rnode {
    char id[32];
    char *name, *url;
    char *owner;        /* the key id that registered it; NULL: no keys */
    char secret[LLMR_NODE_SECRET_HEX + 1];
    char pin[320];
    json_t *info;       /* the registration */
    json_t *models;     /* the last heartbeat's models */
    json_t *metrics;    /* the last heartbeat, without models */
    json_t *proofs;     /* {model: {"nonce", "expected"} while challenged, or true once proven} */
    uint64_t last_seen_ms;
    bool drained;
    unsigned outstanding; /* requests this router sent and that are not done */
    double ttft_ms;       /* moving average of recent first tokens; 0: none yet */
    uint64_t unreachable_until_ms; /* llmr_node_registry_mark_unreachable */
} rnode;

/* A key's registrations in the minute from since_ms. */
typedef struct owner_rate {
    char *owner;
    uint64_t since_ms;
    unsigned count;
} owner_rate;

struct llmr_node_registry {
    pthread_mutex_t lock;
    rnode *nodes;
    size_t n;
    uint64_t offline_after_ms;
    uint64_t expire_after_ms; /* 0: never */
    unsigned max_outstanding; /* 0: none */
    owner_rate *rates;
    size_t n_rates;
};

llmr_node_registry *llmr_node_registry_new(uint64_t offline_after_ms)
{
    llmr_node_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->lock, NULL);
    r->offline_after_ms = offline_after_ms;
    return r;
}

static void node_clear(rnode *n)
{
    free(n->name);
    free(n->url);
    free(n->owner);
    json_decref(n->info);
    json_decref(n->models);
    json_decref(n->metrics);
    json_decref(n->proofs);
}

void llmr_node_registry_free(llmr_node_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        node_clear(&r->nodes[i]);
    free(r->nodes);
    for (size_t i = 0; i < r->n_rates; i++)
        free(r->rates[i].owner);
    free(r->rates);
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

static bool reported_ready(const rnode *n, const char *model);

static bool same_owner(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void hex(const unsigned char *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = 0;
}

/* Counts one registration of owner; false when it is over the limit.  Caller holds
 * the lock. */
static bool count_registration(llmr_node_registry *r, const char *owner, uint64_t now_ms)
{
    owner_rate *o = NULL;
    for (size_t i = 0; i < r->n_rates && !o; i++)
        if (strcmp(r->rates[i].owner, owner) == 0)
            o = &r->rates[i];
    if (!o) {
        /* the table full: the windows that ended make room; none did: refuse (the
         * table holds more keys than registered nodes there may be) */
        for (size_t i = 0; r->n_rates == MAX_OWNERS && i < r->n_rates;) {
            if (now_ms - r->rates[i].since_ms >= 60000) {
                free(r->rates[i].owner);
                r->rates[i] = r->rates[--r->n_rates];
            } else {
                i++;
            }
        }
        owner_rate *grown = r->n_rates < MAX_OWNERS ? realloc(r->rates, (r->n_rates + 1) * sizeof *grown) : NULL;
        if (!grown)
            return false;
        r->rates = grown;
        o = &r->rates[r->n_rates];
        if (!(o->owner = strdup(owner)))
            return false;
        r->n_rates++;
        o->since_ms = now_ms;
        o->count = 0;
    }
    if (now_ms - o->since_ms >= 60000) {
        o->since_ms = now_ms;
        o->count = 0;
    }
    if (o->count >= LLMR_NODE_REGISTRATIONS_PER_MIN)
        return false;
    o->count++;
    return true;
}

static void remove_at(llmr_node_registry *r, size_t i)
{
    node_clear(&r->nodes[i]);
    r->nodes[i] = r->nodes[--r->n];
}

llmr_node_add_result llmr_node_registry_add(llmr_node_registry *r, const json_t *registration, const char *owner,
                                            const char *pin, uint64_t now_ms, llmr_node_added *out)
{
    memset(out, 0, sizeof *out);
    const char *url = json_string_value(json_object_get(registration, "url"));
    llmr_node_add_result res = LLMR_NODE_ADDED;
    pthread_mutex_lock(&r->lock);
    /* The entry this one replaces: the owner's own (a key holds one node), or, without
     * keys, the one at the same URL (the node restarted, or this router did).  Another
     * owner's node at the URL is replaced only once it is offline. */
    ssize_t replace = -1;
    for (size_t i = 0; i < r->n && res == LLMR_NODE_ADDED; i++) {
        rnode *n = &r->nodes[i];
        bool same_url = url && n->url && strcmp(n->url, url) == 0;
        if (owner && same_owner(n->owner, owner)) {
            if (!same_url && online(r, n, now_ms))
                res = LLMR_NODE_KEY_IN_USE;
            else
                replace = (ssize_t)i;
        } else if (same_url) {
            if (owner && online(r, n, now_ms))
                res = LLMR_NODE_URL_IN_USE;
            else
                replace = (ssize_t)i;
        }
    }
    if (res == LLMR_NODE_ADDED && owner && !count_registration(r, owner, now_ms))
        res = LLMR_NODE_TOO_FAST;
    unsigned char rnd[8 + LLMR_NODE_SECRET_HEX / 2];
    if (res == LLMR_NODE_ADDED && !llmr_random_bytes(rnd, sizeof rnd))
        res = LLMR_NODE_FULL;
    if (res == LLMR_NODE_ADDED && replace >= 0) {
        snprintf(out->replaced, sizeof out->replaced, "%s", r->nodes[replace].id);
        remove_at(r, (size_t)replace);
    }
    rnode *grown = res == LLMR_NODE_ADDED && r->n < MAX_NODES ? realloc(r->nodes, (r->n + 1) * sizeof *grown) : NULL;
    if (res == LLMR_NODE_ADDED && !grown)
        res = LLMR_NODE_FULL;
    if (res == LLMR_NODE_ADDED) {
        r->nodes = grown;
        rnode *n = &r->nodes[r->n++];
        memset(n, 0, sizeof *n);
        char idhex[17];
        hex(rnd, 8, idhex);
        snprintf(n->id, sizeof n->id, "n-%s", idhex);
        hex(rnd + 8, LLMR_NODE_SECRET_HEX / 2, n->secret);
        snprintf(n->pin, sizeof n->pin, "%s", pin ? pin : "");
        const char *name = json_string_value(json_object_get(registration, "name"));
        n->name = strdup(name ? name : n->id);
        n->url = strdup(url ? url : "");
        n->owner = owner ? strdup(owner) : NULL;
        n->info = json_deep_copy(registration);
        n->models = json_array();
        n->metrics = json_object();
        n->proofs = json_object();
        n->last_seen_ms = now_ms;
        snprintf(out->id, sizeof out->id, "%s", n->id);
        snprintf(out->secret, sizeof out->secret, "%s", n->secret);
    }
    memset(rnd, 0, sizeof rnd);
    pthread_mutex_unlock(&r->lock);
    return res;
}

bool llmr_node_registry_heartbeat(llmr_node_registry *r, const char *id, const char *owner, const json_t *body,
                                  uint64_t now_ms)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n && !same_owner(n->owner, owner))
        n = NULL; /* another key's node: as if unknown, and left as it was */
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
        /* a model no longer ready there is proven again when it is */
        const char *key;
        json_t *v, *tmp;
        json_object_foreach_safe(n->proofs, tmp, key, v)
        {
            if (!reported_ready(n, key))
                json_object_del(n->proofs, key);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return n != NULL;
}

void llmr_node_registry_set_expire(llmr_node_registry *r, uint64_t expire_after_ms)
{
    pthread_mutex_lock(&r->lock);
    r->expire_after_ms = expire_after_ms;
    pthread_mutex_unlock(&r->lock);
}

size_t llmr_node_registry_expire(llmr_node_registry *r, uint64_t now_ms, char (*ids)[32], size_t max)
{
    size_t count = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; r->expire_after_ms && i < r->n;) {
        rnode *n = &r->nodes[i];
        /* one with requests outstanding stays until they end */
        if (now_ms - n->last_seen_ms > r->expire_after_ms && !n->outstanding) {
            if (count < max)
                snprintf(ids[count++], 32, "%s", n->id);
            remove_at(r, i);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return count;
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

static bool reported_ready(const rnode *n, const char *model)
{
    const char *state = json_string_value(json_object_get(model_entry(n, model), "state"));
    return state && strcmp(state, "ready") == 0;
}

static bool ready_on(const llmr_node_registry *r, const rnode *n, const char *model, uint64_t now_ms)
{
    return online(r, n, now_ms) && !n->drained && reported_ready(n, model) &&
           json_is_true(json_object_get(n->proofs, model));
}

bool llmr_node_registry_needs_challenge(llmr_node_registry *r, const char *id, const char *model)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    bool needs = n && reported_ready(n, model) && !json_object_get(n->proofs, model);
    pthread_mutex_unlock(&r->lock);
    return needs;
}

void llmr_node_registry_challenge(llmr_node_registry *r, const char *id, const char *model, const char *nonce,
                                  const char *expected)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n)
        json_object_set_new(n->proofs, model, json_pack("{s:s, s:s}", "nonce", nonce, "expected", expected));
    pthread_mutex_unlock(&r->lock);
}

bool llmr_node_registry_answer(llmr_node_registry *r, const char *id, const char *model, const char *nonce,
                               const char *sha256)
{
    bool ok = false;
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    json_t *c = n ? json_object_get(n->proofs, model) : NULL;
    const char *want_nonce = json_string_value(json_object_get(c, "nonce"));
    const char *expected = json_string_value(json_object_get(c, "expected"));
    if (want_nonce && expected && strcmp(want_nonce, nonce) == 0) {
        ok = strcmp(expected, sha256) == 0;
        if (ok)
            json_object_set_new(n->proofs, model, json_true());
        else
            json_object_del(n->proofs, model); /* a new challenge follows */
    }
    pthread_mutex_unlock(&r->lock);
    return ok;
}

void llmr_node_registry_drop_challenge(llmr_node_registry *r, const char *id, const char *model)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    json_t *c = n ? json_object_get(n->proofs, model) : NULL;
    if (c && !json_is_true(c))
        json_object_del(n->proofs, model);
    pthread_mutex_unlock(&r->lock);
}

void llmr_node_registry_prove(llmr_node_registry *r, const char *id, const char *model)
{
    pthread_mutex_lock(&r->lock);
    rnode *n = find(r, id);
    if (n)
        json_object_set_new(n->proofs, model, json_true());
    pthread_mutex_unlock(&r->lock);
}

void llmr_node_registry_forget_model(llmr_node_registry *r, const char *model)
{
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n; i++)
        json_object_del(r->nodes[i].proofs, model);
    pthread_mutex_unlock(&r->lock);
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
            if (reported_ready(n, model)) /* routed there only once proven */
                json_object_set_new(o, "proven", json_boolean(json_is_true(json_object_get(n->proofs, model))));
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
                             const char *const *exclude, size_t n_exclude, llmr_node_target *t)
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
        snprintf(t->id, sizeof t->id, "%s", best->id);
        snprintf(t->url, sizeof t->url, "%s", best->url);
        snprintf(t->secret, sizeof t->secret, "%s", best->secret);
        snprintf(t->pin, sizeof t->pin, "%s", best->pin);
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

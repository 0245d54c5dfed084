/* Per-key limits (docs/router.md, "Limits"): requests per minute, requests at once and
 * tokens per minute, each key's own (stored with the key) or the router's default.
 *
 * Each key seen has a counter here: the requests running now, and the requests and
 * tokens of its current minute.  A minute is a fixed window that starts with the first
 * request after the last one ended; a request is refused while the window's requests
 * or tokens have reached the limit (tokens are counted when a request ends: its
 * prompt and completion), or while the key has as many running as it may.  A refusal
 * says how long to wait: the rest of the window, or a second for a running request.
 * Requests running count those waiting for a node, so one key cannot fill the wait
 * queue for everyone. */
#include "router/router_internal.h"

#include <stdlib.h>
#include <string.h>

#define WINDOW_MS 60000u

typedef struct counter {
    struct counter *next;
    char *key;                 /* "" for requests without a key (--no-auth) */
    uint64_t window_start_ms;
    uint64_t requests, tokens; /* in the window */
    uint64_t running;
} counter;

struct router_limits {
    pthread_mutex_t lock;
    counter *all;
};

router_limits *router_limits_new(void)
{
    router_limits *l = calloc(1, sizeof *l);
    if (l)
        pthread_mutex_init(&l->lock, NULL);
    return l;
}

void router_limits_free(router_limits *l)
{
    if (!l)
        return;
    for (counter *c = l->all, *next; c; c = next) {
        next = c->next;
        free(c->key);
        free(c);
    }
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* The key's counter (made when new), with its window moved on; NULL when out of
 * memory.  With the lock held. */
static counter *find(router_limits *l, const char *key, uint64_t now_ms)
{
    if (!key)
        key = "";
    counter *c = l->all;
    while (c && strcmp(c->key, key) != 0)
        c = c->next;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c || !(c->key = strdup(key))) {
            free(c);
            return NULL;
        }
        c->window_start_ms = now_ms;
        c->next = l->all;
        l->all = c;
    }
    if (now_ms - c->window_start_ms >= WINDOW_MS) {
        c->window_start_ms = now_ms;
        c->requests = c->tokens = 0;
    }
    return c;
}

static unsigned window_left_s(const counter *c, uint64_t now_ms)
{
    uint64_t left = c->window_start_ms + WINDOW_MS - now_ms;
    unsigned s = (unsigned)((left + 999) / 1000);
    return s ? s : 1;
}

router_limit_refusal router_limits_admit(router_limits *l, const char *key, const llmr_store_key_limits *lim,
                                         uint64_t now_ms, unsigned *retry_s, int64_t *limit)
{
    pthread_mutex_lock(&l->lock);
    counter *c = find(l, key, now_ms);
    router_limit_refusal why = ROUTER_LIMIT_OK;
    if (!c) {
        why = ROUTER_LIMIT_OK; /* out of memory: not worth refusing over */
    } else if (lim->concurrent_requests > 0 && c->running >= (uint64_t)lim->concurrent_requests) {
        why = ROUTER_LIMIT_CONCURRENT;
        *retry_s = 1;
        *limit = lim->concurrent_requests;
    } else if (lim->requests_per_minute > 0 && c->requests >= (uint64_t)lim->requests_per_minute) {
        why = ROUTER_LIMIT_RPM;
        *retry_s = window_left_s(c, now_ms);
        *limit = lim->requests_per_minute;
    } else if (lim->tokens_per_minute > 0 && c->tokens >= (uint64_t)lim->tokens_per_minute) {
        why = ROUTER_LIMIT_TPM;
        *retry_s = window_left_s(c, now_ms);
        *limit = lim->tokens_per_minute;
    } else {
        c->requests++;
        c->running++;
    }
    pthread_mutex_unlock(&l->lock);
    return why;
}

void router_limits_done(router_limits *l, const char *key, uint64_t tokens, uint64_t now_ms)
{
    pthread_mutex_lock(&l->lock);
    counter *c = find(l, key, now_ms);
    if (c) {
        if (c->running)
            c->running--;
        c->tokens += tokens;
    }
    pthread_mutex_unlock(&l->lock);
}

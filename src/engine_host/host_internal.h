/* Inside the EngineHost (engine_host.h): the records its files share.
 *
 *   engine_host.c      the API: create, models, submit, cancel
 *   host_status.c      status JSON and metrics
 *   host_requests.c    requests: queues, dispatch to workers, events, final events
 *   host_load.c        loading a model into a worker: estimate, fit, load, swap
 *   host_supervisor.c  the supervisor thread: watchdog, health, restarts, memory
 *                      pressure, draining and reaping workers
 *   host_plugins.c     scanning and probing plugins, reload
 *
 * Locking: one mutex, h->lock, guards every record below.  Nothing blocking happens
 * under it: frames to workers are collected in an outbox and written after it is
 * released, and request events are delivered after it too, under the request's own
 * `deliver` mutex, which keeps each request's events in order and its final event
 * single.  Records are freed only at zero `refs`. */
#ifndef LLMR_ENGINE_HOST_HOST_INTERNAL_H
#define LLMR_ENGINE_HOST_HOST_INTERNAL_H

#include <pthread.h>

#include "engine_host/engine_host.h"
#include "engine_host/engine_registry.h"
#include "engine_host/worker_client.h"

#define HOST_COMPONENT "engine"
#define RELEASES_KEPT 64

/* A plugin as a worker runs it, copied from its manifest (the registry that owned the
 * manifest may be replaced by a reload). */
typedef struct plugin_ref {
    char *id;
    char *version;
    char *library_path;
    bool has_identity;
    uint64_t dev, ino, size;
    int64_t mtime_ns;
} plugin_ref;

typedef struct hreq hreq;
typedef struct hworker hworker;
typedef struct hmodel hmodel;

struct hreq {
    hreq *next;               /* in its model's queue or its worker's running list */
    uint64_t id;
    hmodel *model;
    hworker *worker;          /* while running */
    llmr_gen_event_fn cb;
    void *user;
    llmr_strbuf payload;      /* the SUBMIT payload, until it is sent */
    uint32_t prompt_len;
    uint64_t queued_ms, started_ms, progress_ms;
    bool got_token;           /* a token came (before that it may wait inside the engine) */
    bool timing_out;          /* the watchdog cancelled it */
    uint64_t cancel_sent_ms;
    bool cancel_requested;    /* the client cancelled it */
    bool detached;            /* in no list any more: its final event is decided */
    int refs;
    pthread_mutex_t deliver;
    bool finished;            /* the final event went out (under deliver) */
};

typedef enum worker_phase {
    WORKER_LOADING,  /* open, estimate, load in progress */
    WORKER_SERVING,
    WORKER_DRAINING, /* no new requests; exits when its running ones are done */
    WORKER_EXITING   /* told to exit, or killed */
} worker_phase;

struct hworker {
    hworker *next;
    llmr_engine_host *host;
    llmr_worker *w;
    hmodel *model;
    plugin_ref plugin;
    int gpu;                      /* CUDA ordinal, -1: CPU */
    worker_phase phase;
    uint32_t max_batch, context_length;
    hreq *running;
    uint32_t in_flight;
    bool exited;
    int wait_status;
    uint64_t exited_ms;
    char kill_reason[512];        /* why the host killed it ("" when it did not) */
    llmr_status kill_status;      /* what its running requests end with then */
    uint64_t started_ms, loaded_ms, ping_sent_ms, pong_ms;
    uint64_t token_ms;            /* the last token of any of its requests */
    uint64_t est_vram, est_ram;   /* the engine's estimate (or the weights) */
    uint64_t vram, ram, host_alloc; /* the last pong */
    uint64_t kv_used, kv_capacity; /* KV positions in use (the last pong), held (the load) */
    bool has_memory;
    uint64_t base_vram, base_ram, base_alloc; /* first idle pong after the load */
    bool have_base;
    bool check_idle_memory;       /* a pong after the last request ended is due */
    bool replacing;               /* a replacement is loading (leak, reload) */
    int refs;
};

typedef enum model_state {
    MODEL_NOT_READY, /* its files are fine but no engine runs it: reason */
    MODEL_IDLE,      /* an engine is chosen; nothing loaded */
    MODEL_LOADING,
    MODEL_READY,
    MODEL_FAILED     /* the last load failed: reason; another try after retry_at_ms */
} model_state;

struct hmodel {
    hmodel *next;
    char *name, *dir, *format, *gguf_file, *options_json;
    uint32_t context_length;
    char *runtime, *architecture;
    uint64_t total_bytes;
    model_state state;
    llmr_status reason_code;
    char *reason;
    bool has_engine;
    plugin_ref engine;            /* the chosen plugin */
    int gpu;                      /* where it would run: CUDA ordinal or -1 */
    hworker *current;             /* the serving worker */
    hworker *loading;             /* a load in progress (first or replacement) */
    hreq *queue_head, *queue_tail;
    uint32_t queued;
    uint64_t last_used_ms;
    unsigned failures;            /* consecutive failed loads and crashes */
    uint64_t retry_at_ms;
    bool keep_loaded;             /* reload after a crash (it was serving) */
    bool removed;                 /* taken off the node (h->removed): a load that ends
                                     now retires its worker at once */
    bool unload_asked;            /* unloaded (llmr stop) while a load ran: that load is
                                     cancelled (its worker killed, nothing counted as a
                                     failure, its queued requests answered) */
    int64_t loaded_since;         /* unix seconds of the current worker's load */
    double last_load_ms;
    uint64_t loads, restarts, requests, tokens, timeouts, failed_requests;
};

typedef struct budget {
    char *plugin_id;
    uint64_t bytes;
} budget;

/* Memory given back recently, which a resource sample may not show yet. */
typedef struct release {
    int gpu;
    uint64_t vram, ram;
    uint64_t at_ns;
} release;

/* ---- frames to send and events to deliver once the lock is released ---------- */

typedef struct outbox_item {
    hworker *hw;
    uint16_t type;
    uint64_t request_id;
    llmr_strbuf payload;
    bool kill;                    /* SIGKILL instead of a frame */
} outbox_item;

typedef struct final_event {
    hreq *r;
    llmr_status status;
    uint32_t finish;
    char *message;
} final_event;

typedef struct outbox {
    outbox_item *items;
    size_t count, cap;
    final_event *finals;
    size_t final_count, final_cap;
} outbox;

struct llmr_engine_host {
    llmr_engine_host_options opt;
    char **plugin_dirs;
    char *worker_exe;
    pthread_mutex_t lock;
    pthread_cond_t changed;       /* loads finishing, workers ending */
    llmr_engine_registry *registry;
    json_t *refused;              /* plugins refused at the last scan */
    json_t *engines;              /* id -> what its describe() said */
    hmodel *models;
    hmodel *removed;              /* models taken off (llmr_engine_host_remove_model): kept
                                     until the host is freed, as workers and requests
                                     may still point at them */
    hworker *workers;
    uint64_t next_request_id;
    llmr_resource_monitor *monitor;
    budget *budgets;
    size_t budget_count;
    release releases[RELEASES_KEPT];
    size_t release_count;
    uint64_t pressure_quiet_until_ms[LLMR_MAX_GPUS + 1]; /* [0] RAM, [1 + gpu] VRAM */
    pthread_t supervisor;
    bool stopping;
    unsigned loads_running;
    uint64_t lru_unloads, watchdog_kills, crashes, leaks;
    outbox deferred;              /* filled where the lock cannot be let go; the
                                     supervisor flushes it */
};

/* Under the lock: queue a frame (payload moved in, may be NULL) or a kill. */
void outbox_send(outbox *ob, hworker *hw, uint16_t type, uint64_t request_id,
                 llmr_strbuf *payload);
void outbox_kill(outbox *ob, hworker *hw);
/* Under the lock: detach r and queue its final event. */
void outbox_final(outbox *ob, hreq *r, llmr_status status, uint32_t finish, const char *fmt,
                  ...) __attribute__((format(printf, 5, 6)));
/* Without the lock: send, kill, deliver; then drop the references. */
void outbox_flush(llmr_engine_host *h, outbox *ob);

/* ---- shared helpers (under the lock unless said) ------------------------------- */

uint64_t host_now_ms(void);
hmodel *host_find_model(llmr_engine_host *h, const char *name);
void plugin_ref_free(plugin_ref *p);
bool plugin_ref_copy(plugin_ref *dst, const llmr_plugin_manifest *m);
bool plugin_ref_dup(plugin_ref *dst, const plugin_ref *src);
bool plugin_ref_same_build(const plugin_ref *p, const llmr_plugin_manifest *m);
const char *model_state_name(model_state s);
void model_set_reason(hmodel *m, model_state state, llmr_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The delay before the next try after `failures` failures. */
uint64_t host_backoff_ms(const llmr_engine_host *h, unsigned failures);

/* host_requests.c */
void requests_dispatch(llmr_engine_host *h, hmodel *m, outbox *ob);
/* Every queued request of m ends with status and message. */
void requests_fail_queue(hmodel *m, outbox *ob, llmr_status status, const char *message);
void request_unref(llmr_engine_host *h, hreq *r);
extern const llmr_worker_callbacks host_worker_callbacks;

/* host_load.c */
/* Starts loading m in a new worker on a thread of its own.  `replace`: m is serving
 * and the new worker takes over when ready (reload, leak). */
void load_start(llmr_engine_host *h, hmodel *m, bool replace);
/* Picks the engine and GPU for m from the registry and the latest readings. */
void model_choose_engine(llmr_engine_host *h, hmodel *m);
/* Stops routing to hw and lets it exit when idle. */
void worker_retire(llmr_engine_host *h, hworker *hw, outbox *ob);
/* What a resource holds now as far as the host can tell: the reading, plus loads
 * since (their estimates), less workers that ended since. */
uint64_t host_predicted_use(llmr_engine_host *h, const llmr_resource_snapshot *snap, bool vram,
                            int gpu, const hworker *self);
/* Idle serving workers (not for_model's) to unload, least recently used first, until
 * `need` more bytes fit under `limit`.  Returns how many; 0 when that does not suffice
 * unless `partial`. */
size_t host_pick_idle(llmr_engine_host *h, const hmodel *for_model, bool vram, int gpu,
                      uint64_t used, uint64_t need, uint64_t limit, bool partial, hworker **out,
                      size_t cap);
void host_unload_idle(llmr_engine_host *h, hworker *w, const char *why, outbox *ob);
/* The bytes a worker holds, as far as the host knows. */
uint64_t worker_vram(const hworker *hw);
uint64_t worker_ram(const hworker *hw);

/* host_supervisor.c */
void *supervisor_main(void *arg);
/* The watchdog's limit for a request on hw: cpu_request_timeout_ms for a worker on the
 * CPU, request_timeout_ms on a GPU; and its setting in words, for messages:
 * "cpu_request_timeout = 600 s (--cpu-request-timeout or LLMR_CPU_REQUEST_TIMEOUT)". */
unsigned host_request_timeout_ms(const llmr_engine_host *h, const hworker *hw);
void host_request_timeout_words(const llmr_engine_host *h, const hworker *hw, char *buf, size_t size);
void host_on_pressure(void *ctx, const llmr_resource_snapshot *snap, llmr_resource_kind kind,
                      int gpu, double used_fraction);

/* host_plugins.c: scans into a new registry and probes its plugins (no lock held). */
llmr_engine_registry *plugins_scan(llmr_engine_host *h, llmr_problems *problems,
                                   json_t **refused, json_t **engines);

#endif

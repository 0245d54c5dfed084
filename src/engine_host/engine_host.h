/* The EngineHost: the node's engine layer.  It knows the installed engine plugins
 * (EngineRegistry), the models the node serves, and the engine worker processes that
 * run them; it loads a model on demand into the best engine that fits, queues and
 * runs requests, streams their tokens back, and keeps the node alive and within its
 * memory whatever an engine does:
 *
 *   - every model runs in its own worker process (worker_main.h); a crash or a hang
 *     costs that model's running requests, never the node;
 *   - a load that would not fit in GPU or host memory (the engine's estimate against
 *     the resource monitor's readings and the per-plugin VRAM budgets) is refused up
 *     front with OOM_VRAM / OOM_RAM and the numbers, after idle models were unloaded
 *     to make room where that suffices;
 *   - above the memory threshold, idle models are unloaded, least recently used
 *     first, until it is under again;
 *   - the watchdog ends a request that makes no progress for request_timeout_ms
 *     (cpu_request_timeout_ms for a model on the CPU; its messages name the setting):
 *     cancel, then after cancel_grace_ms kill the worker (its GPU memory goes back
 *     with the process); the client gets TIMEOUT and the model is reloaded for the
 *     next request;
 *   - a worker that crashes is restarted with exponential backoff; one that stops
 *     answering health checks is killed and restarted; one whose memory grows while
 *     idle (a leaking engine) is replaced;
 *   - reload_plugins loads changed plugins in new workers beside the old ones and
 *     switches models over when they are ready; running requests finish on the old
 *     worker.  No request fails across a reload.
 *
 * Threads: the API may be called from any thread.  Event callbacks run on worker
 * reader threads or on the host's supervisor thread, one at a time per request, in
 * order, and end with exactly one final event.  A callback must not block for long;
 * it may call llmr_engine_host_cancel but not free the host.  See
 * docs/engine-host.md. */
#ifndef LLMR_ENGINE_HOST_ENGINE_HOST_H
#define LLMR_ENGINE_HOST_ENGINE_HOST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/problems.h"
#include "common/strbuf.h"
#include "engine_host/resource_monitor.h"
#include "llmr/engine.h"

typedef struct llmr_engine_host llmr_engine_host;

typedef struct llmr_engine_host_options {
    const char *const *plugin_dirs;
    size_t plugin_dir_count;
    const char *worker_exe;          /* the llmr binary; NULL: this process's own */
    unsigned request_timeout_ms;     /* no token for this long ends a request of a
                                        model on a GPU; 30000 */
    unsigned cpu_request_timeout_ms; /* the same for a model on the CPU, whose prefill
                                        and tokens take far longer; 600000 */
    unsigned cancel_grace_ms;        /* then the worker is killed; 5000 */
    unsigned load_timeout_ms;        /* open + estimate + load; 600000 */
    unsigned health_interval_ms;     /* pings; 1000 */
    unsigned health_timeout_ms;      /* no pong this long kills the worker; 10000 */
    unsigned restart_backoff_ms;     /* first delay after a crash or failed load; 1000 */
    unsigned restart_backoff_max_ms; /* the delay doubles up to this; 60000 */
    unsigned max_queue;              /* requests waiting per model; 256 */
    const char *vram_budgets;        /* "plugin-id=SIZE,..." (common/byte_size.h); NULL */
    double memory_threshold;         /* fraction of RAM / VRAM; 0.90 */
    unsigned monitor_interval_ms;    /* 1000 */
    llmr_resource_reader reader;     /* .read NULL: the system's readings */
    const char *nvml_library;        /* NULL: the default */
    bool monitor_no_thread;          /* tests sample with llmr_resource_monitor_sample_now */
    /* Before each load, in the load's thread: whether the model's files are still what
     * they were (the node's check, node/model_check.h).  Not LLMR_OK fails the load with
     * that status and message.  NULL: no check. */
    llmr_status (*check_files)(void *user, const char *model_dir, llmr_strbuf *why);
    void *check_files_user;
} llmr_engine_host_options;

void llmr_engine_host_options_default(llmr_engine_host_options *o);

/* Starts the resource monitor and the supervisor thread and scans the plugin
 * directories, probing every plugin in a worker (never in this process).  Plugins
 * that are refused are listed in `problems` (manifest path, code, reason) and in the
 * status; that is not an error of create. */
llmr_status llmr_engine_host_create(const llmr_engine_host_options *o, llmr_engine_host **out,
                                    llmr_problems *problems, llmr_strbuf *err);
/* Fails every request still running (CANCELLED), stops every worker, frees. */
void llmr_engine_host_free(llmr_engine_host *h);

typedef struct llmr_model_spec {
    const char *name;         /* how requests name it; [A-Za-z0-9._:/-], at most 128 */
    const char *dir;
    const char *format;       /* "safetensors", "gguf", "directml"; NULL: decide */
    const char *gguf_file;    /* NULL */
    uint32_t context_length;  /* 0: the model's */
    const char *options_json; /* engine options for its loads (a JSON object), or NULL */
} llmr_model_spec;

/* Checks the model's files (ModelStorage) and picks its engine.  A model with broken
 * files is refused (MODEL_CORRUPT, NOT_FOUND, ..., err lists the problems); a sound
 * model no engine runs is added as not ready, with the reason in the status. */
llmr_status llmr_engine_host_add_model(llmr_engine_host *h, const llmr_model_spec *spec,
                                       llmr_strbuf *err);

/* Loads a model now and waits for the outcome (requests also load on demand). */
llmr_status llmr_engine_host_load(llmr_engine_host *h, const char *name, llmr_strbuf *err);
/* Stops routing to the model's worker and lets it exit when its requests are done. */
llmr_status llmr_engine_host_unload(llmr_engine_host *h, const char *name, llmr_strbuf *err);
/* Takes the model off the host: its queued requests fail (NOT_FOUND), its worker exits
 * once its running requests are done, and the name is free for another add.  NOT_FOUND
 * when there is no such model. */
llmr_status llmr_engine_host_remove_model(llmr_engine_host *h, const char *name, llmr_strbuf *err);

typedef struct llmr_gen_event {
    uint64_t request_id;
    uint32_t index;
    int32_t id;               /* -1: no token in this event */
    const char *text;         /* the token's text (UTF-8, complete characters) */
    size_t text_len;
    float logprob;
    uint32_t top_count;
    const int32_t *top_ids;
    const float *top_logprobs;
    uint64_t time_ns;         /* when the engine sampled the token (CLOCK_MONOTONIC) */
    uint64_t sent_ns;         /* when its worker sent it on (0 for events of the host) */
    uint32_t finish;          /* llmr_engine_finish; nonzero on the last event */
    llmr_status status;       /* LLMR_OK, or what ended it: TIMEOUT, CANCELLED, ... */
    const char *message;      /* NUL-terminated; with an error status */
    uint32_t prompt_tokens, completion_tokens; /* in the last event */
} llmr_gen_event;

typedef void (*llmr_gen_event_fn)(void *user, const llmr_gen_event *ev);

typedef struct llmr_gen_request {
    const char *model;
    llmr_engine_request_params params; /* request_id is the host's to set */
    const char *const *stop_strings;
    const size_t *stop_lens;
    uint32_t stop_count;
    bool skip_special;        /* leave special tokens out of the text */
} llmr_gen_request;

/* Queues a request; events follow through on_event, the last one exactly once.
 * Errors known at once (unknown model, a model no engine runs, a failed load still
 * in its backoff, a bad prompt or stop string, a full queue) are returned here and
 * no event comes.  *request_id (may be NULL) names the request for cancel. */
llmr_status llmr_engine_host_submit(llmr_engine_host *h, const llmr_gen_request *req,
                                    llmr_gen_event_fn on_event, void *user,
                                    uint64_t *request_id, llmr_strbuf *err);
/* Ends a request (its last event says CANCELLED).  NOT_FOUND when it has ended. */
llmr_status llmr_engine_host_cancel(llmr_engine_host *h, uint64_t request_id);

/* Rescans the plugin directories and moves loaded models whose best engine changed
 * (a new version, a rebuilt library, a better plugin) to new workers, waiting up to
 * the load timeout for them.  *report says what happened to every plugin and model. */
llmr_status llmr_engine_host_reload_plugins(llmr_engine_host *h, json_t **report,
                                            llmr_strbuf *err);

/* Plugins (accepted and refused), models (state, reason, engine, worker, memory,
 * queue), resources. */
json_t *llmr_engine_host_status(llmr_engine_host *h);
/* Prometheus text: request, token and restart counters, model states, and the
 * resource monitor's gauges. */
void llmr_engine_host_metrics(llmr_engine_host *h, llmr_strbuf *out);

/* The host's resource monitor (tests sample it by hand). */
llmr_resource_monitor *llmr_engine_host_monitor(llmr_engine_host *h);

#endif

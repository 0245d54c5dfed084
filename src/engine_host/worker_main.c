/* The engine worker process: see worker_main.h.
 *
 * Threads: the main thread reads the node's frames and calls the engine (open,
 * estimate, load, submit, cancel); the engine calls on_token from its own threads.
 * Frames to the node are written whole under write_lock.  A request's state (its
 * detokenizer and stop strings) is touched only by the engine thread that delivers
 * its events, which the ABI serialises; the list of requests is under lock. */
#include "engine_host/worker_main.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/log.h"
#include "engine_host/host_services.h"
#include "engine_host/meminfo.h"
#include "engine_host/model_desc.h"
#include "engine_host/plugin_loader.h"
#include "engine_host/stop_strings.h"
#include "engine_host/worker_protocol.h"
#include "tokenizer/detokenizer.h"

#define DETOKENIZER_CONTEXT 8 /* prompt ids given as left context */

typedef struct request {
    struct request *next;
    uint64_t id;
    uint32_t prompt_len;
    uint32_t tokens;
    bool has_detok;
    llmr_detokenizer detok;
    llmr_stop_matcher stops;
    atomic_bool cancel;    /* the node asked; used when the engine has no cancel() */
    bool ended_by_stop;    /* a stop string ended it: the engine's own end is dropped */
} request;

static struct worker {
    int fd;
    pthread_mutex_t write_lock;
    pthread_mutex_t lock; /* requests, in_flight */
    request *requests;
    uint32_t in_flight;
    llmr_host_api host;
    llmr_plugin plugin;
    bool plugin_open;
    llmr_model_desc_owner desc;
    bool desc_open;
    llmr_engine_model *model;
    llmr_tokenizer *tok;
    bool engine_writes_text;
} w = {.fd = -1,
       .write_lock = PTHREAD_MUTEX_INITIALIZER,
       .lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- sending ------------------------------------------------------------------ */

static void send_frame(uint16_t type, uint64_t id, const void *payload, size_t len)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    pthread_mutex_lock(&w.write_lock);
    llmr_status st = llmr_wire_write(w.fd, type, id, payload, len, &err);
    pthread_mutex_unlock(&w.write_lock);
    if (st != LLMR_OK) /* the node is gone: nothing to serve any more */
        _exit(0);
    llmr_strbuf_free(&err);
}

static void reply(json_t *body, llmr_status st, const char *message)
{
    json_object_set_new(body, "status", json_string(llmr_status_name(st)));
    json_object_set_new(body, "message", json_string(message ? message : ""));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text)
        _exit(70);
    send_frame(LLMR_WIRE_REPLY, 0, text, strlen(text));
    free(text);
}

static void send_event(uint64_t request_id, const llmr_wire_event *ev)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    if (!llmr_wire_event_encode(ev, &sb))
        _exit(70);
    send_frame(LLMR_WIRE_EVENT, request_id, sb.data, sb.len);
    llmr_strbuf_free(&sb);
}

/* The last event of a request that never reached the engine. */
static void send_failure(uint64_t request_id, llmr_status st, const char *message)
{
    llmr_wire_event ev;
    memset(&ev, 0, sizeof ev);
    ev.id = -1;
    ev.finish = LLMR_ENGINE_FINISH_ERROR;
    ev.status = (int32_t)st;
    ev.message = message;
    ev.message_len = (uint32_t)strlen(message);
    ev.sent_ns = llmr_now_ns();
    send_event(request_id, &ev);
}

/* ---- requests ----------------------------------------------------------------- */

static void request_free(request *r)
{
    if (r->has_detok)
        llmr_detokenizer_free(&r->detok);
    llmr_stop_matcher_free(&r->stops);
    free(r);
}

static void request_release(request *r)
{
    pthread_mutex_lock(&w.lock);
    for (request **pp = &w.requests; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            w.in_flight--;
            break;
        }
    }
    pthread_mutex_unlock(&w.lock);
    request_free(r);
}

/* The token's text through the detokenizer (unless the engine wrote it). */
static void token_text(request *r, const llmr_engine_token *t, llmr_strbuf *piece)
{
    if (w.engine_writes_text) {
        if (t->text)
            llmr_strbuf_append(piece, t->text, t->text_len);
        return;
    }
    /* The token that ended the request on a stop id is not part of the output. */
    if (!r->has_detok || t->id < 0 || t->finish == LLMR_ENGINE_FINISH_STOP)
        return;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_detokenizer_push(&r->detok, (uint32_t)t->id, piece, &err) != LLMR_OK)
        llmr_log_warn("worker", "request %llu: token %d has no text: %s",
                      (unsigned long long)r->id, t->id, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
}

static int on_token(void *user, const llmr_engine_token *t)
{
    request *r = user;
    bool last = t->finish != LLMR_ENGINE_FINISH_NONE;
    if (r->ended_by_stop) {
        if (last)
            request_release(r);
        return 1;
    }
    if (t->id >= 0)
        r->tokens++;
    llmr_strbuf piece = LLMR_STRBUF_INIT, text = LLMR_STRBUF_INIT;
    token_text(r, t, &piece);
    bool stopped = llmr_stop_matcher_push(&r->stops, piece.data ? piece.data : "", piece.len,
                                          &text);
    if (last && !stopped) {
        llmr_strbuf rest = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
        if (r->has_detok && !w.engine_writes_text)
            llmr_detokenizer_finish(&r->detok, &rest, &err);
        stopped = llmr_stop_matcher_push(&r->stops, rest.data ? rest.data : "", rest.len, &text);
        if (!stopped)
            llmr_stop_matcher_flush(&r->stops, &text);
        llmr_strbuf_free(&rest);
        llmr_strbuf_free(&err);
    }
    llmr_wire_event ev;
    memset(&ev, 0, sizeof ev);
    ev.index = t->index;
    ev.id = t->id;
    ev.logprob = t->logprob;
    ev.time_ns = t->time_ns;
    ev.finish = stopped ? LLMR_ENGINE_FINISH_STOP : t->finish;
    ev.status = stopped ? LLMR_OK : (int32_t)llmr_plugin_status(t->status);
    ev.prompt_tokens = t->prompt_tokens ? t->prompt_tokens : r->prompt_len;
    ev.completion_tokens = r->tokens;
    ev.text = text.data;
    ev.text_len = (uint32_t)text.len;
    if (t->message && last) {
        ev.message = t->message;
        ev.message_len = (uint32_t)strnlen(t->message, 4096);
    }
    ev.top_count = t->top_count > LLMR_WIRE_MAX_TOP ? LLMR_WIRE_MAX_TOP : t->top_count;
    for (uint32_t i = 0; i < ev.top_count; i++) {
        ev.top_ids[i] = t->top_ids[i];
        ev.top_logprobs[i] = t->top_logprobs[i];
    }
    ev.sent_ns = llmr_now_ns();
    send_event(r->id, &ev);
    llmr_strbuf_free(&piece);
    llmr_strbuf_free(&text);
    if (last) {
        request_release(r);
        return 1;
    }
    if (stopped) { /* returning nonzero asks the engine to end it */
        r->ended_by_stop = true;
        return 1;
    }
    return atomic_load(&r->cancel) ? 1 : 0;
}

static void handle_submit(const llmr_wire_frame *f)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_wire_submit s;
    if (llmr_wire_submit_decode(f->payload, f->len, f->request_id, &s, &err) != LLMR_OK) {
        send_failure(f->request_id, LLMR_INTERNAL, llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return;
    }
    if (!w.model) {
        send_failure(f->request_id, LLMR_LOAD_FAILED, "no model is loaded in this worker");
        llmr_wire_submit_free(&s);
        return;
    }
    request *r = calloc(1, sizeof *r);
    llmr_status st = r ? LLMR_OK : LLMR_OOM_RAM;
    if (r) {
        r->id = f->request_id;
        r->prompt_len = s.params.prompt_len;
        st = llmr_stop_matcher_init(&r->stops, (const char *const *)s.stop_strings,
                                    s.stop_string_lens, s.stop_string_count, &err);
    }
    if (st == LLMR_OK && w.tok && !w.engine_writes_text) {
        uint32_t n = s.params.prompt_len < DETOKENIZER_CONTEXT ? s.params.prompt_len
                                                               : DETOKENIZER_CONTEXT;
        const uint32_t *ctx = (const uint32_t *)(s.params.prompt + s.params.prompt_len - n);
        st = llmr_detokenizer_init(&r->detok, w.tok, s.skip_special ? LLMR_DECODE_SKIP_SPECIAL : 0,
                                   ctx, n);
        r->has_detok = st == LLMR_OK;
    }
    if (st != LLMR_OK) {
        send_failure(f->request_id, st, err.len ? llmr_strbuf_cstr(&err) : "out of memory");
        if (r)
            request_free(r);
        llmr_wire_submit_free(&s);
        llmr_strbuf_free(&err);
        return;
    }
    pthread_mutex_lock(&w.lock);
    r->next = w.requests;
    w.requests = r;
    w.in_flight++;
    pthread_mutex_unlock(&w.lock);
    st = llmr_plugin_status(w.plugin.api->submit(w.model, &s.params, on_token, r));
    if (st != LLMR_OK) {
        const char *why = w.plugin.api->last_error(w.model);
        send_failure(f->request_id, st, why && *why ? why : llmr_status_message(st));
        request_release(r);
    }
    llmr_wire_submit_free(&s);
    llmr_strbuf_free(&err);
}

static void handle_cancel(uint64_t id)
{
    bool found = false;
    pthread_mutex_lock(&w.lock);
    for (request *r = w.requests; r; r = r->next) {
        if (r->id == id) {
            atomic_store(&r->cancel, true);
            found = true;
        }
    }
    pthread_mutex_unlock(&w.lock);
    if (found && w.model && w.plugin.has_cancel)
        w.plugin.api->cancel(w.model, id);
}

static void handle_ping(void)
{
    llmr_wire_pong p;
    memset(&p, 0, sizeof p);
    if (w.model && w.plugin.has_memory) {
        llmr_engine_memory m = {.struct_size = sizeof m};
        if (w.plugin.api->memory(w.model, &m) == LLMR_OK) {
            p.vram_bytes = m.vram_bytes;
            p.ram_bytes = m.ram_bytes;
            if (LLMR_ENGINE_HAS(&m, llmr_engine_memory, kv_used_tokens))
                p.kv_used_tokens = m.kv_used_tokens;
        }
        p.has_memory = 1;
    }
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_process_rss((int)getpid(), &p.rss_bytes, &err);
    llmr_strbuf_free(&err);
    p.host_alloc_bytes = llmr_host_services_allocated();
    pthread_mutex_lock(&w.lock);
    p.in_flight = w.in_flight;
    pthread_mutex_unlock(&w.lock);
    uint8_t buf[48];
    llmr_wire_pong_encode(&p, buf);
    send_frame(LLMR_WIRE_PONG, 0, buf, sizeof buf);
}

/* ---- open, estimate, load -------------------------------------------------------- */

static json_t *capability_names(uint64_t caps)
{
    static const struct {
        uint64_t bit;
        const char *name;
    } names[] = {{LLMR_ENGINE_CAP_CPU, "cpu"},           {LLMR_ENGINE_CAP_CUDA, "cuda"},
                 {LLMR_ENGINE_CAP_LOGPROBS, "logprobs"}, {LLMR_ENGINE_CAP_BATCHING, "batching"},
                 {LLMR_ENGINE_CAP_TEXT, "text"},         {LLMR_ENGINE_CAP_CANCEL, "cancel"}};
    json_t *a = json_array();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (caps & names[i].bit)
            json_array_append_new(a, json_string(names[i].name));
    return a;
}

static void handle_open(const llmr_wire_frame *f)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *msg = llmr_wire_json(f, &err);
    const char *plugin = json_string_value(json_object_get(msg, "plugin"));
    const char *dir = json_string_value(json_object_get(msg, "model_dir"));
    const char *name = json_string_value(json_object_get(msg, "model_name"));
    const char *format = json_string_value(json_object_get(msg, "format"));
    const char *gguf = json_string_value(json_object_get(msg, "gguf_file"));
    json_t *out = json_object();
    llmr_status st = LLMR_OK;
    if (w.plugin_open) {
        st = LLMR_INTERNAL;
        llmr_strbuf_puts(&err, "this worker has a plugin open already");
    } else if (!plugin || !name || (dir && !format)) {
        st = LLMR_INTERNAL;
        llmr_strbuf_puts(&err, "open needs plugin and model_name (and format with model_dir)");
    }
    if (st == LLMR_OK) {
        llmr_host_services_init(&w.host, name);
        st = llmr_plugin_open(plugin, &w.host, &w.plugin, &err);
        w.plugin_open = st == LLMR_OK;
    }
    if (st == LLMR_OK) {
        const llmr_engine_info *info = &w.plugin.info;
        w.engine_writes_text = info->capabilities & LLMR_ENGINE_CAP_TEXT;
        json_t *engine = json_pack("{s:s, s:s, s:o, s:i, s:{s:b, s:b, s:b}}", "name", info->name,
                                   "version", info->version, "capabilities",
                                   capability_names(info->capabilities), "max_top_logprobs",
                                   (int)info->max_top_logprobs, "optional", "estimate",
                                   w.plugin.has_estimate, "cancel", w.plugin.has_cancel,
                                   "memory", w.plugin.has_memory);
        json_object_set_new(engine, "table_abi",
                            json_sprintf("%u.%u", w.plugin.api->abi_major,
                                         w.plugin.api->abi_minor));
        json_object_set_new(out, "engine", engine);
        if (dir) { /* without a model: a probe of the plugin */
            st = llmr_model_desc_open(name, dir, format, gguf, &w.desc, &err);
            w.desc_open = st == LLMR_OK;
        }
    }
    if (st == LLMR_OK && w.desc_open) {
        const llmr_engine_model_desc *d = &w.desc.desc;
        json_object_set_new(out, "model",
                            json_pack("{s:s, s:s?, s:I, s:I}", "runtime", d->runtime,
                                      "architecture", d->architecture, "total_bytes",
                                      (json_int_t)d->total_bytes, "tensors",
                                      (json_int_t)d->tensor_count));
        char *tok_path = llmr_path_join(d->dir, "tokenizer.json");
        llmr_strbuf tok_err = LLMR_STRBUF_INIT;
        if (!w.engine_writes_text && tok_path && access(tok_path, F_OK) == 0 &&
            llmr_tokenizer_load_file(tok_path, &w.tok, &tok_err) != LLMR_OK)
            json_object_set_new(out, "tokenizer_error", json_string(llmr_strbuf_cstr(&tok_err)));
        json_object_set_new(out, "tokenizer", json_boolean(w.tok != NULL));
        llmr_strbuf_free(&tok_err);
        free(tok_path);
    }
    json_decref(msg);
    reply(out, st, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
}

/* Load params from the node's JSON; options_json points into *options_text. */
static void load_params(const json_t *msg, llmr_engine_load_params *p, char **options_text)
{
    *p = llmr_engine_load_default_params();
    uint64_t v;
    if (llmr_json_as_u64(json_object_get(msg, "context_length"), &v))
        p->context_length = (uint32_t)v;
    if (llmr_json_as_u64(json_object_get(msg, "max_batch"), &v))
        p->max_batch = (uint32_t)v;
    if (llmr_json_as_u64(json_object_get(msg, "threads"), &v))
        p->threads = (uint32_t)v;
    if (llmr_json_as_u64(json_object_get(msg, "vram_budget"), &v))
        p->vram_budget = v;
    if (llmr_json_as_u64(json_object_get(msg, "ram_budget"), &v))
        p->ram_budget = v;
    json_t *gpu = json_object_get(msg, "gpu_index");
    if (json_is_integer(gpu))
        p->gpu_index = (int32_t)json_integer_value(gpu);
    json_t *options = json_object_get(msg, "options");
    *options_text = json_is_object(options) ? json_dumps(options, JSON_COMPACT) : NULL;
    p->options_json = *options_text;
}

static bool ready_for(const char *what, llmr_strbuf *err)
{
    if (!w.desc_open) {
        llmr_strbuf_printf(err, "%s before the model was opened", what);
        return false;
    }
    return true;
}

static void handle_estimate(const llmr_wire_frame *f)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *msg = llmr_wire_json(f, &err);
    json_t *out = json_object();
    llmr_status st = msg && ready_for("estimate", &err) ? LLMR_OK : LLMR_INTERNAL;
    if (st == LLMR_OK) {
        llmr_engine_load_params p;
        char *options = NULL;
        load_params(msg, &p, &options);
        llmr_engine_memory m = {.struct_size = sizeof m};
        const char *source = "engine";
        if (w.plugin.has_estimate) {
            st = llmr_plugin_status(w.plugin.api->estimate(&w.desc.desc, &p, &m));
            if (st != LLMR_OK)
                llmr_strbuf_puts(&err, w.plugin.api->last_error(NULL));
        } else {
            /* No estimate: the weights are what the model needs at least. */
            source = "weight files";
            if (w.plugin.info.capabilities & LLMR_ENGINE_CAP_CUDA && p.gpu_index >= 0)
                m.vram_bytes = w.desc.desc.total_bytes;
            else
                m.ram_bytes = w.desc.desc.total_bytes;
        }
        json_object_set_new(out, "vram_bytes", json_integer((json_int_t)m.vram_bytes));
        json_object_set_new(out, "ram_bytes", json_integer((json_int_t)m.ram_bytes));
        json_object_set_new(out, "source", json_string(source));
        free(options);
    }
    json_decref(msg);
    reply(out, st, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
}

static void handle_load(const llmr_wire_frame *f)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *msg = llmr_wire_json(f, &err);
    json_t *out = json_object();
    llmr_status st = msg && ready_for("load", &err) ? LLMR_OK : LLMR_INTERNAL;
    if (st == LLMR_OK && w.model) {
        st = LLMR_INTERNAL;
        llmr_strbuf_puts(&err, "the model is loaded already");
    }
    if (st == LLMR_OK) {
        llmr_engine_load_params p;
        char *options = NULL;
        load_params(msg, &p, &options);
        uint64_t t0 = llmr_now_ns();
        st = llmr_plugin_status(w.plugin.api->load(&w.desc.desc, &p, &w.model));
        json_object_set_new(out, "load_ms", json_real((double)(llmr_now_ns() - t0) / 1e6));
        free(options);
        if (st != LLMR_OK || !w.model) {
            const char *why = w.plugin.api->last_error(NULL);
            llmr_strbuf_puts(&err, why && *why ? why : "the engine could not load the model");
            if (st == LLMR_OK)
                st = LLMR_LOAD_FAILED;
            w.model = NULL;
        }
    }
    if (st == LLMR_OK) {
        llmr_engine_model_info info = {.struct_size = sizeof info};
        st = llmr_plugin_status(w.plugin.api->model_info(w.model, &info));
        if (st != LLMR_OK)
            llmr_strbuf_puts(&err, w.plugin.api->last_error(w.model));
        json_object_set_new(out, "context_length", json_integer(info.context_length));
        json_object_set_new(out, "max_batch", json_integer(info.max_batch ? info.max_batch : 1));
        json_object_set_new(out, "vocab_size", json_integer(info.vocab_size));
        if (LLMR_ENGINE_HAS(&info, llmr_engine_model_info, kv_capacity_tokens) &&
            info.kv_capacity_tokens)
            json_object_set_new(out, "kv_capacity_tokens",
                                json_integer((json_int_t)info.kv_capacity_tokens));
        if (w.plugin.has_memory) {
            llmr_engine_memory m = {.struct_size = sizeof m};
            if (w.plugin.api->memory(w.model, &m) == LLMR_OK) {
                json_object_set_new(out, "vram_bytes", json_integer((json_int_t)m.vram_bytes));
                json_object_set_new(out, "ram_bytes", json_integer((json_int_t)m.ram_bytes));
            }
        }
    }
    json_decref(msg);
    reply(out, st, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
}

/* ---- the loop ----------------------------------------------------------------- */

static void shut_down(void)
{
    if (w.model)
        w.plugin.api->unload(w.model); /* running requests end, CANCELLED */
    w.model = NULL;
    if (w.tok)
        llmr_tokenizer_free(w.tok);
    w.tok = NULL;
    if (w.desc_open)
        llmr_model_desc_close(&w.desc);
    w.desc_open = false;
    /* The plugin stays mapped: engine threads may still be winding down. */
}

/* Ends the worker when the node is gone, even while the main thread is stuck in an
 * engine call.  (PR_SET_PDEATHSIG would fire when the node's thread that started
 * the worker ends, not the node.) */
static void *watch_parent(void *arg)
{
    pid_t parent = (pid_t)(intptr_t)arg;
    while (getppid() == parent)
        llmr_sleep_ms(500);
    _exit(0);
}

int llmr_engine_worker_main(int fd, const char *model_name)
{
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, watch_parent, (void *)(intptr_t)getppid()) == 0)
        pthread_detach(watcher);
    signal(SIGPIPE, SIG_IGN);
    fcntl(fd, F_SETFD, FD_CLOEXEC);   /* processes an engine starts must not hold it */
    w.fd = fd;
    llmr_wire_reader reader;
    llmr_wire_reader_init(&reader, fd);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    int rc = 0;
    for (;;) {
        llmr_wire_frame f;
        llmr_strbuf_reset(&err);
        llmr_status st = llmr_wire_read(&reader, &f, &err);
        if (st != LLMR_OK) {
            if (strcmp(llmr_strbuf_cstr(&err), "closed") != 0) {
                llmr_log_error("worker", "%s: bad frame from the node: %s", model_name,
                               llmr_strbuf_cstr(&err));
                rc = 1;
            }
            break;
        }
        switch (f.type) {
        case LLMR_WIRE_OPEN:
            handle_open(&f);
            break;
        case LLMR_WIRE_ESTIMATE:
            handle_estimate(&f);
            break;
        case LLMR_WIRE_LOAD:
            handle_load(&f);
            break;
        case LLMR_WIRE_SUBMIT:
            handle_submit(&f);
            break;
        case LLMR_WIRE_CANCEL:
            handle_cancel(f.request_id);
            break;
        case LLMR_WIRE_PING:
            handle_ping();
            break;
        case LLMR_WIRE_EXIT:
            shut_down();
            llmr_wire_reader_free(&reader);
            llmr_strbuf_free(&err);
            return 0;
        default:
            llmr_log_error("worker", "%s: unknown frame type %u from the node", model_name,
                           f.type);
            break;
        }
    }
    llmr_wire_reader_free(&reader);
    llmr_strbuf_free(&err);
    _exit(rc); /* the node is gone: engine threads may be mid-request; do not wait */
}

int llmr_engine_worker_cli(int argc, char **argv)
{
    const char *fd_text = NULL, *name = "?";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fd") == 0 && i + 1 < argc)
            fd_text = argv[++i];
        else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
            name = argv[++i];
    }
    char *end = NULL;
    long fd = fd_text ? strtol(fd_text, &end, 10) : -1;
    if (!fd_text || *end || fd < 0 || fd > 1 << 20) {
        fprintf(stderr, "llmr %s: started by the node only (--fd N --name MODEL)\n",
                LLMR_WORKER_COMMAND);
        return 2;
    }
    return llmr_engine_worker_main((int)fd, name);
}

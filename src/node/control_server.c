/* The node's control socket: see control_server.h. */
#include "node/control_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/log.h"

#define COMPONENT "control"
#define MAX_PROMPT_IDS (1u << 24)

struct llmr_control_server {
    int fd;
    int wake[2];
    char *path;
    llmr_engine_host *host;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned connections;
    int open_fds[64];
    bool stopping;
};

char *llmr_control_socket_path(const char *data_dir, llmr_strbuf *err)
{
    char *run = llmr_path_join(data_dir, "run");
    char *path = run ? llmr_path_join(run, "node.sock") : NULL;
    free(run);
    struct sockaddr_un sa;
    if (path && strlen(path) >= sizeof sa.sun_path) {
        llmr_strbuf_printf(err, "the control socket %s is %zu bytes long, more than a Unix "
                                "socket path may be (%zu): use a shorter --data-dir",
                           path, strlen(path), sizeof sa.sun_path - 1);
        free(path);
        return NULL;
    }
    return path;
}

/* ---- writing lines ----------------------------------------------------------------- */

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_json(int fd, json_t *value)
{
    char *text = json_dumps(value, JSON_COMPACT);
    json_decref(value);
    if (!text)
        return false;
    bool ok = send_all(fd, text, strlen(text)) && send_all(fd, "\n", 1);
    free(text);
    return ok;
}

static bool send_error(int fd, llmr_status st, const char *message)
{
    return send_json(fd, json_pack("{s:s, s:s}", "error", message, "status", llmr_status_name(st)));
}

/* ---- generate ---------------------------------------------------------------------- */

typedef struct stream {
    int fd;
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    bool broken; /* the client is gone */
} stream;

static const char *finish_name(uint32_t finish)
{
    switch (finish) {
    case LLMR_ENGINE_FINISH_STOP:
        return "stop";
    case LLMR_ENGINE_FINISH_LENGTH:
        return "length";
    case LLMR_ENGINE_FINISH_CANCELLED:
        return "cancelled";
    case LLMR_ENGINE_FINISH_ERROR:
        return "error";
    default:
        return "none";
    }
}

static void on_event(void *user, const llmr_gen_event *ev)
{
    stream *s = user;
    json_t *o;
    if (ev->finish) {
        o = json_pack("{s:s, s:s, s:s, s:i, s:i}", "event", "end", "finish",
                      finish_name(ev->finish), "status", llmr_status_name(ev->status),
                      "prompt_tokens", (int)ev->prompt_tokens, "completion_tokens",
                      (int)ev->completion_tokens);
        if (ev->message)
            json_object_set_new(o, "message", json_string(ev->message));
    } else {
        o = json_pack("{s:s, s:i}", "event", "token", "index", (int)ev->index);
    }
    if (ev->id >= 0) {
        json_object_set_new(o, "id", json_integer(ev->id));
        json_object_set_new(o, "text", json_stringn(ev->text ? ev->text : "", ev->text_len));
        json_object_set_new(o, "logprob", json_real(ev->logprob));
    } else if (ev->text_len) {
        json_object_set_new(o, "text", json_stringn(ev->text, ev->text_len));
    }
    bool ok = !s->broken && send_json(s->fd, o);
    pthread_mutex_lock(&s->lock);
    if (!ok)
        s->broken = true;
    if (ev->finish) {
        s->done = true;
        pthread_cond_broadcast(&s->done_cond);
    }
    pthread_mutex_unlock(&s->lock);
}

static bool ids_from(const json_t *a, int32_t **out, uint32_t *n, const char *what,
                     llmr_strbuf *err)
{
    *out = NULL;
    *n = 0;
    if (!a)
        return true;
    if (!json_is_array(a) || json_array_size(a) > MAX_PROMPT_IDS) {
        llmr_strbuf_printf(err, "%s must be an array of token ids", what);
        return false;
    }
    *out = malloc((json_array_size(a) + 1) * sizeof **out);
    if (!*out) {
        llmr_strbuf_puts(err, "out of memory");
        return false;
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            llmr_strbuf_printf(err, "%s[%zu] is not a token id", what, i);
            free(*out);
            *out = NULL;
            return false;
        }
        (*out)[i] = (int32_t)json_integer_value(v);
    }
    *n = (uint32_t)json_array_size(a);
    return true;
}

static void generate(llmr_control_server *srv, int fd, const json_t *req)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_gen_request g;
    memset(&g, 0, sizeof g);
    g.model = json_string_value(json_object_get(req, "model"));
    g.params = llmr_engine_request_default_params();
    int32_t *prompt = NULL, *stop_ids = NULL;
    const char *stops[16];
    size_t stop_lens[16];
    json_t *stop = json_object_get(req, "stop");
    llmr_status st = LLMR_OK;
    if (!g.model) {
        llmr_strbuf_puts(&err, "generate needs \"model\"");
        st = LLMR_INVALID_ARGUMENT;
    } else if (!ids_from(json_object_get(req, "prompt_ids"), &prompt, &g.params.prompt_len,
                         "prompt_ids", &err) ||
               !ids_from(json_object_get(req, "stop_ids"), &stop_ids, &g.params.stop_id_count,
                         "stop_ids", &err)) {
        st = LLMR_INVALID_ARGUMENT;
    } else if (stop && (!json_is_array(stop) || json_array_size(stop) > 16)) {
        llmr_strbuf_puts(&err, "stop must be an array of at most 16 strings");
        st = LLMR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; st == LLMR_OK && i < json_array_size(stop); i++) {
        json_t *v = json_array_get(stop, i);
        if (!json_is_string(v)) {
            llmr_strbuf_printf(&err, "stop[%zu] is not a string", i);
            st = LLMR_INVALID_ARGUMENT;
            break;
        }
        stops[i] = json_string_value(v);
        stop_lens[i] = json_string_length(v);
        g.stop_count = (uint32_t)i + 1;
    }
    if (st == LLMR_OK) {
        uint64_t v;
        g.params.prompt = prompt;
        g.params.stop_ids = stop_ids;
        g.stop_strings = stops;
        g.stop_lens = stop_lens;
        if (llmr_json_as_u64(json_object_get(req, "max_tokens"), &v))
            g.params.max_tokens = (uint32_t)(v > UINT32_MAX ? UINT32_MAX : v);
        if (llmr_json_as_u64(json_object_get(req, "seed"), &v))
            g.params.seed = v;
        if (llmr_json_as_u64(json_object_get(req, "logprobs"), &v)) {
            g.params.logprobs = 1;
            g.params.top_logprobs = (uint32_t)(v > 20 ? 20 : v);
        }
        json_t *t = json_object_get(req, "temperature");
        if (json_is_number(t))
            g.params.temperature = (float)json_number_value(t);
    }
    stream s = {.fd = fd};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.done_cond, NULL);
    uint64_t id = 0;
    if (st == LLMR_OK)
        st = llmr_engine_host_submit(srv->host, &g, on_event, &s, &id, &err);
    if (st != LLMR_OK) {
        send_error(fd, st, llmr_strbuf_cstr(&err));
    } else {
        /* Wait for the end; a client that hangs up cancels. */
        bool cancelled = false;
        pthread_mutex_lock(&s.lock);
        while (!s.done) {
            pthread_mutex_unlock(&s.lock);
            struct pollfd p = {fd, POLLIN, 0};
            int r = poll(&p, 1, 50);
            char c;
            bool gone = r > 0 && (p.revents & (POLLHUP | POLLERR) ||
                                  recv(fd, &c, 1, MSG_DONTWAIT) == 0);
            pthread_mutex_lock(&s.lock);
            if ((gone || s.broken || srv->stopping) && !cancelled && !s.done) {
                cancelled = true;
                pthread_mutex_unlock(&s.lock);
                llmr_engine_host_cancel(srv->host, id);
                pthread_mutex_lock(&s.lock);
            }
        }
        pthread_mutex_unlock(&s.lock);
    }
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.done_cond);
    free(prompt);
    free(stop_ids);
    llmr_strbuf_free(&err);
}

/* ---- connections --------------------------------------------------------------------- */

/* Reads one line (without its newline); NULL at the end or when over the limit. */
static char *read_line(int fd, llmr_strbuf *err)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    char c;
    for (;;) {
        ssize_t n = recv(fd, &c, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (c == '\n')
            return llmr_strbuf_take(&sb);
        if (sb.len >= LLMR_CONTROL_LINE_MAX) {
            llmr_strbuf_printf(err, "a request line longer than %u bytes", LLMR_CONTROL_LINE_MAX);
            break;
        }
        llmr_strbuf_putc(&sb, c);
    }
    llmr_strbuf_free(&sb);
    return NULL;
}

static void handle(llmr_control_server *srv, int fd)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *line = read_line(fd, &err);
    json_t *req = line ? llmr_json_parse(line, strlen(line), &err) : NULL;
    const char *op = json_string_value(json_object_get(req, "op"));
    const char *model = json_string_value(json_object_get(req, "model"));
    if (!req) {
        send_error(fd, LLMR_INVALID_ARGUMENT, err.len ? llmr_strbuf_cstr(&err) : "no request");
    } else if (!op) {
        send_error(fd, LLMR_INVALID_ARGUMENT, "a request is {\"op\": ...}");
    } else if (strcmp(op, "status") == 0) {
        send_json(fd, llmr_engine_host_status(srv->host));
    } else if (strcmp(op, "metrics") == 0) {
        llmr_strbuf text = LLMR_STRBUF_INIT;
        llmr_engine_host_metrics(srv->host, &text);
        send_json(fd, json_pack("{s:s%}", "metrics", text.data ? text.data : "", text.len));
        llmr_strbuf_free(&text);
    } else if (strcmp(op, "reload-plugins") == 0) {
        json_t *report = NULL;
        llmr_status st = llmr_engine_host_reload_plugins(srv->host, &report, &err);
        if (st == LLMR_OK)
            send_json(fd, report);
        else
            send_error(fd, st, llmr_strbuf_cstr(&err));
    } else if ((strcmp(op, "load") == 0 || strcmp(op, "unload") == 0) && model) {
        llmr_status st = strcmp(op, "load") == 0
                             ? llmr_engine_host_load(srv->host, model, &err)
                             : llmr_engine_host_unload(srv->host, model, &err);
        if (st == LLMR_OK)
            send_json(fd, json_pack("{s:b}", "ok", 1));
        else
            send_error(fd, st, llmr_strbuf_cstr(&err));
    } else if (strcmp(op, "generate") == 0) {
        generate(srv, fd, req);
    } else {
        llmr_strbuf_reset(&err);
        llmr_strbuf_puts(&err, "unknown op \"");
        llmr_strbuf_put_display(&err, op, strlen(op) > 40 ? 40 : strlen(op));
        llmr_strbuf_puts(&err, "\" (status, metrics, reload-plugins, load, unload, generate)");
        send_error(fd, LLMR_INVALID_ARGUMENT, llmr_strbuf_cstr(&err));
    }
    json_decref(req);
    free(line);
    llmr_strbuf_free(&err);
}

typedef struct conn {
    llmr_control_server *srv;
    int fd;
} conn;

static void *serve_connection(void *arg)
{
    conn *c = arg;
    llmr_control_server *srv = c->srv;
    handle(srv, c->fd);
    pthread_mutex_lock(&srv->lock);
    for (size_t i = 0; i < sizeof srv->open_fds / sizeof srv->open_fds[0]; i++)
        if (srv->open_fds[i] == c->fd)
            srv->open_fds[i] = -1;
    close(c->fd);
    srv->connections--;
    pthread_cond_broadcast(&srv->changed);
    pthread_mutex_unlock(&srv->lock);
    free(c);
    return NULL;
}

static void *accept_loop(void *arg)
{
    llmr_control_server *srv = arg;
    for (;;) {
        struct pollfd p[2] = {{srv->fd, POLLIN, 0}, {srv->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept(srv->fd, NULL, NULL);
        if (fd < 0)
            continue;
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        pthread_mutex_lock(&srv->lock);
        size_t slot = SIZE_MAX;
        for (size_t i = 0; i < sizeof srv->open_fds / sizeof srv->open_fds[0]; i++)
            if (srv->open_fds[i] < 0) {
                slot = i;
                break;
            }
        conn *c = slot != SIZE_MAX ? malloc(sizeof *c) : NULL;
        pthread_t t;
        if (c) {
            c->srv = srv;
            c->fd = fd;
            srv->open_fds[slot] = fd;
            srv->connections++;
        }
        pthread_mutex_unlock(&srv->lock);
        if (!c) {
            send_error(fd, LLMR_LIMIT_EXCEEDED, "too many control connections at once");
            close(fd);
            continue;
        }
        if (pthread_create(&t, NULL, serve_connection, c) == 0) {
            pthread_detach(t);
        } else {
            serve_connection(c); /* no thread: serve it here */
        }
    }
    return NULL;
}

llmr_status llmr_control_server_start(const char *path, llmr_engine_host *host,
                                      llmr_control_server **out, llmr_strbuf *err)
{
    *out = NULL;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        llmr_strbuf_printf(err, "control socket path too long: %s", path);
        return LLMR_INVALID_ARGUMENT;
    }
    memcpy(sa.sun_path, path, strlen(path));
    char *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash)
        *slash = '\0';
    llmr_status st = dir ? llmr_mkdir_p(dir, err) : LLMR_OOM_RAM;
    if (st == LLMR_OK)
        chmod(dir, 0700);
    free(dir);
    if (st != LLMR_OK)
        return st;
    /* A socket file left by a node that died: replace it; one that answers: refuse. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0) {
        close(probe);
        llmr_strbuf_printf(err, "another node is running with this data directory (it answers "
                                "on %s); stop it first or use another --data-dir",
                           path);
        return LLMR_INVALID_ARGUMENT;
    }
    if (probe >= 0)
        close(probe);
    unlink(path);
    llmr_control_server *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    s->host = host;
    s->fd = -1;
    s->wake[0] = s->wake[1] = -1;
    for (size_t i = 0; i < sizeof s->open_fds / sizeof s->open_fds[0]; i++)
        s->open_fds[i] = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(s->fd, 16) != 0 ||
        pipe(s->wake) != 0) {
        llmr_strbuf_printf(err, "cannot listen on %s: %s", path, strerror(errno));
        llmr_control_server_stop(s);
        return LLMR_IO;
    }
    chmod(path, 0600);
    if (pthread_create(&s->thread, NULL, accept_loop, s) != 0) {
        llmr_strbuf_puts(err, "cannot start the control thread");
        close(s->wake[1]);
        s->wake[1] = -1;
        llmr_control_server_stop(s);
        return LLMR_INTERNAL;
    }
    *out = s;
    return LLMR_OK;
}

void llmr_control_server_stop(llmr_control_server *s)
{
    if (!s)
        return;
    if (s->wake[1] >= 0) {
        if (write(s->wake[1], "x", 1) == 1)
            pthread_join(s->thread, NULL);
    }
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    for (size_t i = 0; i < sizeof s->open_fds / sizeof s->open_fds[0]; i++)
        if (s->open_fds[i] >= 0)
            shutdown(s->open_fds[i], SHUT_RDWR);
    while (s->connections)
        pthread_cond_wait(&s->changed, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (s->fd >= 0)
        close(s->fd);
    if (s->wake[0] >= 0)
        close(s->wake[0]);
    if (s->wake[1] >= 0)
        close(s->wake[1]);
    if (s->path)
        unlink(s->path);
    free(s->path);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->changed);
    free(s);
}

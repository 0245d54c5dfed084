/* `llmr bench router`: load through a real router in front of real nodes, all on this
 * machine, and the latency the router adds (docs/router.md, "Load benchmark").  This
 * file owns the run: the options, the child processes, the setup, the load and the
 * kill.  The load generator is bench_router_client.c; the report (percentiles, the
 * JSON, the table, whether the run passed) is bench_router_report.c.
 *
 * It writes a loopback model (the echo test engine) into a temporary directory,
 * starts a router (--no-auth, any free port) and --nodes nodes as child processes of
 * this one (each with max_batch enough for every connection and --token-delay-us
 * between tokens), registers the model, waits until every node has it ready, warms
 * the nodes and the router up, then keeps --concurrency streamed chat requests in
 * flight for --duration seconds (bench_router_client.c).  With --kill-node-after it
 * SIGKILLs the first node that many seconds in; the report then checks that each
 * stream in flight either finished or ended with an error event and [DONE] (never a
 * hang or a silent cut) and that every request started after the kill succeeded.
 *
 * Router-added latency, per request: the client's time to first body byte through
 * the router minus the node's time to first body byte as the router measured it (its
 * X-Llmr-Upstream-Ttfb-Us header).  While the load runs it samples the router
 * process's /proc/PID/status every PROC_SAMPLE_MS (its thread count at peak) and, at
 * the end, its peak resident memory (VmHWM).  Every child is reaped on every way out,
 * SIGINT and SIGTERM included. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/bench.h"
#include "cli/bench_router_client.h"
#include "cli/bench_router_report.h"
#include "common/clock.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/random.h"
#include "models/loopback_model.h"
#include "net/curl_handle.h"

#define CMD "bench router"
#define MODEL_NAME "echo"
#define MAX_NODES 32
#define READY_TIMEOUT_MS 60000u
#define PROC_SAMPLE_MS 50

/* ---- options ------------------------------------------------------------------------- */

typedef struct bench_opts {
    unsigned concurrency, nodes, tokens, threads;
    double duration_s, kill_after_s, hang_after_s; /* kill_after_s < 0: no kill */
    unsigned long token_delay_us;
    bool chat, json, keep;
} bench_opts;

static bool number_option(const char *name, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    double d = strtod(v, &end);
    if (!end || end == v || *end || !(d >= lo && d <= hi)) {
        llmr_cli_error(CMD, "%s takes a number from %g to %g, not \"%s\"", name, lo, hi, v);
        return false;
    }
    *out = d;
    return true;
}

static bool whole_option(const char *name, const char *v, double lo, double hi, unsigned *out)
{
    double d = 0;
    if (!number_option(name, v, lo, hi, &d))
        return false;
    if (d != floor(d)) {
        llmr_cli_error(CMD, "%s takes a whole number, not \"%s\"", name, v);
        return false;
    }
    *out = (unsigned)d;
    return true;
}

/* 0: parsed; otherwise the exit code. */
static int parse_options(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){500, 2, 64, 2, 60, -1, 0, 20000, true, false, false};
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (!strcmp(argv[i], "--json")) {
            o->json = true;
        } else if (!strcmp(argv[i], "--keep")) {
            o->keep = true;
        } else if (llmr_cli_option(argc, argv, &i, "--concurrency", &v, &bad)) {
            bad = bad || !whole_option("--concurrency", v, 1, 100000, &o->concurrency);
        } else if (llmr_cli_option(argc, argv, &i, "--duration", &v, &bad)) {
            bad = bad || !number_option("--duration", v, 0.1, 86400, &o->duration_s);
        } else if (llmr_cli_option(argc, argv, &i, "--nodes", &v, &bad)) {
            bad = bad || !whole_option("--nodes", v, 1, MAX_NODES, &o->nodes);
        } else if (llmr_cli_option(argc, argv, &i, "--tokens", &v, &bad)) {
            bad = bad || !whole_option("--tokens", v, 1, 100000, &o->tokens);
        } else if (llmr_cli_option(argc, argv, &i, "--token-delay-us", &v, &bad)) {
            unsigned us = 0;
            bad = bad || !whole_option("--token-delay-us", v, 0, 10000000, &us);
            o->token_delay_us = us;
        } else if (llmr_cli_option(argc, argv, &i, "--kill-node-after", &v, &bad)) {
            bad = bad || !number_option("--kill-node-after", v, 0.001, 86400, &o->kill_after_s);
        } else if (llmr_cli_option(argc, argv, &i, "--hang-after", &v, &bad)) {
            bad = bad || !number_option("--hang-after", v, 0.1, 3600, &o->hang_after_s);
        } else if (llmr_cli_option(argc, argv, &i, "--threads", &v, &bad)) {
            bad = bad || !whole_option("--threads", v, 1, 64, &o->threads);
        } else if (llmr_cli_option(argc, argv, &i, "--endpoint", &v, &bad)) {
            o->chat = !bad && !strcmp(v, "chat");
            if (!bad && !o->chat && strcmp(v, "completions") != 0) {
                llmr_cli_error(CMD, "--endpoint is chat or completions");
                bad = true;
            }
        } else if (!bad) {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr bench --help", argv[i]);
            bad = true;
        }
    }
    if (!bad && o->kill_after_s >= 0 && o->nodes < 2) {
        llmr_cli_error(CMD, "--kill-node-after needs --nodes 2 or more (a node must survive)");
        bad = true;
    }
    if (!bad && o->kill_after_s >= o->duration_s) {
        llmr_cli_error(CMD, "--kill-node-after must be less than --duration");
        bad = true;
    }
    if (o->hang_after_s <= 0) { /* a whole stream, three times over, and at least 10 s */
        double stream_s = o->tokens * (o->token_delay_us / 1e6);
        o->hang_after_s = fmax(10, 3 * stream_s + 5);
    }
    return bad ? LLMR_EXIT_USAGE : 0;
}

/* ---- child processes ----------------------------------------------------------------- */

typedef struct child {
    pid_t pid; /* 0: not running (never started, or reaped) */
    int status; /* waitpid's, once reaped */
    char *log;
    char *data_dir;
    unsigned port; /* its HTTP port once known */
} child;

typedef struct bench {
    bench_opts o;
    char *tmp;
    child router, node[MAX_NODES];
    unsigned router_port;
    char router_url[64];
    char *model_dir;
    char node_key[40];    /* the nodes' own --api-key: the warm-up goes straight to them */
    char node_auth[64];   /* "Authorization: Bearer " node_key */
} bench;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* The environment for the children: this one's, without what would change how they
 * run (keys, a router, engine options). */
static char **child_env(void)
{
    extern char **environ;
    static const char *const dropped[] = {"LLMR_API_KEY=",  "LLMR_NODE_KEY=",       "LLMR_ROUTER=",
                                          "LLMR_ADMIN_KEY=", "LLMR_ENGINE_OPTIONS="};
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 1, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; env && i < n; i++) {
        bool drop = false;
        for (size_t d = 0; d < sizeof dropped / sizeof dropped[0]; d++)
            drop = drop || strncmp(environ[i], dropped[d], strlen(dropped[d])) == 0;
        if (!drop)
            env[k++] = environ[i];
    }
    return env;
}

/* Starts this binary with argv (argv[0] included), output to ch->log, in a process
 * group of its own (so that a terminal's ^C reaches only this process, which stops
 * the children in order) and killed if this process dies. */
static bool spawn(child *ch, char *const argv[])
{
    char **env = child_env();
    int log = open(ch->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_t parent = getpid();
    pid_t pid = env && log >= 0 ? fork() : -1;
    if (pid == 0) { /* only async-signal-safe calls from here */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, 0);
        dup2(log, 1);
        dup2(log, 2);
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    if (log >= 0)
        close(log);
    free(env);
    if (pid < 0) {
        llmr_cli_error(CMD, "cannot start %s %s: %s", argv[0], argv[1], strerror(errno));
        return false;
    }
    ch->pid = pid;
    return true;
}

/* false when the child has exited (it is reaped then). */
static bool child_alive(child *ch)
{
    if (!ch->pid)
        return false;
    if (waitpid(ch->pid, &ch->status, WNOHANG) == ch->pid) {
        ch->pid = 0;
        return false;
    }
    return true;
}

static void print_log_tail(const child *ch, const char *what)
{
    char *text = NULL;
    size_t len = 0;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (ch->log && llmr_read_file(ch->log, 64u << 20, &text, &len, &err) == LLMR_OK) {
        size_t start = len, lines = 0;
        while (start > 0 && lines <= 15)
            if (text[--start] == '\n')
                lines++;
        fprintf(stderr, "--- the end of the %s's log (%s):\n%s\n", what, ch->log, text + start);
    }
    free(text);
    llmr_strbuf_free(&err);
}

/* SIGTERM to every child still running, up to 5 s to exit, then SIGKILL; all reaped.
 * false when one did not exit cleanly (a crash on the way out, a sanitizer's report):
 * said on stderr. */
static bool stop_children(bench *b)
{
    child *all[MAX_NODES + 1];
    bool running_before[MAX_NODES + 1], clean = true;
    size_t n = 0;
    for (unsigned i = 0; i < b->o.nodes; i++)
        all[n++] = &b->node[i];
    all[n++] = &b->router; /* last: the nodes' goodbyes reach it */
    for (size_t i = 0; i < n; i++) {
        running_before[i] = all[i]->pid != 0;
        if (all[i]->pid)
            kill(all[i]->pid, SIGTERM);
    }
    uint64_t deadline = llmr_now_ms() + 5000;
    for (;;) {
        bool running = false;
        for (size_t i = 0; i < n; i++)
            running = child_alive(all[i]) || running;
        if (!running || llmr_now_ms() > deadline)
            break;
        llmr_sleep_ms(20);
    }
    for (size_t i = 0; i < n; i++) {
        if (all[i]->pid) {
            kill(all[i]->pid, SIGKILL);
            waitpid(all[i]->pid, &all[i]->status, 0);
            all[i]->pid = 0;
        }
        int st = all[i]->status;
        if (running_before[i] && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            fprintf(stderr, "bench router: warning: %s did not stop cleanly (%s %d)\n", all[i]->log,
                    WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            clean = false;
        }
    }
    return clean;
}

/* ---- HTTP to the router and nodes (setup only; the load is bench_router_client.c) ---- */

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    llmr_strbuf_append(user, data, size * n);
    return size * n;
}

/* The status (0: no answer) and the body into out. */
/* auth: an "Authorization: ..." header, or NULL. */
static long http_call_as(const char *method, const char *url, const char *body, const char *auth, llmr_strbuf *out)
{
    CURL *c = llmr_curl_new();
    if (!c)
        return 0;
    llmr_strbuf_reset(out);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (auth)
        h = curl_slist_append(h, auth);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

static long http_call(const char *method, const char *url, const char *body, llmr_strbuf *out)
{
    return http_call_as(method, url, body, NULL, out);
}

static json_t *get_json(const bench *b, const char *path)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", b->router_url, path);
    llmr_strbuf body = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    json_t *v = http_call("GET", url, NULL, &body) == 200 ? llmr_json_parse(body.data, body.len, &err) : NULL;
    llmr_strbuf_free(&body);
    llmr_strbuf_free(&err);
    return v;
}

/* ---- setup ------------------------------------------------------------------------------ */

static bool children_alive(bench *b, const char **dead)
{
    if (!child_alive(&b->router)) {
        print_log_tail(&b->router, "router");
        *dead = "the router";
        return false;
    }
    for (unsigned i = 0; i < b->o.nodes; i++)
        if (!child_alive(&b->node[i])) {
            print_log_tail(&b->node[i], "node");
            *dead = "a node";
            return false;
        }
    return true;
}

/* Waits for the router's "listening on http://127.0.0.1:PORT" line. */
static bool router_start(bench *b)
{
    char *dir = llmr_path_join(b->tmp, "router");
    b->router.log = llmr_path_join(b->tmp, "router.log");
    b->router.data_dir = dir;
    char *argv[] = {"llmr", "router", "--no-auth", "--host", "127.0.0.1", "--port", "0",
                    "--data-dir", dir, "--log-level", "info", NULL};
    if (!dir || !b->router.log || !spawn(&b->router, argv))
        return false;
    static const char mark[] = "listening on http://127.0.0.1:";
    for (uint64_t end = llmr_now_ms() + 15000; llmr_now_ms() < end && !interrupted;) {
        char *text = NULL;
        size_t len = 0;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_read_file(b->router.log, 64u << 20, &text, &len, &err) == LLMR_OK) {
            const char *at = strstr(text, mark);
            b->router_port = at ? (unsigned)strtoul(at + sizeof mark - 1, NULL, 10) : 0;
        }
        free(text);
        llmr_strbuf_free(&err);
        if (b->router_port) {
            snprintf(b->router_url, sizeof b->router_url, "http://127.0.0.1:%u", b->router_port);
            return true;
        }
        if (!child_alive(&b->router))
            break;
        llmr_sleep_ms(50);
    }
    if (!interrupted) {
        llmr_cli_error(CMD, "the router did not start");
        print_log_tail(&b->router, "router");
    }
    return false;
}

static bool nodes_start(bench *b)
{
    char options[160];
    /* every connection may land on one node (after a kill); little memory per token */
    snprintf(options, sizeof options, "{\"max_batch\": %u, \"token_delay_us\": %lu, \"kv_bytes_per_token\": 16}",
             b->o.concurrency + 8, b->o.token_delay_us);
    /* a node behind a router answers /v1 only to it, or with its own key: the warm-up's */
    unsigned char rnd[16];
    if (!llmr_random_bytes(rnd, sizeof rnd)) {
        llmr_cli_error(CMD, "no random bytes for the nodes' key");
        return false;
    }
    int w = snprintf(b->node_key, sizeof b->node_key, "bench-");
    for (size_t i = 0; i < sizeof rnd; i++)
        w += snprintf(b->node_key + w, sizeof b->node_key - (size_t)w, "%02x", rnd[i]);
    snprintf(b->node_auth, sizeof b->node_auth, "Authorization: Bearer %s", b->node_key);
    for (unsigned i = 0; i < b->o.nodes; i++) {
        child *n = &b->node[i];
        char name[32];
        snprintf(name, sizeof name, "node-%u", i + 1);
        n->data_dir = llmr_path_join(b->tmp, name);
        snprintf(name, sizeof name, "node-%u.log", i + 1);
        n->log = llmr_path_join(b->tmp, name);
        char *argv[] = {"llmr", "node", "--router", b->router_url, "--allow-cpu", "--heartbeat", "0.5",
                        "--engine-options", options, "--host", "127.0.0.1", "--port", "0",
                        "--data-dir", n->data_dir, "--log-level", "warn", "--api-key", b->node_key, NULL};
        if (!n->data_dir || !n->log || !spawn(n, argv))
            return false;
    }
    return true;
}

static bool register_model(bench *b)
{
    llmr_loopback_model_options mo;
    llmr_loopback_model_options_default(&mo);
    if (mo.context_length < b->o.tokens + 512)
        mo.context_length = b->o.tokens + 512;
    llmr_strbuf err = LLMR_STRBUF_INIT, out = LLMR_STRBUF_INIT;
    b->model_dir = llmr_path_join(b->tmp, "model/" MODEL_NAME);
    bool ok = b->model_dir && llmr_loopback_model_write(b->model_dir, &mo, &err) == LLMR_OK;
    if (!ok)
        llmr_cli_error(CMD, "cannot write the loopback model: %s", llmr_strbuf_cstr(&err));
    json_t *req = json_pack("{s:s, s:s, s:s}", "path", b->model_dir ? b->model_dir : "", "format",
                            "safetensors", "name", MODEL_NAME);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    char url[128];
    snprintf(url, sizeof url, "%s/v0/models", b->router_url);
    long st = ok && text ? http_call("POST", url, text, &out) : 0;
    if (ok && st != 201) {
        llmr_cli_error(CMD, "registering the model: HTTP %ld %s", st, llmr_strbuf_cstr(&out));
        ok = false;
    }
    free(text);
    json_decref(req);
    llmr_strbuf_free(&err);
    llmr_strbuf_free(&out);
    return ok;
}

/* How many online nodes have the model ready, as the router sees it. */
static unsigned nodes_ready(const bench *b)
{
    json_t *m = get_json(b, "/v0/models/" MODEL_NAME);
    unsigned ready = 0;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(m, "nodes"), i, n)
    {
        const char *state = json_string_value(json_object_get(n, "state"));
        ready += state && !strcmp(state, "ready") && json_is_true(json_object_get(n, "online"));
    }
    json_decref(m);
    return ready;
}

static bool wait_ready(bench *b)
{
    const char *dead = NULL;
    uint64_t end = llmr_now_ms() + READY_TIMEOUT_MS;
    while (!interrupted && children_alive(b, &dead)) {
        unsigned ready = nodes_ready(b);
        if (ready == b->o.nodes)
            break;
        if (llmr_now_ms() > end) {
            llmr_cli_error(CMD, "after %u s, %u of %u nodes have the model ready", READY_TIMEOUT_MS / 1000,
                           ready, b->o.nodes);
            print_log_tail(&b->node[0], "first node");
            return false;
        }
        llmr_sleep_ms(100);
    }
    if (dead)
        llmr_cli_error(CMD, "%s exited during the setup", dead);
    for (unsigned i = 0; !dead && !interrupted && i < b->o.nodes; i++) {
        char *run = llmr_path_join(b->node[i].data_dir, "run/http.port");
        char *text = NULL;
        size_t len = 0;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (run && llmr_read_file(run, 64, &text, &len, &err) == LLMR_OK)
            b->node[i].port = (unsigned)strtoul(text, NULL, 10);
        free(text);
        free(run);
        llmr_strbuf_free(&err);
        if (!b->node[i].port) {
            llmr_cli_error(CMD, "node %u wrote no HTTP port", i + 1);
            return false;
        }
    }
    return !dead && !interrupted;
}

static char *request_body(const bench_opts *o, bool stream, unsigned tokens)
{
    json_t *r = json_pack("{s:s, s:i, s:b}", "model", MODEL_NAME, "max_tokens", (int)tokens, "stream", stream);
    if (o->chat)
        json_object_set_new(r, "messages", json_pack("[{s:s, s:s}]", "role", "user", "content", "Say something."));
    else
        json_object_set_new(r, "prompt", json_string("Say something."));
    if (stream)
        json_object_set_new(r, "stream_options", json_pack("{s:b}", "include_usage", 1));
    char *text = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    return text;
}

/* Each node loads the model (a request straight to it), then a few requests pass
 * through the router. */
static bool warm_up(bench *b)
{
    const char *path = b->o.chat ? "/v1/chat/completions" : "/v1/completions";
    char *body = request_body(&b->o, false, 2);
    llmr_strbuf out = LLMR_STRBUF_INIT;
    bool ok = body != NULL;
    char url[128];
    for (unsigned i = 0; ok && i < b->o.nodes; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:%u%s", b->node[i].port, path);
        long st = http_call_as("POST", url, body, b->node_auth, &out);
        if (st != 200) {
            llmr_cli_error(CMD, "warming node %u up: HTTP %ld %s", i + 1, st, llmr_strbuf_cstr(&out));
            ok = false;
        }
    }
    snprintf(url, sizeof url, "%s%s", b->router_url, path);
    for (unsigned i = 0; ok && i < 2 * b->o.nodes; i++) {
        long st = http_call("POST", url, body, &out);
        if (st != 200) {
            llmr_cli_error(CMD, "a request through the router: HTTP %ld %s", st, llmr_strbuf_cstr(&out));
            ok = false;
        }
    }
    free(body);
    llmr_strbuf_free(&out);
    return ok;
}

/* ---- the run ------------------------------------------------------------------------- */

typedef struct run_info {
    uint64_t start_ns, kill_ns; /* kill_ns 0: no kill */
    int killed_outstanding;     /* the router's count on the killed node; -1: unknown */
    bool interrupted;
    long threads_peak;          /* the router process's most threads seen; -1: unknown */
    long rss_peak_kib;          /* its peak resident memory (VmHWM); -1: unknown */
} run_info;

/* The value of a "Name:   N ..." line of /proc/PID/status; -1 when not read. */
static long proc_status_value(pid_t pid, const char *name)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = pid > 0 ? fopen(path, "re") : NULL;
    if (!f)
        return -1;
    long v = -1;
    size_t n = strlen(name);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, name, n) && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* The router's thread count now, kept when it is the highest seen. */
static void sample_router(const bench *b, run_info *ri)
{
    long t = proc_status_value(b->router.pid, "Threads");
    if (t > ri->threads_peak)
        ri->threads_peak = t;
}

/* The router's count of requests outstanding on node i; -1: unknown. */
static int outstanding_on(const bench *b, unsigned i)
{
    json_t *all = get_json(b, "/v0/nodes"), *n;
    int found = -1;
    char tail[24];
    snprintf(tail, sizeof tail, ":%u", b->node[i].port);
    size_t k, t = strlen(tail);
    json_array_foreach(json_object_get(all, "nodes"), k, n)
    {
        const char *url = json_string_value(json_object_get(n, "url"));
        size_t len = url ? strlen(url) : 0;
        if (len >= t && !strcmp(url + len - t, tail))
            found = (int)json_integer_value(json_object_get(n, "outstanding"));
    }
    json_decref(all);
    return found;
}

static void kill_node(bench *b, run_info *ri)
{
    ri->killed_outstanding = outstanding_on(b, 0);
    ri->kill_ns = llmr_now_ns();
    if (b->node[0].pid > 0) { /* never kill(0): that is this process group */
        kill(b->node[0].pid, SIGKILL);
        waitpid(b->node[0].pid, NULL, 0);
    }
    b->node[0].pid = 0;
    fprintf(stderr, "bench router: %.1f s: node 1 killed (SIGKILL)\n", (ri->kill_ns - ri->start_ns) / 1e9);
}

static void progress(const run_info *ri, brc_load *l)
{
    brc_live v;
    brc_live_counts(l, &v);
    fprintf(stderr, "bench router: %5.1f s: %llu done, %llu in flight, %llu errors\n",
            (llmr_now_ns() - ri->start_ns) / 1e9, (unsigned long long)v.done, (unsigned long long)v.in_flight,
            (unsigned long long)v.errors);
}

/* Runs the load for the duration, kills a node on time, drains. */
static bool run_load(bench *b, brc_load **out, run_info *ri)
{
    char *body = request_body(&b->o, true, b->o.tokens);
    double stream_ms = b->o.tokens * (b->o.token_delay_us / 1e3);
    brc_options co = {b->router_port, b->o.chat ? "/v1/chat/completions" : "/v1/completions", body,
                      b->o.concurrency, b->o.threads, (unsigned)fmin(stream_ms, 1000),
                      (unsigned)(b->o.hang_after_s * 1000)};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    memset(ri, 0, sizeof *ri);
    ri->killed_outstanding = -1;
    ri->threads_peak = ri->rss_peak_kib = -1;
    ri->start_ns = llmr_now_ns();
    llmr_status st = body ? brc_start(&co, out, &err) : LLMR_OOM_RAM;
    free(body);
    if (st != LLMR_OK) {
        llmr_cli_error(CMD, "%s", err.len ? llmr_strbuf_cstr(&err) : "out of memory");
        llmr_strbuf_free(&err);
        return false;
    }
    llmr_strbuf_free(&err);
    uint64_t end = ri->start_ns + (uint64_t)(b->o.duration_s * 1e9);
    uint64_t kill_at = b->o.kill_after_s >= 0 ? ri->start_ns + (uint64_t)(b->o.kill_after_s * 1e9) : 0;
    uint64_t next_progress = ri->start_ns + 1000000000u, next_sample = 0;
    bool stopping = false;
    for (;;) {
        uint64_t now = llmr_now_ns();
        if (now >= next_sample) {
            sample_router(b, ri);
            next_sample = now + PROC_SAMPLE_MS * 1000000u;
        }
        if (interrupted) {
            brc_abort(*out);
            ri->interrupted = true;
            break;
        }
        if (kill_at && !ri->kill_ns && now >= kill_at)
            kill_node(b, ri);
        if (!stopping && now >= end) {
            brc_stop_issuing(*out);
            stopping = true;
        }
        brc_live v;
        brc_live_counts(*out, &v);
        if (stopping && v.in_flight == 0)
            break;
        if (now >= next_progress) {
            progress(ri, *out);
            next_progress += 1000000000u;
        }
        llmr_sleep_ms(10);
    }
    brc_join(*out);
    sample_router(b, ri);
    ri->rss_peak_kib = proc_status_value(b->router.pid, "VmHWM");
    return !ri->interrupted;
}

/* The report is bench_router_report.c: what it needs out of the options and the run. */
static int report_run(const bench *b, brc_load *l, const run_info *ri)
{
    brr_input in = {
        .concurrency = b->o.concurrency,
        .nodes = b->o.nodes,
        .tokens = b->o.tokens,
        .duration_s = b->o.duration_s,
        .token_delay_us = b->o.token_delay_us,
        .chat = b->o.chat,
        .json = b->o.json,
        .load = l,
        .start_ns = ri->start_ns,
        .kill_ns = ri->kill_ns,
        .killed_outstanding = ri->killed_outstanding,
        .router_threads_peak = ri->threads_peak,
        .router_rss_peak_kib = ri->rss_peak_kib,
    };
    return brr_report(&in);
}

/* ---- the command -------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void bench_free(bench *b, bool remove_tmp)
{
    if (!stop_children(b))
        remove_tmp = false;
    if (b->tmp && remove_tmp)
        nftw(b->tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    else if (b->tmp)
        fprintf(stderr, "bench router: the logs and data are kept in %s\n", b->tmp);
    free(b->tmp);
    free(b->router.log);
    free(b->router.data_dir);
    for (unsigned i = 0; i < MAX_NODES; i++) {
        free(b->node[i].log);
        free(b->node[i].data_dir);
    }
    free(b->model_dir);
}

/* One descriptor per connection: the soft limit goes up to the hard one. */
static void raise_fd_limit(unsigned need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need + 256)
        return;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need + 64)
        fprintf(stderr, "bench router: warning: %llu file descriptors at most, for %u connections\n",
                (unsigned long long)rl.rlim_cur, need);
}

static bool setup(bench *b)
{
    raise_fd_limit(b->o.concurrency);
    const char *root = getenv("TMPDIR");
    char *tmpl = llmr_path_join(root && *root ? root : "/tmp", "llmr-bench-router-XXXXXX");
    b->tmp = tmpl && mkdtemp(tmpl) ? tmpl : NULL;
    if (!b->tmp) {
        free(tmpl);
        llmr_cli_error(CMD, "cannot make a temporary directory: %s", strerror(errno));
        return false;
    }
    fprintf(stderr, "bench router: starting a router and %u node%s in %s\n", b->o.nodes, b->o.nodes == 1 ? "" : "s",
            b->tmp);
    if (!router_start(b) || !register_model(b) || !nodes_start(b) || !wait_ready(b))
        return false;
    fprintf(stderr, "bench router: router on port %u, model ready on %u nodes; warming up\n", b->router_port,
            b->o.nodes);
    return warm_up(b);
}

int llmr_bench_router(int argc, char **argv, const llmr_config *cfg)
{
    (void)cfg;
    bench b;
    memset(&b, 0, sizeof b);
    int rc = parse_options(argc, argv, &b.o);
    if (rc)
        return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    struct sigaction old_int, old_term;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = LLMR_EXIT_FAILED;
    brc_load *load = NULL;
    run_info ri;
    memset(&ri, 0, sizeof ri);
    if (setup(&b) && !interrupted) {
        fprintf(stderr, "bench router: %u connections for %.1f s%s\n", b.o.concurrency, b.o.duration_s,
                b.o.kill_after_s >= 0 ? ", one node killed on the way" : "");
        if (run_load(&b, &load, &ri))
            rc = report_run(&b, load, &ri);
    }
    if (interrupted) {
        llmr_cli_error(CMD, "interrupted; stopping the router and nodes");
        rc = 130;
    }
    brc_free(load);
    bench_free(&b, (rc == LLMR_EXIT_OK || interrupted) && !b.o.keep);
    curl_global_cleanup();
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}

/* `llmr node`: run a node, or talk to the one running on this data directory through
 * its control socket (node/control_server.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/id_list.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "node/control_server.h"
#include "node/node_service.h"
#include "tokenizer/tokenizer.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr node [run] [--router URL] [--node-key KEY] [--node-url URL]\n"
            "                 [--node-name NAME] [--api-key KEY] [--allow-cpu]\n"
            "                 [--origin-allowlist HOSTS] [--prefer-origin] [--local-dirs DIRS]\n"
            "                 [--heartbeat SECONDS] [--no-http] [--engine-options JSON]\n"
            "                 [--cors-origins LIST] [--default-max-tokens N]\n"
            "                 [--shutdown-grace SECONDS] [--max-connections N]\n"
            "                 [--max-connections-per-client N] [--header-timeout SECONDS]\n"
            "                 [--body-timeout SECONDS]\n"
            "       llmr node status [--json]\n"
            "       llmr node metrics\n"
            "       llmr node reload-plugins\n"
            "       llmr node load MODEL | unload MODEL\n"
            "       llmr node generate MODEL (--prompt TEXT | --prompt-ids 1,2,3)\n"
            "                 [--max-tokens N] [--temperature T] [--seed S] [--stop TEXT]...\n"
            "                 [--json]\n\n"
            "run (the default) starts a node: the engine plugins found in the plugin\n"
            "directories (--plugin-dirs; by default DATA_DIR/engines and the engines\n"
            "installed with llmr), the models under DATA_DIR/models (each loaded on its\n"
            "first request, in a worker process of its own), and a control socket at\n"
            "DATA_DIR/run/node.sock.  SIGHUP reloads the plugins; SIGINT or SIGTERM stops:\n"
            "no new connection or request is taken, running requests have --shutdown-grace\n"
            "seconds (default 30) to finish, then end (a stream with an error event).\n\n"
            "It serves the OpenAI API on --host and --port (HTTPS with --tls-cert FILE and\n"
            "--tls-key FILE; --tls-ca FILE: the CA trusted for the router's certificate;\n"
            "docs/security.md) (port 0: any free port, written to\n"
            "DATA_DIR/run/http.port): POST /v1/chat/completions and /v1/completions (plain\n"
            "and streamed), GET /v1/models and /v1/models/ID, /health and /metrics\n"
            "(docs/node.md).  Each answer carries its request id (the client's x-request-id,\n"
            "else a new one) and writes an access line to the log (--log-format json: JSON\n"
            "lines); a client that goes away cancels its request, streamed or not (logged as\n"
            "499).\n"
            "  --api-key KEY         clients must send \"Authorization: Bearer KEY\"\n"
            "                        (or LLMR_API_KEY); default: no key\n"
            "  --no-http             no HTTP API, the control socket only\n"
            "  --default-max-tokens N  what a request without max_tokens (or with\n"
            "                        max_tokens: null) generates at most (default 8192)\n"
            "  --shutdown-grace S    how long running requests may go on at a stop\n"
            "  --max-connections N   client connections at once (default 1024)\n"
            "  --max-connections-per-client N  connections at once from one IP address\n"
            "                        (default: no limit but --max-connections)\n"
            "  --header-timeout S    a connection that has not sent a request's headers S\n"
            "                        seconds after it opened is closed (default 10)\n"
            "  --body-timeout S      likewise for its body, from the headers (default 60)\n"

            "  --cors-origins LIST   origins a browser app may call the API from,\n"
            "                        comma-separated, or * (or LLMR_CORS_ORIGINS); default:\n"
            "                        no CORS\n"
            "  --engine-options JSON load options for every model this node serves, a JSON\n"
            "                        object handed to the engine (or LLMR_ENGINE_OPTIONS);\n"
            "                        e.g. '{\"max_batch\": 64}' (the loopback engine also\n"
            "                        takes token_delay_us)\n"
            "With --router URL (or LLMR_ROUTER) it registers with that router, sends a\n"
            "heartbeat every --heartbeat seconds (default 5), and fetches and verifies the\n"
            "models the router lists into DATA_DIR/models (docs/node-router-protocol.md);\n"
            "a model the router removes (llmr rm) is unloaded and its copy deleted, one it\n"
            "registers again with other files is fetched again, and llmr stop unloads one.\n"
            "Its /v1 then answers only the credential the router gave it at registration,\n"
            "or --api-key: a client that goes around the router gets 401 (docs/security.md).\n"
            "  --node-key KEY        the router's node key (or LLMR_NODE_KEY); one node a key\n"
            "  --node-url URL        how the router reaches this node (default\n"
            "                        http://HOST:PORT); its host must resolve to the address\n"
            "                        the node registers from, unless the router allows it\n"
            "  --node-name NAME      default: the host name\n"
            "  --allow-cpu           register even without a GPU (tests, tiny models)\n"
            "  --origin-allowlist H  hosts a model file may be fetched from directly\n"
            "                        (default huggingface.co,hf.co)\n"
            "  --prefer-origin       fetch from an allowed origin before the router\n"
            "  --local-dirs DIRS     directories of this machine (comma-separated) whose\n"
            "                        models, registered with the router from there, are\n"
            "                        used in place: hard-linked into DATA_DIR/models after\n"
            "                        a check of size and sampled digest, no byte copied\n"
            "                        (default: none; `llmr serve` allows every directory)\n\n"
            "The other forms talk to that running node (through its control socket; with no\n"
            "node at DATA_DIR, the node `llmr serve` runs in DATA_DIR/node):\n"
            "  status          plugins (and refused ones, with why), models (state, reason,\n"
            "                  engine, worker, memory) and memory readings\n"
            "  metrics         counters and gauges in Prometheus text: requests, tokens,\n"
            "                  timeouts, restarts, memory, memory alerts\n"
            "  reload-plugins  load changed plugins beside the running ones and move models\n"
            "                  over without failing a request; prints what happened\n"
            "  load, unload    load a model now, or unload it when its requests are done\n"
            "  generate        run one request and print its text as it comes (--json:\n"
            "                  one JSON event per line); --prompt is tokenized with the\n"
            "                  model's tokenizer.json, with special tokens recognised\n");
}

/* ---- the client ---------------------------------------------------------------------- */

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* The control socket of the node of DATA_DIR: DATA_DIR/run/node.sock, or, when there
 * is none, that of the node `llmr serve` runs in DATA_DIR/node. */
static char *node_socket_path(const char *data_dir, llmr_strbuf *err)
{
    char *path = llmr_control_socket_path(data_dir, err);
    struct stat st;
    if (!path || stat(path, &st) == 0)
        return path;
    char *serve_dir = data_dir ? llmr_path_join(data_dir, "node") : NULL;
    llmr_strbuf ignored = LLMR_STRBUF_INIT;
    char *serve_path = serve_dir ? llmr_control_socket_path(serve_dir, &ignored) : NULL;
    llmr_strbuf_free(&ignored);
    free(serve_dir);
    if (serve_path && stat(serve_path, &st) == 0) {
        free(path);
        return serve_path;
    }
    free(serve_path);
    return path;
}

static int connect_node(const llmr_config *cfg)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *path = node_socket_path(llmr_config_get(cfg, LLMR_CONFIG_DATA_DIR), &err);
    if (!path) {
        llmr_cli_error("node", "%s", llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return -1;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        llmr_cli_error("node", "no node answers on %s (%s): start one with `llmr node` and the "
                               "same --data-dir",
                       path, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    free(path);
    llmr_strbuf_free(&err);
    return fd;
}

static bool send_request(int fd, json_t *req)
{
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!text)
        return false;
    size_t n = strlen(text);
    bool ok = send(fd, text, n, MSG_NOSIGNAL) == (ssize_t)n && send(fd, "\n", 1, MSG_NOSIGNAL) == 1;
    free(text);
    return ok;
}

/* Reads one JSON line; NULL at the end of the stream. */
static json_t *read_reply(FILE *in)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, in);
    json_t *v = NULL;
    if (n > 0) {
        llmr_strbuf err = LLMR_STRBUF_INIT;
        v = llmr_json_parse(line, (size_t)n, &err);
        llmr_strbuf_free(&err);
    }
    free(line);
    return v;
}

/* Prints an error reply and returns true when `reply` is one. */
static bool reply_failed(const json_t *reply)
{
    const char *e = json_string_value(json_object_get(reply, "error"));
    if (!reply) {
        llmr_cli_error("node", "the node closed the connection without an answer");
        return true;
    }
    if (e) {
        llmr_cli_error("node", "%s (%s)", e,
                       or_empty(json_string_value(json_object_get(reply, "status"))));
        return true;
    }
    return false;
}

/* One request, one reply. */
static json_t *call(const llmr_config *cfg, json_t *req)
{
    int fd = connect_node(cfg);
    if (fd < 0) {
        json_decref(req);
        return NULL;
    }
    json_t *reply = NULL;
    FILE *in = fdopen(fd, "r");
    if (in && send_request(fd, req))
        reply = read_reply(in);
    if (in)
        fclose(in);
    else
        close(fd);
    if (reply_failed(reply)) {
        json_decref(reply);
        return NULL;
    }
    return reply;
}

static void print_json(const json_t *v)
{
    char *text = llmr_json_pretty(v);
    if (text)
        printf("%s\n", text);
    free(text);
}

/* ---- subcommands --------------------------------------------------------------------- */

static double gb(const json_t *bytes)
{
    return (double)json_integer_value(bytes) / 1e9;
}

static int cmd_status(int argc, char **argv, const llmr_config *cfg)
{
    bool as_json = argc > 1 && strcmp(argv[1], "--json") == 0;
    json_t *s = call(cfg, json_pack("{s:s}", "op", "status"));
    if (!s)
        return LLMR_EXIT_FAILED;
    if (as_json) {
        print_json(s);
        json_decref(s);
        return LLMR_EXIT_OK;
    }
    size_t i;
    json_t *v;
    printf("plugins:\n");
    json_array_foreach(json_object_get(s, "plugins"), i, v)
        printf("  %-24s %s (%s)\n", json_string_value(json_object_get(v, "id")),
               json_string_value(json_object_get(v, "version")),
               json_string_value(json_object_get(v, "dir")));
    json_array_foreach(json_object_get(s, "refused_plugins"), i, v)
        printf("  refused: %s: %s: %s\n", json_string_value(json_object_get(v, "manifest")),
               json_string_value(json_object_get(v, "status")),
               json_string_value(json_object_get(v, "message")));
    printf("models:\n");
    json_array_foreach(json_object_get(s, "models"), i, v)
    {
        json_t *w = json_object_get(v, "worker");
        printf("  %-24s %-9s", json_string_value(json_object_get(v, "name")),
               json_string_value(json_object_get(v, "state")));
        if (json_object_get(v, "engine"))
            printf(" %s", json_string_value(json_object_get(v, "engine")));
        if (w)
            printf(", worker %lld, %.2f GB GPU, %.2f GB RAM, %lld running",
                   (long long)json_integer_value(json_object_get(w, "pid")),
                   gb(json_object_get(w, "vram_bytes")), gb(json_object_get(w, "ram_bytes")),
                   (long long)json_integer_value(json_object_get(w, "in_flight")));
        printf("\n");
        if (json_object_get(v, "reason"))
            printf("  %-24s %s\n", "", json_string_value(json_object_get(v, "reason")));
    }
    json_t *res = json_object_get(s, "resources");
    if (json_object_get(res, "ram"))
        printf("memory: RAM %.1f of %.1f GB", gb(json_object_get(json_object_get(res, "ram"), "used_bytes")),
               gb(json_object_get(json_object_get(res, "ram"), "total_bytes")));
    json_array_foreach(json_object_get(res, "gpus"), i, v)
        printf("; GPU %zu (%s) %.1f of %.1f GB", i, json_string_value(json_object_get(v, "name")),
               gb(json_object_get(v, "used_bytes")), gb(json_object_get(v, "total_bytes")));
    if (json_object_get(res, "gpu_note"))
        printf("; %s", json_string_value(json_object_get(res, "gpu_note")));
    printf("\n");
    json_decref(s);
    return LLMR_EXIT_OK;
}

static int cmd_metrics(const llmr_config *cfg)
{
    json_t *r = call(cfg, json_pack("{s:s}", "op", "metrics"));
    if (!r)
        return LLMR_EXIT_FAILED;
    fputs(or_empty(json_string_value(json_object_get(r, "metrics"))), stdout);
    json_decref(r);
    return LLMR_EXIT_OK;
}

static int cmd_reload(const llmr_config *cfg)
{
    json_t *r = call(cfg, json_pack("{s:s}", "op", "reload-plugins"));
    if (!r)
        return LLMR_EXIT_FAILED;
    print_json(r);
    int rc = LLMR_EXIT_OK;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(r, "models"), i, m)
    {
        const char *result = json_string_value(json_object_get(m, "result"));
        if (result && strncmp(result, "failed", 6) == 0)
            rc = LLMR_EXIT_FAILED;
    }
    json_decref(r);
    return rc;
}

static int cmd_load(const char *op, int argc, char **argv, const llmr_config *cfg)
{
    if (argc != 2) {
        llmr_cli_error("node", "%s takes one model name; see llmr node --help", op);
        return LLMR_EXIT_USAGE;
    }
    json_t *r = call(cfg, json_pack("{s:s, s:s}", "op", op, "model", argv[1]));
    if (!r)
        return LLMR_EXIT_FAILED;
    printf("%s: %s\n", argv[1], strcmp(op, "load") == 0 ? "loaded" : "unloading");
    json_decref(r);
    return LLMR_EXIT_OK;
}

static bool parse_ids(const char *text, json_t *out)
{
    uint32_t n = 0;
    int32_t *ids = llmr_id_list_parse(text, &n);
    for (uint32_t i = 0; ids && i < n; i++)
        json_array_append_new(out, json_integer(ids[i]));
    free(ids);
    return ids != NULL;
}

/* Tokenizes text with DATA_DIR/models/MODEL/tokenizer.json. */
static bool tokenize_prompt(const llmr_config *cfg, const char *model, const char *text,
                            json_t *ids)
{
    char *models = llmr_path_join(llmr_config_get(cfg, LLMR_CONFIG_DATA_DIR), "models");
    char *dir = models ? llmr_path_join(models, model) : NULL;
    char *path = dir ? llmr_path_join(dir, "tokenizer.json") : NULL;
    llmr_tokenizer *tok = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_ids out = LLMR_IDS_INIT;
    bool ok = path && llmr_tokenizer_load_file(path, &tok, &err) == LLMR_OK &&
              llmr_tokenizer_encode(tok, text, strlen(text), LLMR_ENCODE_PARSE_SPECIAL, &out,
                                    &err) == LLMR_OK;
    if (!ok)
        llmr_cli_error("node", "cannot tokenize the prompt with %s: %s", path ? path : model,
                       llmr_strbuf_cstr(&err));
    for (size_t i = 0; ok && i < out.count; i++)
        json_array_append_new(ids, json_integer(out.data[i]));
    llmr_ids_free(&out);
    llmr_tokenizer_free(tok);
    llmr_strbuf_free(&err);
    free(path);
    free(dir);
    free(models);
    return ok;
}

static int cmd_generate(int argc, char **argv, const llmr_config *cfg)
{
    if (argc < 2 || argv[1][0] == '-') {
        llmr_cli_error("node", "generate needs a model name; see llmr node --help");
        return LLMR_EXIT_USAGE;
    }
    json_t *req = json_pack("{s:s, s:s, s:[], s:[]}", "op", "generate", "model", argv[1],
                            "prompt_ids", "stop");
    bool as_json = false, bad = false, have_prompt = false;
    for (int i = 2; i < argc && !bad; i++) {
        const char *v;
        if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (llmr_cli_option(argc, argv, &i, "--prompt-ids", &v, &bad)) {
            have_prompt = true;
            if (!parse_ids(v, json_object_get(req, "prompt_ids"))) {
                llmr_cli_error("node", "--prompt-ids takes token ids like 1,2,3");
                bad = true;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--prompt", &v, &bad)) {
            have_prompt = true;
            if (!tokenize_prompt(cfg, argv[1], v, json_object_get(req, "prompt_ids"))) {
                json_decref(req);
                return LLMR_EXIT_FAILED;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--max-tokens", &v, &bad)) {
            json_object_set_new(req, "max_tokens", json_integer(strtol(v, NULL, 10)));
        } else if (llmr_cli_option(argc, argv, &i, "--temperature", &v, &bad)) {
            json_object_set_new(req, "temperature", json_real(strtod(v, NULL)));
        } else if (llmr_cli_option(argc, argv, &i, "--seed", &v, &bad)) {
            json_object_set_new(req, "seed", json_integer(strtoll(v, NULL, 10)));
        } else if (llmr_cli_option(argc, argv, &i, "--stop", &v, &bad)) {
            json_array_append_new(json_object_get(req, "stop"), json_string(v));
        } else if (!bad) {
            llmr_cli_error("node", "unknown option \"%s\" for generate", argv[i]);
            bad = true;
        }
    }
    if (!bad && !have_prompt) {
        llmr_cli_error("node", "generate needs --prompt or --prompt-ids");
        bad = true;
    }
    if (bad) {
        json_decref(req);
        return LLMR_EXIT_USAGE;
    }
    int fd = connect_node(cfg);
    if (fd < 0) {
        json_decref(req);
        return LLMR_EXIT_FAILED;
    }
    FILE *in = fdopen(fd, "r");
    if (!in || !send_request(fd, req)) {
        llmr_cli_error("node", "cannot send the request to the node");
        if (in)
            fclose(in);
        return LLMR_EXIT_FAILED;
    }
    int rc = LLMR_EXIT_FAILED;
    for (;;) {
        json_t *ev = read_reply(in);
        if (!ev || json_object_get(ev, "error")) {
            reply_failed(ev);
            json_decref(ev);
            break;
        }
        const char *kind = json_string_value(json_object_get(ev, "event"));
        bool end = kind && strcmp(kind, "end") == 0;
        if (as_json) {
            char *text = json_dumps(ev, JSON_COMPACT);
            printf("%s\n", text ? text : "{}");
            free(text);
        } else {
            json_t *t = json_object_get(ev, "text");
            fwrite(or_empty(json_string_value(t)), 1, json_string_length(t), stdout);
        }
        fflush(stdout);
        if (end) {
            const char *status = json_string_value(json_object_get(ev, "status"));
            rc = status && strcmp(status, "OK") == 0 ? LLMR_EXIT_OK : LLMR_EXIT_FAILED;
            if (!as_json) {
                printf("\n");
                if (rc != LLMR_EXIT_OK)
                    llmr_cli_error("node", "the request ended with %s: %s", status,
                                   or_empty(json_string_value(json_object_get(ev, "message"))));
            }
            json_decref(ev);
            break;
        }
        json_decref(ev);
    }
    fclose(in);
    return rc;
}

/* `llmr node [run] [options]`: the options of a running node (secrets also from the
 * environment, so they stay off the command line). */
static int cmd_run(int argc, char **argv, const llmr_config *cfg)
{
    llmr_node_options o;
    llmr_node_options_default(&o);
    o.router_url = getenv("LLMR_ROUTER");
    o.node_key = getenv("LLMR_NODE_KEY");
    o.api_key = getenv("LLMR_API_KEY");
    o.engine_options = getenv("LLMR_ENGINE_OPTIONS");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char **value = !strcmp(a, "--router")             ? &o.router_url
                             : !strcmp(a, "--node-key")         ? &o.node_key
                             : !strcmp(a, "--node-url")         ? &o.node_url
                             : !strcmp(a, "--node-name")        ? &o.node_name
                             : !strcmp(a, "--api-key")          ? &o.api_key
                             : !strcmp(a, "--origin-allowlist") ? &o.origin_allowlist
                             : !strcmp(a, "--local-dirs")       ? &o.local_dirs
                             : !strcmp(a, "--engine-options")   ? &o.engine_options
                                                                : NULL;
        bool bad = false;
        if (llmr_cli_http_limit(argc, argv, &i, "node", &o.http_limits, &bad)) {
            if (bad)
                return LLMR_EXIT_USAGE;
        } else if (value) {
            if (i + 1 >= argc) {
                llmr_cli_error("node", "%s needs a value", a);
                return LLMR_EXIT_USAGE;
            }
            *value = argv[++i];
        } else if (!strcmp(a, "--allow-cpu")) {
            o.allow_cpu = true;
        } else if (!strcmp(a, "--prefer-origin")) {
            o.prefer_origin = true;
        } else if (!strcmp(a, "--no-http")) {
            o.no_http = true;
        } else if (!strcmp(a, "--shutdown-grace")) {
            char *end = NULL;
            unsigned long n = i + 1 < argc ? strtoul(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !end || *end || argv[i + 1][0] == '-' || n > 86400) {
                llmr_cli_error("node", "--shutdown-grace needs a whole number of seconds up to 86400");
                return LLMR_EXIT_USAGE;
            }
            o.shutdown_grace_s = (unsigned)n;
            i++;
        } else if (!strcmp(a, "--default-max-tokens")) {
            char *end = NULL;
            unsigned long n = i + 1 < argc ? strtoul(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || !end || *end || argv[i + 1][0] == '-' || n < 1 || n > 10000000) {
                llmr_cli_error("node", "--default-max-tokens needs a whole number of tokens from 1 to 10000000");
                return LLMR_EXIT_USAGE;
            }
            o.default_max_tokens = (unsigned)n;
            i++;
        } else if (!strcmp(a, "--heartbeat")) {
            char *end = NULL;
            double secs = i + 1 < argc ? strtod(argv[i + 1], &end) : 0;
            if (i + 1 >= argc || !end || *end || secs < 0.1 || secs > 3600) {
                llmr_cli_error("node", "--heartbeat needs a number of seconds from 0.1 to 3600");
                return LLMR_EXIT_USAGE;
            }
            o.heartbeat_ms = (unsigned)(secs * 1000);
            i++;
        } else {
            llmr_cli_error("node", "unexpected argument \"%s\"; see llmr node --help", a);
            return LLMR_EXIT_USAGE;
        }
    }
    if (o.router_url && !*o.router_url)
        o.router_url = NULL;
    if (o.api_key && !*o.api_key)
        o.api_key = NULL;
    if (o.engine_options && !*o.engine_options)
        o.engine_options = NULL;
    if (!llmr_cli_tls_read(cfg, "node", &o.http_limits))
        return LLMR_EXIT_FAILED;
    int rc = llmr_node_run(cfg, &o);
    llmr_cli_tls_free(&o.http_limits);
    return rc;
}

static int run(int argc, char **argv, const llmr_config *cfg)
{
    const char *sub = argc > 1 ? argv[1] : "run";
    if (strcmp(sub, "run") == 0)
        return cmd_run(argc - 2, argv + 2, cfg);
    if (strncmp(sub, "--", 2) == 0)
        return cmd_run(argc - 1, argv + 1, cfg);
    if (strcmp(sub, "status") == 0)
        return cmd_status(argc - 1, argv + 1, cfg);
    if (strcmp(sub, "reload-plugins") == 0)
        return cmd_reload(cfg);
    if (strcmp(sub, "metrics") == 0)
        return cmd_metrics(cfg);
    if (strcmp(sub, "load") == 0 || strcmp(sub, "unload") == 0)
        return cmd_load(sub, argc - 1, argv + 1, cfg);
    if (strcmp(sub, "generate") == 0)
        return cmd_generate(argc - 1, argv + 1, cfg);
    llmr_cli_error("node", "unknown subcommand \"%s\"; see llmr node --help", sub);
    return LLMR_EXIT_USAGE;
}

const llmr_command llmr_cmd_node = {"node", "run a node, or control the running one", run, help};

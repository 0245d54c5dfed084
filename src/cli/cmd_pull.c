/* `llmr pull SOURCE`: registers a model with a running router (POST /v0/models) from a
 * Hugging Face repo or a local directory, then follows GET /v0/models/NAME until a node
 * has it ready, every node has failed it, or the time runs out.  Owns only the
 * command line and what it prints; the router does the checks and the nodes the
 * syncing (docs/router.md). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/router_client.h"
#include "common/fs_util.h"

#define CMD "pull"
#define POLL_NS 500000000L
#define QUIET_PRINT_S 5.0 /* without a TTY, byte counts are printed at most this often */

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr pull SOURCE [--format safetensors|gguf] [--name NAME] [--filename F]\n"
            "                 [--chat-template-file FILE] [--no-wait] [--timeout SECONDS]\n"
            "                 [--router URL] [--api-key KEY]\n\n"
            "Registers a model with a running router (`llmr serve` or `llmr router`) and waits\n"
            "until a node has it ready, showing each node's sync on stderr.  SOURCE is a\n"
            "Hugging Face repo (org/name, org/name@revision or a huggingface.co URL) or a\n"
            "directory on the router's machine (a relative path is made absolute here).\n"
            "The router checks the files first: a 400 names the missing or ambiguous ones.\n\n"
            "  --format F               safetensors (the default) or gguf; a directory whose\n"
            "                           only weights are .gguf files defaults to gguf\n"
            "  --name NAME              the model's name (default: the last part of SOURCE)\n"
            "  --filename F             which .gguf file, when there are several\n"
            "  --chat-template-file F   use this chat template instead of the model's own\n"
            "  --no-wait                return once the router has registered the model\n"
            "  --timeout SECONDS        give up waiting after this long (default 600)\n"
            "  --router URL             the router (default $LLMR_ROUTER, else\n"
            "                           http://127.0.0.1:PORT with the configured port)\n"
            "  --api-key KEY            (or --key) an admin key (default $LLMR_API_KEY, else\n"
            "                           $LLMR_ADMIN_KEY, else for a router on this machine\n"
            "                           the key file DATA_DIR/admin.key)\n\n"
            "Exit status: 0 ready on a node (or registered, with --no-wait); 1 refused,\n"
            "failed on every node, or timed out; 2 a wrong command line.\n");
}

typedef struct pull_args {
    llmr_router_client client;
    const char *source, *format, *name, *filename, *template_file;
    bool no_wait;
    double timeout_s;
} pull_args;

/* ---- the command line ---------------------------------------------------------------- */

static int parse(int argc, char **argv, pull_args *a)
{
    memset(a, 0, sizeof *a);
    llmr_router_client_init(&a->client, CMD);
    a->timeout_s = 600;
    const char *timeout = NULL;
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        if (llmr_router_client_option(&a->client, argc, argv, &i, &bad) ||
            llmr_cli_option(argc, argv, &i, "--format", &a->format, &bad) ||
            llmr_cli_option(argc, argv, &i, "--name", &a->name, &bad) ||
            llmr_cli_option(argc, argv, &i, "--filename", &a->filename, &bad) ||
            llmr_cli_option(argc, argv, &i, "--chat-template-file", &a->template_file, &bad) ||
            llmr_cli_option(argc, argv, &i, "--timeout", &timeout, &bad)) {
            continue;
        } else if (!strcmp(argv[i], "--no-wait")) {
            a->no_wait = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            llmr_cli_error(CMD, "unknown option \"%s\"; see llmr pull --help", argv[i]);
            return LLMR_EXIT_USAGE;
        } else if (a->source) {
            llmr_cli_error(CMD, "one SOURCE at a time (\"%s\", then \"%s\")", a->source, argv[i]);
            return LLMR_EXIT_USAGE;
        } else {
            a->source = argv[i];
        }
    }
    if (bad)
        return LLMR_EXIT_USAGE;
    if (!a->source) {
        llmr_cli_error(CMD, "which model? llmr pull SOURCE (org/name, a huggingface.co URL or a directory)");
        return LLMR_EXIT_USAGE;
    }
    if (a->format && strcmp(a->format, "safetensors") && strcmp(a->format, "gguf")) {
        llmr_cli_error(CMD, "--format must be safetensors or gguf, not \"%s\"", a->format);
        return LLMR_EXIT_USAGE;
    }
    if (timeout) {
        char *end = NULL;
        a->timeout_s = strtod(timeout, &end);
        if (!*timeout || *end || !(a->timeout_s > 0) || a->timeout_s > 7 * 24 * 3600) {
            llmr_cli_error(CMD, "--timeout wants a number of seconds above 0, not \"%s\"", timeout);
            return LLMR_EXIT_USAGE;
        }
    }
    return LLMR_EXIT_OK;
}

/* ---- the source ------------------------------------------------------------------------- */

/* path made absolute from the working directory, "." and ".." taken out lexically
 * (not through links: the directory keeps the name it was given). */
static bool absolute_path(const char *path, llmr_strbuf *out)
{
    llmr_strbuf in = LLMR_STRBUF_INIT;
    if (path[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return false;
        llmr_strbuf_printf(&in, "%s/", cwd);
    }
    llmr_strbuf_puts(&in, path);
    if (llmr_strbuf_failed(&in)) {
        llmr_strbuf_free(&in);
        return false;
    }
    char *s = (char *)llmr_strbuf_cstr(&in), *save = NULL;
    for (char *seg = strtok_r(s, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
        if (!strcmp(seg, "."))
            continue;
        if (!strcmp(seg, "..")) {
            char *slash = out->len ? strrchr(llmr_strbuf_cstr(out), '/') : NULL;
            if (slash) {
                out->len = (size_t)(slash - out->data);
                out->data[out->len] = 0;
            }
            continue;
        }
        llmr_strbuf_printf(out, "/%s", seg);
    }
    if (!out->len)
        llmr_strbuf_putc(out, '/');
    llmr_strbuf_free(&in);
    return !llmr_strbuf_failed(out);
}

/* "gguf" when the directory's top-level weights are all .gguf, else "safetensors". */
static const char *guess_format(const char *dir)
{
    DIR *d = opendir(dir);
    size_t gguf = 0, safetensors = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        gguf += llmr_name_has_suffix(de->d_name, ".gguf");
        safetensors += llmr_name_has_suffix(de->d_name, ".safetensors");
    }
    if (d)
        closedir(d);
    return gguf && !safetensors ? "gguf" : "safetensors";
}

static bool looks_like_path(const char *s)
{
    return s[0] == '/' || s[0] == '~' || !strcmp(s, ".") || !strcmp(s, "..") || !strncmp(s, "./", 2) ||
           !strncmp(s, "../", 3);
}

/* The registration's body; NULL after printing why. */
static json_t *request_body(const pull_args *a)
{
    json_t *body = json_object();
    struct stat st;
    const char *format = a->format, *filename = a->filename;
    llmr_strbuf path = LLMR_STRBUF_INIT;
    bool ok = false;
    if (stat(a->source, &st) == 0 && (S_ISDIR(st.st_mode) || llmr_name_has_suffix(a->source, ".gguf"))) {
        if (!absolute_path(a->source, &path)) {
            llmr_cli_error(CMD, "cannot make %s an absolute path: %s", a->source, strerror(errno));
            goto done;
        }
        if (!S_ISDIR(st.st_mode)) { /* one .gguf file: its directory, and the file by name */
            char *slash = strrchr(llmr_strbuf_cstr(&path), '/');
            if (filename && strcmp(filename, slash + 1)) {
                llmr_cli_error(CMD, "SOURCE is the file %s but --filename says %s; give one", slash + 1, filename);
                goto done;
            }
            filename = slash + 1;
            json_object_set_new(body, "filename", json_string(filename));
            *slash = 0;
            path.len = (size_t)(slash - llmr_strbuf_cstr(&path));
            format = format ? format : "gguf";
        }
        format = format ? format : guess_format(llmr_strbuf_cstr(&path));
        if (json_object_set_new(body, "path", json_string(path.len ? llmr_strbuf_cstr(&path) : "/"))) {
            llmr_cli_error(CMD, "the path %s is not UTF-8, which the router's JSON needs", a->source);
            goto done;
        }
    } else if (stat(a->source, &st) == 0) {
        llmr_cli_error(CMD, "%s is a file: give the model's directory (or a .gguf file)", a->source);
        goto done;
    } else if (looks_like_path(a->source)) {
        llmr_cli_error(CMD, "no directory %s here (%s); a Hugging Face repo is written org/name", a->source,
                       strerror(errno));
        goto done;
    } else {
        json_object_set_new(body, "repo", json_string(a->source));
    }
    json_object_set_new(body, "format", json_string(format ? format : "safetensors"));
    if (a->name)
        json_object_set_new(body, "name", json_string(a->name));
    if (a->filename && !json_object_get(body, "filename"))
        json_object_set_new(body, "filename", json_string(a->filename));
    if (a->template_file) {
        char *text = NULL;
        size_t len = 0;
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (llmr_read_file(a->template_file, 4u << 20, &text, &len, &err) != LLMR_OK) {
            llmr_cli_error(CMD, "cannot read the chat template: %s", llmr_strbuf_cstr(&err));
            llmr_strbuf_free(&err);
            goto done;
        }
        json_t *t = json_stringn(text, len);
        free(text);
        if (!t) {
            llmr_cli_error(CMD, "%s is not UTF-8 text", a->template_file);
            goto done;
        }
        json_object_set_new(body, "chat_template", t);
    }
    ok = true;
done:
    llmr_strbuf_free(&path);
    if (!ok) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* ---- registering ---------------------------------------------------------------------- */

static void print_files(const json_t *files)
{
    size_t i;
    const json_t *f;
    if (json_array_size(files))
        fprintf(stderr, "  the files at fault:\n");
    json_array_foreach(files, i, f)
    {
        if (json_is_string(f))
            fprintf(stderr, "    %s\n", json_string_value(f));
    }
}

/* The name the router gives the model: --name, else the last part of the source
 * (without @revision), as the router makes it. */
static void default_name(const pull_args *a, const json_t *body, char *out, size_t size)
{
    const char *src = a->name ? a->name : json_string_value(json_object_get(body, "repo"));
    if (!src)
        src = json_string_value(json_object_get(body, "path"));
    const char *end = src + strlen(src);
    while (end > src && end[-1] == '/')
        end--;
    const char *start = end;
    while (start > src && start[-1] != '/')
        start--;
    const char *at = a->name ? NULL : memchr(start, '@', (size_t)(end - start));
    snprintf(out, size, "%.*s", (int)((at ? at : end) - start), start);
}

/* POST /v0/models; the registered name into *name (malloc'd), or an exit code. */
static int do_register(const pull_args *a, const json_t *body, long timeout_s, char **name)
{
    llmr_router_answer ans;
    if (!llmr_router_request(&a->client, "POST", "/v0/models", body, timeout_s, &ans))
        return LLMR_EXIT_FAILED;
    char buf[320];
    const char *msg = llmr_router_answer_message(&ans, buf, sizeof buf);
    char wanted[160];
    default_name(a, body, wanted, sizeof wanted);
    int rc = LLMR_EXIT_FAILED;
    if (ans.status == 201 && json_string_value(json_object_get(ans.json, "name"))) {
        *name = strdup(json_string_value(json_object_get(ans.json, "name")));
        rc = *name ? LLMR_EXIT_OK : LLMR_EXIT_FAILED;
        fprintf(stderr, "llmr pull: registered %s (%s, %lld files) at %s\n", *name,
                json_string_value(json_object_get(ans.json, "format")),
                (long long)json_integer_value(json_object_get(ans.json, "files")), a->client.url);
    } else if (ans.status == 400) {
        llmr_cli_error(CMD, "the router refused %s: %s", a->source, msg);
        print_files(json_object_get(json_object_get(ans.json, "error"), "files"));
    } else if (ans.status == 409) {
        llmr_cli_error(CMD,
                       "%s exists already at %s (409): %s\n  Pull it under another name with --name NAME, or "
                       "delete the old one first:\n    curl -X DELETE -H \"Authorization: Bearer $KEY\" "
                       "%s/v0/models/%s",
                       wanted, a->client.url, msg, a->client.url, wanted);
    } else {
        llmr_router_print_refusal(&a->client, &ans, "registering a model", true);
    }
    llmr_router_answer_free(&ans);
    return rc;
}

/* ---- waiting -------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct progress {
    bool tty;
    bool told_no_nodes;
    bool line_open; /* a TTY line waits for its newline */
    llmr_strbuf coarse_last, fine_last;
    double printed_at;
    double rate_at, rate_bytes; /* the last sample of the bytes synced, and when */
    double rate;                /* bytes a second, smoothed; 0: not known yet */
} progress;

/* Seconds as "42 s", "3:07" or "1 h 05 min". */
static void format_left(double s, char *out, size_t size)
{
    long n = (long)(s + 0.5);
    if (n < 60)
        snprintf(out, size, "%ld s", n);
    else if (n < 3600)
        snprintf(out, size, "%ld:%02ld", n / 60, n % 60);
    else
        snprintf(out, size, "%ld h %02ld min", n / 3600, n % 3600 / 60);
}

/* "37% 5.1 GB/13.8 GB, 84.2 MB/s, 1:43 left; " over the nodes that sync (the speed once
 * two looks are apart), so that a line cut at the terminal's width keeps it; nothing
 * when no node syncs. */
static void describe_totals(progress *p, const json_t *nodes, double elapsed, llmr_strbuf *out)
{
    double done = 0, total = 0;
    size_t i;
    const json_t *node;
    json_array_foreach(nodes, i, node)
    {
        const json_t *sync = json_object_get(node, "sync");
        if (!json_is_object(sync))
            continue;
        done += (double)json_integer_value(json_object_get(sync, "bytes_done"));
        total += (double)json_integer_value(json_object_get(sync, "bytes_total"));
    }
    if (total <= 0)
        return;
    if (p->rate_at > 0 && elapsed - p->rate_at >= 0.4 && done >= p->rate_bytes) {
        double now_rate = (done - p->rate_bytes) / (elapsed - p->rate_at);
        p->rate = p->rate > 0 ? 0.7 * p->rate + 0.3 * now_rate : now_rate;
    }
    if (p->rate_at <= 0 || elapsed - p->rate_at >= 0.4) {
        p->rate_at = elapsed;
        p->rate_bytes = done;
    }
    char a[32], b[32];
    llmr_router_format_bytes(done, a, sizeof a);
    llmr_router_format_bytes(total, b, sizeof b);
    llmr_strbuf_printf(out, "%.0f%% %s/%s", 100.0 * done / total, a, b);
    if (p->rate > 0 && done < total) {
        char r[32], left[32];
        llmr_router_format_bytes(p->rate, r, sizeof r);
        format_left((total - done) / p->rate, left, sizeof left);
        llmr_strbuf_printf(out, ", %s/s, %s left", r, left);
    }
    llmr_strbuf_puts(out, "; ");
}

static void end_line(progress *p)
{
    if (p->line_open)
        fputc('\n', stderr);
    p->line_open = false;
}

/* How many bytes of line fit on the terminal's row without wrapping (a wrapped line
 * could not be rewritten in place); whole UTF-8 characters only. */
static int fit_terminal(const llmr_strbuf *line)
{
    struct winsize ws;
    size_t cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1u : 79u;
    size_t n = line->len;
    const unsigned char *s = (const unsigned char *)llmr_strbuf_cstr(line);
    if (n > cols) {
        n = cols;
        while (n > 0 && (s[n] & 0xC0) == 0x80)
            n--;
    }
    return (int)n;
}

/* Shows the nodes' states: one rewritten line on a TTY; otherwise a line when the
 * state changes (byte counts alone: at most every QUIET_PRINT_S). */
static void show(progress *p, const char *name, const json_t *nodes, double elapsed)
{
    if (!json_array_size(nodes))
        return;
    llmr_strbuf coarse = LLMR_STRBUF_INIT, fine = LLMR_STRBUF_INIT, totals = LLMR_STRBUF_INIT;
    llmr_router_describe_nodes(nodes, true, &coarse);
    llmr_router_describe_nodes(nodes, false, &fine);
    describe_totals(p, nodes, elapsed, &totals);
    if (p->tty) {
        llmr_strbuf line = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&line, "llmr pull: %s %3.0f s: %s%s", name, elapsed, llmr_strbuf_cstr(&totals),
                           llmr_strbuf_cstr(&fine));
        fprintf(stderr, "\r\033[K%.*s", fit_terminal(&line), llmr_strbuf_cstr(&line));
        llmr_strbuf_free(&line);
        p->line_open = true;
    } else if (strcmp(llmr_strbuf_cstr(&coarse), llmr_strbuf_cstr(&p->coarse_last)) ||
               (strcmp(llmr_strbuf_cstr(&fine), llmr_strbuf_cstr(&p->fine_last)) &&
                elapsed - p->printed_at >= QUIET_PRINT_S)) {
        fprintf(stderr, "llmr pull: %s %.0f s: %s%s\n", name, elapsed, llmr_strbuf_cstr(&totals),
                llmr_strbuf_cstr(&fine));
        p->printed_at = elapsed;
        llmr_strbuf_reset(&p->coarse_last);
        llmr_strbuf_puts(&p->coarse_last, llmr_strbuf_cstr(&coarse));
        llmr_strbuf_reset(&p->fine_last);
        llmr_strbuf_puts(&p->fine_last, llmr_strbuf_cstr(&fine));
    }
    fflush(stderr);
    llmr_strbuf_free(&coarse);
    llmr_strbuf_free(&fine);
    llmr_strbuf_free(&totals);
}

static void print_failures(const json_t *nodes)
{
    size_t i;
    const json_t *node;
    json_array_foreach(nodes, i, node)
    {
        llmr_strbuf line = LLMR_STRBUF_INIT;
        llmr_router_describe_node(node, false, &line);
        fprintf(stderr, "  %s\n", llmr_strbuf_cstr(&line));
        llmr_strbuf_free(&line);
    }
}

/* One look at the model: an exit code when the wait is over, -1 to go on. */
static int look(const pull_args *a, const char *name, progress *p, double elapsed)
{
    char path[256];
    snprintf(path, sizeof path, "/v0/models/%s", name);
    llmr_router_answer ans;
    if (!llmr_router_request(&a->client, "GET", path, NULL, 10, &ans)) {
        end_line(p);
        return LLMR_EXIT_FAILED;
    }
    int rc = -1;
    const json_t *nodes = json_object_get(ans.json, "nodes");
    llmr_router_node_counts n;
    llmr_router_count_nodes(nodes, &n);
    if (ans.status == 404) {
        end_line(p);
        llmr_cli_error(CMD, "%s is no longer registered (deleted meanwhile?)", name);
        rc = LLMR_EXIT_FAILED;
    } else if (ans.status != 200 || !json_is_array(nodes)) {
        end_line(p);
        llmr_router_print_refusal(&a->client, &ans, "following the model's state", false);
        rc = LLMR_EXIT_FAILED;
    } else if (!n.total && !p->told_no_nodes) {
        end_line(p);
        fprintf(stderr,
                "llmr pull: no node is registered with the router at %s, so nothing syncs %s yet.\n"
                "  Start one (`llmr node --router %s --node-key KEY`, or use `llmr serve`);\n"
                "  waiting up to %.0f s for one to join.\n",
                a->client.url, name, a->client.url, a->timeout_s);
        p->told_no_nodes = true;
    } else {
        show(p, name, nodes, elapsed);
        if (json_is_true(json_object_get(ans.json, "ready")) || n.ready) {
            end_line(p);
            printf("%s is ready on %zu/%zu node%s\n", name, n.ready, n.total, n.total == 1 ? "" : "s");
            rc = LLMR_EXIT_OK;
        } else if (n.total && n.dead == n.total) {
            end_line(p);
            llmr_cli_error(CMD, "%s failed or cannot run on every node (it stays registered; fix the cause, "
                                "then delete it and pull it again):", name);
            print_failures(nodes);
            rc = LLMR_EXIT_FAILED;
        }
    }
    llmr_router_answer_free(&ans);
    return rc;
}

static int wait_ready(const pull_args *a, const char *name, double started)
{
    progress p = {.tty = isatty(STDERR_FILENO) == 1, .coarse_last = LLMR_STRBUF_INIT, .fine_last = LLMR_STRBUF_INIT,
                  .printed_at = -1e9};
    int rc;
    for (;;) {
        double elapsed = now_s() - started;
        if ((rc = look(a, name, &p, elapsed)) >= 0)
            break;
        if (elapsed >= a->timeout_s) {
            end_line(&p);
            llmr_cli_error(CMD, "gave up after %.0f s (--timeout) waiting for a node to have %s ready; it stays "
                                "registered, `llmr list` shows its state:", a->timeout_s, name);
            char path[256];
            snprintf(path, sizeof path, "/v0/models/%s", name);
            llmr_router_answer ans;
            if (llmr_router_request(&a->client, "GET", path, NULL, 10, &ans)) {
                const json_t *nodes = json_object_get(ans.json, "nodes");
                if (json_array_size(nodes))
                    print_failures(nodes);
                else
                    fprintf(stderr, "  no node is registered with the router\n");
                llmr_router_answer_free(&ans);
            }
            rc = LLMR_EXIT_FAILED;
            break;
        }
        struct timespec ts = {0, POLL_NS};
        nanosleep(&ts, NULL);
    }
    llmr_strbuf_free(&p.coarse_last);
    llmr_strbuf_free(&p.fine_last);
    return rc;
}

static int run(int argc, char **argv, const llmr_config *cfg)
{
    pull_args a;
    int rc = parse(argc, argv, &a);
    if (rc != LLMR_EXIT_OK)
        return rc;
    if (!llmr_router_client_finish(&a.client, cfg))
        return LLMR_EXIT_USAGE;
    double started = now_s();
    json_t *body = request_body(&a);
    if (!body)
        return LLMR_EXIT_FAILED;
    char *name = NULL;
    rc = do_register(&a, body, (long)a.timeout_s + 1, &name);
    json_decref(body);
    if (rc == LLMR_EXIT_OK && a.no_wait)
        printf("%s registered; `llmr list` shows when a node has it ready\n", name);
    else if (rc == LLMR_EXIT_OK)
        rc = wait_ready(&a, name, started);
    free(name);
    return rc;
}

const llmr_command llmr_cmd_pull = {"pull", "register a model with a running router and wait until it is ready",
                                    run, help};

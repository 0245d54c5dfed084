/* `llmr run MODEL [PROMPT]` against a running router: see run_chat.h.  Owns the
 * conversation (the messages sent again each turn), the chat's commands (/bye, /clear,
 * /?), and how an answer is shown: on a terminal the reasoning dim and prefixed apart
 * from the answer, elsewhere plain text.  The request itself is chat_stream.c's, the
 * line editing line_edit.c's, the router's URL and key router_client.c's. */
#include "cli/run_chat.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/chat_stream.h"
#include "cli/cli.h"
#include "cli/line_edit.h"
#include "cli/router_client.h"
#include "router/router.h"

#define CMD "run"
#define PROMPT ">>> "
#define DIM "\x1b[2m"
#define RESET "\x1b[0m"
#define REASONING_LABEL "Thinking: "

void llmr_run_chat_help(FILE *out)
{
    fprintf(out,
            "usage: llmr run MODEL [PROMPT] [--system TEXT] [--max-tokens N] [--temperature T]\n"
            "                [--reasoning] [--router URL] [--api-key KEY]\n\n"
            "With MODEL the name of a model the running server has (`llmr list` shows them),\n"
            "a chat with it in the terminal: each line you type is sent with the conversation\n"
            "so far to POST /v1/chat/completions and the answer streams back.  The model's\n"
            "reasoning (gpt-oss's analysis channel) is shown apart from the answer: dim, after\n"
            "\"Thinking:\", on a terminal; as plain text elsewhere.  It is not sent back with\n"
            "the next turn.  Up and down recall earlier lines; left, right, Home, End,\n"
            "Backspace, Delete and Ctrl-A/E/K/U/W edit the line.  Ctrl-C stops an answer.\n"
            "  /bye (or Ctrl-D on an empty line)  leave\n"
            "  /clear                             start a new conversation\n"
            "  /?                                 these commands\n\n"
            "With PROMPT (or --prompt TEXT), one answer for scripts: the answer alone is written\n"
            "to stdout and the command exits; the reasoning is left out, or written to stderr\n"
            "with --reasoning.\n\n"
            "  --system TEXT   a system message before the conversation\n"
            "  --max-tokens N  at most N tokens an answer (default: the server's)\n"
            "  --temperature T (default: the server's)\n"
            "  --router URL    the server (alias --url; default $LLMR_ROUTER, else\n"
            "                  http://127.0.0.1:PORT with the configured port, where\n"
            "                  `llmr serve` listens)\n"
            "  --api-key KEY   an inference or admin key (default $LLMR_API_KEY, else\n"
            "                  $LLMR_ADMIN_KEY, else for a server on this machine the key\n"
            "                  file DATA_DIR/admin.key that it wrote)\n\n"
            "Exit status: 0 done; 1 the server is not there, refused, or the answer failed;\n"
            "2 a wrong command line.\n");
}

/* ---- showing an answer --------------------------------------------------------------- */

typedef struct shown {
    bool tty;            /* stdout is a terminal: colours */
    bool one_shot;       /* the script form: reasoning to stderr or nowhere */
    bool reasoning_out;  /* --reasoning */
    bool in_reasoning;   /* the last piece shown was reasoning */
    bool any;            /* something was shown */
    char last;           /* the last byte written to stdout */
    llmr_strbuf content; /* the answer, for the conversation */
} shown;

static void out(shown *s, const char *text, size_t n)
{
    if (!n)
        return;
    fwrite(text, 1, n, stdout);
    s->last = text[n - 1];
    s->any = true;
}

static void on_piece(void *user, bool reasoning, const char *text, size_t n)
{
    shown *s = user;
    if (s->one_shot) {
        if (reasoning && s->reasoning_out)
            fwrite(text, 1, n, stderr), fflush(stderr);
        else if (!reasoning)
            out(s, text, n), llmr_strbuf_append(&s->content, text, n);
        fflush(stdout);
        return;
    }
    if (reasoning) {
        if (!s->in_reasoning) {
            if (s->any && s->last != '\n')
                out(s, "\n", 1);
            out(s, s->tty ? DIM REASONING_LABEL : REASONING_LABEL, strlen(s->tty ? DIM REASONING_LABEL : REASONING_LABEL));
            s->in_reasoning = true;
        }
        out(s, text, n);
    } else {
        if (s->in_reasoning) {
            if (s->tty)
                out(s, RESET, strlen(RESET));
            out(s, s->last == '\n' ? "\n" : "\n\n", s->last == '\n' ? 1 : 2);
            s->in_reasoning = false;
        }
        out(s, text, n);
        llmr_strbuf_append(&s->content, text, n);
    }
    fflush(stdout);
}

/* Ends what was shown: colours reset, a newline after the last line. */
static void end_answer(shown *s)
{
    if (s->in_reasoning && s->tty)
        out(s, RESET, strlen(RESET));
    s->in_reasoning = false;
    if (s->any && s->last != '\n')
        out(s, "\n", 1);
    fflush(stdout);
}

/* ---- the server and the model ------------------------------------------------------ */

static void print_key_refusal(const llmr_router_client *c, long status)
{
    if (status == 401 && !c->key)
        llmr_cli_error(CMD,
                       "the server at %s wants an API key (401).\n  Pass --api-key KEY or set LLMR_API_KEY: "
                       "an inference key (`llmr keys create NAME` on the server's machine)\n  or the admin "
                       "key, kept in DATA_DIR/%s where the server runs%s%s%s.",
                       c->url, LLMR_ROUTER_KEY_FILE, c->key_file[0] ? " (there is no " : "", c->key_file,
                       c->key_file[0] ? " here)" : "");
    else if (status == 401)
        llmr_cli_error(CMD, "the server at %s refused the key from %s (401: unknown or revoked)", c->url,
                       c->key_from);
    else
        llmr_cli_error(CMD, "the key from %s may not chat (403: it lacks the inference scope)", c->key_from);
}

/* Whether the server at c serves model, after printing why not (no server, a refused
 * key, an unknown model with the names of those there are). */
static bool check_model(const llmr_router_client *c, const char *model)
{
    llmr_router_answer ans;
    if (!llmr_router_request(c, "GET", "/v1/models", NULL, 15, &ans))
        return false;
    bool ok = false;
    const json_t *data = json_object_get(ans.json, "data"), *m;
    if (ans.status == 401 || ans.status == 403) {
        print_key_refusal(c, ans.status);
    } else if (ans.status != 200 || !json_is_array(data)) {
        char buf[320];
        llmr_cli_error(CMD, "the server at %s answered %ld to GET /v1/models: %s", c->url, ans.status,
                       llmr_router_answer_message(&ans, buf, sizeof buf));
    } else {
        llmr_strbuf names = LLMR_STRBUF_INIT;
        size_t i;
        json_array_foreach(data, i, m)
        {
            const char *id = json_string_value(json_object_get(m, "id"));
            if (id && !strcmp(id, model))
                ok = true;
            if (id)
                llmr_strbuf_printf(&names, "%s%s", names.len ? ", " : "", id);
        }
        if (!ok && !names.len)
            llmr_cli_error(CMD, "no model \"%s\" at %s: it has no models yet; `llmr pull SOURCE` registers one",
                           model, c->url);
        else if (!ok)
            llmr_cli_error(CMD, "no model \"%s\" at %s; the models there: %s (`llmr list` shows their state)", model,
                           c->url, llmr_strbuf_cstr(&names));
        llmr_strbuf_free(&names);
    }
    llmr_router_answer_free(&ans);
    return ok;
}

/* ---- one turn ------------------------------------------------------------------------ */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

typedef struct chat {
    const llmr_router_client *c;
    const char *model;
    json_t *messages;
    long max_tokens;
    double temperature; /* < 0: the server's */
    bool tty, one_shot, reasoning_out;
} chat;

/* Sends the conversation and shows the answer; on success the answer joins the
 * conversation.  An exit code. */
static int turn(chat *ch)
{
    json_t *body = json_pack("{s:s, s:O}", "model", ch->model, "messages", ch->messages);
    if (!body) {
        llmr_cli_error(CMD, "out of memory");
        return LLMR_EXIT_FAILED;
    }
    if (ch->max_tokens > 0)
        json_object_set_new(body, "max_tokens", json_integer(ch->max_tokens));
    if (ch->temperature >= 0)
        json_object_set_new(body, "temperature", json_real(ch->temperature));
    shown s = {.tty = ch->tty, .one_shot = ch->one_shot, .reasoning_out = ch->reasoning_out,
               .content = LLMR_STRBUF_INIT};
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old);
    llmr_chat_outcome o;
    bool answered = llmr_chat_stream(ch->c, body, &interrupted, on_piece, &s, &o);
    sigaction(SIGINT, &old, NULL);
    json_decref(body);
    end_answer(&s);
    int rc = LLMR_EXIT_FAILED;
    if (!answered) {
        /* printed */
    } else if (o.status == 401 || o.status == 403) {
        print_key_refusal(ch->c, o.status);
    } else if (o.status != 200 && !o.stopped) {
        llmr_cli_error(CMD, "the server at %s answered %ld: %s", ch->c->url, o.status, o.error);
    } else if (o.error[0]) {
        llmr_cli_error(CMD, "%s", o.error);
    } else {
        if (o.stopped)
            fprintf(stderr, "(stopped)\n");
        else if (!strcmp(o.finish, "length"))
            fprintf(stderr, "(the answer reached its token limit)\n");
        rc = LLMR_EXIT_OK;
    }
    /* the answer joins the conversation; a failed turn leaves no trace in it */
    if (rc == LLMR_EXIT_OK && (s.content.len || !o.stopped))
        json_array_append_new(ch->messages,
                              json_pack("{s:s, s:s%}", "role", "assistant", "content",
                                        s.content.len ? s.content.data : "", s.content.len));
    else
        json_array_remove(ch->messages, json_array_size(ch->messages) - 1);
    llmr_strbuf_free(&s.content);
    return rc;
}

static void reset_conversation(chat *ch, const char *system)
{
    json_array_clear(ch->messages);
    if (system)
        json_array_append_new(ch->messages, json_pack("{s:s, s:s}", "role", "system", "content", system));
}

static void add_user(chat *ch, const char *text)
{
    json_array_append_new(ch->messages, json_pack("{s:s, s:s}", "role", "user", "content", text));
}

static void print_commands(void)
{
    printf("  /bye     leave (Ctrl-D on an empty line too)\n"
           "  /clear   start a new conversation\n"
           "  /?       these commands\n"
           "Up and down recall earlier lines; Ctrl-C stops an answer.\n");
}

static int converse(chat *ch, const char *system)
{
    llmr_line_editor *ed = llmr_line_editor_new(STDIN_FILENO, STDOUT_FILENO);
    if (!ed) {
        llmr_cli_error(CMD, "out of memory");
        return LLMR_EXIT_FAILED;
    }
    bool edit = llmr_line_editor_interactive(ed);
    if (edit)
        printf("Chatting with %s at %s.  /bye or Ctrl-D leaves, /? lists the commands.\n", ch->model, ch->c->url);
    int rc = LLMR_EXIT_OK;
    for (;;) {
        fflush(stdout);
        char *line = NULL;
        llmr_line_result r = llmr_line_read(ed, edit ? PROMPT : "", &line);
        if (r == LLMR_LINE_EOF)
            break;
        if (r == LLMR_LINE_INTERRUPTED) {
            if (edit)
                printf("(/bye or Ctrl-D leaves)\n");
            continue;
        }
        if (r == LLMR_LINE_ERROR) {
            llmr_cli_error(CMD, "cannot read the terminal");
            rc = LLMR_EXIT_FAILED;
            break;
        }
        const char *t = line;
        while (*t == ' ' || *t == '\t')
            t++;
        if (edit)
            llmr_line_history_add(ed, line);
        if (!*t) {
            free(line);
            continue;
        }
        if (!strcmp(t, "/bye")) {
            free(line);
            break;
        }
        if (!strcmp(t, "/clear")) {
            reset_conversation(ch, system);
            printf("(a new conversation)\n");
        } else if (!strcmp(t, "/?") || !strcmp(t, "/help")) {
            print_commands();
        } else if (t[0] == '/' && !strchr(t, ' ') && t[1] && t[1] != '/') {
            printf("unknown command %s; /? lists them (start a message with // to send a /)\n", t);
        } else {
            add_user(ch, t[0] == '/' && t[1] == '/' ? t + 1 : t);
            turn(ch); /* a failed turn is reported; the chat goes on */
            if (edit)
                printf("\n");
        }
        free(line);
    }
    llmr_line_editor_free(ed);
    return rc;
}

int llmr_run_chat(int argc, char **argv, const llmr_config *cfg)
{
    llmr_router_client c;
    llmr_router_client_init(&c, CMD);
    const char *model = NULL, *prompt = NULL, *system = NULL, *v;
    chat ch = {.c = &c, .temperature = -1};
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        if (llmr_router_client_option(&c, argc, argv, &i, &bad) ||
            llmr_cli_option(argc, argv, &i, "--url", &c.flag_url, &bad)) {
            continue;
        } else if (!strcmp(argv[i], "--reasoning")) {
            ch.reasoning_out = true;
        } else if (llmr_cli_option(argc, argv, &i, "--prompt", &v, &bad)) {
            prompt = v;
        } else if (llmr_cli_option(argc, argv, &i, "--system", &v, &bad)) {
            system = v;
        } else if (llmr_cli_option(argc, argv, &i, "--max-tokens", &v, &bad)) {
            char *end;
            ch.max_tokens = strtol(v, &end, 10);
            if (*end || ch.max_tokens < 1) {
                llmr_cli_error(CMD, "--max-tokens takes a whole number above 0, not \"%s\"", v);
                bad = true;
            }
        } else if (llmr_cli_option(argc, argv, &i, "--temperature", &v, &bad)) {
            char *end;
            ch.temperature = strtod(v, &end);
            if (*end || ch.temperature < 0) {
                llmr_cli_error(CMD, "--temperature takes a number 0 or above, not \"%s\"", v);
                bad = true;
            }
        } else if (bad) {
            break;
        } else if (argv[i][0] != '-' && !model) {
            model = argv[i];
        } else if (argv[i][0] != '-' && !prompt) {
            prompt = argv[i];
        } else {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr run --help", argv[i]);
            bad = true;
        }
    }
    if (!bad && !model) {
        llmr_cli_error(CMD, "which model? llmr run MODEL (`llmr list` shows them) or llmr run DIR --prompt TEXT");
        bad = true;
    }
    if (bad || !llmr_router_client_finish(&c, cfg))
        return LLMR_EXIT_USAGE;
    if (!check_model(&c, model))
        return LLMR_EXIT_FAILED;
    ch.model = model;
    ch.tty = isatty(STDOUT_FILENO);
    ch.one_shot = prompt != NULL;
    if (!(ch.messages = json_array())) {
        llmr_cli_error(CMD, "out of memory");
        return LLMR_EXIT_FAILED;
    }
    reset_conversation(&ch, system);
    int rc;
    if (prompt) {
        add_user(&ch, prompt);
        rc = turn(&ch);
    } else {
        rc = converse(&ch, system);
    }
    json_decref(ch.messages);
    return rc;
}

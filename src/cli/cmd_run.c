/* `llmr run`: with a model name, a chat with the running server (run_chat.c); with a
 * directory, `llmr run DIR --prompt TEXT`, one generation with it in this process: the prompt rendered with the model's chat template (loaded and rendered as
 * the node does it, node/node_prompt.h), tokenized with its tokenizer.json, generated
 * by the engine that would serve it, and the text streamed to stdout as it comes. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/id_list.h"
#include "cli/local_engine.h"
#include "cli/run_chat.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "models/harmony.h"
#include "models/runtime.h"
#include "node/node_prompt.h"
#include "template/chat_format.h"
#include "tokenizer/detokenizer.h"

static void help(FILE *out)
{
    llmr_run_chat_help(out);
    fprintf(out,
            "\n"
            "usage: llmr run DIR (--prompt TEXT | --prompt-ids 1,2,3) [--system TEXT] [--raw]\n"
            "                [--show-prompt] [--max-tokens N] [--temperature T] [--top-p P]\n"
            "                [--top-k K] [--seed S] [--json] [--options JSON]\n\n"
            "Generates with the model in DIR, loaded in this process by the engine that would\n"
            "serve it, and streams the text to stdout.  --prompt (with --system as a system\n"
            "message before it) is rendered with the model's chat template as the node renders\n"
            "a chat (chat_template.jinja, chat_template.json, or tokenizer_config.json's\n"
            "chat_template; add_generation_prompt true), then tokenized with DIR/tokenizer.json,\n"
            "special tokens recognised.  A gpt-oss model without a template gets llmr's built-in\n"
            "gpt-oss (harmony) format, with a note on stderr; other models without one need\n"
            "--raw or --prompt-ids.  --raw tokenizes --prompt as it is; --prompt-ids gives the\n"
            "tokens.  The text is the engine's when it writes it (llama.cpp for a .gguf: then\n"
            "--prompt-ids needs no tokenizer.json), else decoded with DIR/tokenizer.json.\n\n"
            "  --show-prompt    write the prompt text given to the tokenizer to stderr\n"
            "  --max-tokens N   default 256\n"
            "  --temperature T  default 1.0; 0 is greedy (the same output every time)\n"
            "  --json           one JSON line per token (index, id, text, logprob), then the end\n"
            "                   (with prompt_tokens)\n"
            "  --options JSON   the engine's load options, a JSON object; for gpt-oss e.g.\n"
            "                   '{\"cpu\":1}' (the CPU path even with a GPU), '{\"threads\":8}'\n");
}

/* The tokenizer the prompt is encoded and the output decoded with: the node's prompt
 * context's when the model's template renders the prompt, else one loaded here. */
typedef struct prompt_ctx {
    llmr_node_prompts *prompts; /* the node's cache of prompt contexts, or NULL */
    llmr_tokenizer *own;        /* loaded here, or NULL */
    const llmr_tokenizer *tok;  /* one of the two, or NULL (--prompt-ids, no tokenizer.json) */
} prompt_ctx;

static void prompt_ctx_free(prompt_ctx *c)
{
    llmr_node_prompts_free(c->prompts);
    llmr_tokenizer_free(c->own);
}

/* Whether dir/config.json names a model the gpt-oss engine runs. */
static bool is_gpt_oss(const char *dir)
{
    char *path = llmr_path_join(dir, "config.json");
    llmr_status st;
    llmr_strbuf e = LLMR_STRBUF_INIT;
    json_t *cfg = path ? llmr_json_load_file(path, 1u << 20, &st, &e) : NULL;
    bool yes = cfg && llmr_runtime_for_config(cfg, &e) == LLMR_RUNTIME_GPT_OSS;
    json_decref(cfg);
    llmr_strbuf_free(&e);
    free(path);
    return yes;
}

/* The prompt rendered with the model's chat template by the node's own renderer
 * (malloc'd); NULL with err (the template's own message). */
static char *render_template(const llmr_node_prompt *p, const char *system, const char *prompt,
                             llmr_strbuf *err)
{
    json_t *messages = json_array();
    if (system)
        json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "system", "content", system));
    json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "user", "content", prompt));
    llmr_strbuf out = LLMR_STRBUF_INIT;
    char *text = NULL;
    if (json_array_size(messages) != (system ? 2u : 1u))
        llmr_strbuf_puts(err, "out of memory");
    else if (llmr_node_prompt_render(p, messages, NULL, NULL, &out, NULL, err) && !(text = llmr_strbuf_take(&out)))
        llmr_strbuf_puts(err, "out of memory");
    json_decref(messages);
    llmr_strbuf_free(&out);
    return text;
}

/* gpt-oss's chat format by llmr's own renderer, for a gpt-oss model that ships no
 * template; the date as the template's strftime_now gives it (local time). */
static char *render_harmony(const char *system, const char *prompt)
{
    char date[16];
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%Y-%m-%d", localtime_r(&now, &tm));
    llmr_chat_message msgs[2] = {{"system", system ? system : ""}, {"user", prompt}};
    return llmr_harmony_render(system ? msgs : msgs + 1, system ? 2 : 1, true, date);
}

/* Loads dir/tokenizer.json into c when it is needed, or when it is there. */
static llmr_status load_tokenizer(const char *dir, bool needed, prompt_ctx *c, llmr_strbuf *err)
{
    char *path = llmr_path_join(dir, "tokenizer.json");
    llmr_status st = path ? LLMR_OK : LLMR_OOM_RAM;
    if (path && (needed || access(path, F_OK) == 0)) {
        llmr_strbuf e = LLMR_STRBUF_INIT;
        if ((st = llmr_tokenizer_load_file(path, &c->own, &e)) != LLMR_OK)
            llmr_strbuf_puts(err, llmr_strbuf_cstr(&e)); /* it names the file */
        llmr_strbuf_free(&e);
        c->tok = c->own;
    }
    if (!path)
        llmr_strbuf_puts(err, "out of memory");
    free(path);
    return st;
}

/* The text --prompt becomes (malloc'd), with c's tokenizer loaded for it: the model's
 * chat template's render (chosen and loaded as the node does, node/node_prompt.h), the
 * built-in harmony format for a gpt-oss model that ships no template, or --prompt
 * itself with --raw.  NULL with err (a sentence to print). */
static char *prompt_text(const char *dir, const char *prompt, const char *system, bool raw, prompt_ctx *c,
                         llmr_strbuf *err)
{
    if (raw) {
        char *text = load_tokenizer(dir, true, c, err) == LLMR_OK ? strdup(prompt) : NULL;
        if (!text && !err->len)
            llmr_strbuf_puts(err, "out of memory");
        return text;
    }
    llmr_status st = LLMR_OOM_RAM;
    const llmr_node_prompt *p = (c->prompts = llmr_node_prompts_new())
                                    ? llmr_node_prompts_get(c->prompts, dir, dir, &st, err)
                                    : NULL;
    if (!p) {
        if (!err->len)
            llmr_strbuf_puts(err, "out of memory");
        return NULL;
    }
    c->tok = llmr_node_prompt_tokenizer(p);
    if (strcmp(llmr_node_prompt_template_origin(p), LLMR_CHAT_ORIGIN_DEFAULT) != 0)
        return render_template(p, system, prompt, err);
    if (!is_gpt_oss(dir)) {
        llmr_strbuf_printf(err,
                           "%s has no chat template (chat_template.jinja, chat_template.json or "
                           "tokenizer_config.json's chat_template) to put --prompt in; pass --raw to "
                           "tokenize the text as it is, or --prompt-ids with the prompt's tokens",
                           dir);
        return NULL;
    }
    fprintf(stderr, "llmr run: note: %s has no chat template; using llmr's built-in gpt-oss "
                    "(harmony) format\n",
            dir);
    char *text = render_harmony(system, prompt);
    if (!text)
        llmr_strbuf_puts(err, "out of memory");
    return text;
}

/* The prompt's token ids from --prompt (into *given, *n; malloc'd), with --show-prompt
 * writing its text to stderr.  An exit code: LLMR_EXIT_OK, or the error printed. */
static int prompt_ids(const char *dir, const char *prompt, const char *system, bool raw, bool show,
                      prompt_ctx *c, int32_t **given, uint32_t *n)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_ids ids = LLMR_IDS_INIT;
    int rc = LLMR_EXIT_FAILED;
    char *text = prompt_text(dir, prompt, system, raw, c, &err);
    if (!text) {
        llmr_cli_error("run", "%s", llmr_strbuf_cstr(&err));
        goto out;
    }
    if (show)
        fprintf(stderr, "%s\n", text);
    if (llmr_tokenizer_encode(c->tok, text, strlen(text), LLMR_ENCODE_PARSE_SPECIAL, &ids, &err) != LLMR_OK) {
        llmr_cli_error("run", "cannot tokenize the prompt: %s", llmr_strbuf_cstr(&err));
        goto out;
    }
    *n = (uint32_t)ids.count;
    if (!(*given = malloc((*n ? *n : 1) * sizeof **given))) {
        llmr_cli_error("run", "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < *n; i++)
        (*given)[i] = (int32_t)ids.data[i];
    rc = LLMR_EXIT_OK;
out:
    free(text);
    llmr_ids_free(&ids);
    llmr_strbuf_free(&err);
    return rc;
}

typedef struct stream {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done, json;
    llmr_detokenizer detok;
    bool have_detok;
    bool engine_text; /* the engine fills token text (LLMR_ENGINE_CAP_TEXT) */
    uint32_t finish;
    int status;
    char message[512];
    uint32_t tokens;
} stream;

static void print_json_text(const char *s, size_t n)
{
    json_t *t = json_stringn(s, n);
    char *text = t ? json_dumps(t, JSON_ENCODE_ANY) : NULL;
    fputs(text ? text : "\"\"", stdout);
    free(text);
    json_decref(t);
}

static int on_token(void *user, const llmr_engine_token *t)
{
    stream *s = user;
    llmr_strbuf piece = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    bool stop_token = t->finish == LLMR_ENGINE_FINISH_STOP;
    if (s->engine_text) { /* the engine wrote complete UTF-8 itself */
        if (t->text)
            llmr_strbuf_append(&piece, t->text, t->text_len);
    } else {
        if (t->id >= 0 && s->have_detok && !stop_token)
            llmr_detokenizer_push(&s->detok, (uint32_t)t->id, &piece, &err);
        if (t->finish && s->have_detok)
            llmr_detokenizer_finish(&s->detok, &piece, &err);
    }
    if (t->id >= 0)
        s->tokens++;
    if (s->json) {
        if (t->id >= 0) {
            printf("{\"index\":%u,\"id\":%d,\"text\":", t->index, t->id);
            print_json_text(piece.data ? piece.data : "", piece.len);
            printf(",\"logprob\":%.6g}\n", t->logprob);
        }
    } else {
        fwrite(piece.data ? piece.data : "", 1, piece.len, stdout);
    }
    fflush(stdout);
    llmr_strbuf_free(&piece);
    llmr_strbuf_free(&err);
    if (t->finish) {
        pthread_mutex_lock(&s->lock);
        s->done = true;
        s->finish = t->finish;
        s->status = t->status;
        snprintf(s->message, sizeof s->message, "%s", t->message ? t->message : "");
        pthread_cond_broadcast(&s->done_cond);
        pthread_mutex_unlock(&s->lock);
    }
    return 0;
}

static const char *finish_name(uint32_t f)
{
    static const char *names[] = {"none", "stop", "length", "cancelled", "error"};
    return f < 5 ? names[f] : "?";
}

/* The first argument that is not an option or an option's value: the model's name or
 * directory (NULL when there is none). */
static const char *target(int argc, char **argv)
{
    static const char *const with_value[] = {"--prompt", "--prompt-ids", "--system", "--max-tokens",
                                             "--temperature", "--top-p", "--top-k", "--seed",
                                             "--options", "--router", "--url", "--api-key", "--key"};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return argv[i];
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            if (!strcmp(argv[i], with_value[k]))
                i++;
    }
    return NULL;
}

static int run_local(int argc, char **argv, const llmr_config *cfg);

static int run(int argc, char **argv, const llmr_config *cfg)
{
    const char *t = target(argc, argv);
    struct stat st;
    if (t && stat(t, &st) == 0 && S_ISDIR(st.st_mode))
        return run_local(argc, argv, cfg);
    return llmr_run_chat(argc, argv, cfg);
}

static int run_local(int argc, char **argv, const llmr_config *cfg)
{
    const char *dir = NULL, *prompt = NULL, *ids_text = NULL, *system = NULL, *options_text = NULL;
    bool raw = false, json = false, show = false, bad = false;
    llmr_engine_request_params p = llmr_engine_request_default_params();
    p.max_tokens = 256;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (strcmp(argv[i], "--raw") == 0)
            raw = true;
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--show-prompt") == 0)
            show = true;
        else if (llmr_cli_option(argc, argv, &i, "--prompt", &v, &bad))
            prompt = v;
        else if (llmr_cli_option(argc, argv, &i, "--prompt-ids", &v, &bad))
            ids_text = v;
        else if (llmr_cli_option(argc, argv, &i, "--system", &v, &bad))
            system = v;
        else if (llmr_cli_option(argc, argv, &i, "--max-tokens", &v, &bad))
            p.max_tokens = (uint32_t)strtoul(v, NULL, 10);
        else if (llmr_cli_option(argc, argv, &i, "--temperature", &v, &bad))
            p.temperature = strtof(v, NULL);
        else if (llmr_cli_option(argc, argv, &i, "--top-p", &v, &bad))
            p.top_p = strtof(v, NULL);
        else if (llmr_cli_option(argc, argv, &i, "--top-k", &v, &bad))
            p.top_k = (uint32_t)strtoul(v, NULL, 10);
        else if (llmr_cli_option(argc, argv, &i, "--seed", &v, &bad))
            p.seed = strtoull(v, NULL, 10);
        else if (llmr_cli_option(argc, argv, &i, "--options", &v, &bad))
            options_text = v;
        else if (!bad && argv[i][0] != '-' && !dir)
            dir = argv[i];
        else if (!bad) {
            llmr_cli_error("run", "unexpected argument \"%s\"; see llmr run --help", argv[i]);
            bad = true;
        }
    }
    if (!bad && (!dir || (!prompt == !ids_text))) {
        llmr_cli_error("run", "DIR and one of --prompt or --prompt-ids are required");
        bad = true;
    }
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char *options = NULL;
    if (!bad && llmr_local_engine_options(options_text, NULL, &options, &err) != LLMR_OK) {
        llmr_cli_error("run", "--options: %s", llmr_strbuf_cstr(&err));
        bad = true;
    }
    if (bad) {
        llmr_strbuf_free(&err);
        return LLMR_EXIT_USAGE;
    }

    /* The prompt's tokens.  The tokenizer also decodes, unless the engine writes text
     * itself (a GGUF's llama.cpp does, and may come without tokenizer.json). */
    prompt_ctx pc = {0};
    int32_t *given = NULL;
    uint32_t n = 0;
    int rc = LLMR_EXIT_FAILED;
    if (ids_text) {
        if (load_tokenizer(dir, false, &pc, &err) != LLMR_OK) {
            llmr_cli_error("run", "%s", llmr_strbuf_cstr(&err));
            goto out;
        }
        if (!(given = llmr_id_list_parse(ids_text, &n))) {
            llmr_cli_error("run", "--prompt-ids takes token ids like 1,2,3");
            rc = LLMR_EXIT_USAGE;
            goto out;
        }
    } else if ((rc = prompt_ids(dir, prompt, system, raw, show, &pc, &given, &n)) != LLMR_EXIT_OK) {
        goto out;
    }
    rc = LLMR_EXIT_FAILED;
    llmr_local_engine e;
    llmr_status opened = llmr_local_engine_open(cfg, dir, options, 0, &e, &err);
    if (opened != LLMR_OK) {
        llmr_cli_error("run", "%s: %s", llmr_status_name(opened), llmr_strbuf_cstr(&err));
        goto out;
    }
    stream s = {.json = json};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.done_cond, NULL);
    uint32_t ctx_n = n < 8 ? n : 8;
    s.engine_text = (e.plugin.info.capabilities & LLMR_ENGINE_CAP_TEXT) != 0;
    s.have_detok = pc.tok && !s.engine_text &&
                   llmr_detokenizer_init(&s.detok, pc.tok, 0, (const uint32_t *)given + n - ctx_n,
                                         ctx_n) == LLMR_OK;
    p.prompt = given;
    p.prompt_len = n;
    p.request_id = 1;
    llmr_status st = llmr_plugin_status(e.plugin.api->submit(e.model, &p, on_token, &s));
    if (st != LLMR_OK) {
        llmr_cli_error("run", "%s", e.plugin.api->last_error(e.model));
    } else {
        pthread_mutex_lock(&s.lock);
        while (!s.done)
            pthread_cond_wait(&s.done_cond, &s.lock);
        pthread_mutex_unlock(&s.lock);
        if (json)
            printf("{\"end\":\"%s\",\"status\":\"%s\",\"prompt_tokens\":%u,\"completion_tokens\":%u}\n",
                   finish_name(s.finish), llmr_status_name((llmr_status)s.status), n, s.tokens);
        else
            printf("\n");
        if (s.status != LLMR_OK)
            llmr_cli_error("run", "%s", s.message);
        else
            rc = LLMR_EXIT_OK;
    }
    if (s.have_detok)
        llmr_detokenizer_free(&s.detok);
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.done_cond);
    llmr_local_engine_close(&e);
out:
    free(options);
    free(given);
    prompt_ctx_free(&pc);
    llmr_strbuf_free(&err);
    return rc;
}

const llmr_command llmr_cmd_run = {"run", "chat with a model of the running server, or generate with a model "
                                          "directory in this process",
                                   run, help};

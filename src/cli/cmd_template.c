/* `llmr template render`: renders a Jinja2 chat template (src/template) with a JSON
 * context and writes the render exactly, for operators and for checks against
 * Python's jinja2 (bench/template_vs_jinja2.py).  Also what `llmr bench template`
 * shares with it: the options, reading the files and compiling (cmd_template.h). */
#define _XOPEN_SOURCE 700 /* strptime */
#include "cli/cmd_template.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "common/fs_util.h"
#include "common/json_util.h"

#define TEMPLATE_FILE_MAX (16u << 20)
#define CONTEXT_FILE_MAX (1u << 30)
#define ERR_SIZE 1024

static void help(FILE *out)
{
    fprintf(out,
            "usage: llmr template render (--template FILE | --default) --context FILE.json [--now TIME]\n\n"
            "Renders a chat template as Hugging Face transformers does (Jinja2 in a sandbox,\n"
            "trim_blocks and lstrip_blocks, loop controls, {%% generation %%}, tojson,\n"
            "raise_exception, strftime_now) and writes the render to standard output\n"
            "exactly, with nothing added (not even a final newline).\n\n"
            "  --template FILE     the template's source (e.g. a model's chat_template.jinja)\n"
            "  --default           the built-in ChatML-like template for models that ship none\n"
            "  --context FILE.json a JSON object whose members are the template's variables,\n"
            "                      e.g. {\"messages\": [...], \"add_generation_prompt\": true}\n"
            "  --now \"YYYY-MM-DD HH:MM:SS\"\n"
            "                      the time strftime_now() sees (default: the local time),\n"
            "                      for renders that are the same every day\n\n"
            "A missing or unreadable file, a context that is not a JSON object, a template\n"
            "that does not compile and a failed render (raise_exception included) are errors\n"
            "on standard error, naming the file, with exit code 1 and nothing on standard\n"
            "output.  `llmr bench template` times the render.\n");
}

bool llmr_cli_template_option(int argc, char **argv, int *i, llmr_cli_template_args *a,
                              bool *bad)
{
    if (strcmp(argv[*i], "--default") == 0) {
        a->use_default = true;
        return true;
    }
    if (llmr_cli_option(argc, argv, i, "--template", &a->template_path, bad))
        return true;
    if (llmr_cli_option(argc, argv, i, "--now", &a->now_text, bad))
        return true;
    return llmr_cli_option(argc, argv, i, "--context", &a->context_path, bad);
}

llmr_template_options llmr_cli_template_options(const llmr_cli_template_args *a)
{
    llmr_template_options o = llmr_template_default_options();
    if (a->now_text)
        o.fixed_now = &a->now;
    return o;
}

bool llmr_cli_template_args_check(const char *cmd, llmr_cli_template_args *a)
{
    if (a->now_text) {
        memset(&a->now, 0, sizeof a->now);
        const char *end = strptime(a->now_text, "%Y-%m-%d %H:%M:%S", &a->now);
        if (!end || *end) {
            llmr_cli_error(cmd, "--now takes \"YYYY-MM-DD HH:MM:SS\", not \"%s\"", a->now_text);
            return false;
        }
        a->now.tm_isdst = -1;
        time_t t = mktime(&a->now); /* fills the weekday and the day of the year */
        if (t == (time_t)-1) {
            llmr_cli_error(cmd, "--now \"%s\" is not a time this machine can represent", a->now_text);
            return false;
        }
    }
    if (a->template_path && a->use_default) {
        llmr_cli_error(cmd, "give --template FILE or --default, not both");
        return false;
    }
    if (!a->template_path && !a->use_default) {
        llmr_cli_error(cmd, "--template FILE (or --default) is required");
        return false;
    }
    if (!a->context_path) {
        llmr_cli_error(cmd, "--context FILE.json is required");
        return false;
    }
    return true;
}

const char *llmr_cli_template_name(const llmr_cli_template_args *a)
{
    return a->use_default ? "the default template" : a->template_path;
}

char *llmr_cli_template_read_source(const char *cmd, const llmr_cli_template_args *a,
                                    size_t *len)
{
    if (a->use_default) {
        const char *src = llmr_template_default_source();
        *len = strlen(src);
        char *copy = malloc(*len + 1);
        if (!copy)
            llmr_cli_error(cmd, "out of memory");
        else
            memcpy(copy, src, *len + 1);
        return copy;
    }
    char *src = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_read_file(a->template_path, TEMPLATE_FILE_MAX, &src, len, &err) != LLMR_OK)
        llmr_cli_error(cmd, "%s: %s", a->template_path, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return src;
}

json_t *llmr_cli_template_read_context(const char *cmd, const llmr_cli_template_args *a)
{
    llmr_status st;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *ctx = llmr_json_load_file(a->context_path, CONTEXT_FILE_MAX, &st, &err);
    if (!ctx) {
        llmr_cli_error(cmd, "%s: %s%s", a->context_path,
                       st == LLMR_MODEL_CORRUPT ? "not valid JSON: " : "", llmr_strbuf_cstr(&err));
    } else if (!json_is_object(ctx)) {
        llmr_json_describe(&err, ctx);
        llmr_cli_error(cmd, "%s: the context must be a JSON object, not %s", a->context_path,
                       llmr_strbuf_cstr(&err));
        json_decref(ctx);
        ctx = NULL;
    }
    llmr_strbuf_free(&err);
    return ctx;
}

llmr_template *llmr_cli_template_compile(const char *cmd, const llmr_cli_template_args *a,
                                         const char *src, size_t len)
{
    char err[ERR_SIZE] = "";
    llmr_template *t = llmr_template_compile(src, len, err, sizeof err);
    if (!t)
        llmr_cli_error(cmd, "%s: does not compile: %s", llmr_cli_template_name(a), err);
    return t;
}

void llmr_cli_template_render_error(const char *cmd, const llmr_cli_template_args *a,
                                    const char *err)
{
    llmr_cli_error(cmd, "%s: rendering with %s failed: %s", llmr_cli_template_name(a),
                   a->context_path, err);
}

/* Writes the render exactly; false (after saying why) when standard output fails. */
static bool write_exactly(const llmr_strbuf *out)
{
    if (out->len && fwrite(llmr_strbuf_cstr(out), 1, out->len, stdout) != out->len) {
        llmr_cli_error("template", "cannot write standard output: %s", strerror(errno));
        return false;
    }
    if (fflush(stdout) != 0) {
        llmr_cli_error("template", "cannot write standard output: %s", strerror(errno));
        return false;
    }
    return true;
}

/* Renders the template once with the context and writes it out. */
static int render_once(const llmr_cli_template_args *a)
{
    const char *cmd = "template";
    size_t len = 0;
    char *src = llmr_cli_template_read_source(cmd, a, &len);
    json_t *ctx = src ? llmr_cli_template_read_context(cmd, a) : NULL;
    llmr_template *t = ctx ? llmr_cli_template_compile(cmd, a, src, len) : NULL;
    int rc = LLMR_EXIT_FAILED;
    if (t) {
        llmr_strbuf out = LLMR_STRBUF_INIT;
        char err[ERR_SIZE] = "";
        llmr_template_options opt = llmr_cli_template_options(a);
        if (!llmr_template_render(t, ctx, &opt, &out, err, sizeof err))
            llmr_cli_template_render_error(cmd, a, err);
        else if (llmr_strbuf_failed(&out))
            llmr_cli_error(cmd, "out of memory holding the render");
        else if (write_exactly(&out))
            rc = LLMR_EXIT_OK;
        llmr_strbuf_free(&out);
    }
    llmr_template_free(t);
    json_decref(ctx);
    free(src);
    return rc;
}

/* argv[0] is "template", argv[1] "render". */
static int render_run(int argc, char **argv)
{
    llmr_cli_template_args a;
    memset(&a, 0, sizeof a);
    bool bad = false;
    for (int i = 2; i < argc && !bad; i++) {
        if (!llmr_cli_template_option(argc, argv, &i, &a, &bad)) {
            llmr_cli_error("template", "unexpected argument \"%s\"; see llmr template --help",
                           argv[i]);
            bad = true;
        }
    }
    if (bad || !llmr_cli_template_args_check("template", &a))
        return LLMR_EXIT_USAGE;
    return render_once(&a);
}

static int run(int argc, char **argv, const llmr_config *config)
{
    (void)config;
    if (argc >= 2 && strcmp(argv[1], "render") == 0)
        return render_run(argc, argv);
    if (argc >= 2)
        llmr_cli_error("template", "unknown subcommand \"%s\" (there is: render)", argv[1]);
    else
        llmr_cli_error("template", "which subcommand? (render); see llmr template --help");
    return LLMR_EXIT_USAGE;
}

const llmr_command llmr_cmd_template = {"template", "render a chat template with a JSON context",
                                        run, help};

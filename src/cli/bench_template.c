/* `llmr bench template`: the cost of rendering a chat template.  Compiles the
 * template once, renders the context N times on one thread, each render timed with
 * the project's clock; prints a table on stderr and one JSON line on stdout (median,
 * min and max render microseconds, compile microseconds, output bytes).
 * bench/template_vs_jinja2.py compares it with Python's jinja2. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "cli/cmd_template.h"
#include "common/clock.h"
#include "common/utf8.h"

#define CMD "bench template"
#define DEFAULT_RUNS 2000
#define MAX_RUNS 10000000L
#define ERR_SIZE 1024

typedef struct render_stats {
    long runs;
    double compile_us;
    double median_us, min_us, max_us;
    size_t output_bytes;
} render_stats;

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Options; false (after saying why) when the command line is wrong. */
static bool parse_args(int argc, char **argv, llmr_cli_template_args *a, long *runs)
{
    bool bad = false;
    for (int i = 1; i < argc && !bad; i++) {
        const char *v;
        if (llmr_cli_template_option(argc, argv, &i, a, &bad))
            continue;
        if (llmr_cli_option(argc, argv, &i, "--runs", &v, &bad)) {
            char *end = NULL;
            *runs = bad ? 0 : strtol(v, &end, 10);
            if (!bad && (*end != '\0' || *runs < 1 || *runs > MAX_RUNS)) {
                llmr_cli_error(CMD, "--runs takes 1 to %ld", MAX_RUNS);
                bad = true;
            }
        } else {
            llmr_cli_error(CMD, "unexpected argument \"%s\"; see llmr bench --help", argv[i]);
            bad = true;
        }
    }
    return !bad && llmr_cli_template_args_check(CMD, a);
}

/* Renders runs times into us[] (microseconds each); false after printing an error. */
static bool time_renders(const llmr_cli_template_args *a, const llmr_template *t,
                         const json_t *ctx, long runs, double *us, size_t *bytes)
{
    llmr_strbuf out = LLMR_STRBUF_INIT;
    char err[ERR_SIZE] = "";
    bool ok = true;
    llmr_template_options opt = llmr_cli_template_options(a);
    for (long r = 0; r < runs && ok; r++) {
        llmr_strbuf_reset(&out);
        uint64_t t0 = llmr_now_ns();
        ok = llmr_template_render(t, ctx, &opt, &out, err, sizeof err);
        us[r] = (double)(llmr_now_ns() - t0) / 1e3;
        if (!ok)
            llmr_cli_template_render_error(CMD, a, err);
    }
    *bytes = out.len;
    llmr_strbuf_free(&out);
    return ok;
}

/* Compiles once and times the renders into *s. */
static bool measure(const llmr_cli_template_args *a, const char *src, size_t len,
                    const json_t *ctx, render_stats *s)
{
    uint64_t t0 = llmr_now_ns();
    llmr_template *t = llmr_cli_template_compile(CMD, a, src, len);
    s->compile_us = (double)(llmr_now_ns() - t0) / 1e3;
    if (!t)
        return false;
    double *us = calloc((size_t)s->runs, sizeof *us);
    bool ok = us && time_renders(a, t, ctx, s->runs, us, &s->output_bytes);
    if (!us)
        llmr_cli_error(CMD, "out of memory for %ld timings", s->runs);
    if (ok) {
        qsort(us, (size_t)s->runs, sizeof *us, compare_doubles);
        s->min_us = us[0];
        s->median_us = us[s->runs / 2];
        s->max_us = us[s->runs - 1];
    }
    free(us);
    llmr_template_free(t);
    return ok;
}

/* A path for JSON: as it is when valid UTF-8, otherwise null. */
static const char *json_path(const char *p)
{
    return p && llmr_utf8_valid(p, strlen(p), NULL) ? p : NULL;
}

static double round2(double x)
{
    return (double)llround(x * 100.0) / 100.0;
}

static void report(const llmr_cli_template_args *a, const render_stats *s)
{
    fprintf(stderr,
            "template %s, context %s, %ld renders on one thread\n"
            "%-10s %12s %12s %12s\n"
            "%-10s %12.2f %12s %12s\n"
            "%-10s %12.2f %12.2f %12.2f\n"
            "output: %zu bytes\n",
            llmr_cli_template_name(a), a->context_path, s->runs, "(us)", "median", "min", "max",
            "compile", round2(s->compile_us), "-", "-", "render", round2(s->median_us),
            round2(s->min_us), round2(s->max_us), s->output_bytes);
    json_t *j = json_pack("{s:s, s:s?, s:b, s:s?, s:I, s:f, s:f, s:f, s:f, s:I}", "benchmark",
                          "template", "template", json_path(a->template_path), "default",
                          a->use_default, "context", json_path(a->context_path), "runs",
                          (json_int_t)s->runs, "compile_us", round2(s->compile_us),
                          "render_us_median", round2(s->median_us), "render_us_min",
                          round2(s->min_us), "render_us_max", round2(s->max_us), "output_bytes",
                          (json_int_t)s->output_bytes);
    char *text = j ? json_dumps(j, JSON_REAL_PRECISION(12)) : NULL;
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(j);
}

int llmr_bench_template(int argc, char **argv, const llmr_config *cfg)
{
    (void)cfg;
    llmr_cli_template_args a;
    memset(&a, 0, sizeof a);
    render_stats s;
    memset(&s, 0, sizeof s);
    s.runs = DEFAULT_RUNS;
    if (!parse_args(argc, argv, &a, &s.runs))
        return LLMR_EXIT_USAGE;
    size_t len = 0;
    char *src = llmr_cli_template_read_source(CMD, &a, &len);
    json_t *ctx = src ? llmr_cli_template_read_context(CMD, &a) : NULL;
    bool ok = ctx && measure(&a, src, len, ctx, &s);
    if (ok)
        report(&a, &s);
    json_decref(ctx);
    free(src);
    return ok ? LLMR_EXIT_OK : LLMR_EXIT_FAILED;
}

/* The chat-template renderer (template/template.h) against Python's jinja2 on real
 * templates: every template of the shared data's chat-templates/templates/ with every
 * conversation of chat-templates/cases/ (one JSON file each, the whole render
 * context), compared with chat-templates/expected/<template>/<case>.txt (the render
 * must be byte-identical) or .error (the compile or the render must fail, and when
 * jinja2's error is raise_exception's TemplateError, our error must carry its
 * message).  strftime_now's clock is fixed at 2026-01-15 09:30:00, as for the expected
 * renders.  Each template is compiled once and rendered for every case.  Prints one
 * line per pair that does not match (the first differing byte with context on both
 * sides, or the error) and "template pairs: N of M match"; fails unless all match.
 * Skips, with the reason, when the shared data directory is absent. */
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "common/fs_util.h"
#include "common/strbuf.h"
#include "fixture.h"
#include "template/template.h"

#define MAX_FILE (8u << 20)

/* The names in dir that end in suffix, without it, sorted; returns the count. */
static size_t list_names(const char *dir, const char *suffix, char ***out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0, cap = 0, sl = strlen(suffix);
    char **names = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof *names);
            if (!names)
                abort();
        }
        names[n] = malloc(len - sl + 1);
        if (!names[n])
            abort();
        memcpy(names[n], e->d_name, len - sl);
        names[n][len - sl] = '\0';
        n++;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++) /* insertion sort: a few dozen names */
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    *out = names;
    return n;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Reads dir/name+suffix into *data (malloc'd, NUL-terminated); false when it is not
 * there. */
static bool read_in(const char *dir, const char *name, const char *suffix, char **data, size_t *len)
{
    llmr_strbuf path = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&path, "%s/%s%s", dir, name, suffix);
    bool ok = llmr_read_file(llmr_strbuf_cstr(&path), MAX_FILE, data, len, &err) == LLMR_OK;
    llmr_strbuf_free(&path);
    llmr_strbuf_free(&err);
    return ok;
}

/* A path from a format, in a buffer the caller frees with llmr_strbuf_free. */
static const char *path_of(llmr_strbuf *sb, const char *fmt, const char *a, const char *b)
{
    llmr_strbuf_reset(sb);
    llmr_strbuf_printf(sb, fmt, a, b);
    return llmr_strbuf_cstr(sb);
}

/* raise_exception's message in a jinja2 error line ("TemplateError: MESSAGE\n"), or
 * NULL for other errors.  Points into `text`, whose trailing newline is cut. */
static const char *raise_message(char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    static const char tag[] = "TemplateError: ";
    if (strncmp(text, tag, sizeof tag - 1) != 0)
        return NULL;
    return text + sizeof tag - 1;
}

/* "offset O (line L, column C)" of the first differing byte, then up to 24 bytes before
 * and 40 from there of both sides. */
static void describe_difference(llmr_strbuf *msg, const char *want, size_t want_len, const char *got,
                                size_t got_len)
{
    size_t off = 0;
    while (off < want_len && off < got_len && want[off] == got[off])
        off++;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (want[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    size_t from = off > 24 ? off - 24 : 0;
    llmr_strbuf_printf(msg, "first difference at byte %zu (line %zu, column %zu; expected %zu bytes, got %zu)\n",
                       off, line, col, want_len, got_len);
    llmr_strbuf_puts(msg, "      expected: \"");
    llmr_strbuf_put_display(msg, want + from, off - from);
    llmr_strbuf_puts(msg, "\" >>> \"");
    size_t wn = want_len - off < 40 ? want_len - off : 40;
    llmr_strbuf_put_display(msg, want + off, wn);
    llmr_strbuf_puts(msg, want_len - off > 40 ? "\"...\n" : "\"\n");
    llmr_strbuf_puts(msg, "      got:      \"");
    llmr_strbuf_put_display(msg, got + from, off - from);
    llmr_strbuf_puts(msg, "\" >>> \"");
    size_t gn = got_len - off < 40 ? got_len - off : 40;
    llmr_strbuf_put_display(msg, got + off, gn);
    llmr_strbuf_puts(msg, got_len - off > 40 ? "\"..." : "\"");
}

TEST(every_template_renders_every_case_like_jinja2)
{
    const char *shared = fx_shared_dir();
    llmr_strbuf tdir_sb = LLMR_STRBUF_INIT, cdir_sb = LLMR_STRBUF_INIT, edir_sb = LLMR_STRBUF_INIT,
                tedir_sb = LLMR_STRBUF_INIT, path = LLMR_STRBUF_INIT;
    const char *tdir = path_of(&tdir_sb, "%s/%s", shared, "chat-templates/templates");
    const char *cdir = path_of(&cdir_sb, "%s/%s", shared, "chat-templates/cases");
    const char *edir = path_of(&edir_sb, "%s/%s", shared, "chat-templates/expected");
    char **templates = NULL, **cases = NULL;
    size_t nt = list_names(tdir, ".jinja", &templates);
    size_t nc = list_names(cdir, ".json", &cases);
    CHECK(nt > 0);
    CHECK(nc > 0);

    /* The contexts, loaded once. */
    json_t **contexts = calloc(nc ? nc : 1, sizeof *contexts);
    if (!contexts)
        abort();
    for (size_t c = 0; c < nc; c++) {
        json_error_t jerr;
        contexts[c] = json_load_file(path_of(&path, "%s/%s.json", cdir, cases[c]), 0, &jerr);
        if (!json_is_object(contexts[c]))
            llmr_test_fail(__FILE__, __LINE__, "case %s: not a JSON object: %s", cases[c], jerr.text);
    }

    struct tm now = {0};
    now.tm_year = 2026 - 1900;
    now.tm_mon = 0;
    now.tm_mday = 15;
    now.tm_hour = 9;
    now.tm_min = 30;
    now.tm_sec = 0;
    now.tm_wday = 4; /* Thursday */
    now.tm_yday = 14;
    llmr_template_options opt = llmr_template_default_options();
    opt.fixed_now = &now;

    size_t pairs = 0, matched = 0;
    static char err[8192];
    llmr_strbuf out = LLMR_STRBUF_INIT, msg = LLMR_STRBUF_INIT;
    for (size_t t = 0; t < nt; t++) {
        char *src = NULL;
        size_t src_len = 0;
        if (!read_in(tdir, templates[t], ".jinja", &src, &src_len)) {
            llmr_test_fail(__FILE__, __LINE__, "%s.jinja: cannot read", templates[t]);
            continue;
        }
        char compile_err[8192];
        compile_err[0] = '\0';
        llmr_template *tpl = llmr_template_compile(src, src_len, compile_err, sizeof compile_err);
        const char *tedir = path_of(&tedir_sb, "%s/%s", edir, templates[t]);
        for (size_t c = 0; c < nc; c++) {
            if (!contexts[c])
                continue;
            char *want = NULL, *want_err = NULL;
            size_t want_len = 0, want_err_len = 0;
            bool have_txt = read_in(tedir, cases[c], ".txt", &want, &want_len);
            bool have_err = !have_txt && read_in(tedir, cases[c], ".error", &want_err, &want_err_len);
            if (!have_txt && !have_err) {
                /* No expectation for this pair: not counted. */
                fprintf(stderr, "  (no expected file for %s / %s)\n", templates[t], cases[c]);
                continue;
            }
            pairs++;
            llmr_strbuf_reset(&msg);
            bool ok = false;
            err[0] = '\0';
            llmr_strbuf_reset(&out);
            bool rendered = tpl && llmr_template_render(tpl, contexts[c], &opt, &out, err, sizeof err);
            const char *why = tpl ? err : compile_err;
            const char *stage = tpl ? "render" : "compile";
            if (have_txt) {
                if (!rendered) {
                    llmr_strbuf_printf(&msg, "%s error: %s", stage, why);
                } else if (out.len != want_len || memcmp(llmr_strbuf_cstr(&out), want, want_len) != 0) {
                    describe_difference(&msg, want, want_len, llmr_strbuf_cstr(&out), out.len);
                } else {
                    ok = true;
                }
            } else {
                const char *raised = raise_message(want_err, want_err_len);
                if (rendered) {
                    llmr_strbuf_printf(&msg, "expected an error (jinja2: %s), got %zu bytes of output", want_err,
                                       out.len);
                } else if (raised && !strstr(why, raised)) {
                    llmr_strbuf_printf(&msg, "expected an error with raise_exception's \"%s\", got %s error: %s",
                                       raised, stage, why);
                } else {
                    ok = true;
                }
            }
            if (ok)
                matched++;
            else
                fprintf(stderr, "MISMATCH %s / %s: %s\n", templates[t], cases[c], llmr_strbuf_cstr(&msg));
            free(want);
            free(want_err);
        }
        llmr_template_free(tpl);
        free(src);
    }
    fprintf(stderr, "template pairs: %zu of %zu match\n", matched, pairs);
    if (matched != pairs || pairs == 0)
        llmr_test_fail(__FILE__, __LINE__, "template pairs: %zu of %zu match", matched, pairs);

    llmr_strbuf_free(&out);
    llmr_strbuf_free(&msg);
    llmr_strbuf_free(&tdir_sb);
    llmr_strbuf_free(&cdir_sb);
    llmr_strbuf_free(&edir_sb);
    llmr_strbuf_free(&tedir_sb);
    llmr_strbuf_free(&path);
    for (size_t c = 0; c < nc; c++)
        json_decref(contexts[c]);
    free(contexts);
    free_names(templates, nt);
    free_names(cases, nc);
}

int main(void)
{
    const char *shared = fx_shared_dir();
    llmr_strbuf probe = LLMR_STRBUF_INIT;
    DIR *d = shared ? opendir(path_of(&probe, "%s/%s", shared, "chat-templates/templates")) : NULL;
    llmr_strbuf_free(&probe);
    if (!d) {
        llmr_test_skip("the shared chat templates are absent (set LLMR_SHARED_DIR to a directory "
                       "with chat-templates/templates, cases and expected)");
        return llmr_test_finish();
    }
    closedir(d);
    RUN(every_template_renders_every_case_like_jinja2);
    return llmr_test_finish();
}

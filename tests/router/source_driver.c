/* A command-line front to the router's model sources for
 * tests/router/test_model_source.sh:
 *
 *   source_driver [--no-hash] [--allowlist LIST] resolve SOURCE
 *   source_driver [...] check SOURCE FORMAT [FILENAME]
 *   source_driver [...] manifest SOURCE NAME FORMAT [FILENAME]
 *   source_driver [...] read SOURCE PATH
 *
 * The Hub is HF_ENDPOINT with the token HF_TOKEN (the sources' defaults).  resolve
 * prints the listing as JSON ({"kind", "repo", "revision", "dir", "files": [{"path",
 * "size", "sha256", "origin_url"}]}); check prints {"ok": true} or {"ok": false,
 * "status", "files"}; manifest checks first, then prints the manifest, which must pass
 * the node's llmr_manifest_check; read prints the file's bytes.  Errors go to stderr as
 * "error: STATUS: message".  Exit codes: 0 success, 1 a failure of the source, 2 bad
 * arguments, 3 a manifest that is missing or that the node's check refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/strbuf.h"
#include "llmr/status.h"
#include "node/model_sync.h"
#include "router/model_source.h"

static int usage(void)
{
    fprintf(stderr, "usage: source_driver [--no-hash] [--allowlist LIST] resolve SOURCE\n"
                    "       source_driver [...] check SOURCE FORMAT [FILENAME]\n"
                    "       source_driver [...] manifest SOURCE NAME FORMAT [FILENAME]\n"
                    "       source_driver [...] read SOURCE PATH\n");
    return 2;
}

static void print_json(const json_t *v)
{
    char *text = llmr_json_pretty(v);
    printf("%s\n", text ? text : "null");
    free(text);
}

static int fail(llmr_status status, const llmr_strbuf *err)
{
    fprintf(stderr, "error: %s: %s\n", llmr_status_name(status), llmr_strbuf_cstr(err));
    return 1;
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *listing_json(const llmr_source *s)
{
    json_t *files = json_array();
    for (size_t i = 0; i < s->count; i++) {
        const llmr_source_file *f = &s->files[i];
        json_array_append_new(files, json_pack("{s:s, s:I, s:o, s:o, s:o}", "path", f->path, "size",
                                               (json_int_t)f->size, "sha256",
                                               string_or_null(f->sha256), "sample_sha256",
                                               string_or_null(f->sample_sha256), "origin_url",
                                               string_or_null(f->origin_url)));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "kind", string_or_null(s->kind), "repo",
                     string_or_null(s->repo), "revision", string_or_null(s->revision), "dir",
                     string_or_null(s->dir), "files", files);
}

/* check's verdict on stdout; 0 when OK. */
static int run_check(const llmr_source_options *o, const llmr_source *s, const char *format,
                     const char *filename, bool print_ok)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *files = NULL;
    llmr_status status = llmr_source_check(o, s, format, filename, &files, &err);
    int rc = 0;
    if (status == LLMR_OK) {
        if (files) {
            fprintf(stderr, "error: check passed but gave a list of files\n");
            rc = 1;
        } else if (print_ok) {
            printf("{\"ok\": true}\n");
        }
    } else {
        json_t *v = json_pack("{s:b, s:s, s:O}", "ok", 0, "status", llmr_status_name(status),
                              "files", files ? files : json_null());
        print_json(v);
        json_decref(v);
        rc = fail(status, &err);
    }
    json_decref(files);
    llmr_strbuf_free(&err);
    return rc;
}

int main(int argc, char **argv)
{
    llmr_source_options o;
    llmr_source_options_default(&o);
    const char *allowlist = NULL;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--no-hash") == 0) {
            o.hash_local = false;
        } else if (strcmp(argv[i], "--allowlist") == 0 && i + 1 < argc) {
            allowlist = argv[++i];
        } else {
            fprintf(stderr, "source_driver: unknown option %s\n", argv[i]);
            return usage();
        }
    }
    if (argc - i < 2)
        return usage();
    const char *cmd = argv[i], *source = argv[i + 1];
    char **rest = argv + i + 2;
    int nrest = argc - i - 2;
    bool ok_args = (strcmp(cmd, "resolve") == 0 && nrest == 0) ||
                   (strcmp(cmd, "check") == 0 && (nrest == 1 || nrest == 2)) ||
                   (strcmp(cmd, "manifest") == 0 && (nrest == 2 || nrest == 3)) ||
                   (strcmp(cmd, "read") == 0 && nrest == 1);
    if (!ok_args)
        return usage();

    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_source s;
    int rc = 0;
    llmr_status status = llmr_source_resolve(&o, source, &s, &err);
    if (status != LLMR_OK) {
        rc = fail(status, &err);
        llmr_strbuf_free(&err);
        return rc;
    }
    if (strcmp(cmd, "resolve") == 0) {
        json_t *v = listing_json(&s);
        print_json(v);
        json_decref(v);
    } else if (strcmp(cmd, "check") == 0) {
        rc = run_check(&o, &s, rest[0], nrest > 1 ? rest[1] : NULL, true);
    } else if (strcmp(cmd, "read") == 0) {
        char *data = NULL;
        size_t len = 0;
        status = llmr_source_read(&o, &s, rest[0], 16u << 20, &data, &len, &err);
        if (status == LLMR_OK)
            fwrite(data, 1, len, stdout);
        else
            rc = fail(status, &err);
        free(data);
    } else {
        const char *name = rest[0], *format = rest[1], *filename = nrest > 2 ? rest[2] : NULL;
        rc = run_check(&o, &s, format, filename, false);
        json_t *m = rc == 0 ? llmr_source_manifest(&s, name, format, filename, allowlist) : NULL;
        if (rc == 0 && !m) {
            fprintf(stderr, "error: no manifest although the check passed\n");
            rc = 3;
        } else if (m) {
            llmr_strbuf_reset(&err);
            status = llmr_manifest_check(m, &err);
            print_json(m);
            if (status != LLMR_OK) {
                fprintf(stderr, "error: the node's manifest check refuses it: %s\n",
                        llmr_strbuf_cstr(&err));
                rc = 3;
            }
        }
        json_decref(m);
    }
    llmr_source_free(&s);
    llmr_strbuf_free(&err);
    return rc;
}

/* A command-line front to llmr_model_sync for tests/node/test_sync_e2e.sh:
 *
 *   sync_driver DATA_DIR ROUTER_URL MANIFEST.json [--prefer-origin] [--allowlist HOSTS]
 *               [--retries N] [--stall-timeout S] [--auth HEADER]
 *
 * Progress goes to stderr as lines "progress STATE FILE DONE/TOTAL files F/T" (FILE is
 * "-" when none; at most one line per 50 ms for the same state and file).  At the end
 * stdout gets "skipped: JSON" and "status: NAME" (": message" when not OK); the exit
 * code is 0 for OK, 1 for a failed sync, 2 for bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/json_util.h"
#include "common/strbuf.h"
#include "llmr/status.h"
#include "node/model_sync.h"

typedef struct printer {
    char state[32];
    char file[512];
    uint64_t last_ms;
    bool any;
} printer;

static bool on_progress(void *user, const llmr_sync_progress *p)
{
    printer *pr = user;
    const char *file = p->file ? p->file : "-";
    uint64_t now = llmr_now_ms();
    bool same = pr->any && strcmp(pr->state, p->state) == 0 && strcmp(pr->file, file) == 0;
    if (same && now - pr->last_ms < 50)
        return true;
    snprintf(pr->state, sizeof pr->state, "%s", p->state);
    snprintf(pr->file, sizeof pr->file, "%s", file);
    pr->last_ms = now;
    pr->any = true;
    fprintf(stderr, "progress %s %s %llu/%llu files %u/%u\n", p->state, file,
            (unsigned long long)p->bytes_done, (unsigned long long)p->bytes_total,
            (unsigned)p->files_done, (unsigned)p->files_total);
    return true;
}

static int usage(void)
{
    fprintf(stderr, "usage: sync_driver DATA_DIR ROUTER_URL MANIFEST.json [--prefer-origin] "
                    "[--allowlist HOSTS] [--retries N] [--stall-timeout S] [--auth HEADER]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return usage();
    llmr_sync_options o;
    llmr_sync_options_default(&o);
    o.data_dir = argv[1];
    o.router_url = argv[2];
    const char *manifest_path = argv[3];
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--prefer-origin") == 0) {
            o.prefer_origin = true;
        } else if (strcmp(a, "--allowlist") == 0 && next) {
            o.origin_allowlist = next;
            i++;
        } else if (strcmp(a, "--retries") == 0 && next) {
            o.retries = (unsigned)strtoul(next, NULL, 10);
            i++;
        } else if (strcmp(a, "--stall-timeout") == 0 && next) {
            o.stall_timeout_s = (unsigned)strtoul(next, NULL, 10);
            i++;
        } else if (strcmp(a, "--auth") == 0 && next) {
            o.auth_header = next;
            i++;
        } else {
            fprintf(stderr, "sync_driver: unknown argument %s\n", a);
            return usage();
        }
    }

    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status status;
    json_t *manifest = llmr_json_load_file(manifest_path, 16u << 20, &status, &err);
    if (!manifest) {
        fprintf(stderr, "sync_driver: %s: %s\n", manifest_path, llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return 2;
    }
    printer pr;
    memset(&pr, 0, sizeof pr);
    o.progress = on_progress;
    o.user = &pr;
    json_t *skipped = NULL;
    status = llmr_model_sync(&o, manifest, &skipped, &err);
    char *text = skipped ? json_dumps(skipped, JSON_COMPACT) : NULL;
    printf("skipped: %s\n", text ? text : "null");
    if (status == LLMR_OK)
        printf("status: OK\n");
    else
        printf("status: %s: %s\n", llmr_status_name(status), llmr_strbuf_cstr(&err));
    free(text);
    json_decref(skipped);
    json_decref(manifest);
    llmr_strbuf_free(&err);
    return status == LLMR_OK ? 0 : 1;
}

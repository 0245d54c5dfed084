/* Fuzz target: the engine plugin manifest parser, and the GPU target and
 * semantic-version helpers its rules rest on. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "engine_host/plugin_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What every accepted manifest must hold, whatever the input. */
static void check_manifest(const llmr_plugin_manifest *m)
{
    if (!m->id || !m->version || !m->library || !m->description || m->dir || m->library_path)
        __builtin_trap();
    if (!llmr_file_name_is_safe(m->library)) /* a library name never leaves its directory */
        __builtin_trap();
    if (!llmr_semver_is_valid(m->version) || llmr_semver_compare(m->version, m->version) != 0)
        __builtin_trap();
    if (!m->runtime_count || !m->format_count || !m->architecture_count || !m->gpu_target_count)
        __builtin_trap();
    if (m->priority < LLMR_PLUGIN_PRIORITY_MIN || m->priority > LLMR_PLUGIN_PRIORITY_MAX)
        __builtin_trap();
    for (size_t i = 0; i < m->gpu_target_count; i++) {
        llmr_strbuf sb = LLMR_STRBUF_INIT;
        llmr_gpu_target t;
        llmr_gpu_target_format(&m->gpu_targets[i], &sb);
        if (!llmr_gpu_target_parse(llmr_strbuf_cstr(&sb), &t) || t.kind != m->gpu_targets[i].kind ||
            t.major != m->gpu_targets[i].major || t.minor != m->gpu_targets[i].minor)
            __builtin_trap();
        int s = llmr_gpu_target_score(&t, t.major, t.minor);
        if (s < 1 || s > 4)
            __builtin_trap(); /* every target runs on its own capability */
        llmr_strbuf_free(&sb);
    }
    json_t *j = llmr_plugin_manifest_json(m);
    if (!j)
        __builtin_trap();
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_plugin_manifest *m = NULL;
    llmr_status st = llmr_plugin_manifest_parse((const char *)data, size, NULL, &m, &err);
    if (st == LLMR_OK) {
        if (!m || err.len != 0)
            __builtin_trap();
        check_manifest(m);
        llmr_plugin_manifest_free(m);
    } else if (m || err.len == 0 || (st != LLMR_LOAD_FAILED && st != LLMR_ABI_MISMATCH)) {
        __builtin_trap();
    } else {
        for (size_t i = 0; i < err.len; i++)
            if ((unsigned char)err.data[i] < 0x20 || err.data[i] == 0x7f)
                __builtin_trap(); /* messages are printable: names from outside are escaped */
    }
    llmr_strbuf_free(&err);

    /* the input as two short strings for the version and target helpers */
    if (size <= 256) {
        char *text = malloc(size + 1);
        if (!text)
            return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        char *bar = strchr(text, '|');
        const char *b = "1.0.0";
        if (bar) {
            *bar = '\0';
            b = bar + 1;
        }
        int ab = llmr_semver_compare(text, b), ba = llmr_semver_compare(b, text);
        if ((ab < 0) != (ba > 0) || (ab == 0) != (ba == 0))
            __builtin_trap();
        llmr_gpu_target t;
        if (llmr_gpu_target_parse(text, &t)) {
            llmr_strbuf sb = LLMR_STRBUF_INIT;
            llmr_gpu_target_format(&t, &sb);
            if (strcmp(llmr_strbuf_cstr(&sb), text) != 0)
                __builtin_trap(); /* one spelling per target */
            llmr_strbuf_free(&sb);
        }
        free(text);
    }
    return 0;
}

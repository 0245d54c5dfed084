/* The llama.cpp plugin refuses llama.cpp libraries of another release than the one it
 * was built against, with a message that names both and what to do.
 *
 * This program defines ggml_version() and ggml_commit() itself and exports them
 * (ENABLE_EXPORTS), so the plugin it opens, asking "which ggml is this?", gets this
 * program's answer, as it would from a library of another release put beside it; the
 * rest of ggml is the real one.  The model is the tiny GGUF of make_tiny_gguf.sh
 * (fixture llama_tiny, LLMR_LLAMA_TINY_DIR). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine_host/host_services.h"
#include "engine_host/model_desc.h"
#include "engine_host/plugin_loader.h"

const char *ggml_version(void);
const char *ggml_commit(void);

const char *ggml_version(void)
{
    return "0.99.0";
}

const char *ggml_commit(void)
{
    return "f00dfee";
}

static llmr_host_api host;
static llmr_plugin plugin;
static const char *models;

static llmr_status load(llmr_engine_model **m, llmr_model_desc_owner *desc)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny", models);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_model_desc_open("tiny", dir, "gguf", NULL, desc, &err);
    if (st != LLMR_OK) {
        llmr_test_fail(__FILE__, __LINE__, "opening %s: %s", dir, llmr_strbuf_cstr(&err));
        llmr_strbuf_free(&err);
        return st;
    }
    llmr_strbuf_free(&err);
    llmr_engine_load_params p = llmr_engine_load_default_params();
    return plugin.api->load(&desc->desc, &p, m);
}

TEST(a_library_of_another_release_is_refused_by_name)
{
    llmr_engine_model *m = NULL;
    llmr_model_desc_owner desc;
    llmr_status st = load(&m, &desc);
    CHECK_EQ_INT(st, LLMR_UNSUPPORTED);
    CHECK(m == NULL);
    const char *why = plugin.api->last_error(NULL);
    CHECK(strstr(why, "ggml 0.99.0 (commit f00dfee)") != NULL);
    CHECK(strstr(why, "built against ggml " LLMR_LC_GGML_VERSION " (commit " LLMR_LC_GGML_COMMIT ")") != NULL);
    CHECK(strstr(why, "rebuild llmr") != NULL);
    if (m)
        plugin.api->unload(m);
    llmr_model_desc_close(&desc);
}

TEST(the_refusal_stays_for_every_later_load)
{
    llmr_engine_model *m = NULL;
    llmr_model_desc_owner desc;
    CHECK_EQ_INT(load(&m, &desc), LLMR_UNSUPPORTED);
    CHECK(strstr(plugin.api->last_error(NULL), "0.99.0") != NULL);
    llmr_model_desc_close(&desc);
}

int main(void)
{
    models = getenv("LLMR_LLAMA_TINY_DIR");
    if (!models) {
        fprintf(stderr, "LLMR_LLAMA_TINY_DIR is not set (ctest sets it)\n");
        return 1;
    }
    llmr_host_services_init(&host, "test");
    llmr_strbuf err = LLMR_STRBUF_INIT;
    if (llmr_plugin_open(LLMR_LLAMA_CPP_PLUGIN, &host, &plugin, &err) != LLMR_OK) {
        fprintf(stderr, "cannot open %s: %s\n", LLMR_LLAMA_CPP_PLUGIN, llmr_strbuf_cstr(&err));
        return 1;
    }
    llmr_strbuf_free(&err);
    RUN(a_library_of_another_release_is_refused_by_name);
    RUN(the_refusal_stays_for_every_later_load);
    int rc = llmr_test_finish();
    llmr_plugin_close(&plugin);
    return rc;
}

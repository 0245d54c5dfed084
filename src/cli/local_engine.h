/* An engine in this process, for the tools that run a model directly (`llmr run`,
 * `llmr logits`, `llmr bench engine`): the model's files checked and mapped, the best
 * installed plugin for it chosen as the node would (format, runtime, architecture,
 * the GPU NVML reports), opened, and the model loaded; and the --options text those
 * tools pass it, checked. */
#ifndef LLMR_CLI_LOCAL_ENGINE_H
#define LLMR_CLI_LOCAL_ENGINE_H

#include <jansson.h>

#include "common/config.h"
#include "engine_host/model_desc.h"
#include "engine_host/plugin_loader.h"

typedef struct llmr_local_engine {
    llmr_host_api host;
    llmr_plugin plugin;
    llmr_model_desc_owner desc;
    llmr_engine_model *model;
    llmr_engine_model_info info;
    char plugin_name[96]; /* "gpt-oss 0.1.0" */
} llmr_local_engine;

/* options_json (may be NULL): the engine's load options.  context: 0 for the model's. */
llmr_status llmr_local_engine_open(const llmr_config *cfg, const char *dir,
                                   const char *options_json, uint32_t context,
                                   llmr_local_engine *out, llmr_strbuf *err);
void llmr_local_engine_close(llmr_local_engine *e);

/* The text of an --options flag made into an engine's load options: checked to be a
 * JSON object, each member of `add` (an object, or NULL) set over it, and written
 * compact as the node passes options, into *out (malloc'd; NULL when text and add are
 * both NULL).  INVALID_ARGUMENT with a sentence in err when text is not a JSON
 * object. */
llmr_status llmr_local_engine_options(const char *text, json_t *add, char **out,
                                      llmr_strbuf *err);

#endif

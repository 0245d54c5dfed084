/* Runtime selection: see runtime.h. */
#include "models/runtime.h"

#include <string.h>

static const struct {
    const char *model_type;
    const char *architecture;
    llmr_runtime runtime;
} safetensors_runtimes[] = {
    {"gpt_oss", "GptOssForCausalLM", LLMR_RUNTIME_GPT_OSS},
    {"nemotron_h", "NemotronHForCausalLM", LLMR_RUNTIME_NEMOTRON_H},
    {"llmr_loopback", "LlmrLoopbackForCausalLM", LLMR_RUNTIME_LOOPBACK},
};

#define N_RUNTIMES (sizeof safetensors_runtimes / sizeof safetensors_runtimes[0])

const char *llmr_runtime_limitation(const char *runtime_name)
{
    if (runtime_name && strcmp(runtime_name, "nemotron_h") == 0)
        return "Nemotron-H weights load and validate, but llmr does not generate text with "
               "them yet: there is no Nemotron-H engine";
    return NULL;
}

const char *llmr_runtime_name(llmr_runtime runtime)
{
    switch (runtime) {
    case LLMR_RUNTIME_GPT_OSS:
        return "gpt_oss";
    case LLMR_RUNTIME_NEMOTRON_H:
        return "nemotron_h";
    case LLMR_RUNTIME_LLAMA_CPP:
        return "llama_cpp";
    case LLMR_RUNTIME_LOOPBACK:
        return "loopback";
    default:
        return NULL;
    }
}

llmr_runtime llmr_runtime_for_config(const json_t *config, llmr_strbuf *why)
{
    const json_t *mt = json_object_get(config, "model_type");
    const json_t *archs = json_object_get(config, "architectures");
    const char *model_type = json_string_value(mt);
    const char *arch = json_is_array(archs) ? json_string_value(json_array_get(archs, 0)) : NULL;

    for (size_t i = 0; i < N_RUNTIMES; i++) {
        if (model_type && strcmp(model_type, safetensors_runtimes[i].model_type) == 0)
            return safetensors_runtimes[i].runtime;
        if (!model_type && arch && strcmp(arch, safetensors_runtimes[i].architecture) == 0)
            return safetensors_runtimes[i].runtime;
    }
    if (!model_type && !arch) {
        llmr_strbuf_puts(why, "config.json has neither a model_type string nor an architectures "
                              "list: cannot tell which model this is");
        return LLMR_RUNTIME_NONE;
    }
    llmr_strbuf_puts(why, "config.json describes ");
    if (model_type) {
        llmr_strbuf_puts(why, "model_type \"");
        llmr_strbuf_put_display(why, model_type, strlen(model_type) > 64 ? 64 : strlen(model_type));
        llmr_strbuf_puts(why, "\"");
    }
    if (arch) {
        llmr_strbuf_puts(why, model_type ? " (" : "architecture ");
        llmr_strbuf_put_display(why, arch, strlen(arch) > 64 ? 64 : strlen(arch));
        if (model_type)
            llmr_strbuf_putc(why, ')');
    }
    llmr_strbuf_puts(why, ", which no llmr engine runs from safetensors (engines: gpt_oss, "
                          "nemotron_h); a GGUF conversion of it runs on llama.cpp");
    return LLMR_RUNTIME_NONE;
}

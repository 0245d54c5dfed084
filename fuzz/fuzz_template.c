/* libFuzzer target: chat templates (template/template.h).  The input is a template
 * source, then a NUL byte, then the JSON context; without a NUL, or when what follows
 * it is not a JSON object, a fixed small conversation (messages with a tool call,
 * tools, add_generation_prompt, the special tokens) is the context.  Whatever compiles
 * is rendered twice under small limits (1 MiB of output, 100000 loop iterations,
 * depth 64) with a fixed clock.  Any error is fine; a crash, a leak or a hang is not,
 * and neither is breaking the contract: a failure must say why and leave the output
 * as it was, a success must stay within max_output, be valid UTF-8 (the source and
 * the context are) and be the same both times. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/strbuf.h"
#include "common/utf8.h"
#include "template/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fixed_context[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true,"
    " \"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    "{\"role\": \"user\", \"content\": \"Weather in Tokyo? caf\\u00e9 \\ud83e\\udd99\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\","
    " \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\":"
    " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\", \"n\": 1.5}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"{\\\"t\\\": 18}\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"thanks\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    " \"description\": \"Get the weather.\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t src_len = nul ? (size_t)(nul - data) : size;
    json_t *context = NULL;
    if (nul)
        context = json_loadb((const char *)nul + 1, size - src_len - 1, 0, NULL);
    if (!json_is_object(context)) {
        json_decref(context);
        context = json_loads(fixed_context, 0, NULL);
        if (!context)
            __builtin_trap();
    }

    char err[512];
    err[0] = '\0';
    llmr_template *t = llmr_template_compile((const char *)data, src_len, err, sizeof err);
    if (!t) {
        if (err[0] == '\0' || !memchr(err, '\0', sizeof err))
            __builtin_trap(); /* a refusal must say why */
        json_decref(context);
        return 0;
    }

    struct tm now = {0};
    now.tm_year = 2026 - 1900;
    now.tm_mday = 15;
    now.tm_hour = 9;
    now.tm_min = 30;
    now.tm_wday = 4;
    now.tm_yday = 14;
    llmr_template_options opt = llmr_template_default_options();
    opt.limits.max_output = 1u << 20;
    opt.limits.max_iterations = 100000;
    opt.limits.max_depth = 64;
    opt.fixed_now = &now;

    llmr_strbuf first = LLMR_STRBUF_INIT, second = LLMR_STRBUF_INIT;
    llmr_strbuf_puts(&first, "#");
    err[0] = '\0';
    bool ok = llmr_template_render(t, context, &opt, &first, err, sizeof err);
    if (!ok) {
        if (err[0] == '\0' || !memchr(err, '\0', sizeof err))
            __builtin_trap(); /* a failed render must say why */
        if (first.len != 1 || first.data[0] != '#')
            __builtin_trap(); /* ... and leave out as it was */
    } else {
        if (first.len - 1 > opt.limits.max_output)
            __builtin_trap();
        if (!llmr_strbuf_failed(&first) && !llmr_utf8_valid(first.data + 1, first.len - 1, NULL))
            __builtin_trap();
    }
    /* Compile once, render many: the same input renders the same way again. */
    err[0] = '\0';
    bool ok2 = llmr_template_render(t, context, &opt, &second, err, sizeof err);
    if (ok2 != ok)
        __builtin_trap();
    if (ok && (second.len != first.len - 1 || memcmp(second.data ? second.data : "", first.data + 1,
                                                     second.len) != 0))
        __builtin_trap();

    llmr_strbuf_free(&first);
    llmr_strbuf_free(&second);
    llmr_template_free(t);
    json_decref(context);
    return 0;
}

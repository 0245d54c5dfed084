/* Fuzz target: what a client or a router sends a node.  The first byte picks the
 * parser: chat completions, completions, or a model-sync manifest (the router's); the
 * rest is the body.  A refusal must carry a 4xx status and a message; an accepted
 * chat request has messages, an accepted completion a prompt; the response builders
 * take whatever was accepted; what a chat template is given (llmr_oai_template_input)
 * is built for any accepted chat, in harmony's shape too: one call per assistant
 * message, no null content, no tools under tool_choice "none". */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/strbuf.h"
#include "node/model_sync.h"
#include "openai/openai_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_template_input(const llmr_oai_request *r)
{
    for (int harmony = 0; harmony < 2; harmony++) {
        json_t *m, *t;
        llmr_oai_error e;
        if (!llmr_oai_template_input(r, harmony, &m, &t, &e))
            continue; /* out of memory */
        if (!json_is_array(m) || (t && !json_is_array(t)))
            __builtin_trap();
        if (harmony && r->tool_choice == LLMR_OAI_TOOL_NONE && t)
            __builtin_trap();
        size_t i;
        json_t *msg;
        json_array_foreach(m, i, msg) {
            json_t *calls = json_object_get(msg, "tool_calls");
            if (harmony && (json_is_null(json_object_get(msg, "content")) && json_object_get(msg, "tool_calls")))
                __builtin_trap();
            if (harmony && calls && json_array_size(calls) != 1)
                __builtin_trap();
        }
        json_decref(m);
        json_decref(t);
    }
}

static void check_request(llmr_oai_kind kind, const char *body, size_t len)
{
    llmr_oai_request r;
    llmr_oai_error e;
    memset(&e, 0, sizeof e);
    if (!llmr_oai_parse(kind, body, len, &r, &e)) {
        if (e.status < 400 || e.status > 599 || !e.type || !e.message[0])
            __builtin_trap();
        json_t *j = llmr_oai_error_json(&e);
        if (!j)
            __builtin_trap();
        json_decref(j);
        return;
    }
    if (!r.model || (kind == LLMR_OAI_CHAT && !json_is_array(r.messages)) ||
        (kind == LLMR_OAI_COMPLETION && !r.prompt && !r.prompt_ids) || r.stop_count > LLMR_OAI_MAX_STOP)
        __builtin_trap();
    if (kind == LLMR_OAI_CHAT)
        check_template_input(&r);
    llmr_oai_usage u = {1, 2};
    json_t *resp = kind == LLMR_OAI_CHAT
                       ? llmr_oai_chat_response("id", r.model, 0, body, len, "stop", &u, NULL)
                       : llmr_oai_completion_response("id", r.model, 0, body, len, "length", &u, NULL);
    char *text = resp ? llmr_oai_dumps(resp) : NULL;
    if (!text)
        __builtin_trap();
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_oai_sse_data(&sb, resp);
    llmr_strbuf_free(&sb);
    json_decref(resp);
    free(text);
    llmr_oai_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 3) {
    case 0: check_request(LLMR_OAI_CHAT, body, len); break;
    case 1: check_request(LLMR_OAI_COMPLETION, body, len); break;
    default: {
        json_t *m = json_loadb(body, len, 0, NULL);
        llmr_strbuf err = LLMR_STRBUF_INIT;
        if (m && llmr_manifest_check(m, &err) != LLMR_OK && !err.len)
            __builtin_trap(); /* a refusal says why */
        llmr_strbuf_free(&err);
        json_decref(m);
        break;
    }
    }
    return 0;
}

/* The Responses API's answer (see openai_responses.h): chat deltas in, output items
 * and the Responses stream's events out.  Each piece extends the open item when it
 * is of the same kind (reasoning text, answer text, the arguments of the call just
 * started), or closes it and opens the next one:
 *
 *   reasoning      {type: "reasoning", id: "rs_...", summary: [], content:
 *                  [{type: "reasoning_text", text}]}: output_item.added,
 *                  content_part.added, reasoning_text.delta..., reasoning_text.done,
 *                  content_part.done, output_item.done;
 *   message        {type: "message", id: "msg_...", role: "assistant", status, content:
 *                  [{type: "output_text", text, annotations: []}]}: the same with
 *                  output_text.delta / .done;
 *   function_call  {type: "function_call", id: "fc_...", call_id, name, arguments,
 *                  status}: output_item.added, function_call_arguments.delta...,
 *                  function_call_arguments.done, output_item.done. */
#include "openai/openai_responses.h"

#include <stdlib.h>
#include <string.h>

#include "openai/openai_internal.h"

enum { ITEM_NONE, ITEM_REASONING, ITEM_MESSAGE, ITEM_CALL };

struct llmr_oai_resp_out {
    json_t *response;   /* the response object; its "output" the items */
    int open;           /* the kind of the last item while it is open */
    llmr_strbuf text;   /* the open item's text (or arguments) so far */
    uint64_t sequence;
    bool failed;
};

static json_t *resp_output(const llmr_oai_resp_out *o)
{
    return json_object_get(o->response, "output");
}

/* An event {type, sequence_number, ...rest} (rest taken) appended to events. */
static void emit(llmr_oai_resp_out *o, json_t *events, const char *type, json_t *rest)
{
    if (!rest) {
        o->failed = true;
        return;
    }
    if (!events) {
        json_decref(rest);
        return;
    }
    json_t *e = json_pack("{s:s, s:I}", "type", type, "sequence_number", (json_int_t)o->sequence++);
    if (!e || json_object_update(e, rest) != 0 || json_array_append(events, e) != 0)
        o->failed = true;
    json_decref(e);
    json_decref(rest);
}

/* A copy of the response's echoed setting key, or dflt (taken) when not given. */
static json_t *setting(const json_t *request, const char *key, json_t *dflt)
{
    json_t *v = llmr_oai_given(request, key);
    if (!v)
        return dflt;
    json_decref(dflt);
    return json_deep_copy(v);
}

llmr_oai_resp_out *llmr_oai_resp_out_new(const char *id, const char *model, int64_t created,
                                         const json_t *request)
{
    llmr_oai_resp_out *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    llmr_strbuf_init(&o->text);
    json_t *reasoning = json_pack("{s:n, s:n}", "effort", "summary");
    json_t *effort = llmr_oai_given(llmr_oai_given(request, "reasoning"), "effort");
    if (reasoning && effort)
        json_object_set(reasoning, "effort", effort);
    bool store = true;
    json_t *s = llmr_oai_given(request, "store");
    if (json_is_boolean(s))
        store = json_is_true(s);
    o->response = json_pack(
        "{s:s, s:s, s:I, s:s, s:n, s:n, s:o, s:s, s:[], s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
        "s:o, s:b, s:b, s:{s:{s:s}}, s:s, s:n, s:o}",
        "id", id, "object", "response", "created_at", (json_int_t)created, "status",
        "in_progress", "error", "incomplete_details", "instructions",
        setting(request, "instructions", json_null()), "model", model, "output", "metadata",
        setting(request, "metadata", json_object()), "parallel_tool_calls",
        setting(request, "parallel_tool_calls", json_true()), "temperature",
        setting(request, "temperature", json_real(1)), "top_p",
        setting(request, "top_p", json_real(1)), "tool_choice",
        setting(request, "tool_choice", json_string("auto")), "tools",
        setting(request, "tools", json_array()), "max_output_tokens",
        setting(request, "max_output_tokens", json_null()), "previous_response_id",
        setting(request, "previous_response_id", setting(request, LLMR_OAI_PREVIOUS_ECHO, json_null())),
        "background", false, "store",
        store, "text", "format", "type", "text", "truncation", "disabled", "usage", "reasoning",
        reasoning ? reasoning : json_null());
    if (!o->response) {
        llmr_oai_resp_out_free(o);
        return NULL;
    }
    json_t *user = llmr_oai_given(request, "user");
    if (json_is_string(user))
        json_object_set(o->response, "user", user);
    return o;
}

void llmr_oai_resp_out_free(llmr_oai_resp_out *o)
{
    if (!o)
        return;
    json_decref(o->response);
    llmr_strbuf_free(&o->text);
    free(o);
}

/* {type: "response.X", response: <the response now>} */
static void emit_response(llmr_oai_resp_out *o, json_t *events, const char *type)
{
    if (events)
        emit(o, events, type, json_pack("{s:O}", "response", o->response));
}

void llmr_oai_resp_out_start(llmr_oai_resp_out *o, json_t *events)
{
    emit_response(o, events, "response.created");
    emit_response(o, events, "response.in_progress");
}

static json_t *sb_text(const llmr_strbuf *sb)
{
    return llmr_oai_text_json(sb->data ? sb->data : "", sb->len);
}

/* The open item done: its text in, its status set, the closing events. */
static void close_item(llmr_oai_resp_out *o, json_t *events, const char *status)
{
    if (o->open == ITEM_NONE)
        return;
    size_t index = json_array_size(resp_output(o)) - 1;
    json_t *item = json_array_get(resp_output(o), index);
    const char *item_id = json_string_value(json_object_get(item, "id"));
    json_int_t at = (json_int_t)index;
    json_t *text = sb_text(&o->text);
    if (!text) {
        o->failed = true;
        text = json_string("");
    }
    if (o->open == ITEM_CALL) {
        json_object_set(item, "arguments", text);
        emit(o, events, "response.function_call_arguments.done",
             json_pack("{s:s, s:I, s:O, s:O}", "item_id", item_id, "output_index", at, "arguments",
                       text, "name", json_object_get(item, "name")));
    } else {
        bool reasoning = o->open == ITEM_REASONING;
        json_t *part = json_array_get(json_object_get(item, "content"), 0);
        json_object_set(part, "text", text);
        json_t *done = json_pack("{s:s, s:I, s:i, s:O}", "item_id", item_id, "output_index", at,
                                 "content_index", 0, "text", text);
        if (done && !reasoning)
            json_object_set_new(done, "logprobs", json_array());
        emit(o, events, reasoning ? "response.reasoning_text.done" : "response.output_text.done",
             done);
        emit(o, events, "response.content_part.done",
             json_pack("{s:s, s:I, s:i, s:O}", "item_id", item_id, "output_index", at,
                       "content_index", 0, "part", part));
    }
    json_decref(text);
    if (o->open != ITEM_REASONING || json_object_get(item, "status"))
        json_object_set_new(item, "status", json_string(status));
    emit(o, events, "response.output_item.done",
         json_pack("{s:I, s:O}", "output_index", at, "item", item));
    o->open = ITEM_NONE;
    llmr_strbuf_reset(&o->text);
}

/* A new item (taken) opened: output_item.added, and its content part's added. */
static void open_item(llmr_oai_resp_out *o, json_t *events, int kind, json_t *item)
{
    if (!item || json_array_append_new(resp_output(o), item) != 0) {
        o->failed = true;
        return;
    }
    o->open = kind;
    json_int_t at = (json_int_t)json_array_size(resp_output(o)) - 1;
    /* as it was when added, its content empty: the part comes with content_part.added
     * (as OpenAI streams it; an SDK's accumulator appends that part to the item) */
    json_t *shown = json_deep_copy(item);
    if (shown && json_object_get(shown, "content"))
        json_object_set_new(shown, "content", json_array());
    emit(o, events, "response.output_item.added",
         json_pack("{s:I, s:o}", "output_index", at, "item", shown ? shown : json_null()));
    json_t *part = json_array_get(json_object_get(item, "content"), 0);
    if (part)
        emit(o, events, "response.content_part.added",
             json_pack("{s:O, s:I, s:i, s:O}", "item_id", json_object_get(item, "id"),
                       "output_index", at, "content_index", 0, "part", part));
}

static void add_text(llmr_oai_resp_out *o, json_t *events, int kind, const json_t *piece)
{
    const char *text = json_string_value(piece);
    size_t len = json_string_length(piece);
    if (!text || !len)
        return;
    if (o->open != kind) {
        close_item(o, events, "completed");
        char id[48];
        json_t *item;
        if (kind == ITEM_REASONING) {
            llmr_oai_new_id("rs_", id, sizeof id);
            item = json_pack("{s:s, s:s, s:[], s:[{s:s, s:s}]}", "id", id, "type", "reasoning",
                             "summary", "content", "type", "reasoning_text", "text", "");
        } else {
            llmr_oai_new_id("msg_", id, sizeof id);
            item = json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s, s:[]}]}", "id", id, "type",
                             "message", "role", "assistant", "status", "in_progress", "content",
                             "type", "output_text", "text", "", "annotations");
        }
        open_item(o, events, kind, item);
        if (o->open != kind)
            return;
    }
    llmr_strbuf_append(&o->text, text, len);
    json_t *item = json_array_get(resp_output(o), json_array_size(resp_output(o)) - 1);
    json_t *delta = json_pack("{s:O, s:I, s:i, s:O}", "item_id", json_object_get(item, "id"),
                              "output_index", (json_int_t)json_array_size(resp_output(o)) - 1,
                              "content_index", 0, "delta", piece);
    if (delta && kind == ITEM_MESSAGE)
        json_object_set_new(delta, "logprobs", json_array());
    emit(o, events,
         kind == ITEM_REASONING ? "response.reasoning_text.delta" : "response.output_text.delta",
         delta);
}

/* One entry of a chat delta's tool_calls: a call's start (it has an id) or arguments. */
static void add_call_piece(llmr_oai_resp_out *o, json_t *events, const json_t *c)
{
    json_t *fn = json_object_get(c, "function");
    json_t *call_id = json_object_get(c, "id");
    if (json_is_string(call_id)) {
        close_item(o, events, "completed");
        char id[48];
        llmr_oai_new_id("fc_", id, sizeof id);
        open_item(o, events, ITEM_CALL,
                  json_pack("{s:s, s:s, s:s, s:O, s:O, s:s}", "id", id, "type", "function_call",
                            "status", "in_progress", "call_id", call_id, "name",
                            json_object_get(fn, "name"), "arguments", ""));
    }
    json_t *args = json_object_get(fn, "arguments");
    if (o->open != ITEM_CALL || !json_string_length(args))
        return;
    llmr_strbuf_append(&o->text, json_string_value(args), json_string_length(args));
    json_t *item = json_array_get(resp_output(o), json_array_size(resp_output(o)) - 1);
    emit(o, events, "response.function_call_arguments.delta",
         json_pack("{s:O, s:I, s:O}", "item_id", json_object_get(item, "id"), "output_index",
                   (json_int_t)json_array_size(resp_output(o)) - 1, "delta", args));
}

void llmr_oai_resp_out_delta(llmr_oai_resp_out *o, const json_t *delta, json_t *events)
{
    json_t *r = json_object_get(delta, "reasoning_content");
    if (r)
        add_text(o, events, ITEM_REASONING, r);
    json_t *c = json_object_get(delta, "content");
    if (json_is_string(c))
        add_text(o, events, ITEM_MESSAGE, c);
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, call) add_call_piece(o, events, call);
}

void llmr_oai_resp_out_text(llmr_oai_resp_out *o, const char *text, size_t len, json_t *events)
{
    json_t *t = llmr_oai_text_json(text, len);
    if (!t) {
        o->failed = true;
        return;
    }
    add_text(o, events, ITEM_MESSAGE, t);
    json_decref(t);
}

void llmr_oai_resp_out_finish(llmr_oai_resp_out *o, bool length, const llmr_oai_resp_usage *u,
                              json_t *events)
{
    close_item(o, events, length ? "incomplete" : "completed");
    json_t *usage = json_pack("{s:I, s:{s:i}, s:I, s:{s:I}, s:I}", "input_tokens",
                              (json_int_t)u->input_tokens, "input_tokens_details", "cached_tokens",
                              0, "output_tokens", (json_int_t)u->output_tokens,
                              "output_tokens_details", "reasoning_tokens",
                              (json_int_t)u->reasoning_tokens, "total_tokens",
                              (json_int_t)u->input_tokens + u->output_tokens);
    if (!usage || json_object_set_new(o->response, "usage", usage) != 0)
        o->failed = true;
    json_object_set_new(o->response, "status", json_string(length ? "incomplete" : "completed"));
    if (length)
        json_object_set_new(o->response, "incomplete_details",
                            json_pack("{s:s}", "reason", "max_output_tokens"));
    emit_response(o, events, length ? "response.incomplete" : "response.completed");
}

void llmr_oai_resp_out_fail(llmr_oai_resp_out *o, const char *code, const char *message,
                            json_t *events)
{
    close_item(o, events, "incomplete");
    json_object_set_new(o->response, "status", json_string("failed"));
    json_object_set_new(o->response, "error",
                        json_pack("{s:s, s:s}", "code", code ? code : "server_error", "message",
                                  message ? message : "the generation failed"));
    emit_response(o, events, "response.failed");
}

json_t *llmr_oai_resp_out_response(const llmr_oai_resp_out *o)
{
    return json_deep_copy(o->response);
}

bool llmr_oai_resp_out_failed(const llmr_oai_resp_out *o)
{
    return o->failed || llmr_strbuf_failed(&o->text);
}

void llmr_oai_sse_event(llmr_strbuf *out, const json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    char *text = llmr_oai_dumps(event);
    if (!text) {
        llmr_strbuf_puts(out, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\","
                              "\"message\":\"out of memory\"}\n\n");
        return;
    }
    llmr_strbuf_printf(out, "event: %s\ndata: %s\n\n", type ? type : "message", text);
    free(text);
}

/* The OpenAI wire format, chat's tools: `tools` (function tools, kept as sent for the
 * chat template), `tool_choice` and `parallel_tool_calls` (see openai_api.h), and the
 * deprecated function-calling fields, which are refused.
 *
 * tool_choice is "auto" (the default), "none", "required" or
 * {"type": "function", "function": {"name": NAME}}; "required" and a named function
 * need tools, and the name must be one of them.  What each does to the answer is the
 * caller's (llmr_oai_template_input for the prompt, the answer's options for the
 * calls returned). */
#include <string.h>

#include "openai/openai_internal.h"

#define INVALID LLMR_OAI_INVALID

static bool check_tool(const json_t *tool, size_t i, llmr_oai_error *err)
{
    char p[64];
    llmr_oai_param(p, sizeof p, "tools[%zu]", i);
    if (!json_is_object(tool))
        return llmr_oai_fail_type(err, p, "an object", tool);
    json_t *type = json_object_get(tool, "type");
    llmr_oai_param(p, sizeof p, "tools[%zu].type", i);
    if (!type)
        return llmr_oai_fail_missing(err, p);
    if (!json_is_string(type))
        return llmr_oai_fail_type(err, p, "a string", type);
    if (strcmp(json_string_value(type), "function") != 0) {
        llmr_oai_error_set(err, 400, INVALID, "unsupported_value", p,
                           "Tools of type '%s' are not supported: only 'function' tools are.",
                           llmr_oai_has_nul(type) ? "?" : json_string_value(type));
        return false;
    }
    json_t *fn = json_object_get(tool, "function");
    llmr_oai_param(p, sizeof p, "tools[%zu].function", i);
    if (!fn)
        return llmr_oai_fail_missing(err, p);
    if (!json_is_object(fn))
        return llmr_oai_fail_type(err, p, "an object", fn);
    json_t *name = json_object_get(fn, "name");
    llmr_oai_param(p, sizeof p, "tools[%zu].function.name", i);
    if (!name)
        return llmr_oai_fail_missing(err, p);
    if (!json_is_string(name))
        return llmr_oai_fail_type(err, p, "a string", name);
    if (json_string_length(name) == 0 || llmr_oai_has_nul(name)) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", p,
                           "Invalid '%s': a function needs a non-empty name without NUL "
                           "characters.",
                           p);
        return false;
    }
    json_t *desc = llmr_oai_given(fn, "description");
    if (desc && !json_is_string(desc))
        return llmr_oai_fail_type(err,
                                  llmr_oai_param(p, sizeof p, "tools[%zu].function.description", i),
                                  "a string", desc);
    json_t *params = llmr_oai_given(fn, "parameters");
    if (params && !json_is_object(params))
        return llmr_oai_fail_type(err,
                                  llmr_oai_param(p, sizeof p, "tools[%zu].function.parameters", i),
                                  "an object", params);
    return true;
}

/* Whether tools holds a function of this name. */
static bool has_function(const json_t *tools, const char *name)
{
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        const char *n = json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
        if (n && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

/* {"type": "function", "function": {"name": NAME}} into r. */
static bool parse_named_choice(const json_t *choice, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *type = json_object_get(choice, "type");
    if (!type)
        return llmr_oai_fail_missing(err, "tool_choice.type");
    if (!json_is_string(type))
        return llmr_oai_fail_type(err, "tool_choice.type", "a string", type);
    if (strcmp(json_string_value(type), "function") != 0) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "tool_choice.type",
                           "Invalid value for 'tool_choice.type': only 'function' is supported.");
        return false;
    }
    json_t *fn = json_object_get(choice, "function");
    if (!fn)
        return llmr_oai_fail_missing(err, "tool_choice.function");
    if (!json_is_object(fn))
        return llmr_oai_fail_type(err, "tool_choice.function", "an object", fn);
    json_t *name = json_object_get(fn, "name");
    if (!name)
        return llmr_oai_fail_missing(err, "tool_choice.function.name");
    if (!json_is_string(name))
        return llmr_oai_fail_type(err, "tool_choice.function.name", "a string", name);
    if (llmr_oai_has_nul(name))
        return llmr_oai_fail_nul(err, "tool_choice.function.name");
    const char *n = json_string_value(name);
    if (!r->tools || !has_function(r->tools, n)) {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "tool_choice.function.name",
                           "Invalid value for 'tool_choice.function.name': no function named "
                           "'%.128s' is among 'tools'.",
                           n);
        return false;
    }
    if (!(r->tool_choice_name = strdup(n)))
        return llmr_oai_fail_oom(err);
    r->tool_choice = LLMR_OAI_TOOL_FUNCTION;
    return true;
}

static bool parse_tool_choice(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *choice = llmr_oai_given(root, "tool_choice");
    if (!choice)
        return true;
    if (json_is_object(choice))
        return parse_named_choice(choice, r, err);
    if (!json_is_string(choice))
        return llmr_oai_fail_type(err, "tool_choice", "a string or an object", choice);
    const char *c = json_string_value(choice);
    if (strcmp(c, "auto") == 0) {
        r->tool_choice = LLMR_OAI_TOOL_AUTO;
    } else if (strcmp(c, "none") == 0) {
        r->tool_choice = LLMR_OAI_TOOL_NONE;
    } else if (strcmp(c, "required") == 0) {
        if (!r->tools) {
            llmr_oai_error_set(err, 400, INVALID, "invalid_value", "tool_choice",
                               "Invalid value for 'tool_choice': 'required' needs functions in "
                               "'tools' to call.");
            return false;
        }
        r->tool_choice = LLMR_OAI_TOOL_REQUIRED;
    } else {
        llmr_oai_error_set(err, 400, INVALID, "invalid_value", "tool_choice",
                           "Invalid value for 'tool_choice': supported values are 'none', "
                           "'auto', 'required' and {\"type\": \"function\", \"function\": "
                           "{\"name\": ...}}.");
        return false;
    }
    return true;
}

bool llmr_oai_parse_tools(const json_t *root, llmr_oai_request *r, llmr_oai_error *err)
{
    json_t *tools = llmr_oai_given(root, "tools");
    if (tools) {
        if (!json_is_array(tools))
            return llmr_oai_fail_type(err, "tools", "an array", tools);
        size_t i;
        json_t *tool;
        json_array_foreach(tools, i, tool) {
            if (!check_tool(tool, i, err))
                return false;
        }
        if (json_array_size(tools) > 0)
            r->tools = json_incref(tools);
    }
    if (!parse_tool_choice(root, r, err) ||
        !llmr_oai_get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, err))
        return false;
    const char *deprecated[] = {"functions", "function_call"};
    for (size_t i = 0; i < 2; i++) {
        if (llmr_oai_given(root, deprecated[i])) {
            llmr_oai_error_set(err, 400, INVALID, "unsupported_parameter", deprecated[i],
                               "'%s' is deprecated and not supported: describe functions in "
                               "'tools' instead.",
                               deprecated[i]);
            return false;
        }
    }
    return true;
}

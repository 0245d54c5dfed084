/* Tests of a model's chat format (template/chat_format.h): which template wins
 * (registration, chat_template.jinja, chat_template.json, tokenizer_config.json as a
 * string or a named list, the default), the special tokens taken from
 * tokenizer_config.json (and the texts of its special added tokens), files that are
 * not what they should be (each error names the
 * file), the JSON form kept in the router's store, and the render's context. */
#include <jansson.h>
#include <string.h>

#include "check.h"
#include "common/strbuf.h"
#include "template/chat_format.h"

static const char TCFG[] = "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"</s>\", \"lstrip\": false},"
                           " \"pad_token\": \"<pad>\", \"model_max_length\": 1000000000000000019884624838656,"
                           " \"chat_template\": \"TC{{ bos_token }}\"}";

static llmr_status choose(const llmr_chat_files *f, llmr_chat_format *out, llmr_strbuf *err)
{
    llmr_strbuf_reset(err);
    return llmr_chat_format_choose(f, out, err);
}

TEST(the_first_template_found_wins)
{
    llmr_chat_format f;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_chat_files files = {.override = "R", .jinja = "J", .jinja_len = 1,
                             .template_json = "{\"chat_template\": \"JS\"}", .template_json_len = 23,
                             .tokenizer_config = TCFG, .tokenizer_config_len = sizeof TCFG - 1};
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.source, "R");
    CHECK_EQ_STR(f.origin, LLMR_CHAT_ORIGIN_REGISTRATION);
    llmr_chat_format_free(&f);

    files.override = NULL;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.source, "J");
    CHECK_EQ_STR(f.origin, LLMR_CHAT_ORIGIN_JINJA);
    llmr_chat_format_free(&f);

    files.jinja = NULL;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.source, "JS");
    CHECK_EQ_STR(f.origin, LLMR_CHAT_ORIGIN_JSON);
    llmr_chat_format_free(&f);

    files.template_json = NULL;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.source, "TC{{ bos_token }}");
    CHECK_EQ_STR(f.origin, LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG);
    llmr_chat_format_free(&f);

    files.tokenizer_config = NULL;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.source, llmr_template_default_source());
    CHECK_EQ_STR(f.origin, LLMR_CHAT_ORIGIN_DEFAULT);
    CHECK_EQ_STR(json_string_value(json_object_get(f.special, "bos_token")), "");
    llmr_chat_format_free(&f);
    llmr_strbuf_free(&err);
}

TEST(a_named_list_gives_its_default_and_no_default_falls_through)
{
    llmr_chat_format f;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    const char *named = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
                        " {\"name\": \"default\", \"template\": \"D\"}]}";
    llmr_chat_files files = {.tokenizer_config = named, .tokenizer_config_len = strlen(named)};
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.source, "D");
    llmr_chat_format_free(&f);

    const char *no_default = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}]}";
    files.tokenizer_config = no_default;
    files.tokenizer_config_len = strlen(no_default);
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.origin, LLMR_CHAT_ORIGIN_DEFAULT);
    llmr_chat_format_free(&f);

    /* chat_template.json without a template: tokenizer_config.json's */
    files.template_json = "{}";
    files.template_json_len = 2;
    files.tokenizer_config = TCFG;
    files.tokenizer_config_len = sizeof TCFG - 1;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(f.origin, LLMR_CHAT_ORIGIN_TOKENIZER_CONFIG);
    llmr_chat_format_free(&f);
    llmr_strbuf_free(&err);
}

TEST(special_tokens_come_from_tokenizer_config)
{
    llmr_chat_format f;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_chat_files files = {.jinja = "x", .jinja_len = 1, .tokenizer_config = TCFG,
                             .tokenizer_config_len = sizeof TCFG - 1};
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK_EQ_STR(json_string_value(json_object_get(f.special, "bos_token")), "<s>");
    CHECK_EQ_STR(json_string_value(json_object_get(f.special, "eos_token")), "</s>");
    CHECK_EQ_STR(json_string_value(json_object_get(f.special, "pad_token")), "<pad>");
    CHECK(json_object_get(f.special, "unk_token") == NULL); /* absent: not defined */
    llmr_chat_format_free(&f);
    llmr_strbuf_free(&err);
}

/* The texts request strings may not form (template/chat_text.h): added_tokens_decoder's
 * special entries, kept through the JSON form; none when the file lists no decoder. */
TEST(special_token_texts_come_from_added_tokens_decoder)
{
    static const char cfg[] = "{\"added_tokens_decoder\": {\"7\": {\"content\": \"<|end|>\", \"special\": true},"
                              " \"8\": {\"content\": \"<think>\", \"special\": false},"
                              " \"9\": {\"content\": \"<|start|>\", \"special\": true}}}";
    llmr_chat_format f, back;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_chat_files files = {.tokenizer_config = cfg, .tokenizer_config_len = sizeof cfg - 1};
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    json_t *want = json_pack("[s, s]", "<|end|>", "<|start|>");
    CHECK(json_equal(f.special_tokens, want));
    json_t *j = llmr_chat_format_to_json(&f);
    CHECK(llmr_chat_format_from_json(j, &back));
    CHECK(json_equal(back.special_tokens, want));
    llmr_chat_format_free(&back);
    json_object_set_new(j, "special_tokens", json_pack("[i]", 1));
    CHECK(!llmr_chat_format_from_json(j, &back));
    json_decref(j);
    json_decref(want);
    llmr_chat_format_free(&f);

    /* a decoder that marks none special says nothing: the list then comes from
     * tokenizer.json, as the node's does (an empty guard would let request text spell
     * the tokenizer's control tokens) */
    static const char none[] = "{\"added_tokens_decoder\": {\"8\": {\"content\": \"<think>\", \"special\": false}}}";
    files.tokenizer_config = none;
    files.tokenizer_config_len = sizeof none - 1;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK(f.special_tokens == NULL);
    llmr_chat_format_free(&f);

    files.tokenizer_config = TCFG;
    files.tokenizer_config_len = sizeof TCFG - 1;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    CHECK(f.special_tokens == NULL);
    j = llmr_chat_format_to_json(&f);
    CHECK(json_object_get(j, "special_tokens") == NULL);
    json_decref(j);
    llmr_chat_format_free(&f);
    llmr_strbuf_free(&err);
}

TEST(bad_files_are_named)
{
    llmr_chat_format f;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_chat_files files = {.tokenizer_config = "{\"bos_token\": ", .tokenizer_config_len = 14};
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "tokenizer_config.json is not valid JSON");
    CHECK(f.source == NULL);

    files.tokenizer_config = "{\"chat_template\": 7}";
    files.tokenizer_config_len = strlen(files.tokenizer_config);
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "tokenizer_config.json: \"chat_template\" must be a string");

    files.tokenizer_config = "[1]";
    files.tokenizer_config_len = 3;
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "tokenizer_config.json is not a JSON object");

    llmr_chat_files broken = {.jinja = "{% for %}", .jinja_len = 9};
    CHECK_EQ_INT(choose(&broken, &f, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "the chat template from chat_template.jinja does not compile");

    llmr_chat_files given = {.override = "{{ x"};
    CHECK_EQ_INT(choose(&given, &f, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "from registration does not compile");

    llmr_chat_files bad_json = {.template_json = "nope", .template_json_len = 4};
    CHECK_EQ_INT(choose(&bad_json, &f, &err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "chat_template.json is not valid JSON");
    llmr_strbuf_free(&err);
}

TEST(the_json_form_round_trips_and_refuses_other_shapes)
{
    llmr_chat_format f, back;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_chat_files files = {.jinja = "{{ bos_token }}", .jinja_len = 15, .tokenizer_config = TCFG,
                             .tokenizer_config_len = sizeof TCFG - 1};
    CHECK_EQ_INT(choose(&files, &f, &err), LLMR_OK);
    json_t *j = llmr_chat_format_to_json(&f);
    CHECK(llmr_chat_format_from_json(j, &back));
    CHECK_EQ_STR(back.source, f.source);
    CHECK_EQ_STR(back.origin, LLMR_CHAT_ORIGIN_JINJA);
    CHECK(json_equal(back.special, f.special));
    llmr_chat_format_free(&back);
    json_decref(j);

    const char *bad[] = {"null", "{}", "{\"template\": \"x\", \"origin\": \"elsewhere\", \"special\": {}}",
                         "{\"template\": \"x\", \"origin\": \"default\", \"special\": {\"bos_token\": 1}}",
                         "{\"template\": 3, \"origin\": \"default\", \"special\": {}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *b = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        CHECK(!llmr_chat_format_from_json(b, &back));
        CHECK(back.source == NULL);
        json_decref(b);
    }
    llmr_chat_format_free(&f);
    llmr_strbuf_free(&err);
}

TEST(the_render_sees_tokens_kwargs_messages_and_the_generation_prompt)
{
    const char *src = "{{ bos_token }}|{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}|"
                      "{{ tools | length if tools is defined else 'none' }}|{{ flavour | default('-') }}|"
                      "{{ add_generation_prompt }}";
    char terr[256];
    llmr_template *tpl = llmr_template_compile(src, strlen(src), terr, sizeof terr);
    CHECK(tpl != NULL);
    if (!tpl)
        return;
    json_t *special = json_pack("{s:s}", "bos_token", "<s>");
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    json_t *kwargs = json_pack("{s:s, s:s}", "flavour", "mint", "bos_token", "[B]");
    json_t *tools = json_pack("[{}, {}]");
    llmr_strbuf out = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    CHECK(llmr_chat_render(tpl, special, messages, NULL, NULL, &out, &err));
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "<s>|user:hi;|none|-|True");
    llmr_strbuf_reset(&out);
    CHECK(llmr_chat_render(tpl, special, messages, tools, kwargs, &out, &err));
    CHECK_EQ_STR(llmr_strbuf_cstr(&out), "[B]|user:hi;|2|mint|True");
    CHECK(json_object_get(special, "flavour") == NULL); /* the caller's tokens untouched */

    const char *raising = "{{ raise_exception('no system role here') }}";
    llmr_template *r = llmr_template_compile(raising, strlen(raising), terr, sizeof terr);
    llmr_strbuf_reset(&out);
    CHECK(!llmr_chat_render(r, special, messages, NULL, NULL, &out, &err));
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "no system role here");
    llmr_template_free(r);
    llmr_template_free(tpl);
    json_decref(special);
    json_decref(messages);
    json_decref(kwargs);
    json_decref(tools);
    llmr_strbuf_free(&out);
    llmr_strbuf_free(&err);
}

int main(void)
{
    RUN(the_first_template_found_wins);
    RUN(a_named_list_gives_its_default_and_no_default_falls_through);
    RUN(special_tokens_come_from_tokenizer_config);
    RUN(special_token_texts_come_from_added_tokens_decoder);
    RUN(bad_files_are_named);
    RUN(the_json_form_round_trips_and_refuses_other_shapes);
    RUN(the_render_sees_tokens_kwargs_messages_and_the_generation_prompt);
    return llmr_test_finish();
}

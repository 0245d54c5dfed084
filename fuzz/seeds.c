/* Writes seed inputs for the fuzz targets into OUT/{safetensors,index,gguf,tokenizer,
 * text,manifest,wire,template}: valid inputs of each kind, small enough for the fuzzer
 * to mutate quickly. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fixture.h"
#include "gguf_builder.h"
#include "spm_tokenizer.h"
#include "engine_host/worker_protocol.h"
#include "storage/st_writer.h"
#include "template/template.h"

/* A seed whose first byte is the target's choice of parser, then text. */
static void seed_with_kind(const char *dir, const char *name, char kind, const char *text)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_putc(&sb, kind);
    llmr_strbuf_puts(&sb, text);
    fx_write(dir, name, sb.data, sb.len);
    llmr_strbuf_free(&sb);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds OUT_DIR\n");
        return 2;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/safetensors", argv[1]);
    mkdir(argv[1], 0755);
    mkdir(dir, 0755);
    llmr_st_write_tensor a[] = {{"model.embed_tokens.weight", LLMR_DTYPE_BF16, 2, {16, 8}},
                                {"model.layers.0.mlp.experts.gate_up_proj_blocks", LLMR_DTYPE_U8, 4, {2, 4, 1, 16}},
                                {"model.norm.weight", LLMR_DTYPE_F32, 1, {8}},
                                {"scalar", LLMR_DTYPE_I64, 0, {0}},
                                {"packed", LLMR_DTYPE_F4, 1, {4}}};
    fx_write_st(dir, "file.safetensors", a, 5);
    fx_write_text(dir, "header.json",
                  "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],"
                  "\"data_offsets\":[0,12]},\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[12,16]}}");

    snprintf(dir, sizeof dir, "%s/index", argv[1]);
    mkdir(dir, 0755);
    fx_write_text(dir, "index.json",
                  "{\"metadata\":{\"total_size\":1024},\"weight_map\":{"
                  "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
                  "\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}");

    snprintf(dir, sizeof dir, "%s/gguf", argv[1]);
    mkdir(dir, 0755);
    gb_write_simple(dir, "simple.gguf", "llama");
    gguf_builder b;
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", "gpt-oss");
    gb_kv_u32(&b, "general.alignment", 64);
    gb_kv_f32(&b, "gpt-oss.rope.freq_base", 150000.0f);
    gb_kv_bool(&b, "gpt-oss.flag", 1);
    const char *toks[] = {"a", "bc"};
    gb_kv_string_array(&b, "tokenizer.ggml.tokens", 2, toks);
    gb_kv_i32_array(&b, "tokenizer.ggml.token_type", 2);
    gb_tensor(&b, "blk.0.ffn_down_exps.weight", 3, (uint64_t[]){64, 2, 2}, 39, 0);
    gb_tensor(&b, "output.weight", 2, (uint64_t[]){256, 1}, 12, 192);
    gb_write(&b, dir, "mxfp4.gguf", 192 + 144);
    gb_free(&b);

    snprintf(dir, sizeof dir, "%s/tokenizer", argv[1]);
    mkdir(dir, 0755);
    char *spm = spm_tokenizer_json(SPM_LLAMA2, 30);
    fx_write_text(dir, "spm_llama2.json", spm);
    free(spm);
    spm = spm_tokenizer_json(SPM_METASPACE, 30);
    fx_write_text(dir, "spm_metaspace.json", spm);
    free(spm);
    fx_write_text(dir, "byte_level.json",
                  "{\"added_tokens\":[{\"id\":9,\"content\":\"<|x|>\",\"special\":true,"
                  "\"lstrip\":true,\"single_word\":true}],\"normalizer\":{\"type\":\"Sequence\","
                  "\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Lowercase\"}]},"
                  "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                  "\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}| ?\\\\p{L}+|\\\\s+(?!\\\\S)|\\\\s+\"},"
                  "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
                  "\"add_prefix_space\":false,\"use_regex\":false}]},\"post_processor\":"
                  "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|x|>\"}},"
                  "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<|x|>\":{\"ids\":[9]}}},"
                  "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\","
                  "\"ignore_merges\":true,\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xc4\xa0\":3,"
                  "\"1\":4},\"merges\":[[\"a\",\"b\"]]}}");

    snprintf(dir, sizeof dir, "%s/text", argv[1]);
    mkdir(dir, 0755);
    fx_write_text(dir, "mixed.txt", "The quick brown fox, 12345 <|end|> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                                    "\xf0\x9f\xa6\x99\n\t  spaces   and\r\n");

    snprintf(dir, sizeof dir, "%s/manifest", argv[1]);
    mkdir(dir, 0755);
    fx_write_text(dir, "cuda.json",
                  "{\"id\": \"gpt-oss-cuda\", \"version\": \"0.1.0-rc.1\", \"abi_version\": "
                  "\"1.0\", \"runtimes\": [\"gpt_oss\"], \"formats\": [\"safetensors\"], "
                  "\"architectures\": [\"GptOssForCausalLM\"], \"gpu_targets\": [\"sm_90a\", "
                  "\"sm_80\", \"compute_80\"], \"library\": \"libgptoss.so\", \"priority\": 10, "
                  "\"description\": \"gpt-oss on NVIDIA GPUs\", \"extra\": {\"x\": 1}}");
    fx_write_text(dir, "cpu.json",
                  "{\"id\": \"loopback\", \"version\": \"1.0.0\", \"abi_version\": \"1.3\", "
                  "\"runtimes\": [\"loopback\"], \"formats\": [\"safetensors\", \"gguf\"], "
                  "\"architectures\": [\"*\"], \"gpu_targets\": [\"cpu\", \"directml\"], "
                  "\"library\": \"libloop.so\"}");

    /* wire: the first byte picks the decoder (0 submit, 1 event, 2 pong, 3 frames) */
    snprintf(dir, sizeof dir, "%s/wire", argv[1]);
    mkdir(dir, 0755);
    llmr_engine_request_params p = llmr_engine_request_default_params();
    int32_t prompt[3] = {1, 2, 3}, stop_ids[1] = {200002};
    p.prompt = prompt;
    p.prompt_len = 3;
    p.stop_ids = stop_ids;
    p.stop_id_count = 1;
    p.max_tokens = 16;
    const char *stops[] = {"\n\nUser:"};
    size_t stop_lens[] = {8};
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_putc(&sb, 0);
    llmr_wire_submit_encode(&p, stops, stop_lens, 1, true, &sb);
    fx_write(dir, "submit.bin", sb.data, sb.len);
    llmr_strbuf_reset(&sb);
    llmr_strbuf_putc(&sb, 1);
    llmr_wire_event ev = {.index = 3, .id = 42, .finish = 2, .text = "hi", .text_len = 2,
                          .message = "done", .message_len = 4, .top_count = 2,
                          .top_ids = {42, 7}, .top_logprobs = {-0.1f, -2.0f}};
    llmr_wire_event_encode(&ev, &sb);
    fx_write(dir, "event.bin", sb.data, sb.len);
    llmr_strbuf_reset(&sb);
    uint8_t frames[1 + 16 + 4] = {3, 16, 0, 0, 0, 65, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd'};
    fx_write(dir, "frames.bin", frames, sizeof frames);
    llmr_strbuf_free(&sb);

    /* template: a chat template, a NUL, the JSON context */
    snprintf(dir, sizeof dir, "%s/template", argv[1]);
    mkdir(dir, 0755);
    static const char conversation[] =
        "{\"bos_token\": \"<s>\", \"add_generation_prompt\": true, \"messages\": ["
        "{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
        "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
        " \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]},"
        "{\"role\": \"tool\", \"content\": \"42\"}], \"tools\": [{\"type\": \"function\","
        " \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]}";
    const char *templates[][2] = {
        {"chatml.bin", llmr_template_default_source()},
        {"llama.bin",
         "{{- bos_token }}\n{%- set ns = namespace(sys='') %}\n{%- for m in messages %}\n"
         "{%- if m.role == 'system' %}{% set ns.sys = m.content | trim %}{% continue %}{% endif %}\n"
         "<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
         "{%- if m.tool_calls is defined and m.tool_calls %}\n"
         "{%- for tc in m.tool_calls %}{{ {'name': tc.function.name, 'parameters': tc.function.arguments}"
         " | tojson }}{% endfor %}\n"
         "{%- else %}{{ m['content'] | trim }}{% endif %}<|eot_id|>\n{%- endfor %}\n"
         "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
         "{{ ns.sys }} {{ strftime_now('%d %b %Y') }}"},
        {"macros.bin",
         "{% macro render(t, indent=2) -%}\n{{ t.function.name }}: {{ t | tojson(indent=indent) }}\n"
         "{%- endmacro %}\n{% for t in tools if t.type == 'function' %}{{ render(t) }}\n{% else %}none{% endfor %}\n"
         "{% for m in messages | selectattr('role', 'in', ['user', 'assistant']) %}"
         "{{ loop.index }}/{{ loop.length }} {{ m.role | upper }} {{ (m.content or '')[::-1] }}"
         "{{ ', ' if not loop.last }}{% endfor %}\n{% set a, b = 'x,y'.split(',') %}{{ b ~ a }}"
         "{% if messages[-1].role == 'nobody' %}{{ raise_exception('last is nobody') }}{% endif %}"},
    };
    for (size_t i = 0; i < sizeof templates / sizeof templates[0]; i++) {
        llmr_strbuf_puts(&sb, templates[i][1]);
        llmr_strbuf_putc(&sb, '\0');
        llmr_strbuf_puts(&sb, conversation);
        fx_write(dir, templates[i][0], sb.data, sb.len);
        llmr_strbuf_reset(&sb);
    }
    llmr_strbuf_free(&sb);

    /* openai: the first byte picks chat (0), completions (1) or a sync manifest (2) */
    snprintf(dir, sizeof dir, "%s/openai", argv[1]);
    mkdir(dir, 0755);
    seed_with_kind(dir, "chat.bin", 0,
                  "{\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": \"s\"}, "
                  "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}, "
                  "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c\", "
                  "\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}, "
                  "{\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": \"r\"}], "
                  "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
                  "\"stream\": true, \"stream_options\": {\"include_usage\": true}, \"max_tokens\": 9, "
                  "\"temperature\": 0.5, \"top_p\": 0.9, \"stop\": [\"a\", \"b\"], \"seed\": -3, "
                  "\"logprobs\": true, \"top_logprobs\": 2, \"chat_template_kwargs\": {\"x\": 1}}");
    seed_with_kind(dir, "harmony-chat.bin", 0,
                  "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
                  "{\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"r\", "
                  "\"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": "
                  "\"f\", \"arguments\": \"{\\\"a\\\": 1}\"}}, {\"id\": \"c2\", \"function\": {\"name\": "
                  "\"g\", \"arguments\": \"x\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c2\", "
                  "\"content\": \"2\"}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": "
                  "[{\"type\": \"text\", \"text\": \"1\"}]}], \"tools\": [{\"type\": \"function\", "
                  "\"function\": {\"name\": \"f\"}}, {\"type\": \"function\", \"function\": {\"name\": "
                  "\"g\", \"description\": \"G\"}}], \"tool_choice\": {\"type\": \"function\", "
                  "\"function\": {\"name\": \"g\"}}, \"parallel_tool_calls\": false, "
                  "\"include_reasoning\": false, \"reasoning_effort\": \"low\"}");
    seed_with_kind(dir, "completion.bin", 1,
                  "{\"model\": \"m\", \"prompt\": [[1, 2, 3]], \"max_tokens\": 4, \"logprobs\": 3, "
                  "\"stop\": \"x\", \"presence_penalty\": 1.5, \"n\": 1}");
    seed_with_kind(dir, "manifest.bin", 2,
                  "{\"name\": \"tiny\", \"format\": \"safetensors\", \"files\": [{\"path\": "
                  "\"config.json\", \"size\": 10, \"sha256\": \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
                  "2b0b822cd15d6c15b0f00a08\", \"required\": true, \"url\": \"/v0/models/tiny/files/"
                  "config.json\"}, {\"path\": \"sub/a.bin\", \"size\": 0, \"required\": false, "
                  "\"url\": \"/x\", \"origin_url\": \"https://huggingface.co/o/r/resolve/main/a.bin\"}]}");
    return 0;
}

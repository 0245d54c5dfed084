/* The harmony chat format: see harmony.h. */
#include "models/harmony.h"

#include <string.h>

#include "common/strbuf.h"

char *llmr_harmony_render(const llmr_chat_message *messages, size_t count,
                          bool add_generation_prompt, const char *date)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_printf(&sb,
                       "<|start|>system<|message|>You are ChatGPT, a large language model "
                       "trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: %s\n\n"
                       "Reasoning: medium\n\n# Valid channels: analysis, commentary, final. "
                       "Channel must be included for every message.<|end|>",
                       date);
    size_t first = 0;
    if (count && (strcmp(messages[0].role, "system") == 0 ||
                  strcmp(messages[0].role, "developer") == 0)) {
        llmr_strbuf_printf(&sb, "<|start|>developer<|message|># Instructions\n\n%s\n\n<|end|>",
                           messages[0].content);
        first = 1;
    }
    for (size_t i = first; i < count; i++) {
        const llmr_chat_message *m = &messages[i];
        if (strcmp(m->role, "user") == 0) {
            llmr_strbuf_printf(&sb, "<|start|>user<|message|>%s<|end|>", m->content);
        } else if (strcmp(m->role, "assistant") == 0) {
            bool last = i + 1 == count && !add_generation_prompt;
            llmr_strbuf_printf(&sb, "<|start|>assistant<|channel|>final<|message|>%s%s",
                               m->content, last ? "<|return|>" : "<|end|>");
        } else {
            llmr_strbuf_free(&sb);
            return NULL;
        }
    }
    if (add_generation_prompt)
        llmr_strbuf_puts(&sb, "<|start|>assistant");
    return llmr_strbuf_take(&sb);
}

/* The gpt-oss chat format ("harmony") for plain conversations: system, user and
 * assistant messages of text, rendered as gpt-oss's chat template renders them
 * (checked against its renders in tests).  `llmr run` renders a model's own chat
 * template and uses this only for a gpt-oss model that ships none; tools, reasoning
 * channels and content parts are the template's and are not handled here. */
#ifndef LLMR_MODELS_HARMONY_H
#define LLMR_MODELS_HARMONY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct llmr_chat_message {
    const char *role;    /* "system", "developer", "user", "assistant" */
    const char *content;
} llmr_chat_message;

/* The prompt (malloc'd), or NULL (out of memory, or a role it does not know).
 * date: "YYYY-MM-DD" for the system block's "Current date".  With
 * add_generation_prompt it ends with the start of the assistant's turn; without it a
 * final assistant message ends with <|return|>. */
char *llmr_harmony_render(const llmr_chat_message *messages, size_t count,
                          bool add_generation_prompt, const char *date);

#endif

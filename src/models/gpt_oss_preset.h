/* gpt-oss presets: the config.json and generation_config.json of openai/gpt-oss-20b and
 * openai/gpt-oss-120b, and smaller variants with the same fields (gpt-oss-20b-2l,
 * gpt-oss-120b-2l: two layers of those; gpt-oss-tiny: scaled-down widths), for the
 * synthetic snapshot generator and tests. */
#ifndef LLMR_MODELS_GPT_OSS_PRESET_H
#define LLMR_MODELS_GPT_OSS_PRESET_H

#include <jansson.h>

/* NULL-terminated list of preset names. */
extern const char *const llmr_gpt_oss_preset_names[];

/* The preset's full config.json (a new reference), or NULL for an unknown name. */
json_t *llmr_gpt_oss_preset_config(const char *name);
/* generation_config.json as gpt-oss-20b publishes it (a new reference). */
json_t *llmr_gpt_oss_generation_config(void);

#endif

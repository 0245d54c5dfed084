/* For engine plugins: reading a whole number from the load options (options_json of
 * llmr_engine_load_params), which the host writes as a flat JSON object.  Header-only,
 * so a plugin still links none of llmr's code.  A key that is absent, or whose value
 * is not a plain non-negative number, gives the default. */
#ifndef LLMR_ENGINE_OPTIONS_H
#define LLMR_ENGINE_OPTIONS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t llmr_engine_option_u64(const char *options_json, const char *key,
                                              uint64_t def)
{
    char quoted[96];
    if (!options_json || snprintf(quoted, sizeof quoted, "\"%s\"", key) >= (int)sizeof quoted)
        return def;
    const char *p = strstr(options_json, quoted);
    if (!p)
        return def;
    p += strlen(quoted);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ':')
        p++;
    return *p >= '0' && *p <= '9' ? strtoull(p, NULL, 10) : def;
}

#endif

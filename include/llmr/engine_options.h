/* For engine plugins: reading a whole number or a short string from the load options
 * (options_json of llmr_engine_load_params), which the host writes as a flat JSON
 * object.  Header-only, so a plugin still links none of llmr's code.  A key that is
 * absent, or whose value is not a plain non-negative number, gives the default. */
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

/* The string value of `key` into out (size bytes): 1 when found, 0 when the key is
 * absent, -1 when its value is not a string without escapes that fits (out then "").
 * A key's name is found only where it is a key (followed by a colon). */
static inline int llmr_engine_option_str(const char *options_json, const char *key, char *out,
                                         size_t size)
{
    char quoted[96];
    if (size)
        out[0] = '\0';
    if (!options_json || snprintf(quoted, sizeof quoted, "\"%s\"", key) >= (int)sizeof quoted)
        return 0;
    for (const char *p = strstr(options_json, quoted); p; p = strstr(p + 1, quoted)) {
        const char *v = p + strlen(quoted);
        while (*v == ' ' || *v == '\t' || *v == '\n')
            v++;
        if (*v != ':')
            continue; /* the name inside a string value, not a key */
        v++;
        while (*v == ' ' || *v == '\t' || *v == '\n')
            v++;
        if (*v != '"')
            return -1;
        const char *end = strchr(v + 1, '"');
        if (!end || (size_t)(end - v - 1) >= size || memchr(v + 1, '\\', (size_t)(end - v - 1)))
            return -1;
        memcpy(out, v + 1, (size_t)(end - v - 1));
        out[end - v - 1] = '\0';
        return 1;
    }
    return 0;
}

#endif

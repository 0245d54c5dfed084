/* For engine plugins: reading a whole number, a switch or a short string from the load
 * options (options_json of llmr_engine_load_params), which the host passes on as the
 * flat JSON object the operator gave.  Header-only, so a plugin still links none of
 * llmr's code.  A key's name is found only where it is a key (followed by a colon), not
 * inside a string value. */
#ifndef LLMR_ENGINE_OPTIONS_H
#define LLMR_ENGINE_OPTIONS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the value of `key` starts (past the colon and blanks), or NULL when the key is
 * absent. */
static inline const char *llmr_engine_option_value(const char *options_json, const char *key)
{
    char quoted[96];
    if (!options_json || snprintf(quoted, sizeof quoted, "\"%s\"", key) >= (int)sizeof quoted)
        return NULL;
    for (const char *p = strstr(options_json, quoted); p; p = strstr(p + 1, quoted)) {
        const char *v = p + strlen(quoted);
        while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r')
            v++;
        if (*v != ':')
            continue; /* the name inside a string value, not a key */
        v++;
        while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r')
            v++;
        return v;
    }
    return NULL;
}

/* The value of `key` as a whole number: a plain non-negative number as it is, true as
 * 1 and false as 0 (so {"batch_invariant": true} means what it says); def when the key
 * is absent or its value is anything else. */
static inline uint64_t llmr_engine_option_u64(const char *options_json, const char *key,
                                              uint64_t def)
{
    const char *v = llmr_engine_option_value(options_json, key);
    if (!v)
        return def;
    if (*v >= '0' && *v <= '9')
        return strtoull(v, NULL, 10);
    if (!strncmp(v, "true", 4))
        return 1;
    if (!strncmp(v, "false", 5))
        return 0;
    return def;
}

/* The string value of `key` into out (size bytes): 1 when found, 0 when the key is
 * absent, -1 when its value is not a string without escapes that fits (out then ""). */
static inline int llmr_engine_option_str(const char *options_json, const char *key, char *out,
                                         size_t size)
{
    if (size)
        out[0] = '\0';
    const char *v = llmr_engine_option_value(options_json, key);
    if (!v)
        return 0;
    if (*v != '"')
        return -1;
    const char *end = strchr(v + 1, '"');
    if (!end || (size_t)(end - v - 1) >= size || memchr(v + 1, '\\', (size_t)(end - v - 1)))
        return -1;
    memcpy(out, v + 1, (size_t)(end - v - 1));
    out[end - v - 1] = '\0';
    return 1;
}

#endif

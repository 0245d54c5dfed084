/* Process configuration: see config.h. */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/byte_size.h"
#include "common/log.h"

typedef bool (*validator)(const char *value, llmr_strbuf *why);

static bool valid_nonempty(const char *value, llmr_strbuf *why)
{
    if (value[0])
        return true;
    llmr_strbuf_puts(why, "must not be empty");
    return false;
}

static bool valid_port(const char *value, llmr_strbuf *why)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno == 0 && end != value && *end == '\0' && isdigit((unsigned char)value[0]) &&
        v >= 0 && v <= 65535)
        return true;
    llmr_strbuf_puts(why, "must be a whole number from 0 (any free port) to 65535");
    return false;
}

static bool valid_log_level(const char *value, llmr_strbuf *why)
{
    llmr_log_level level;
    if (llmr_log_level_parse(value, &level))
        return true;
    llmr_strbuf_puts(why, "must be one of debug, info, warn, error, off");
    return false;
}

static bool valid_log_format(const char *value, llmr_strbuf *why)
{
    llmr_log_format format;
    if (llmr_log_format_parse(value, &format))
        return true;
    llmr_strbuf_puts(why, "must be text or json");
    return false;
}

static bool valid_any(const char *value, llmr_strbuf *why)
{
    (void)value;
    (void)why;
    return true;
}

static bool valid_number_in(const char *value, double lo, double hi, const char *what,
                            llmr_strbuf *why)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno == 0 && end != value && *end == '\0' && v >= lo && v <= hi)
        return true;
    llmr_strbuf_puts(why, what);
    return false;
}

static bool valid_seconds(const char *value, llmr_strbuf *why)
{
    return valid_number_in(value, 0.05, 86400, "must be a number of seconds from 0.05 to 86400",
                           why);
}

static bool valid_fraction(const char *value, llmr_strbuf *why)
{
    return valid_number_in(value, 0.05, 1.0, "must be a fraction from 0.05 to 1 (0.9 is 90%)",
                           why);
}

static bool valid_budgets(const char *value, llmr_strbuf *why)
{
    return llmr_byte_size_list_parse(value, NULL, NULL, why) == LLMR_OK;
}

typedef struct setting {
    const char *name;
    const char *def; /* NULL: computed_default() */
    const char *description;
} setting;

static const validator validators[LLMR_CONFIG_KEY_COUNT] = {
    [LLMR_CONFIG_HOST] = valid_nonempty,
    [LLMR_CONFIG_PORT] = valid_port,
    [LLMR_CONFIG_DATA_DIR] = valid_nonempty,
    [LLMR_CONFIG_LOG_LEVEL] = valid_log_level,
    [LLMR_CONFIG_LOG_FORMAT] = valid_log_format,
    [LLMR_CONFIG_PLUGIN_DIRS] = valid_any,
    [LLMR_CONFIG_REQUEST_TIMEOUT] = valid_seconds,
    [LLMR_CONFIG_CPU_REQUEST_TIMEOUT] = valid_seconds,
    [LLMR_CONFIG_CANCEL_GRACE] = valid_seconds,
    [LLMR_CONFIG_MEMORY_THRESHOLD] = valid_fraction,
    [LLMR_CONFIG_VRAM_BUDGETS] = valid_budgets,
    [LLMR_CONFIG_CORS_ORIGINS] = valid_any, /* the servers check it at start (http/http_cors.h) */
    [LLMR_CONFIG_TLS_CERT] = valid_any,     /* files: read at start (cli.h, llmr_cli_tls_read) */
    [LLMR_CONFIG_TLS_KEY] = valid_any,
    [LLMR_CONFIG_TLS_CA] = valid_any,       /* read by libcurl at each connection */
};

static const setting settings[LLMR_CONFIG_KEY_COUNT] = {
#define SETTING(key, name, def, desc) [LLMR_CONFIG_##key] = {#name, def, desc},
    LLMR_CONFIG_LIST(SETTING)
#undef SETTING
};

const char *llmr_config_name(llmr_config_key key)
{
    return settings[key].name;
}

const char *llmr_config_description(llmr_config_key key)
{
    return settings[key].description;
}

const char *llmr_config_source_name(llmr_config_source source)
{
    switch (source) {
    case LLMR_CONFIG_FROM_FLAG:
        return "flag";
    case LLMR_CONFIG_FROM_ENV:
        return "env";
    default:
        return "default";
    }
}

void llmr_config_flag_name(llmr_config_key key, llmr_strbuf *sb)
{
    llmr_strbuf_puts(sb, "--");
    for (const char *p = settings[key].name; *p; p++)
        llmr_strbuf_putc(sb, *p == '_' ? '-' : *p);
}

void llmr_config_env_name(llmr_config_key key, llmr_strbuf *sb)
{
    llmr_strbuf_puts(sb, "LLMR_");
    for (const char *p = settings[key].name; *p; p++)
        llmr_strbuf_putc(sb, (char)toupper((unsigned char)*p));
}

static char *computed_default(llmr_config_key key)
{
    if (key != LLMR_CONFIG_DATA_DIR)
        return NULL;
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        llmr_strbuf_printf(&sb, "%s/llmr", xdg);
    else if (home && home[0] == '/')
        llmr_strbuf_printf(&sb, "%s/.local/share/llmr", home);
    else
        llmr_strbuf_puts(&sb, "./llmr-data");
    return llmr_strbuf_take(&sb);
}

/* Matches argv[i] against --name / --name=value; returns the key or -1. */
static int match_flag(const char *arg, const char **inline_value)
{
    *inline_value = NULL;
    if (strncmp(arg, "--", 2) != 0)
        return -1;
    llmr_strbuf flag = LLMR_STRBUF_INIT;
    int found = -1;
    for (int k = 0; k < LLMR_CONFIG_KEY_COUNT && found < 0; k++) {
        llmr_strbuf_reset(&flag);
        llmr_config_flag_name((llmr_config_key)k, &flag);
        size_t n = flag.len;
        if (strncmp(arg, flag.data, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
            found = k;
            if (arg[n] == '=')
                *inline_value = arg + n + 1;
        }
    }
    llmr_strbuf_free(&flag);
    return found;
}

void llmr_config_free(llmr_config *cfg)
{
    for (int k = 0; k < LLMR_CONFIG_KEY_COUNT; k++) {
        free(cfg->value[k]);
        cfg->value[k] = NULL;
    }
}

static bool set_value(llmr_config *cfg, int key, const char *value, llmr_config_source src)
{
    char *copy = strdup(value);
    if (!copy)
        return false;
    free(cfg->value[key]);
    cfg->value[key] = copy;
    cfg->source[key] = src;
    return true;
}

llmr_status llmr_config_load(llmr_config *cfg, int *argc, char **argv, llmr_strbuf *err)
{
    memset(cfg, 0, sizeof *cfg);
    llmr_strbuf name = LLMR_STRBUF_INIT;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status status = LLMR_OK;

    /* Defaults, then the environment. */
    for (int k = 0; k < LLMR_CONFIG_KEY_COUNT; k++) {
        char *def = settings[k].def ? strdup(settings[k].def) : computed_default(k);
        if (!def)
            goto oom;
        cfg->value[k] = def;
        cfg->source[k] = LLMR_CONFIG_FROM_DEFAULT;
        llmr_strbuf_reset(&name);
        llmr_config_env_name((llmr_config_key)k, &name);
        const char *env = getenv(llmr_strbuf_cstr(&name));
        if (env) {
            if (!(validators[k] ? validators[k] : valid_any)(env, &why)) {
                llmr_strbuf_printf(err, "%s=%s: %s", name.data, env, why.data);
                status = LLMR_INVALID_ARGUMENT;
                goto fail;
            }
            if (!set_value(cfg, k, env, LLMR_CONFIG_FROM_ENV))
                goto oom;
        }
    }

    /* Flags, which win; compact argv as we go. */
    int out = 1;
    bool rest = false;
    for (int i = 1; i < *argc; i++) {
        const char *inline_value;
        int k = rest ? -1 : match_flag(argv[i], &inline_value);
        if (!rest && strcmp(argv[i], "--") == 0)
            rest = true;
        if (k < 0) {
            argv[out++] = argv[i];
            continue;
        }
        const char *value = inline_value;
        if (!value) {
            if (i + 1 >= *argc) {
                llmr_strbuf_printf(err, "%s needs a value", argv[i]);
                status = LLMR_INVALID_ARGUMENT;
                goto fail;
            }
            value = argv[++i];
        }
        llmr_strbuf_reset(&why);
        if (!(validators[k] ? validators[k] : valid_any)(value, &why)) {
            llmr_strbuf_reset(&name);
            llmr_config_flag_name((llmr_config_key)k, &name);
            llmr_strbuf_printf(err, "%s %s: %s", name.data, value, why.data);
            status = LLMR_INVALID_ARGUMENT;
            goto fail;
        }
        if (!set_value(cfg, k, value, LLMR_CONFIG_FROM_FLAG))
            goto oom;
    }
    argv[out] = NULL;
    *argc = out;
    llmr_strbuf_free(&name);
    llmr_strbuf_free(&why);
    return LLMR_OK;

oom:
    llmr_strbuf_puts(err, "out of memory reading the configuration");
    status = LLMR_OOM_RAM;
fail:
    llmr_config_free(cfg);
    llmr_strbuf_free(&name);
    llmr_strbuf_free(&why);
    return status;
}

const char *llmr_config_get(const llmr_config *cfg, llmr_config_key key)
{
    return cfg->value[key];
}

unsigned llmr_config_port(const llmr_config *cfg)
{
    return (unsigned)strtoul(cfg->value[LLMR_CONFIG_PORT], NULL, 10);
}

double llmr_config_number(const llmr_config *cfg, llmr_config_key key)
{
    return strtod(cfg->value[key], NULL);
}

json_t *llmr_config_to_json(const llmr_config *cfg)
{
    json_t *root = json_object();
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (int k = 0; root && k < LLMR_CONFIG_KEY_COUNT; k++) {
        json_t *entry = json_object();
        json_object_set_new(entry, "value", json_string(cfg->value[k]));
        json_object_set_new(entry, "source", json_string(llmr_config_source_name(cfg->source[k])));
        llmr_strbuf_reset(&sb);
        llmr_config_flag_name((llmr_config_key)k, &sb);
        json_object_set_new(entry, "flag", json_string(llmr_strbuf_cstr(&sb)));
        llmr_strbuf_reset(&sb);
        llmr_config_env_name((llmr_config_key)k, &sb);
        json_object_set_new(entry, "env", json_string(llmr_strbuf_cstr(&sb)));
        json_object_set_new(entry, "description", json_string(settings[k].description));
        json_object_set_new(root, settings[k].name, entry);
    }
    llmr_strbuf_free(&sb);
    return root;
}

void llmr_config_print(const llmr_config *cfg, FILE *out)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (int k = 0; k < LLMR_CONFIG_KEY_COUNT; k++) {
        llmr_strbuf_reset(&sb);
        llmr_strbuf_put_display(&sb, cfg->value[k], strlen(cfg->value[k]));
        fprintf(out, "%-19s %-32s (%s)\n", settings[k].name, llmr_strbuf_cstr(&sb),
                llmr_config_source_name(cfg->source[k]));
    }
    llmr_strbuf_free(&sb);
}

void llmr_config_print_help(FILE *out)
{
    llmr_strbuf flag = LLMR_STRBUF_INIT, env = LLMR_STRBUF_INIT;
    for (int k = 0; k < LLMR_CONFIG_KEY_COUNT; k++) {
        llmr_strbuf_reset(&flag);
        llmr_strbuf_reset(&env);
        llmr_config_flag_name((llmr_config_key)k, &flag);
        llmr_config_env_name((llmr_config_key)k, &env);
        const char *def =
            settings[k].def ? settings[k].def : "$XDG_DATA_HOME/llmr or ~/.local/share/llmr";
        fprintf(out, "  %-21s %-24s %s", flag.data, env.data, settings[k].description);
        if (def[0]) /* an empty default is described in the description */
            fprintf(out, " (default: %s)", def);
        fputc('\n', out);
    }
    llmr_strbuf_free(&flag);
    llmr_strbuf_free(&env);
}

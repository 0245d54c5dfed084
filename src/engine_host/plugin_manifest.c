/* Engine plugin manifests, GPU targets and semantic versions: see plugin_manifest.h.
 * This file owns the manifest rules; the registry only consumes parsed manifests. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "engine_host/plugin_manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs_util.h"
#include "common/json_util.h"
#include "common/utf8.h"
#include "llmr/engine.h"

/* Reasons kept in err at most; the rest are counted. */
#define MAX_ERRORS 16
/* Warnings kept at most; the rest are counted in one more. */
#define MAX_WARNINGS 16
/* Bytes of a name from outside shown in a message. */
#define SHOW_MAX 64

/* ---- GPU targets ------------------------------------------------------------- */

/* "XY" or "XXY": major (no leading zero) and one-digit minor; n is the digit count. */
static bool parse_capability(const char *s, size_t n, int *major, int *minor)
{
    if (n < 2 || n > 3 || s[0] == '0')
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    *major = n == 2 ? s[0] - '0' : (s[0] - '0') * 10 + (s[1] - '0');
    *minor = s[n - 1] - '0';
    return true;
}

bool llmr_gpu_target_parse(const char *text, llmr_gpu_target *out)
{
    if (!text)
        return false;
    llmr_gpu_target t = {LLMR_GPU_TARGET_CPU, 0, 0};
    if (strcmp(text, "cpu") == 0) {
        *out = t;
        return true;
    }
    if (strcmp(text, "directml") == 0) {
        t.kind = LLMR_GPU_TARGET_DIRECTML;
        *out = t;
        return true;
    }
    const char *digits;
    size_t n;
    if (strncmp(text, "sm_", 3) == 0) {
        digits = text + 3;
        n = strlen(digits);
        t.kind = LLMR_GPU_TARGET_SM;
        if (n > 0 && digits[n - 1] == 'a') {
            t.kind = LLMR_GPU_TARGET_SM_ARCH;
            n--;
        }
    } else if (strncmp(text, "compute_", 8) == 0) {
        digits = text + 8;
        n = strlen(digits);
        t.kind = LLMR_GPU_TARGET_PTX;
    } else {
        return false;
    }
    if (!parse_capability(digits, n, &t.major, &t.minor))
        return false;
    *out = t;
    return true;
}

void llmr_gpu_target_format(const llmr_gpu_target *t, llmr_strbuf *out)
{
    switch (t->kind) {
    case LLMR_GPU_TARGET_CPU:
        llmr_strbuf_puts(out, "cpu");
        return;
    case LLMR_GPU_TARGET_DIRECTML:
        llmr_strbuf_puts(out, "directml");
        return;
    case LLMR_GPU_TARGET_SM:
        llmr_strbuf_printf(out, "sm_%d%d", t->major, t->minor);
        return;
    case LLMR_GPU_TARGET_SM_ARCH:
        llmr_strbuf_printf(out, "sm_%d%da", t->major, t->minor);
        return;
    case LLMR_GPU_TARGET_PTX:
        llmr_strbuf_printf(out, "compute_%d%d", t->major, t->minor);
        return;
    }
    llmr_strbuf_puts(out, "unknown");
}

int llmr_gpu_target_score(const llmr_gpu_target *t, int cc_major, int cc_minor)
{
    switch (t->kind) {
    case LLMR_GPU_TARGET_CPU:
    case LLMR_GPU_TARGET_DIRECTML:
        return 1;
    case LLMR_GPU_TARGET_SM_ARCH:
        return cc_major >= 0 && t->major == cc_major && t->minor == cc_minor ? 4 : 0;
    case LLMR_GPU_TARGET_SM:
        return cc_major >= 0 && t->major == cc_major && t->minor <= cc_minor ? 3 : 0;
    case LLMR_GPU_TARGET_PTX:
        if (cc_major < 0)
            return 0;
        return t->major < cc_major || (t->major == cc_major && t->minor <= cc_minor) ? 2 : 0;
    }
    return 0;
}

/* ---- semantic versions ------------------------------------------------------- */

typedef struct semver {
    const char *num[3]; /* MAJOR, MINOR, PATCH digits (not NUL-terminated) */
    size_t num_len[3];
    const char *pre;    /* prerelease after '-', or NULL */
} semver;

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum_or_hyphen(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

static bool semver_split(const char *s, semver *v)
{
    size_t total = strlen(s);
    if (total == 0 || total > LLMR_PLUGIN_VERSION_MAX)
        return false;
    const char *p = s;
    for (int i = 0; i < 3; i++) {
        const char *start = p;
        while (is_digit(*p))
            p++;
        size_t n = (size_t)(p - start);
        if (n == 0 || (n > 1 && start[0] == '0'))
            return false;
        v->num[i] = start;
        v->num_len[i] = n;
        if (i < 2) {
            if (*p != '.')
                return false;
            p++;
        }
    }
    v->pre = NULL;
    if (*p == '\0')
        return true;
    if (*p != '-')
        return false;
    v->pre = ++p;
    /* dot-separated identifiers, non-empty; numeric ones without leading zeros */
    for (;;) {
        const char *start = p;
        bool numeric = true;
        while (is_alnum_or_hyphen(*p)) {
            numeric = numeric && is_digit(*p);
            p++;
        }
        size_t n = (size_t)(p - start);
        if (n == 0 || (numeric && n > 1 && start[0] == '0'))
            return false;
        if (*p == '\0')
            return true;
        if (*p != '.')
            return false;
        p++;
    }
}

bool llmr_semver_is_valid(const char *text)
{
    semver v;
    return text && semver_split(text, &v);
}

/* Digit strings without leading zeros: the longer is larger, else bytewise. */
static int compare_numbers(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn)
        return an < bn ? -1 : 1;
    int c = memcmp(a, b, an);
    return c < 0 ? -1 : c > 0;
}

static int compare_prerelease(const char *a, const char *b)
{
    for (;;) {
        size_t an = strcspn(a, "."), bn = strcspn(b, ".");
        bool a_num = an > 0 && strspn(a, "0123456789") >= an;
        bool b_num = bn > 0 && strspn(b, "0123456789") >= bn;
        int c;
        if (a_num && b_num) {
            c = compare_numbers(a, an, b, bn);
        } else if (a_num != b_num) {
            c = a_num ? -1 : 1; /* numeric identifiers sort before alphanumeric ones */
        } else {
            size_t n = an < bn ? an : bn;
            c = memcmp(a, b, n);
            c = c != 0 ? (c < 0 ? -1 : 1) : (an == bn ? 0 : an < bn ? -1 : 1);
        }
        if (c != 0)
            return c;
        a += an;
        b += bn;
        if (*a == '\0' || *b == '\0')
            return *a == *b ? 0 : *a == '\0' ? -1 : 1; /* fewer identifiers sort first */
        a++;
        b++;
    }
}

int llmr_semver_compare(const char *a, const char *b)
{
    semver va, vb;
    bool a_ok = a && semver_split(a, &va), b_ok = b && semver_split(b, &vb);
    if (!a_ok || !b_ok) {
        if (a_ok != b_ok)
            return a_ok ? 1 : -1;
        int c = strcmp(a ? a : "", b ? b : "");
        return c < 0 ? -1 : c > 0;
    }
    for (int i = 0; i < 3; i++) {
        int c = compare_numbers(va.num[i], va.num_len[i], vb.num[i], vb.num_len[i]);
        if (c != 0)
            return c;
    }
    if (!va.pre || !vb.pre)
        return va.pre == vb.pre ? 0 : va.pre ? -1 : 1; /* a prerelease sorts first */
    return compare_prerelease(va.pre, vb.pre);
}

/* ---- manifest rules ------------------------------------------------------------- */

typedef struct field_rule {
    const char *name;
    const char *noun;    /* what one value is: "plugin id" */
    const char *allowed; /* what is allowed, for people */
} field_rule;

static const field_rule RULE_ID = {
    "id", "plugin id",
    "1 to 64 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit"};
static const field_rule RULE_VERSION = {
    "version", "semantic version",
    "MAJOR.MINOR.PATCH with an optional -prerelease, numbers without leading zeros"};
static const field_rule RULE_ABI = {"abi_version", "ABI version",
                                    "\"MAJOR.MINOR\" in decimal, such as \"1.0\""};
static const field_rule RULE_RUNTIMES = {"runtimes", "runtime name",
                                         "1 to 64 characters of a-z, 0-9, '_'"};
static const field_rule RULE_FORMATS = {"formats", "model format", "safetensors, gguf, directml"};
static const field_rule RULE_ARCHITECTURES = {
    "architectures", "architecture name",
    "1 to 128 printable ASCII characters, or \"*\" for any"};
static const field_rule RULE_GPU_TARGETS = {"gpu_targets", "GPU target",
                                            "cpu, directml, sm_XY, sm_XYa, compute_XY"};
static const field_rule RULE_LIBRARY = {
    "library", "plain file name",
    "a file in the plugin directory, with no '/', no \"..\" and no control characters"};
static const field_rule RULE_PRIORITY = {"priority", "priority", "an integer from -1000 to 1000"};
static const field_rule RULE_DESCRIPTION = {"description", "description",
                                            "a UTF-8 string of at most 512 bytes"};

static const field_rule *const KNOWN_FIELDS[] = {
    &RULE_ID,           &RULE_VERSION,     &RULE_ABI,     &RULE_RUNTIMES,
    &RULE_FORMATS,      &RULE_ARCHITECTURES, &RULE_GPU_TARGETS, &RULE_LIBRARY,
    &RULE_PRIORITY,     &RULE_DESCRIPTION,
};

typedef struct parse_ctx {
    llmr_strbuf *err;
    size_t errors;
    bool oom;
    llmr_plugin_manifest *m;
    size_t unknown_fields; /* unknown keys seen, warned or not */
} parse_ctx;

static void fail(parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds one reason, "manifest.json: ..." ("; "-separated). */
static void fail(parse_ctx *c, const char *fmt, ...)
{
    if (c->errors++ >= MAX_ERRORS)
        return;
    if (c->errors > 1)
        llmr_strbuf_puts(c->err, "; ");
    llmr_strbuf_puts(c->err, LLMR_PLUGIN_MANIFEST_FILE ": ");
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(c->err, fmt, ap);
    va_end(ap);
}

/* "\"runtimes\"[2]" or "\"id\"" */
static void put_label(llmr_strbuf *sb, const field_rule *r, long index)
{
    llmr_strbuf_printf(sb, "\"%s\"", r->name);
    if (index >= 0)
        llmr_strbuf_printf(sb, "[%ld]", index);
}

/* "FIELD[i]: VALUE is not a NOUN (ALLOWED)" */
static void fail_value(parse_ctx *c, const field_rule *r, long index, const json_t *value)
{
    llmr_strbuf label = LLMR_STRBUF_INIT, shown = LLMR_STRBUF_INIT;
    put_label(&label, r, index);
    llmr_json_describe(&shown, value);
    fail(c, "%s: %s is not a%s %s (%s)", llmr_strbuf_cstr(&label), llmr_strbuf_cstr(&shown),
         strchr("aeiouAEIOU", r->noun[0]) ? "n" : "", r->noun, r->allowed);
    llmr_strbuf_free(&label);
    llmr_strbuf_free(&shown);
}

static void fail_missing(parse_ctx *c, const field_rule *r)
{
    fail(c, "\"%s\" is required (%s: %s)", r->name, r->noun, r->allowed);
}

static char *dup_or_oom(parse_ctx *c, const char *s)
{
    char *d = strdup(s);
    if (!d)
        c->oom = true;
    return d;
}

/* A JSON string's bytes, or NULL when the value is not a string or holds a NUL. */
static const char *string_of(const json_t *v, size_t *len)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    *len = json_string_length(v);
    return strlen(s) == *len ? s : NULL;
}

static bool id_is_valid(const char *s, size_t n)
{
    if (n == 0 || n > LLMR_PLUGIN_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || is_digit(ch) ||
                  (i > 0 && (ch == '.' || ch == '_' || ch == '-'));
        if (!ok)
            return false;
    }
    return true;
}

static bool runtime_is_valid(const char *s, size_t n)
{
    if (n == 0 || n > LLMR_PLUGIN_RUNTIME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || is_digit(s[i]) || s[i] == '_'))
            return false;
    return true;
}

static bool format_is_valid(const char *s, size_t n)
{
    (void)n;
    return strcmp(s, "safetensors") == 0 || strcmp(s, "gguf") == 0 || strcmp(s, "directml") == 0;
}

static bool architecture_is_valid(const char *s, size_t n)
{
    if (n == 0 || n > LLMR_PLUGIN_ARCHITECTURE_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

/* "MAJOR.MINOR", decimal, no leading zeros, each at most 9 digits. */
static bool abi_parse(const char *s, unsigned *major, unsigned *minor)
{
    unsigned v[2];
    const char *p = s;
    for (int i = 0; i < 2; i++) {
        const char *start = p;
        unsigned x = 0;
        while (is_digit(*p) && p - start < 9)
            x = x * 10 + (unsigned)(*p++ - '0');
        size_t n = (size_t)(p - start);
        if (n == 0 || (n > 1 && start[0] == '0'))
            return false;
        v[i] = x;
        if (i == 0 && *p++ != '.')
            return false;
    }
    if (*p != '\0')
        return false;
    *major = v[0];
    *minor = v[1];
    return true;
}

/* A required non-empty array within the limit, or NULL after a reason. */
static const json_t *list_of(parse_ctx *c, const json_t *root, const field_rule *r)
{
    const json_t *a = json_object_get(root, r->name);
    if (!a) {
        fail(c, "\"%s\" is required (a non-empty array of %ss: %s)", r->name, r->noun,
             r->allowed);
        return NULL;
    }
    if (!json_is_array(a)) {
        llmr_strbuf shown = LLMR_STRBUF_INIT;
        llmr_json_describe(&shown, a);
        fail(c, "\"%s\": %s is not an array (a non-empty array of %ss: %s)", r->name,
             llmr_strbuf_cstr(&shown), r->noun, r->allowed);
        llmr_strbuf_free(&shown);
        return NULL;
    }
    size_t n = json_array_size(a);
    if (n == 0) {
        fail(c, "\"%s\" is empty (at least one %s: %s)", r->name, r->noun, r->allowed);
        return NULL;
    }
    if (n > LLMR_PLUGIN_LIST_MAX) {
        fail(c, "\"%s\" has %zu entries, more than the limit of %u", r->name, n,
             LLMR_PLUGIN_LIST_MAX);
        return NULL;
    }
    return a;
}

static void fail_twice(parse_ctx *c, const field_rule *r, size_t i, size_t j,
                       const json_t *value)
{
    llmr_strbuf shown = LLMR_STRBUF_INIT;
    llmr_json_describe(&shown, value);
    fail(c, "\"%s\"[%zu]: %s is listed twice (also at [%zu])", r->name, i,
         llmr_strbuf_cstr(&shown), j);
    llmr_strbuf_free(&shown);
}

/* A required array of distinct names that pass `valid`; NULL after a reason. */
static char **parse_names(parse_ctx *c, const json_t *root, const field_rule *r,
                          bool (*valid)(const char *, size_t), size_t *count)
{
    *count = 0;
    const json_t *a = list_of(c, root, r);
    if (!a)
        return NULL;
    size_t n = json_array_size(a);
    char **out = calloc(n, sizeof *out);
    if (!out) {
        c->oom = true;
        return NULL;
    }
    size_t errors = c->errors;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        size_t len;
        const char *s = string_of(v, &len);
        if (!s || !valid(s, len)) {
            fail_value(c, r, (long)i, v);
            continue;
        }
        size_t j = 0;
        while (j < i && !json_equal(json_array_get(a, j), v))
            j++;
        if (j < i) {
            fail_twice(c, r, i, j, v);
            continue;
        }
        if (!(out[(*count)++] = dup_or_oom(c, s)))
            break;
    }
    if (c->errors != errors || c->oom) {
        for (size_t i = 0; i < *count; i++)
            free(out[i]);
        free(out);
        *count = 0;
        return NULL;
    }
    return out;
}

static llmr_gpu_target *parse_gpu_targets(parse_ctx *c, const json_t *root, size_t *count)
{
    const field_rule *r = &RULE_GPU_TARGETS;
    *count = 0;
    const json_t *a = list_of(c, root, r);
    if (!a)
        return NULL;
    size_t n = json_array_size(a);
    llmr_gpu_target *out = calloc(n, sizeof *out);
    long *index_of = calloc(n, sizeof *index_of); /* array index of out[k] */
    if (!out || !index_of) {
        free(out);
        free(index_of);
        c->oom = true;
        return NULL;
    }
    size_t errors = c->errors;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        size_t len;
        const char *s = string_of(v, &len);
        llmr_gpu_target t;
        if (!s || !llmr_gpu_target_parse(s, &t)) {
            fail_value(c, r, (long)i, v);
            continue;
        }
        size_t k = 0;
        while (k < *count && !(out[k].kind == t.kind && out[k].major == t.major &&
                               out[k].minor == t.minor))
            k++;
        if (k < *count) {
            fail_twice(c, r, i, (size_t)index_of[k], v);
            continue;
        }
        index_of[*count] = (long)i;
        out[(*count)++] = t;
    }
    free(index_of);
    if (c->errors != errors) {
        free(out);
        *count = 0;
        return NULL;
    }
    return out;
}

/* A required string that passes `valid`, copied; NULL after a reason. */
static char *parse_string(parse_ctx *c, const json_t *root, const field_rule *r,
                          bool (*valid)(const char *, size_t))
{
    const json_t *v = json_object_get(root, r->name);
    if (!v) {
        fail_missing(c, r);
        return NULL;
    }
    size_t len;
    const char *s = string_of(v, &len);
    if (!s || !valid(s, len)) {
        fail_value(c, r, -1, v);
        return NULL;
    }
    return dup_or_oom(c, s);
}

static bool version_is_valid(const char *s, size_t n)
{
    (void)n;
    return llmr_semver_is_valid(s);
}

static bool library_is_valid(const char *s, size_t n)
{
    (void)n;
    return llmr_file_name_is_safe(s);
}

static void add_warning(parse_ctx *c, const char *key)
{
    llmr_plugin_manifest *m = c->m;
    if (c->unknown_fields++ >= MAX_WARNINGS)
        return;
    llmr_strbuf w = LLMR_STRBUF_INIT;
    size_t n = strlen(key);
    llmr_strbuf_puts(&w, "unknown field \"");
    llmr_strbuf_put_display(&w, key, n > SHOW_MAX ? SHOW_MAX : n);
    llmr_strbuf_puts(&w, n > SHOW_MAX ? "...\" ignored" : "\" ignored");
    char *text = llmr_strbuf_take(&w);
    char **grown = text ? realloc(m->warnings, (m->warning_count + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(text);
        c->oom = true;
        return;
    }
    m->warnings = grown;
    m->warnings[m->warning_count++] = text;
}

static void finish_warnings(parse_ctx *c)
{
    llmr_plugin_manifest *m = c->m;
    if (c->unknown_fields <= MAX_WARNINGS)
        return;
    char text[96];
    snprintf(text, sizeof text, "and %zu more unknown fields ignored",
             c->unknown_fields - MAX_WARNINGS);
    char *d = dup_or_oom(c, text);
    char **grown = d ? realloc(m->warnings, (m->warning_count + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(d);
        c->oom = true;
        return;
    }
    m->warnings = grown;
    m->warnings[m->warning_count++] = d;
}

static bool is_known_field(const char *key)
{
    for (size_t i = 0; i < sizeof KNOWN_FIELDS / sizeof KNOWN_FIELDS[0]; i++)
        if (strcmp(KNOWN_FIELDS[i]->name, key) == 0)
            return true;
    return false;
}

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void llmr_plugin_manifest_free(llmr_plugin_manifest *m)
{
    if (!m)
        return;
    free(m->dir);
    free(m->library);
    free(m->library_path);
    free(m->id);
    free(m->version);
    free(m->description);
    free_strings(m->runtimes, m->runtime_count);
    free_strings(m->formats, m->format_count);
    free_strings(m->architectures, m->architecture_count);
    free(m->gpu_targets);
    free_strings(m->warnings, m->warning_count);
    free(m);
}

/* Checks abi_version before anything else: another major may mean another schema,
 * so nothing more is said about such a manifest. */
static llmr_status check_abi(parse_ctx *c, const json_t *root)
{
    const json_t *v = json_object_get(root, RULE_ABI.name);
    if (!v) {
        fail_missing(c, &RULE_ABI);
        return LLMR_OK;
    }
    size_t len;
    const char *s = string_of(v, &len);
    unsigned major, minor;
    if (!s || !abi_parse(s, &major, &minor)) {
        fail_value(c, &RULE_ABI, -1, v);
        return LLMR_OK;
    }
    if (major != LLMR_ENGINE_ABI_MAJOR) {
        fail(c, "\"abi_version\": the plugin was built for engine ABI %u.%u; this llmr speaks %d.x",
             major, minor, LLMR_ENGINE_ABI_MAJOR);
        return LLMR_ABI_MISMATCH;
    }
    c->m->abi_major = major;
    c->m->abi_minor = minor;
    return LLMR_OK;
}

static void parse_optional(parse_ctx *c, const json_t *root)
{
    llmr_plugin_manifest *m = c->m;
    const json_t *v = json_object_get(root, RULE_PRIORITY.name);
    if (v) {
        json_int_t p = json_is_integer(v) ? json_integer_value(v) : 0;
        if (!json_is_integer(v) || p < LLMR_PLUGIN_PRIORITY_MIN || p > LLMR_PLUGIN_PRIORITY_MAX)
            fail_value(c, &RULE_PRIORITY, -1, v);
        else
            m->priority = (int)p;
    }
    v = json_object_get(root, RULE_DESCRIPTION.name);
    size_t len = 0;
    const char *s = v ? string_of(v, &len) : "";
    if (!s) {
        fail_value(c, &RULE_DESCRIPTION, -1, v);
    } else if (len > LLMR_PLUGIN_DESCRIPTION_MAX) {
        fail(c, "\"description\" is %zu bytes, more than the limit of %u", len,
             LLMR_PLUGIN_DESCRIPTION_MAX);
    } else if (!llmr_utf8_valid(s, len, NULL)) {
        fail_value(c, &RULE_DESCRIPTION, -1, v);
    } else {
        m->description = dup_or_oom(c, s);
    }
}

llmr_status llmr_plugin_manifest_parse(const char *text, size_t len, const char *dir,
                                       llmr_plugin_manifest **out, llmr_strbuf *err)
{
    *out = NULL;
    if (len > LLMR_PLUGIN_MANIFEST_MAX_BYTES) {
        llmr_strbuf_printf(err, LLMR_PLUGIN_MANIFEST_FILE ": %zu bytes, more than the limit of %u",
                           len, LLMR_PLUGIN_MANIFEST_MAX_BYTES);
        return LLMR_LOAD_FAILED;
    }
    llmr_strbuf jerr = LLMR_STRBUF_INIT;
    json_t *root = llmr_json_parse(text, len, &jerr);
    if (!root) {
        /* the parser's reason may quote bytes of the text: shown escaped */
        llmr_strbuf_puts(err, LLMR_PLUGIN_MANIFEST_FILE ": not valid JSON: ");
        llmr_strbuf_put_display(err, llmr_strbuf_cstr(&jerr), jerr.len);
        llmr_strbuf_free(&jerr);
        return LLMR_LOAD_FAILED;
    }
    llmr_strbuf_free(&jerr);
    if (!json_is_object(root)) {
        llmr_strbuf_puts(err, LLMR_PLUGIN_MANIFEST_FILE ": not a JSON object");
        json_decref(root);
        return LLMR_LOAD_FAILED;
    }
    llmr_plugin_manifest *m = calloc(1, sizeof *m);
    if (!m) {
        json_decref(root);
        llmr_strbuf_puts(err, "out of memory reading " LLMR_PLUGIN_MANIFEST_FILE);
        return LLMR_OOM_RAM;
    }
    parse_ctx c = {.err = err, .m = m};
    llmr_status status = check_abi(&c, root);
    if (status != LLMR_OK)
        goto done;

    m->id = parse_string(&c, root, &RULE_ID, id_is_valid);
    m->version = parse_string(&c, root, &RULE_VERSION, version_is_valid);
    m->runtimes = parse_names(&c, root, &RULE_RUNTIMES, runtime_is_valid, &m->runtime_count);
    m->formats = parse_names(&c, root, &RULE_FORMATS, format_is_valid, &m->format_count);
    m->architectures = parse_names(&c, root, &RULE_ARCHITECTURES, architecture_is_valid,
                                   &m->architecture_count);
    m->gpu_targets = parse_gpu_targets(&c, root, &m->gpu_target_count);
    m->library = parse_string(&c, root, &RULE_LIBRARY, library_is_valid);
    parse_optional(&c, root);

    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (!is_known_field(key))
            add_warning(&c, key);
    }
    finish_warnings(&c);

    if (!c.oom && c.errors == 0 && dir) {
        m->dir = dup_or_oom(&c, dir);
        m->library_path = llmr_path_join(dir, m->library);
        if (!m->library_path)
            c.oom = true;
    }
    if (c.errors > MAX_ERRORS)
        llmr_strbuf_printf(err, "; and %zu more problems", c.errors - MAX_ERRORS);
    if (c.oom) {
        llmr_strbuf_puts(err, c.errors ? "; out of memory reading " LLMR_PLUGIN_MANIFEST_FILE
                                       : "out of memory reading " LLMR_PLUGIN_MANIFEST_FILE);
        status = LLMR_OOM_RAM;
    } else if (c.errors > 0) {
        status = LLMR_LOAD_FAILED;
    }
done:
    json_decref(root);
    if (status != LLMR_OK) {
        llmr_plugin_manifest_free(m);
        return status;
    }
    *out = m;
    return LLMR_OK;
}

/* Stats the library beside the manifest and records its identity.  A link to a
 * regular file is fine (a library is often installed as a link to a versioned name);
 * the identity is the target's, the file that will be loaded. */
static llmr_status check_library(llmr_plugin_manifest *m, llmr_strbuf *err)
{
    struct stat st;
    int e = stat(m->library_path, &st) == 0 ? 0 : errno;
    if (e == 0 && S_ISREG(st.st_mode)) {
        m->has_lib_identity = true;
        m->lib_dev = (uint64_t)st.st_dev;
        m->lib_ino = (uint64_t)st.st_ino;
        m->lib_size = (uint64_t)st.st_size;
        m->lib_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + (int64_t)st.st_mtim.tv_nsec;
        return LLMR_OK;
    }
    size_t n = strlen(m->library);
    llmr_strbuf_puts(err, LLMR_PLUGIN_MANIFEST_FILE ": \"library\": \"");
    llmr_strbuf_put_display(err, m->library, n > SHOW_MAX ? SHOW_MAX : n);
    llmr_strbuf_puts(err, n > SHOW_MAX ? "...\"" : "\"");
    if (e == 0)
        llmr_strbuf_puts(err, " is not a regular file");
    else if (e == ENOENT || e == ENOTDIR)
        llmr_strbuf_puts(err, " does not exist in the plugin directory");
    else
        llmr_strbuf_printf(err, " cannot be read: %s", strerror(e));
    return LLMR_LOAD_FAILED;
}

llmr_status llmr_plugin_manifest_load(const char *plugin_dir, llmr_plugin_manifest **out,
                                      llmr_strbuf *err)
{
    *out = NULL;
    char *dir = realpath(plugin_dir, NULL);
    if (!dir) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            llmr_strbuf_puts(err, "the plugin directory does not exist");
            return LLMR_NOT_FOUND;
        }
        if (e == ENOMEM) {
            llmr_strbuf_puts(err, "out of memory reading " LLMR_PLUGIN_MANIFEST_FILE);
            return LLMR_OOM_RAM;
        }
        llmr_strbuf_printf(err, "the plugin directory cannot be opened: %s", strerror(e));
        return LLMR_LOAD_FAILED;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        llmr_strbuf_puts(err, "the plugin directory is not a directory");
        free(dir);
        return LLMR_NOT_FOUND;
    }
    char *path = llmr_path_join(dir, LLMR_PLUGIN_MANIFEST_FILE);
    if (!path) {
        free(dir);
        llmr_strbuf_puts(err, "out of memory reading " LLMR_PLUGIN_MANIFEST_FILE);
        return LLMR_OOM_RAM;
    }
    char *text = NULL;
    size_t len = 0;
    llmr_strbuf rerr = LLMR_STRBUF_INIT;
    llmr_status status = llmr_read_file(path, LLMR_PLUGIN_MANIFEST_MAX_BYTES, &text, &len, &rerr);
    free(path);
    if (status != LLMR_OK) {
        llmr_strbuf_printf(err, LLMR_PLUGIN_MANIFEST_FILE ": %s", llmr_strbuf_cstr(&rerr));
        llmr_strbuf_free(&rerr);
        free(dir);
        /* missing: not a plugin; memory: the node's trouble; anything else: this
         * plugin cannot be loaded */
        return status == LLMR_NOT_FOUND || status == LLMR_OOM_RAM ? status : LLMR_LOAD_FAILED;
    }
    llmr_strbuf_free(&rerr);
    status = llmr_plugin_manifest_parse(text, len, dir, out, err);
    free(text);
    free(dir);
    if (status != LLMR_OK)
        return status;
    status = check_library(*out, err);
    if (status != LLMR_OK) {
        llmr_plugin_manifest_free(*out);
        *out = NULL;
    }
    return status;
}

bool llmr_plugin_manifest_same_build(const llmr_plugin_manifest *a,
                                     const llmr_plugin_manifest *b)
{
    return a && b && a->has_lib_identity && b->has_lib_identity && strcmp(a->id, b->id) == 0 &&
           strcmp(a->version, b->version) == 0 && a->lib_dev == b->lib_dev &&
           a->lib_ino == b->lib_ino && a->lib_size == b->lib_size &&
           a->lib_mtime_ns == b->lib_mtime_ns;
}

/* ---- status output ----------------------------------------------------------- */

/* Sets key to a new value, taking it (jansson frees it on failure too); false when
 * the value could not be made or set. */
static bool put(json_t *o, const char *key, json_t *value)
{
    return value && json_object_set_new(o, key, value) == 0;
}

static json_t *string_array(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *target_array(const llmr_gpu_target *v, size_t n)
{
    json_t *a = json_array();
    llmr_strbuf t = LLMR_STRBUF_INIT;
    for (size_t i = 0; a && i < n; i++) {
        llmr_strbuf_reset(&t);
        llmr_gpu_target_format(&v[i], &t);
        if (llmr_strbuf_failed(&t) ||
            json_array_append_new(a, json_string(llmr_strbuf_cstr(&t))) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    llmr_strbuf_free(&t);
    return a;
}

json_t *llmr_plugin_manifest_json(const llmr_plugin_manifest *m)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    char abi[32];
    snprintf(abi, sizeof abi, "%u.%u", m->abi_major, m->abi_minor);
    /* put() takes each new value, also on failure; && stops at the first */
    bool ok = put(o, "id", json_string(m->id)) && put(o, "version", json_string(m->version)) &&
              put(o, "abi_version", json_string(abi)) &&
              put(o, "runtimes", string_array(m->runtimes, m->runtime_count)) &&
              put(o, "formats", string_array(m->formats, m->format_count)) &&
              put(o, "architectures", string_array(m->architectures, m->architecture_count)) &&
              put(o, "gpu_targets", target_array(m->gpu_targets, m->gpu_target_count)) &&
              put(o, "library", json_string(m->library)) &&
              put(o, "priority", json_integer(m->priority)) &&
              put(o, "description", json_string(m->description ? m->description : ""));
    /* dir and library_path come from the file system: not necessarily UTF-8, so
     * they are shown escaped (json_string refuses invalid UTF-8) */
    llmr_strbuf shown = LLMR_STRBUF_INIT;
    if (ok && m->dir) {
        llmr_strbuf_put_display(&shown, m->dir, strlen(m->dir));
        ok = put(o, "dir", json_string(llmr_strbuf_cstr(&shown)));
        llmr_strbuf_reset(&shown);
        llmr_strbuf_put_display(&shown, m->library_path, strlen(m->library_path));
        ok = ok && put(o, "library_path", json_string(llmr_strbuf_cstr(&shown)));
    }
    llmr_strbuf_free(&shown);
    if (ok && m->warning_count)
        ok = put(o, "warnings", string_array(m->warnings, m->warning_count));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

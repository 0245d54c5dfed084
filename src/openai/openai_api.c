/* The OpenAI wire format, responses: error objects, whole responses, streamed chunks
 * and their Server-Sent Events framing, logprobs, ids and the models list (see
 * openai_api.h; requests are parsed in openai_request.c).
 *
 * Shapes follow the OpenAI API reference: "chat.completion" and
 * "chat.completion.chunk" for chat, "text_completion" for both forms of completions.
 * Text from the engine may end inside a UTF-8 character or hold invalid bytes; it is
 * sent with each ill-formed sequence replaced by U+FFFD, since JSON strings must be
 * valid Unicode. */
#include "openai/openai_api.h"
#include "openai/openai_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/random.h"
#include "common/utf8.h"

/* OpenAI reports an impossible token's logprob as -9999.0 (JSON has no -Infinity). */
#define LOGPROB_FLOOR -9999.0

/* ---- JSON values ------------------------------------------------------------------- */

json_t *llmr_oai_text_json(const char *s, size_t len)
{
    if (!s)
        return json_string("");
    if (llmr_utf8_valid(s, len, NULL))
        return json_stringn_nocheck(s, len);
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_append_lossy(&sb, s, len);
    json_t *j =
        llmr_strbuf_failed(&sb) ? NULL : json_stringn_nocheck(llmr_strbuf_cstr(&sb), sb.len);
    llmr_strbuf_free(&sb);
    return j;
}

static json_t *cstr_json(const char *s)
{
    return llmr_oai_text_json(s, s ? strlen(s) : 0);
}

/* A logprob as the shortest decimal that reads back as the same float, so that it
 * prints as -0.25 or -1.3862944 rather than a double's 17 digits. */
static json_t *logprob_json(float lp)
{
    if (!isfinite(lp) || lp < LOGPROB_FLOOR)
        return json_real(LOGPROB_FLOOR);
    char buf[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)lp);
        if ((float)strtod(buf, NULL) == lp)
            break;
    }
    return json_real(strtod(buf, NULL));
}

/* Sets key to v, which is taken (freed when the set fails; NULL o or v is a failure
 * too); false on failure.  A value built before the call is passed through put or
 * push even after an earlier failure ("ok &= put(...)"), so that it is never lost. */
static bool put(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v) == 0;
}

static bool push(json_t *a, json_t *v)
{
    return json_array_append_new(a, v) == 0;
}

/* The object when every step succeeded, else NULL (and the object freed). */
static json_t *finish(json_t *o, bool ok)
{
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* ---- errors ------------------------------------------------------------------------ */

/* Cuts a string that snprintf may have ended inside a UTF-8 character. */
static void trim_partial_utf8(char *s)
{
    size_t n = strlen(s);
    size_t bad;
    if (!llmr_utf8_valid(s, n, &bad) &&
        llmr_utf8_char_len((const unsigned char *)s + bad, n - bad) == 0 && n - bad < 4)
        s[bad] = '\0';
}

void llmr_oai_error_set(llmr_oai_error *err, unsigned status, const char *type, const char *code,
                        const char *param, const char *fmt, ...)
{
    err->status = status;
    err->type = type ? type : "invalid_request_error";
    err->code = code;
    if (param != err->param) { /* a caller may pass the param already there */
        snprintf(err->param, sizeof err->param, "%s", param ? param : "");
        trim_partial_utf8(err->param);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    trim_partial_utf8(err->message);
}

json_t *llmr_oai_error_json(const llmr_oai_error *err)
{
    json_t *e = json_object();
    bool ok = put(e, "message", cstr_json(err->message)) &&
              put(e, "type", cstr_json(err->type ? err->type : "invalid_request_error")) &&
              put(e, "param", err->param[0] ? cstr_json(err->param) : json_null()) &&
              put(e, "code", err->code ? cstr_json(err->code) : json_null());
    e = finish(e, ok);
    json_t *o = json_object();
    return finish(o, put(o, "error", e));
}

/* ---- logprobs ---------------------------------------------------------------------- */

/* {"token", "logprob", "bytes"}: bytes are the token's own bytes, which say what a
 * token that ends inside a character holds when its text cannot. */
static json_t *chat_token(const char *text, size_t len, float logprob)
{
    json_t *bytes = json_array();
    bool ok = bytes != NULL;
    for (size_t i = 0; ok && i < len; i++)
        ok = push(bytes, json_integer((unsigned char)text[i]));
    bytes = finish(bytes, ok);
    json_t *o = json_object();
    ok = put(o, "token", llmr_oai_text_json(text, len));
    ok &= put(o, "logprob", logprob_json(logprob));
    ok &= put(o, "bytes", bytes);
    return finish(o, ok);
}

json_t *llmr_oai_chat_logprob(const llmr_oai_token_logprob *t)
{
    json_t *o = chat_token(t->text, t->len, t->logprob);
    json_t *top = json_array();
    bool ok = top != NULL;
    for (uint32_t i = 0; ok && i < t->top_count; i++)
        ok = push(top, chat_token(t->top_text[i], t->top_len[i], t->top_logprob[i]));
    return finish(o, put(o, "top_logprobs", finish(top, ok)));
}

size_t llmr_oai_text_chars(const char *text, size_t len)
{
    size_t chars = 0, i = 0;
    while (i < len) {
        size_t n = llmr_utf8_char_len((const unsigned char *)text + i, len - i);
        if (n == 0) /* one U+FFFD for the ill-formed run, as the text is sent */
            n = llmr_utf8_invalid_len((const unsigned char *)text + i, len - i);
        i += n;
        chars++;
    }
    return chars;
}

/* {text: logprob} of the alternatives, plus the sampled token when it is not one of
 * them: OpenAI returns up to logprobs + 1 entries.  Texts that read the same keep
 * the first (most likely) one's logprob. */
static json_t *completion_top(const llmr_oai_token_logprob *t)
{
    json_t *o = json_object();
    llmr_strbuf key = LLMR_STRBUF_INIT;
    bool ok = o != NULL;
    for (uint32_t i = 0; ok && i <= t->top_count; i++) {
        const char *text = i < t->top_count ? t->top_text[i] : t->text;
        size_t len = i < t->top_count ? t->top_len[i] : t->len;
        float lp = i < t->top_count ? t->top_logprob[i] : t->logprob;
        llmr_strbuf_reset(&key);
        llmr_strbuf_append_lossy(&key, text ? text : "", text ? len : 0);
        if (llmr_strbuf_failed(&key)) {
            ok = false;
            break;
        }
        if (!json_object_getn(o, llmr_strbuf_cstr(&key), key.len))
            ok = json_object_setn_new_nocheck(o, llmr_strbuf_cstr(&key), key.len,
                                              logprob_json(lp)) == 0;
    }
    llmr_strbuf_free(&key);
    return finish(o, ok);
}

json_t *llmr_oai_completion_logprobs(const llmr_oai_token_logprob *t, size_t n, size_t offset0)
{
    json_t *tokens = json_array(), *lps = json_array(), *top = json_array(),
           *offsets = json_array();
    bool ok = tokens && lps && top && offsets;
    size_t off = offset0;
    for (size_t i = 0; ok && i < n; i++) {
        ok = push(tokens, llmr_oai_text_json(t[i].text, t[i].len)) &&
             push(lps, logprob_json(t[i].logprob)) && push(top, completion_top(&t[i])) &&
             push(offsets, json_integer((json_int_t)off));
        off += llmr_oai_text_chars(t[i].text, t[i].len);
    }
    json_t *o = json_object();
    ok &= put(o, "tokens", tokens);
    ok &= put(o, "token_logprobs", lps);
    ok &= put(o, "top_logprobs", top);
    ok &= put(o, "text_offset", offsets);
    return finish(o, ok);
}

/* ---- responses and chunks ---------------------------------------------------------- */

/* {"id", "object", "created", "model"}: the head of every response and chunk. */
static json_t *head(const char *id, const char *object, int64_t created, const char *model)
{
    json_t *o = json_object();
    bool ok = put(o, "id", cstr_json(id)) && put(o, "object", json_string(object)) &&
              put(o, "created", json_integer((json_int_t)created)) &&
              put(o, "model", cstr_json(model));
    return finish(o, ok);
}

static json_t *usage_json(const llmr_oai_usage *u)
{
    json_t *o = json_object();
    bool ok =
        put(o, "prompt_tokens", json_integer(u->prompt_tokens)) &&
        put(o, "completion_tokens", json_integer(u->completion_tokens)) &&
        put(o, "total_tokens", json_integer((json_int_t)u->prompt_tokens + u->completion_tokens));
    return finish(o, ok);
}

static json_t *finish_json(const char *finish_reason)
{
    return finish_reason ? json_string(finish_reason) : json_null();
}

/* Chat's logprobs object around the content array (taken), or null. */
static json_t *chat_logprobs(json_t *content)
{
    if (!content)
        return json_null();
    json_t *o = json_object();
    return finish(o, put(o, "content", content) && put(o, "refusal", json_null()));
}

/* {"object": ..., "choices": [choice]} with choice taken. */
static json_t *with_choice(json_t *o, json_t *choice)
{
    json_t *choices = json_array();
    bool ok = push(choices, choice);
    ok &= put(o, "choices", choices);
    return finish(o, ok);
}

json_t *llmr_oai_chat_response_message(const char *id, const char *model, int64_t created,
                                       json_t *message, const char *finish_reason,
                                       const llmr_oai_usage *usage, json_t *logprobs)
{
    json_t *choice = json_object();
    bool ok = put(choice, "index", json_integer(0));
    ok &= put(choice, "message", message);
    ok &= put(choice, "logprobs", chat_logprobs(logprobs));
    ok &= put(choice, "finish_reason", finish_json(finish_reason));
    json_t *o = with_choice(head(id, "chat.completion", created, model), finish(choice, ok));
    if (o && usage && !put(o, "usage", usage_json(usage)))
        o = finish(o, false);
    return o;
}

json_t *llmr_oai_chat_response(const char *id, const char *model, int64_t created, const char *text,
                               size_t len, const char *finish_reason, const llmr_oai_usage *usage,
                               json_t *logprobs)
{
    json_t *msg = json_object();
    bool ok = put(msg, "role", json_string("assistant")) &&
              put(msg, "content", llmr_oai_text_json(text, len)) && put(msg, "refusal", json_null());
    return llmr_oai_chat_response_message(id, model, created, finish(msg, ok), finish_reason, usage,
                                          logprobs);
}

json_t *llmr_oai_completion_response(const char *id, const char *model, int64_t created,
                                     const char *text, size_t len, const char *finish_reason,
                                     const llmr_oai_usage *usage, json_t *logprobs)
{
    json_t *choice = json_object();
    bool ok = put(choice, "text", llmr_oai_text_json(text, len));
    ok &= put(choice, "index", json_integer(0));
    ok &= put(choice, "logprobs", logprobs ? logprobs : json_null());
    ok &= put(choice, "finish_reason", finish_json(finish_reason));
    json_t *o = with_choice(head(id, "text_completion", created, model), finish(choice, ok));
    if (o && usage && !put(o, "usage", usage_json(usage)))
        o = finish(o, false);
    return o;
}

json_t *llmr_oai_chat_delta_chunk(const char *id, const char *model, int64_t created, json_t *delta,
                                  const char *finish_reason, json_t *logprobs,
                                  bool with_null_usage)
{
    if (!delta)
        delta = json_object();
    json_t *choice = json_object();
    bool ok = put(choice, "index", json_integer(0));
    ok &= put(choice, "delta", delta);
    ok &= put(choice, "logprobs", chat_logprobs(logprobs));
    ok &= put(choice, "finish_reason", finish_json(finish_reason));
    json_t *o = with_choice(head(id, "chat.completion.chunk", created, model), finish(choice, ok));
    if (o && with_null_usage && !put(o, "usage", json_null()))
        o = finish(o, false);
    return o;
}

json_t *llmr_oai_chat_chunk(const char *id, const char *model, int64_t created, bool first,
                            const char *text, size_t len, const char *finish_reason,
                            json_t *logprobs, bool with_null_usage)
{
    /* The first delta names the role; later ones carry only text; the last may be
     * empty beside its finish_reason. */
    json_t *delta = json_object();
    bool ok = delta != NULL;
    if (ok && first)
        ok = put(delta, "role", json_string("assistant"));
    if (ok && (first || text))
        ok = put(delta, "content", llmr_oai_text_json(text, len));
    delta = finish(delta, ok);
    if (!delta) {
        json_decref(logprobs);
        return NULL;
    }
    return llmr_oai_chat_delta_chunk(id, model, created, delta, finish_reason, logprobs,
                                     with_null_usage);
}

json_t *llmr_oai_completion_chunk(const char *id, const char *model, int64_t created,
                                  const char *text, size_t len, const char *finish_reason,
                                  json_t *logprobs, bool with_null_usage)
{
    json_t *choice = json_object();
    bool ok = put(choice, "text", llmr_oai_text_json(text, len));
    ok &= put(choice, "index", json_integer(0));
    ok &= put(choice, "logprobs", logprobs ? logprobs : json_null());
    ok &= put(choice, "finish_reason", finish_json(finish_reason));
    json_t *o = with_choice(head(id, "text_completion", created, model), finish(choice, ok));
    if (o && with_null_usage && !put(o, "usage", json_null()))
        o = finish(o, false);
    return o;
}

json_t *llmr_oai_usage_chunk(llmr_oai_kind kind, const char *id, const char *model, int64_t created,
                             const llmr_oai_usage *usage)
{
    json_t *o = head(id, kind == LLMR_OAI_CHAT ? "chat.completion.chunk" : "text_completion",
                     created, model);
    return finish(o, put(o, "choices", json_array()) && put(o, "usage", usage_json(usage)));
}

/* ---- text on the wire -------------------------------------------------------------- */

char *llmr_oai_dumps(const json_t *obj)
{
    /* 9 significant digits: every float logprob exactly, in its shortest form. */
    return json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
}

void llmr_oai_sse_data(llmr_strbuf *out, const json_t *obj)
{
    char *text = obj ? llmr_oai_dumps(obj) : NULL;
    if (!text) {
        out->failed = true; /* the caller checks the buffer once, at the end */
        return;
    }
    llmr_strbuf_puts(out, "data: ");
    llmr_strbuf_puts(out, text);
    llmr_strbuf_puts(out, "\n\n");
    free(text);
}

void llmr_oai_sse_done(llmr_strbuf *out)
{
    llmr_strbuf_puts(out, "data: [DONE]\n\n");
}

/* ---- ids --------------------------------------------------------------------------- */

/* n random bytes from the kernel: getrandom, else /dev/urandom. */
/* Last resort when the kernel gives no randomness: ids need only be unlikely to
 * repeat, so the clock and a counter through splitmix64 do. */
static unsigned char fallback_byte(void)
{
    static uint64_t state;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z =
        (state += 0x9e3779b97f4a7c15ull) ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (unsigned char)(z ^ (z >> 31));
}

#define ID_CHARS 24

void llmr_oai_new_id(const char *prefix, char *out, size_t size)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (size == 0)
        return;
    char id[ID_CHARS + 1];
    size_t have = 0;
    while (have < ID_CHARS) {
        unsigned char buf[64];
        bool ok = llmr_random_bytes(buf, sizeof buf);
        for (size_t i = 0; i < sizeof buf && have < ID_CHARS; i++) {
            unsigned char b = ok ? buf[i] : fallback_byte();
            if (b < 248) /* 248 = 4 * 62: no character more likely than another */
                id[have++] = alphabet[b % 62];
        }
    }
    id[ID_CHARS] = '\0';
    snprintf(out, size, "%s%s", prefix ? prefix : "", id);
}

/* ---- models ------------------------------------------------------------------------ */

json_t *llmr_oai_model_json(const llmr_oai_model_entry *m)
{
    json_t *e = json_object();
    bool ok = put(e, "id", cstr_json(m->id)) && put(e, "object", json_string("model")) &&
              put(e, "created", json_integer((json_int_t)m->created)) &&
              put(e, "owned_by", cstr_json(m->owned_by ? m->owned_by : "llmr"));
    return finish(e, ok);
}

json_t *llmr_oai_models_list(const llmr_oai_model_entry *models, size_t n)
{
    json_t *data = json_array(), *not_ready = json_array();
    bool ok = data && not_ready;
    for (size_t i = 0; ok && i < n; i++) {
        const llmr_oai_model_entry *m = &models[i];
        if (m->ready) {
            ok = push(data, llmr_oai_model_json(m));
        } else {
            json_t *e = json_object();
            bool e_ok = put(e, "id", cstr_json(m->id));
            e_ok = e_ok && put(e, "reason", cstr_json(m->reason ? m->reason : "not ready"));
            ok = push(not_ready, finish(e, e_ok));
        }
    }
    json_t *o = json_object();
    ok &= put(o, "object", json_string("list"));
    ok &= put(o, "data", data);
    ok &= put(o, "not_ready", not_ready);
    return finish(o, ok);
}

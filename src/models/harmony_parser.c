/* The streaming harmony parser: ordinary text goes through a matcher of the special
 * tokens' spellings (so "<|end|>" written as text acts as <|end|> and never comes out),
 * then a state machine over header, body and the gaps between messages.  See
 * harmony_parser.h. */
#include "models/harmony_parser.h"

#include <string.h>

enum { SP_START, SP_END, SP_MESSAGE, SP_CHANNEL, SP_CONSTRAIN, SP_RETURN, SP_CALL, SP_COUNT };

static const char *const spelled[SP_COUNT] = {"<|start|>",     "<|end|>",    "<|message|>",
                                              "<|channel|>",   "<|constrain|>", "<|return|>",
                                              "<|call|>"};

enum { ST_HEADER, ST_BODY, ST_BETWEEN, ST_DONE };

llmr_harmony_ids llmr_harmony_gpt_oss_ids(void)
{
    llmr_harmony_ids ids = {200006, 200007, 200008, 200005, 200003, 200002, 200012};
    return ids;
}

void llmr_harmony_parser_init(llmr_harmony_parser *p, const llmr_harmony_ids *ids)
{
    memset(p, 0, sizeof *p);
    p->ids = *ids;
    p->state = ST_HEADER;
}

bool llmr_harmony_done(const llmr_harmony_parser *p)
{
    return p->state == ST_DONE;
}

/* ---- the header ------------------------------------------------------------------------ */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The word at s (up to whitespace, '<' or the end): its length. */
static size_t word_len(const char *s, const char *end)
{
    size_t n = 0;
    while (s + n < end && !is_space(s[n]) && s[n] != '<')
        n++;
    return n;
}

static bool word_is(const char *w, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(w, lit, n) == 0;
}

/* What the header says: the recipient (*to, *to_len; none: 0) and the channel. */
static void read_header(const llmr_harmony_parser *p, const char **to, size_t *to_len,
                        const char **channel, size_t *channel_len)
{
    const char *h = p->header, *end = h + p->header_len;
    *to = NULL;
    *to_len = 0;
    *channel = NULL;
    *channel_len = 0;
    for (const char *s = h; s < end; s++) {
        bool at_word = s == h || is_space(s[-1]) || s[-1] == '>';
        if (at_word && end - s >= 3 && memcmp(s, "to=", 3) == 0 && !*to) {
            *to = s + 3;
            *to_len = word_len(s + 3, end);
        }
        size_t cl = strlen(spelled[SP_CHANNEL]);
        if ((size_t)(end - s) >= cl && memcmp(s, spelled[SP_CHANNEL], cl) == 0 && !*channel) {
            const char *c = s + cl;
            while (c < end && is_space(*c))
                c++;
            *channel = c;
            *channel_len = word_len(c, end);
        }
    }
    if (*channel && *channel_len)
        return;
    /* the slip: a channel name as plain text, without <|channel|> before it */
    for (const char *s = h; s < end;) {
        while (s < end && (is_space(*s) || *s == '<' || *s == '|' || *s == '>'))
            s++;
        size_t n = word_len(s, end);
        /* the role's text runs into the channel's without a <|channel|> between */
        const char *w = s;
        size_t wn = n;
        if (wn > 9 && memcmp(w, "assistant", 9) == 0) {
            w += 9;
            wn -= 9;
        }
        if (word_is(w, wn, "analysis") || word_is(w, wn, "final") || word_is(w, wn, "commentary")) {
            *channel = w;
            *channel_len = wn;
            return;
        }
        if (n == 0 && s < end)
            s++;
        s += n;
    }
}

static void emit_text(llmr_harmony_parser *p, const char *s, size_t n, llmr_harmony_emit_fn emit,
                      void *user)
{
    if (n && p->state == ST_BODY)
        emit(user, p->body, s, n);
}

/* The header is complete (<|message|>): the body's kind; a call starts.  Only a message
 * to functions.NAME is a call (of a function the client offers); one to a tool of the
 * model's own (python, browser.search) is its reasoning. */
static void open_body(llmr_harmony_parser *p, llmr_harmony_emit_fn emit, void *user)
{
    const char *to, *ch;
    size_t to_len, ch_len;
    read_header(p, &to, &to_len, &ch, &ch_len);
    p->state = ST_BODY;
    if (to_len > 10 && memcmp(to, "functions.", 10) == 0) {
        p->body = LLMR_HARMONY_CALL_ARGS;
        p->calls++;
        emit(user, LLMR_HARMONY_CALL_START, to + 10, to_len - 10);
    } else if (to_len) {
        p->body = LLMR_HARMONY_REASONING;
    } else {
        p->body = ch_len == 8 && memcmp(ch, "analysis", 8) == 0 ? LLMR_HARMONY_REASONING
                                                                : LLMR_HARMONY_CONTENT;
    }
    p->header_len = 0;
}

static void close_body(llmr_harmony_parser *p, llmr_harmony_emit_fn emit, void *user)
{
    if (p->state != ST_BODY)
        return;
    if (p->body == LLMR_HARMONY_CALL_ARGS)
        emit(user, LLMR_HARMONY_CALL_END, NULL, 0);
    emit(user, LLMR_HARMONY_MESSAGE_END, NULL, 0);
    p->state = ST_BETWEEN;
}

/* Whether the header holds the spelling of special token sp. */
static bool has_spelled(const llmr_harmony_parser *p, int sp)
{
    size_t l = strlen(spelled[sp]);
    for (size_t i = 0; i + l <= p->header_len; i++)
        if (memcmp(p->header + i, spelled[sp], l) == 0)
            return true;
    return false;
}

/* Header text that was not a header after all (no <|message|> came, or too long): it
 * is the answer.  plain: its start already said it cannot be a header (could_be_header),
 * so a recipient further on is words of the answer too. */
static void header_as_content(llmr_harmony_parser *p, llmr_harmony_emit_fn emit, void *user, bool plain)
{
    const char *to, *ch;
    size_t to_len, ch_len;
    read_header(p, &to, &to_len, &ch, &ch_len);
    /* a recipient, or a <|channel|> or <|constrain|> (the only special tokens a header
     * keeps as text): a header cut short.  A channel's name alone, or a '<', may well
     * be a word of a plain answer. */
    bool looks_like_header =
        !plain && (to_len || has_spelled(p, SP_CHANNEL) || has_spelled(p, SP_CONSTRAIN));
    size_t n = p->header_len;
    p->header_len = 0;
    if (looks_like_header || !n)
        return;
    /* the role the prompt's <|start|> began with is not content */
    const char *s = p->header;
    size_t w = word_len(s, s + n);
    if (word_is(s, w, "assistant")) {
        s += w;
        n -= w;
    }
    p->state = ST_BODY;
    p->body = LLMR_HARMONY_CONTENT;
    if (n)
        emit(user, LLMR_HARMONY_CONTENT, s, n);
}

/* Whether the header's text so far can still begin a header: after any spaces (the
 * recipient comes as " to=..." right after the prompt's role), its first bytes agree
 * with the role, a channel's name, a recipient or a header's special token (the
 * model's slips write them as text).  Text that cannot (a plain answer without a header) is the
 * answer at once, not held until <|end|> or the header's limit.  Once false, false for
 * every longer text, so the decision does not depend on how the text is split. */
static bool could_be_header(const llmr_harmony_parser *p)
{
    static const char *const starts[] = {"assistant", "analysis", "commentary", "final",
                                         "to=",       "<|channel|>", "<|constrain|>"};
    size_t at = 0;
    while (at < p->header_len && p->header[at] == ' ')
        at++;
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        size_t l = strlen(starts[i]), n = p->header_len - at < l ? p->header_len - at : l;
        if (memcmp(p->header + at, starts[i], n) == 0)
            return true;
    }
    return false;
}

/* Plain text so far (no <|channel|> or <|constrain|> in it) that no header starts with:
 * the answer, at once and whole (a recipient further on is words of it). */
static bool plain_text(const llmr_harmony_parser *p)
{
    return !could_be_header(p) && !has_spelled(p, SP_CHANNEL) && !has_spelled(p, SP_CONSTRAIN);
}

static void on_text(llmr_harmony_parser *p, const char *s, size_t n, llmr_harmony_emit_fn emit,
                    void *user);

static void header_append(llmr_harmony_parser *p, const char *s, size_t n,
                          llmr_harmony_emit_fn emit, void *user)
{
    size_t take = LLMR_HARMONY_HEADER_MAX - p->header_len;
    if (n <= take) {
        memcpy(p->header + p->header_len, s, n);
        p->header_len += n;
        if (plain_text(p))
            header_as_content(p, emit, user, true);
        return;
    }
    /* no header is this long (decided at the same byte however the text is split):
     * plain text was the answer without a header; one that looked like a header is
     * dropped and what follows starts again */
    memcpy(p->header + p->header_len, s, take);
    p->header_len += take;
    /* a UTF-8 character the limit would cut goes with what follows, so that every
     * piece emitted is whole characters (a stream's pieces are sent one by one) */
    size_t cut = LLMR_HARMONY_HEADER_MAX;
    if (((unsigned char)s[take] & 0xC0) == 0x80)
        while (cut > LLMR_HARMONY_HEADER_MAX - 3 && ((unsigned char)p->header[cut - 1] & 0xC0) == 0x80)
            cut--;
    if (((unsigned char)s[take] & 0xC0) == 0x80 && (unsigned char)p->header[cut - 1] >= 0xC0)
        cut--; /* the lead byte of the character cut */
    else
        cut = LLMR_HARMONY_HEADER_MAX;
    /* the cut character whole: its bytes in the header, then the rest of them */
    char whole[8];
    size_t have = LLMR_HARMONY_HEADER_MAX - cut, more = 0;
    memcpy(whole, p->header + cut, have);
    if (have) {
        unsigned char lead = (unsigned char)whole[0];
        size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        more = len > have ? len - have : 0;
        if (more > n - take)
            more = n - take;
        memcpy(whole + have, s + take, more);
    }
    p->header_len = cut;
    header_as_content(p, emit, user, plain_text(p));
    p->header_len = 0;
    on_text(p, whole, have + more, emit, user);
    on_text(p, s + take + more, n - take - more, emit, user);
}

/* ---- tokens ---------------------------------------------------------------------------- */

static void on_special(llmr_harmony_parser *p, int sp, llmr_harmony_emit_fn emit, void *user)
{
    if (p->state == ST_DONE)
        return;
    switch (sp) {
    case SP_START:
        close_body(p, emit, user); /* a missing <|end|> */
        p->state = ST_HEADER;
        p->header_len = 0;
        break;
    case SP_CHANNEL:
    case SP_CONSTRAIN:
        if (p->state == ST_BODY) { /* a new header without <|end|> or <|start|> */
            close_body(p, emit, user);
            p->header_len = 0;
        }
        p->state = ST_HEADER;
        if (p->header_len + strlen(spelled[sp]) > LLMR_HARMONY_HEADER_MAX) {
            /* no header is this long: what came before was none, and the token
             * starts one (its spelling is never text) */
            header_as_content(p, emit, user, false);
            p->header_len = 0;
            p->state = ST_HEADER;
        }
        header_append(p, spelled[sp], strlen(spelled[sp]), emit, user);
        break;
    case SP_MESSAGE:
        if (p->state == ST_HEADER || p->state == ST_BETWEEN)
            open_body(p, emit, user);
        break; /* a stray one in a body: nothing */
    case SP_END:
        if (p->state == ST_HEADER)
            header_as_content(p, emit, user, false); /* a message of text without a header */
        close_body(p, emit, user);
        p->state = ST_BETWEEN;
        p->header_len = 0;
        break;
    case SP_CALL:
        if (p->state == ST_HEADER) { /* a call with no <|message|>: its header says who */
            const char *to, *ch;
            size_t to_len, ch_len;
            read_header(p, &to, &to_len, &ch, &ch_len);
            if (to_len)
                open_body(p, emit, user);
            else
                header_as_content(p, emit, user, false); /* as at <|return|>: plain text was the answer */
        }
        close_body(p, emit, user);
        p->state = ST_DONE;
        break;
    case SP_RETURN:
        if (p->state == ST_HEADER)
            header_as_content(p, emit, user, false);
        close_body(p, emit, user);
        p->state = ST_DONE;
        break;
    }
}

/* Ordinary text, past the matcher: to the header or the body. */
static void on_text(llmr_harmony_parser *p, const char *s, size_t n, llmr_harmony_emit_fn emit,
                    void *user)
{
    if (!n || p->state == ST_DONE)
        return;
    if (p->state == ST_BETWEEN) { /* a header without <|start|> */
        p->state = ST_HEADER;
        p->header_len = 0;
    }
    if (p->state == ST_HEADER)
        header_append(p, s, n, emit, user);
    else
        emit_text(p, s, n, emit, user);
}

/* Which special token pending[0..n) spells completely (-1: none), and whether it is
 * the start of one. */
static int spelled_match(const char *s, size_t n, bool *prefix)
{
    *prefix = false;
    for (int i = 0; i < SP_COUNT; i++) {
        size_t l = strlen(spelled[i]);
        if (n == l && memcmp(s, spelled[i], l) == 0)
            return i;
        if (n < l && memcmp(s, spelled[i], n) == 0)
            *prefix = true;
    }
    return -1;
}

/* Runs ordinary text through the matcher of spelled special tokens. */
static void feed_text(llmr_harmony_parser *p, const char *s, size_t n, llmr_harmony_emit_fn emit,
                      void *user)
{
    size_t plain = 0; /* s[plain..i) is text not held back */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!p->pending_len) {
            if (c != '<')
                continue;
            on_text(p, s + plain, i - plain, emit, user);
            p->pending[p->pending_len++] = c;
            plain = i + 1;
            continue;
        }
        p->pending[p->pending_len++] = c;
        plain = i + 1;
        bool prefix;
        int sp = spelled_match(p->pending, p->pending_len, &prefix);
        if (sp >= 0) {
            p->pending_len = 0;
            on_special(p, sp, emit, user);
        } else if (!prefix) { /* not a special token: let out all but a new '<' */
            size_t keep = 0;
            for (size_t k = 1; k < p->pending_len; k++)
                if (p->pending[k] == '<') {
                    bool pre;
                    if (spelled_match(p->pending + k, p->pending_len - k, &pre) < 0 && pre) {
                        keep = p->pending_len - k;
                        break;
                    }
                }
            on_text(p, p->pending, p->pending_len - keep, emit, user);
            memmove(p->pending, p->pending + p->pending_len - keep, keep);
            p->pending_len = keep;
        }
    }
    on_text(p, s + plain, n - plain, emit, user);
}

static void flush_pending(llmr_harmony_parser *p, llmr_harmony_emit_fn emit, void *user)
{
    size_t n = p->pending_len;
    p->pending_len = 0;
    on_text(p, p->pending, n, emit, user);
}

void llmr_harmony_feed(llmr_harmony_parser *p, int32_t id, const char *text, size_t len,
                       llmr_harmony_emit_fn emit, void *user)
{
    const int32_t ids[SP_COUNT] = {p->ids.start,   p->ids.end,       p->ids.message, p->ids.channel,
                                   p->ids.constrain, p->ids.ret, p->ids.call};
    for (int sp = 0; sp < SP_COUNT; sp++)
        if (id >= 0 && id == ids[sp]) {
            flush_pending(p, emit, user); /* text before a real special token was text */
            on_special(p, sp, emit, user);
            return;
        }
    if (text && len)
        feed_text(p, text, len, emit, user);
}

void llmr_harmony_finish(llmr_harmony_parser *p, llmr_harmony_emit_fn emit, void *user)
{
    flush_pending(p, emit, user);
    if (p->state == ST_HEADER)
        header_as_content(p, emit, user, false);
    close_body(p, emit, user); /* a call whose <|call|> never came ends here */
    p->state = ST_DONE;
}

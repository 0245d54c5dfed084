/* Where a node may be: see node_address.h. */
#include "router/node_address.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* An address as 16 bytes (IPv4 as ::ffff:a.b.c.d). */
typedef struct addr16 {
    unsigned char b[16];
} addr16;

static void from_v4(const struct in_addr *a, addr16 *out)
{
    memset(out->b, 0, 10);
    out->b[10] = out->b[11] = 0xff;
    memcpy(out->b + 12, &a->s_addr, 4);
}

static bool parse_addr(const char *text, addr16 *out, bool *v4)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, text, &a4) == 1) {
        from_v4(&a4, out);
        *v4 = true;
        return true;
    }
    if (inet_pton(AF_INET6, text, &a6) == 1) {
        memcpy(out->b, a6.s6_addr, 16);
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        *v4 = memcmp(out->b, mapped, 12) == 0;
        return true;
    }
    return false;
}

/* One network of the list ("10.0.0.0/8", "::1"): its address and prefix in bits of
 * the 16 bytes. */
static bool parse_net(const char *text, addr16 *net, unsigned *bits)
{
    char buf[80];
    if (strlen(text) >= sizeof buf)
        return false;
    snprintf(buf, sizeof buf, "%s", text);
    char *slash = strchr(buf, '/');
    long prefix = -1;
    if (slash) {
        *slash = 0;
        char *end = NULL;
        prefix = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || prefix < 0)
            return false;
    }
    bool v4 = false;
    if (!parse_addr(buf, net, &v4))
        return false;
    long max = v4 ? 32 : 128;
    if (prefix > max)
        return false;
    *bits = (unsigned)((prefix < 0 ? max : prefix) + (v4 ? 96 : 0));
    return true;
}

static bool in_net(const addr16 *a, const addr16 *net, unsigned bits)
{
    for (unsigned i = 0; i < 16 && bits; i++) {
        unsigned take = bits >= 8 ? 8 : bits;
        unsigned char mask = (unsigned char)(0xff << (8 - take));
        if ((a->b[i] & mask) != (net->b[i] & mask))
            return false;
        bits -= take;
    }
    return true;
}

/* Calls each network of the list; false at the first that does not parse (its text
 * into bad). */
static bool each_net(const char *list, bool (*fn)(void *, const addr16 *, unsigned), void *user, char *bad,
                     size_t bad_size)
{
    const char *p = list ? list : "";
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && isspace((unsigned char)t[-1]))
            t--;
        if (t > p) {
            char one[96];
            snprintf(one, sizeof one, "%.*s", (int)(t - p), p);
            addr16 net;
            unsigned bits = 0;
            if ((size_t)(t - p) >= sizeof one || !parse_net(one, &net, &bits)) {
                snprintf(bad, bad_size, "%s", one);
                return false;
            }
            if (fn && fn(user, &net, bits))
                return true;
        }
        p = e;
    }
    return true;
}

bool llmr_node_allow_valid(const char *text, llmr_strbuf *err)
{
    char bad[96] = "";
    if (each_net(text, NULL, NULL, bad, sizeof bad))
        return true;
    llmr_strbuf_printf(err, "\"%s\" is not a network: give addresses or CIDR networks, comma-separated "
                            "(10.0.0.0/8, fd00::/8, 192.0.2.7)", bad);
    return false;
}

typedef struct match {
    const addr16 *a;
    bool found;
} match;

static bool match_net(void *user, const addr16 *net, unsigned bits)
{
    match *m = user;
    m->found = in_net(m->a, net, bits);
    return m->found;
}

static bool allowed(const char *allow, const addr16 *a)
{
    char bad[96];
    match m = {a, false};
    each_net(allow, match_net, &m, bad, sizeof bad);
    return m.found;
}

/* The host and port of an http:// or https:// URL. */
static bool split_url(const char *url, char *host, size_t host_size, unsigned *port)
{
    bool tls = strncmp(url, "https://", 8) == 0;
    if (!tls && strncmp(url, "http://", 7) != 0)
        return false;
    const char *p = url + (tls ? 8 : 7), *end;
    if (strpbrk(p, "@"))
        return false; /* no user information */
    if (*p == '[') {
        end = strchr(p, ']');
        if (!end || (size_t)(end - p - 1) >= host_size || end == p + 1)
            return false;
        snprintf(host, host_size, "%.*s", (int)(end - p - 1), p + 1);
        end++;
    } else {
        end = p + strcspn(p, ":/?#");
        if (end == p || (size_t)(end - p) >= host_size)
            return false;
        snprintf(host, host_size, "%.*s", (int)(end - p), p);
    }
    *port = tls ? 443 : 80;
    if (*end == ':') {
        char *after = NULL;
        long v = strtol(end + 1, &after, 10);
        if (after == end + 1 || v < 1 || v > 65535 || (*after && !strchr("/?#", *after)))
            return false;
        *port = (unsigned)v;
    } else if (*end && !strchr("/?#", *end)) {
        return false;
    }
    return true;
}

static void addr_text(const addr16 *a, char *out, size_t size)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a->b, mapped, 12) == 0)
        inet_ntop(AF_INET, a->b + 12, out, (socklen_t)size);
    else
        inet_ntop(AF_INET6, a->b, out, (socklen_t)size);
}

bool llmr_node_url_check(const char *url, const char *remote, const char *allow, char *pin, size_t pin_size,
                         llmr_strbuf *why)
{
    char host[256];
    unsigned port = 0;
    pin[0] = 0;
    if (!url || !split_url(url, host, sizeof host, &port)) {
        llmr_strbuf_puts(why, "A node registers with its \"url\": http:// or https://, a host and an optional "
                              "port, no user name.");
        return false;
    }
    addr16 from;
    bool v4 = false, have_from = remote && parse_addr(remote, &from, &v4);
    addr16 literal;
    bool is_literal = parse_addr(host, &literal, &v4);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (!is_literal && getaddrinfo(host, NULL, &hints, &res) != 0) {
        llmr_strbuf_printf(why, "The node's URL host \"%s\" does not resolve on the router.", host);
        return false;
    }
    bool ok = false;
    addr16 chosen;
    for (struct addrinfo *ai = is_literal ? NULL : res; ai && !ok; ai = ai->ai_next) {
        addr16 a;
        if (ai->ai_family == AF_INET)
            from_v4(&((struct sockaddr_in *)ai->ai_addr)->sin_addr, &a);
        else if (ai->ai_family == AF_INET6)
            memcpy(a.b, ((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr.s6_addr, 16);
        else
            continue;
        ok = (have_from && memcmp(a.b, from.b, 16) == 0) || allowed(allow, &a);
        chosen = a;
    }
    if (is_literal) {
        ok = (have_from && memcmp(literal.b, from.b, 16) == 0) || allowed(allow, &literal);
        chosen = literal;
    }
    if (res)
        freeaddrinfo(res);
    if (!ok) {
        llmr_strbuf_printf(why, "The node's URL host \"%s\" is not the address this registration came from "
                                "(%s); the router sends requests only to the machine that registered (an "
                                "operator allows other networks with --node-url-allow).",
                           host, remote ? remote : "unknown");
        return false;
    }
    if (!is_literal) {
        char text[64];
        addr_text(&chosen, text, sizeof text);
        bool six = strchr(text, ':') != NULL;
        snprintf(pin, pin_size, "%s:%u:%s%s%s", host, port, six ? "[" : "", text, six ? "]" : "");
    }
    return true;
}

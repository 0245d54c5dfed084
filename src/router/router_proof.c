/* Proofs that a node holds a model's files (docs/node-router-protocol.md, "Proofs"):
 * with each heartbeat the router checks the node's answers to its challenges, and for
 * each model the node reports ready but has not proven, sends a challenge: a nonce
 * and a byte range (at most 4 KiB) of one of the manifest's files, chosen at random.
 * The node answers the SHA-256 of the nonce (its hex text) and those bytes; the
 * router computes the same from its own copy.  A model the router has no copy of (a
 * Hub model), or whose file it cannot read any more, is taken as proven (logged). */
#include "router/router_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs_util.h"
#include "common/log.h"
#include "common/random.h"
#include "common/sha256.h"

#define COMPONENT "router"
#define PROOF_BYTES 4096u

static void hex(const unsigned char *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

/* A random number below n (n > 0). */
static uint64_t below(uint64_t n)
{
    uint64_t v = 0;
    llmr_random_bytes((unsigned char *)&v, sizeof v);
    return v % n;
}

/* The challenge for a model, or NULL (proven without one, or nothing to do). */
static json_t *challenge(llmr_router *r, const char *id, const char *model)
{
    llmr_store_model m = {0};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *out = NULL;
    if (llmr_store_model_get(r->store, model, &m, &err) != LLMR_OK)
        goto done; /* not a model of this router: never routed anyway */
    if (strcmp(m.source_kind, "local") != 0) {
        llmr_node_registry_prove(r->nodes, id, model); /* no copy here to check against */
        goto done;
    }
    json_t *files = json_object_get(m.manifest, "files"), *f;
    size_t i, n = 0;
    json_array_foreach(files, i, f)
        n += json_integer_value(json_object_get(f, "size")) > 0 && json_is_true(json_object_get(f, "required"));
    if (!n) {
        llmr_node_registry_prove(r->nodes, id, model);
        goto done;
    }
    size_t pick = (size_t)below(n), k = 0;
    const json_t *file = NULL;
    json_array_foreach(files, i, f)
    {
        if (json_integer_value(json_object_get(f, "size")) > 0 && json_is_true(json_object_get(f, "required")) &&
            k++ == pick)
            file = f;
    }
    const char *path = json_string_value(json_object_get(file, "path"));
    uint64_t size = (uint64_t)json_integer_value(json_object_get(file, "size"));
    uint64_t offset = below(size), length = size - offset < PROOF_BYTES ? size - offset : PROOF_BYTES;
    unsigned char bytes[PROOF_BYTES], rnd[16];
    char nonce[33], expected[65];
    char *full = path ? llmr_path_join(m.source, path) : NULL;
    int fd = full ? open(full, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t got = fd >= 0 ? pread(fd, bytes, (size_t)length, (off_t)offset) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    free(full);
    if (got != (ssize_t)length || !llmr_random_bytes(rnd, sizeof rnd)) {
        llmr_log_warn(COMPONENT, "model %s: cannot read %s here to check node %s holds it (%s); taken as proven",
                      model, path ? path : "?", id, got < 0 ? strerror(e) : "short read");
        llmr_node_registry_prove(r->nodes, id, model);
        goto done;
    }
    hex(rnd, sizeof rnd, nonce);
    llmr_sha256 c;
    uint8_t digest[32];
    llmr_sha256_init(&c);
    llmr_sha256_update(&c, nonce, strlen(nonce));
    llmr_sha256_update(&c, bytes, (size_t)length);
    llmr_sha256_final(&c, digest);
    llmr_sha256_hex(digest, expected);
    llmr_node_registry_challenge(r->nodes, id, model, nonce, expected);
    out = json_pack("{s:s, s:s, s:s, s:I, s:I}", "model", model, "nonce", nonce, "file", path, "offset",
                    (json_int_t)offset, "length", (json_int_t)length);
done:
    llmr_store_model_free(&m);
    llmr_strbuf_free(&err);
    return out;
}

json_t *router_node_proofs(llmr_router *r, const char *id, const json_t *heartbeat)
{
    size_t i;
    json_t *p, *out = json_array(), *answered = json_object();
    json_array_foreach(json_object_get(heartbeat, "proofs"), i, p)
    {
        const char *model = json_string_value(json_object_get(p, "model"));
        const char *nonce = json_string_value(json_object_get(p, "nonce"));
        const char *sha = json_string_value(json_object_get(p, "sha256"));
        if (!model || !nonce || !sha)
            continue;
        json_object_set_new(answered, model, json_true());
        if (llmr_node_registry_answer(r->nodes, id, model, nonce, sha))
            llmr_log_info(COMPONENT, "node %s proved it holds model %s", id, model);
        else
            llmr_log_warn(COMPONENT, "node %s failed the proof for model %s: it is not routed there", id, model);
    }
    json_array_foreach(json_object_get(heartbeat, "models"), i, p)
    {
        const char *model = json_string_value(json_object_get(p, "name"));
        if (model && !json_object_get(answered, model)) /* a challenge it left unanswered */
            llmr_node_registry_drop_challenge(r->nodes, id, model);
        if (model && llmr_node_registry_needs_challenge(r->nodes, id, model)) {
            json_t *c = challenge(r, id, model);
            if (c)
                json_array_append_new(out, c);
        }
    }
    json_decref(answered);
    return out;
}

/* The router's node registry: registration, heartbeats, offline after the timeout,
 * drain, and the choice of a node (ready there, reachable, fewest outstanding, then
 * lowest TTFT). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "router/node_registry.h"

static json_t *beat(const char *model, const char *state)
{
    return json_pack("{s:i, s:[{s:s, s:s}]}", "in_flight", 0, "models", "name", model, "state", state);
}

/* Registers url for owner (NULL: no keys); the id into id; the result returned. */
static llmr_node_add_result reg_as(llmr_node_registry *r, const char *owner, const char *url, uint64_t now, char *id,
                                   char *secret)
{
    json_t *body = json_pack("{s:s, s:s}", "name", url, "url", url);
    llmr_node_added added;
    llmr_node_add_result res = llmr_node_registry_add(r, body, owner, NULL, now, &added);
    json_decref(body);
    snprintf(id, 32, "%s", added.id);
    llmr_node_registry_prove(r, added.id, "m"); /* proofs: their own test below */
    if (secret)
        snprintf(secret, LLMR_NODE_SECRET_HEX + 1, "%s", added.secret);
    return res;
}

static void reg(llmr_node_registry *r, const char *url, uint64_t now, char *id)
{
    reg_as(r, NULL, url, now, id, NULL);
}

TEST(registration_and_heartbeats)
{
    llmr_node_registry *r = llmr_node_registry_new(1000);
    char a[32], b[32];
    reg(r, "http://a", 0, a);
    reg(r, "http://b", 0, b);
    CHECK(strcmp(a, b) != 0);
    CHECK(!llmr_node_registry_heartbeat(r, "n-999", NULL, NULL, 10)); /* unknown: register again */
    json_t *hb = beat("m", "ready");
    CHECK(llmr_node_registry_heartbeat(r, a, NULL, hb, 10));
    json_decref(hb);
    CHECK(llmr_node_registry_model_ready(r, "m", 10));
    CHECK(!llmr_node_registry_model_ready(r, "other", 10));
    CHECK(!llmr_node_registry_model_ready(r, "m", 2000)); /* offline after 1 s */
    json_t *states = llmr_node_registry_model_states(r, "m", 10);
    CHECK_EQ_INT(json_array_size(states), 2);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(states, 0), "state")), "ready");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(states, 1), "state")), "absent");
    json_decref(states);
    /* the same URL registering again replaces its entry */
    char a2[32];
    reg(r, "http://a", 20, a2);
    json_t *list = llmr_node_registry_list(r, 20);
    CHECK_EQ_INT(json_array_size(list), 2);
    json_decref(list);
    CHECK(!llmr_node_registry_heartbeat(r, a, NULL, NULL, 30));
    CHECK(llmr_node_registry_remove(r, b));
    CHECK(!llmr_node_registry_remove(r, b));
    llmr_node_registry_free(r);
}

TEST(pick_prefers_ready_idle_fast_nodes)
{
    llmr_node_registry *r = llmr_node_registry_new(60000);
    char a[32], b[32], c[32];
    llmr_node_target t;
    reg(r, "http://a", 0, a);
    reg(r, "http://b", 0, b);
    reg(r, "http://c", 0, c);
    json_t *ready = beat("m", "ready"), *syncing = beat("m", "syncing");
    llmr_node_registry_heartbeat(r, a, NULL, ready, 1);
    llmr_node_registry_heartbeat(r, b, NULL, ready, 1);
    llmr_node_registry_heartbeat(r, c, NULL, syncing, 1);
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, &t));
    CHECK(strcmp(t.id, c) != 0); /* not where the model is still syncing */
    char first[32];
    strcpy(first, t.id);
    /* one outstanding on the first: the next goes to the other */
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, &t));
    CHECK(strcmp(t.id, first) != 0);
    llmr_node_registry_done(r, a, 50);
    llmr_node_registry_done(r, b, 5);
    /* equal load: the lower TTFT wins */
    CHECK(llmr_node_registry_pick(r, "m", 3, NULL, 0, &t));
    CHECK_EQ_STR(t.id, b);
    CHECK_EQ_STR(t.url, "http://b");
    llmr_node_registry_done(r, b, -1);
    /* excluded (tried already) and drained nodes are skipped */
    const char *ex[] = {b};
    CHECK(llmr_node_registry_pick(r, "m", 3, ex, 1, &t));
    CHECK_EQ_STR(t.id, a);
    llmr_node_registry_done(r, a, -1);
    CHECK(llmr_node_registry_drain(r, a, true));
    CHECK(!llmr_node_registry_pick(r, "m", 3, ex, 1, &t));
    CHECK(!llmr_node_registry_pick(r, "nope", 3, NULL, 0, &t));
    json_decref(ready);
    json_decref(syncing);
    llmr_node_registry_free(r);
}

TEST(unreachable_node_picked_only_without_another_for_a_while)
{
    llmr_node_registry *r = llmr_node_registry_new(60000);
    char a[32], b[32];
    llmr_node_target t;
    reg(r, "http://a", 0, a);
    reg(r, "http://b", 0, b);
    json_t *ready = beat("m", "ready");
    llmr_node_registry_heartbeat(r, a, NULL, ready, 1);
    llmr_node_registry_heartbeat(r, b, NULL, ready, 1);
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, &t)); /* one on each */
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, &t));
    llmr_node_registry_done(r, a, -1);
    llmr_node_registry_mark_unreachable(r, a, 10);
    /* a has fewer outstanding, but it could not be reached: b, while the mark lasts */
    CHECK(llmr_node_registry_pick(r, "m", 20, NULL, 0, &t));
    CHECK_EQ_STR(t.id, b);
    /* with no other choice, the marked node is still tried */
    const char *ex[] = {b};
    CHECK(llmr_node_registry_pick(r, "m", 20, ex, 1, &t));
    CHECK_EQ_STR(t.id, a);
    llmr_node_registry_done(r, a, -1);
    /* b (2 outstanding) at its limit: the request waits for b rather than try a */
    llmr_node_registry_set_max_outstanding(r, 3);
    CHECK(llmr_node_registry_pick(r, "m", 20, NULL, 0, &t));
    CHECK_EQ_STR(t.id, b);
    CHECK(!llmr_node_registry_pick(r, "m", 20, NULL, 0, &t));
    const char *tried_a[] = {a}, *tried_both[] = {a, b};
    CHECK(llmr_node_registry_model_ready_except(r, "m", 20, tried_a, 1)); /* b, later */
    CHECK(!llmr_node_registry_model_ready_except(r, "m", 20, tried_both, 2));
    llmr_node_registry_done(r, b, -1);
    llmr_node_registry_set_max_outstanding(r, 0);
    /* after the mark, a is the idlest again */
    CHECK(llmr_node_registry_pick(r, "m", 10 + LLMR_NODE_UNREACHABLE_MS + 1, NULL, 0, &t));
    CHECK_EQ_STR(t.id, a);
    json_decref(ready);
    llmr_node_registry_free(r);
}

/* Ids are random ("n-" and 16 hex digits), not a count: one node's id tells nothing
 * of another's.  Each registration gets its own secret, which pick hands out. */
TEST(random_ids_and_secrets)
{
    llmr_node_registry *r = llmr_node_registry_new(60000);
    char a[32], b[32], sa[LLMR_NODE_SECRET_HEX + 1], sb[LLMR_NODE_SECRET_HEX + 1];
    CHECK(reg_as(r, NULL, "http://a", 0, a, sa) == LLMR_NODE_ADDED);
    CHECK(reg_as(r, NULL, "http://b", 0, b, sb) == LLMR_NODE_ADDED);
    CHECK_EQ_INT(strlen(a), 18);
    CHECK(strncmp(a, "n-", 2) == 0 && strspn(a + 2, "0123456789abcdef") == 16);
    CHECK(strcmp(a, "n-1") != 0 && strcmp(b, "n-2") != 0);
    CHECK_EQ_INT(strlen(sa), LLMR_NODE_SECRET_HEX);
    CHECK(strcmp(sa, sb) != 0);
    json_t *ready = beat("m", "ready");
    llmr_node_registry_heartbeat(r, a, NULL, ready, 1);
    llmr_node_target t;
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, &t));
    CHECK_EQ_STR(t.id, a);
    CHECK_EQ_STR(t.secret, sa);
    json_decref(ready);
    llmr_node_registry_free(r);
}

/* Only the key that registered a node sends its heartbeats: another key's changes
 * nothing (not its models, not its last-seen time). */
TEST(heartbeats_only_from_the_owner)
{
    llmr_node_registry *r = llmr_node_registry_new(1000);
    char a[32], b[32];
    CHECK(reg_as(r, "key-a", "http://a", 0, a, NULL) == LLMR_NODE_ADDED);
    CHECK(reg_as(r, "key-b", "http://b", 0, b, NULL) == LLMR_NODE_ADDED);
    json_t *ready = beat("m", "ready"), *failed = beat("m", "failed");
    CHECK(llmr_node_registry_heartbeat(r, a, "key-a", ready, 10));
    CHECK(llmr_node_registry_model_ready(r, "m", 10));
    CHECK(!llmr_node_registry_heartbeat(r, a, "key-b", failed, 20)); /* spoofed */
    CHECK(!llmr_node_registry_heartbeat(r, a, NULL, failed, 20));
    CHECK(llmr_node_registry_model_ready(r, "m", 20));
    /* nor does a spoofed heartbeat keep the node online */
    CHECK(!llmr_node_registry_heartbeat(r, a, "key-b", ready, 900));
    CHECK(!llmr_node_registry_model_ready(r, "m", 1011));
    json_decref(ready);
    json_decref(failed);
    llmr_node_registry_free(r);
}

/* A key holds one node: a second registration at another URL is refused while the
 * first is online, and replaces it once offline or at the same URL.  Another key's
 * online node keeps its URL. */
TEST(one_node_per_key)
{
    llmr_node_registry *r = llmr_node_registry_new(1000);
    char a[32], a2[32], x[32];
    CHECK(reg_as(r, "key-a", "http://a", 0, a, NULL) == LLMR_NODE_ADDED);
    CHECK(reg_as(r, "key-a", "http://evil", 10, x, NULL) == LLMR_NODE_KEY_IN_USE);
    CHECK(reg_as(r, "key-b", "http://a", 10, x, NULL) == LLMR_NODE_URL_IN_USE);
    json_t *list = llmr_node_registry_list(r, 10);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_decref(list);
    CHECK(reg_as(r, "key-a", "http://a", 20, a2, NULL) == LLMR_NODE_ADDED); /* it restarted */
    CHECK(strcmp(a, a2) != 0);
    CHECK(!llmr_node_registry_heartbeat(r, a, "key-a", NULL, 30)); /* the old id is gone */
    CHECK(reg_as(r, "key-a", "http://a-moved", 2000, x, NULL) == LLMR_NODE_ADDED); /* offline: replaced */
    list = llmr_node_registry_list(r, 2000);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_decref(list);
    llmr_node_registry_free(r);
}

/* A key registers at most LLMR_NODE_REGISTRATIONS_PER_MIN times a minute. */
TEST(registrations_are_rate_limited)
{
    llmr_node_registry *r = llmr_node_registry_new(1000);
    char id[32];
    for (unsigned i = 0; i < LLMR_NODE_REGISTRATIONS_PER_MIN; i++)
        CHECK(reg_as(r, "key-a", "http://a", i, id, NULL) == LLMR_NODE_ADDED);
    CHECK(reg_as(r, "key-a", "http://a", 100, id, NULL) == LLMR_NODE_TOO_FAST);
    CHECK(reg_as(r, "key-b", "http://b", 100, id, NULL) == LLMR_NODE_ADDED); /* another key */
    CHECK(reg_as(r, "key-a", "http://a", 60001, id, NULL) == LLMR_NODE_ADDED); /* a minute on */
    llmr_node_registry_free(r);
}

/* A silent node is removed after the expiry; none expires without one set. */
TEST(silent_nodes_expire)
{
    llmr_node_registry *r = llmr_node_registry_new(1000);
    char a[32], b[32], ids[4][32];
    reg(r, "http://a", 0, a);
    reg(r, "http://b", 0, b);
    CHECK_EQ_INT(llmr_node_registry_expire(r, 100000, ids, 4), 0);
    llmr_node_registry_set_expire(r, 5000);
    json_t *hb = beat("m", "ready");
    CHECK(llmr_node_registry_heartbeat(r, b, NULL, hb, 4000));
    json_decref(hb);
    CHECK_EQ_INT(llmr_node_registry_expire(r, 5000, ids, 4), 0);
    CHECK_EQ_INT(llmr_node_registry_expire(r, 5001, ids, 4), 1);
    CHECK_EQ_STR(ids[0], a);
    CHECK(!llmr_node_registry_heartbeat(r, a, NULL, NULL, 5002)); /* it registers again */
    json_t *list = llmr_node_registry_list(r, 5002);
    CHECK_EQ_INT(json_array_size(list), 1);
    json_decref(list);
    llmr_node_registry_free(r);
}

/* A model reported ready is routed only once proven: challenged, answered right. */
TEST(ready_only_once_proven)
{
    llmr_node_registry *r = llmr_node_registry_new(60000);
    json_t *body = json_pack("{s:s, s:s}", "name", "a", "url", "http://a");
    llmr_node_added a;
    CHECK(llmr_node_registry_add(r, body, NULL, NULL, 0, &a) == LLMR_NODE_ADDED);
    json_decref(body);
    CHECK(!llmr_node_registry_needs_challenge(r, a.id, "m")); /* not reported ready yet */
    json_t *ready = beat("m", "ready"), *syncing = beat("m", "syncing");
    llmr_node_registry_heartbeat(r, a.id, NULL, ready, 1);
    CHECK(!llmr_node_registry_model_ready(r, "m", 1));
    CHECK(llmr_node_registry_needs_challenge(r, a.id, "m"));
    json_t *states = llmr_node_registry_model_states(r, "m", 1);
    CHECK(json_is_false(json_object_get(json_array_get(states, 0), "proven")));
    json_decref(states);
    llmr_node_registry_challenge(r, a.id, "m", "nonce1", "abc");
    CHECK(!llmr_node_registry_needs_challenge(r, a.id, "m")); /* one outstanding */
    CHECK(!llmr_node_registry_answer(r, a.id, "m", "nonce0", "abc")); /* another nonce */
    CHECK(!llmr_node_registry_needs_challenge(r, a.id, "m"));
    CHECK(!llmr_node_registry_answer(r, a.id, "m", "nonce1", "abd")); /* wrong */
    CHECK(!llmr_node_registry_model_ready(r, "m", 2));
    CHECK(llmr_node_registry_needs_challenge(r, a.id, "m"));
    llmr_node_registry_challenge(r, a.id, "m", "nonce2", "abc");
    /* left unanswered: dropped, and a new one is due */
    llmr_node_registry_drop_challenge(r, a.id, "m");
    CHECK(llmr_node_registry_needs_challenge(r, a.id, "m"));
    CHECK(!llmr_node_registry_answer(r, a.id, "m", "nonce2", "abc")); /* no longer outstanding */
    llmr_node_registry_challenge(r, a.id, "m", "nonce2", "abc");
    CHECK(llmr_node_registry_answer(r, a.id, "m", "nonce2", "abc"));
    llmr_node_registry_drop_challenge(r, a.id, "m"); /* a proof made stays */
    CHECK(llmr_node_registry_model_ready(r, "m", 2));
    CHECK(llmr_node_registry_model_ready(r, "m", 2));
    states = llmr_node_registry_model_states(r, "m", 2);
    CHECK(json_is_true(json_object_get(json_array_get(states, 0), "proven")));
    json_decref(states);
    /* no longer ready there: proven again when it is */
    llmr_node_registry_heartbeat(r, a.id, NULL, syncing, 3);
    llmr_node_registry_heartbeat(r, a.id, NULL, ready, 4);
    CHECK(!llmr_node_registry_model_ready(r, "m", 4));
    llmr_node_registry_prove(r, a.id, "m");
    CHECK(llmr_node_registry_model_ready(r, "m", 4));
    /* the model deleted: its proofs go */
    llmr_node_registry_forget_model(r, "m");
    CHECK(!llmr_node_registry_model_ready(r, "m", 5));
    json_decref(ready);
    json_decref(syncing);
    llmr_node_registry_free(r);
}

int main(void)
{
    RUN(ready_only_once_proven);
    RUN(random_ids_and_secrets);
    RUN(heartbeats_only_from_the_owner);
    RUN(one_node_per_key);
    RUN(registrations_are_rate_limited);
    RUN(silent_nodes_expire);
    RUN(registration_and_heartbeats);
    RUN(pick_prefers_ready_idle_fast_nodes);
    RUN(unreachable_node_picked_only_without_another_for_a_while);
    return llmr_test_finish();
}

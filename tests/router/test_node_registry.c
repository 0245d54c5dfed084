/* The router's node registry: registration, heartbeats, offline after the timeout,
 * drain, and the choice of a node (ready there, reachable, fewest outstanding, then
 * lowest TTFT). */
#include <string.h>

#include "check.h"
#include "router/node_registry.h"

static json_t *beat(const char *model, const char *state)
{
    return json_pack("{s:i, s:[{s:s, s:s}]}", "in_flight", 0, "models", "name", model, "state", state);
}

static void reg(llmr_node_registry *r, const char *url, uint64_t now, char *id)
{
    json_t *body = json_pack("{s:s, s:s}", "name", url, "url", url);
    llmr_node_registry_add(r, body, now, id, 32);
    json_decref(body);
}

TEST(registration_and_heartbeats)
{
    llmr_node_registry *r = llmr_node_registry_new(1000);
    char a[32], b[32];
    reg(r, "http://a", 0, a);
    reg(r, "http://b", 0, b);
    CHECK(strcmp(a, b) != 0);
    CHECK(!llmr_node_registry_heartbeat(r, "n-999", NULL, 10)); /* unknown: register again */
    json_t *hb = beat("m", "ready");
    CHECK(llmr_node_registry_heartbeat(r, a, hb, 10));
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
    CHECK(!llmr_node_registry_heartbeat(r, a, NULL, 30));
    CHECK(llmr_node_registry_remove(r, b));
    CHECK(!llmr_node_registry_remove(r, b));
    llmr_node_registry_free(r);
}

TEST(pick_prefers_ready_idle_fast_nodes)
{
    llmr_node_registry *r = llmr_node_registry_new(60000);
    char a[32], b[32], c[32], id[32], url[64];
    reg(r, "http://a", 0, a);
    reg(r, "http://b", 0, b);
    reg(r, "http://c", 0, c);
    json_t *ready = beat("m", "ready"), *syncing = beat("m", "syncing");
    llmr_node_registry_heartbeat(r, a, ready, 1);
    llmr_node_registry_heartbeat(r, b, ready, 1);
    llmr_node_registry_heartbeat(r, c, syncing, 1);
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, id, sizeof id, url, sizeof url));
    CHECK(strcmp(id, c) != 0); /* not where the model is still syncing */
    char first[32];
    strcpy(first, id);
    /* one outstanding on the first: the next goes to the other */
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, id, sizeof id, url, sizeof url));
    CHECK(strcmp(id, first) != 0);
    llmr_node_registry_done(r, a, 50);
    llmr_node_registry_done(r, b, 5);
    /* equal load: the lower TTFT wins */
    CHECK(llmr_node_registry_pick(r, "m", 3, NULL, 0, id, sizeof id, url, sizeof url));
    CHECK_EQ_STR(id, b);
    CHECK_EQ_STR(url, "http://b");
    llmr_node_registry_done(r, b, -1);
    /* excluded (tried already) and drained nodes are skipped */
    const char *ex[] = {b};
    CHECK(llmr_node_registry_pick(r, "m", 3, ex, 1, id, sizeof id, url, sizeof url));
    CHECK_EQ_STR(id, a);
    llmr_node_registry_done(r, a, -1);
    CHECK(llmr_node_registry_drain(r, a, true));
    CHECK(!llmr_node_registry_pick(r, "m", 3, ex, 1, id, sizeof id, url, sizeof url));
    CHECK(!llmr_node_registry_pick(r, "nope", 3, NULL, 0, id, sizeof id, url, sizeof url));
    json_decref(ready);
    json_decref(syncing);
    llmr_node_registry_free(r);
}

TEST(unreachable_node_picked_only_without_another_for_a_while)
{
    llmr_node_registry *r = llmr_node_registry_new(60000);
    char a[32], b[32], id[32], url[64];
    reg(r, "http://a", 0, a);
    reg(r, "http://b", 0, b);
    json_t *ready = beat("m", "ready");
    llmr_node_registry_heartbeat(r, a, ready, 1);
    llmr_node_registry_heartbeat(r, b, ready, 1);
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, id, sizeof id, url, sizeof url)); /* one on each */
    CHECK(llmr_node_registry_pick(r, "m", 2, NULL, 0, id, sizeof id, url, sizeof url));
    llmr_node_registry_done(r, a, -1);
    llmr_node_registry_mark_unreachable(r, a, 10);
    /* a has fewer outstanding, but it could not be reached: b, while the mark lasts */
    CHECK(llmr_node_registry_pick(r, "m", 20, NULL, 0, id, sizeof id, url, sizeof url));
    CHECK_EQ_STR(id, b);
    /* with no other choice, the marked node is still tried */
    const char *ex[] = {b};
    CHECK(llmr_node_registry_pick(r, "m", 20, ex, 1, id, sizeof id, url, sizeof url));
    CHECK_EQ_STR(id, a);
    llmr_node_registry_done(r, a, -1);
    /* b (2 outstanding) at its limit: the request waits for b rather than try a */
    llmr_node_registry_set_max_outstanding(r, 3);
    CHECK(llmr_node_registry_pick(r, "m", 20, NULL, 0, id, sizeof id, url, sizeof url));
    CHECK_EQ_STR(id, b);
    CHECK(!llmr_node_registry_pick(r, "m", 20, NULL, 0, id, sizeof id, url, sizeof url));
    const char *tried_a[] = {a}, *tried_both[] = {a, b};
    CHECK(llmr_node_registry_model_ready_except(r, "m", 20, tried_a, 1)); /* b, later */
    CHECK(!llmr_node_registry_model_ready_except(r, "m", 20, tried_both, 2));
    llmr_node_registry_done(r, b, -1);
    llmr_node_registry_set_max_outstanding(r, 0);
    /* after the mark, a is the idlest again */
    CHECK(llmr_node_registry_pick(r, "m", 10 + LLMR_NODE_UNREACHABLE_MS + 1, NULL, 0, id, sizeof id, url,
                                  sizeof url));
    CHECK_EQ_STR(id, a);
    json_decref(ready);
    llmr_node_registry_free(r);
}

int main(void)
{
    RUN(registration_and_heartbeats);
    RUN(pick_prefers_ready_idle_fast_nodes);
    RUN(unreachable_node_picked_only_without_another_for_a_while);
    return llmr_test_finish();
}

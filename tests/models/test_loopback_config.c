/* The loopback model's config.json (models/loopback_config.h): the next_token mode by
 * default, the echo_last_user mode with its ids, and each bad field of the
 * llmr_loopback object a problem that names it. */
#include <jansson.h>
#include <stdlib.h>

#include "check.h"
#include "models/loopback_config.h"

static llmr_status parse(const char *text, llmr_loopback_config *c, llmr_problems *p)
{
    json_t *root = json_loads(text, 0, NULL);
    CHECK(root != NULL);
    llmr_problems_init(p);
    llmr_status st = llmr_loopback_config_parse(root, "config.json", c, p);
    json_decref(root);
    return st;
}

#define ECHO_OK                                                                            \
    "\"mode\": \"echo_last_user\", \"user_header\": [7, 8, 9], \"end_id\": 10, "          \
    "\"return_id\": 11, \"turn_end_ids\": [11, 12, 10]"

TEST(next_token_is_the_default_mode)
{
    llmr_loopback_config c;
    llmr_problems p;
    CHECK_EQ_INT(parse("{\"vocab_size\": 512}", &c, &p), LLMR_OK);
    CHECK_EQ_INT(c.mode, LLMR_LOOPBACK_NEXT_TOKEN);
    llmr_problems_free(&p);
    CHECK_EQ_INT(parse("{\"vocab_size\": 512, \"llmr_loopback\": {\"mode\": \"next_token\"}}", &c, &p),
                 LLMR_OK);
    CHECK_EQ_INT(c.mode, LLMR_LOOPBACK_NEXT_TOKEN);
    json_t *j = llmr_loopback_config_to_json(&c);
    CHECK(json_object_get(j, "mode") == NULL);
    json_decref(j);
    llmr_problems_free(&p);
}

TEST(the_echo_mode_reads_its_ids_and_writes_them_flat)
{
    llmr_loopback_config c;
    llmr_problems p;
    CHECK_EQ_INT(parse("{\"vocab_size\": 512, \"llmr_loopback\": {" ECHO_OK "}}", &c, &p), LLMR_OK);
    CHECK_EQ_INT(c.mode, LLMR_LOOPBACK_ECHO_LAST_USER);
    CHECK_EQ_INT(c.echo.user_header_len, 3);
    CHECK_EQ_INT(c.echo.user_header[2], 9);
    CHECK_EQ_INT(c.echo.end_id, 10);
    CHECK_EQ_INT(c.echo.return_id, 11);
    CHECK_EQ_INT(c.echo.turn_end_len, 3);
    json_t *j = llmr_loopback_config_to_json(&c);
    char *text = json_dumps(j, JSON_COMPACT);
    CHECK_CONTAINS(text, "\"mode\":\"echo_last_user\"");
    CHECK_CONTAINS(text, "\"echo_user_header\":[7,8,9]");
    CHECK_CONTAINS(text, "\"echo_end_id\":10");
    CHECK_CONTAINS(text, "\"echo_return_id\":11");
    CHECK_CONTAINS(text, "\"echo_turn_end_ids\":[11,12,10]");
    free(text);
    json_decref(j);
    llmr_problems_free(&p);
}

/* Each bad config: MODEL_CORRUPT with a problem naming `field`. */
static void bad(const char *section, const char *field)
{
    char text[512];
    snprintf(text, sizeof text, "{\"vocab_size\": 512, \"llmr_loopback\": %s}", section);
    llmr_loopback_config c;
    llmr_problems p;
    CHECK_EQ_INT(parse(text, &c, &p), LLMR_MODEL_CORRUPT);
    if (!llmr_problems_mention(&p, field))
        llmr_test_fail(__FILE__, __LINE__, "no problem names %s for %s", field, section);
    llmr_problems_free(&p);
}

TEST(bad_fields_are_named)
{
    bad("{\"mode\": \"echo\"}", "llmr_loopback.mode");
    bad("{\"mode\": 3}", "llmr_loopback.mode");
    bad("[1]", "llmr_loopback");
    bad("{\"mode\": \"echo_last_user\", \"end_id\": 10, \"return_id\": 11, \"turn_end_ids\": [11]}",
        "llmr_loopback.user_header");
    bad("{\"mode\": \"echo_last_user\", \"user_header\": [], \"end_id\": 10, \"return_id\": 11, "
        "\"turn_end_ids\": [11]}",
        "llmr_loopback.user_header");
    bad("{\"mode\": \"echo_last_user\", \"user_header\": [1, 512], \"end_id\": 10, "
        "\"return_id\": 11, \"turn_end_ids\": [11]}",
        "llmr_loopback.user_header");
    bad("{\"mode\": \"echo_last_user\", \"user_header\": [1], \"end_id\": 600, \"return_id\": 11, "
        "\"turn_end_ids\": [11]}",
        "llmr_loopback.end_id");
    bad("{\"mode\": \"echo_last_user\", \"user_header\": [1], \"end_id\": 10, \"turn_end_ids\": [11]}",
        "llmr_loopback.return_id");
    bad("{\"mode\": \"echo_last_user\", \"user_header\": [1], \"end_id\": 10, \"return_id\": 11, "
        "\"turn_end_ids\": [1,2,3,4,5,6,7,8,9]}",
        "llmr_loopback.turn_end_ids");
}

int main(void)
{
    RUN(next_token_is_the_default_mode);
    RUN(the_echo_mode_reads_its_ids_and_writes_them_flat);
    RUN(bad_fields_are_named);
    return llmr_test_finish();
}

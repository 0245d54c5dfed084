/* Tests of the configuration: flags beat the environment, which beats defaults;
 * bad values are refused with the flag or variable named; argv is left with the
 * subcommand's own arguments. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/config.h"

static void clear_env(void)
{
    unsetenv("LLMR_HOST");
    unsetenv("LLMR_PORT");
    unsetenv("LLMR_DATA_DIR");
    unsetenv("LLMR_LOG_LEVEL");
}

TEST(defaults_apply_when_nothing_is_set)
{
    clear_env();
    setenv("HOME", "/home/someone", 1);
    unsetenv("XDG_DATA_HOME");
    char *argv[] = {"llmr", "inspect", "dir", NULL};
    int argc = 3;
    llmr_config c;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_config_load(&c, &argc, argv, &err), LLMR_OK);
    CHECK_EQ_STR(llmr_config_get(&c, LLMR_CONFIG_HOST), "127.0.0.1");
    CHECK_EQ_INT(llmr_config_port(&c), 8080);
    CHECK_EQ_STR(llmr_config_get(&c, LLMR_CONFIG_DATA_DIR), "/home/someone/.local/share/llmr");
    CHECK_EQ_INT(c.source[LLMR_CONFIG_PORT], LLMR_CONFIG_FROM_DEFAULT);
    CHECK_EQ_INT(argc, 3);
    llmr_config_free(&c);
    llmr_strbuf_free(&err);
}

TEST(flag_beats_env_beats_default)
{
    clear_env();
    setenv("LLMR_PORT", "9000", 1);
    setenv("LLMR_HOST", "0.0.0.0", 1);
    char *argv[] = {"llmr", "serve", "--port", "9100", "extra", "--data-dir=/srv/llmr", NULL};
    int argc = 6;
    llmr_config c;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_config_load(&c, &argc, argv, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_config_port(&c), 9100);
    CHECK_EQ_INT(c.source[LLMR_CONFIG_PORT], LLMR_CONFIG_FROM_FLAG);
    CHECK_EQ_STR(llmr_config_get(&c, LLMR_CONFIG_HOST), "0.0.0.0");
    CHECK_EQ_INT(c.source[LLMR_CONFIG_HOST], LLMR_CONFIG_FROM_ENV);
    CHECK_EQ_STR(llmr_config_get(&c, LLMR_CONFIG_DATA_DIR), "/srv/llmr");
    /* Only the subcommand's own words are left, in order. */
    CHECK_EQ_INT(argc, 3);
    CHECK_EQ_STR(argv[1], "serve");
    CHECK_EQ_STR(argv[2], "extra");
    CHECK(argv[3] == NULL);
    json_t *j = llmr_config_to_json(&c);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(j, "port"), "source")), "flag");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(j, "data_dir"), "env")),
                 "LLMR_DATA_DIR");
    json_decref(j);
    llmr_config_free(&c);
    llmr_strbuf_free(&err);
    clear_env();
}

TEST(bad_values_name_their_source)
{
    clear_env();
    llmr_config c;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    setenv("LLMR_PORT", "80a", 1);
    char *argv1[] = {"llmr", "serve", NULL};
    int argc = 2;
    CHECK_EQ_INT(llmr_config_load(&c, &argc, argv1, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "LLMR_PORT=80a");
    unsetenv("LLMR_PORT");

    llmr_strbuf_reset(&err);
    char *argv2[] = {"llmr", "serve", "--port", "70000", NULL};
    argc = 4;
    CHECK_EQ_INT(llmr_config_load(&c, &argc, argv2, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "--port 70000");

    llmr_strbuf_reset(&err);
    char *argv3[] = {"llmr", "serve", "--log-level", NULL};
    argc = 3;
    CHECK_EQ_INT(llmr_config_load(&c, &argc, argv3, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "needs a value");

    llmr_strbuf_reset(&err);
    char *argv4[] = {"llmr", "serve", "--log-level=chatty", NULL};
    argc = 3;
    CHECK_EQ_INT(llmr_config_load(&c, &argc, argv4, &err), LLMR_INVALID_ARGUMENT);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "debug, info, warn, error, off");
    llmr_strbuf_free(&err);
}

TEST(flags_after_double_dash_are_left_alone)
{
    clear_env();
    char *argv[] = {"llmr", "x", "--", "--port", "1", NULL};
    int argc = 5;
    llmr_config c;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_config_load(&c, &argc, argv, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_config_port(&c), 8080);
    CHECK_EQ_INT(argc, 5);
    CHECK_EQ_STR(argv[3], "--port");
    llmr_config_free(&c);
    llmr_strbuf_free(&err);
}

int main(void)
{
    RUN(defaults_apply_when_nothing_is_set);
    RUN(flag_beats_env_beats_default);
    RUN(bad_values_name_their_source);
    RUN(flags_after_double_dash_are_left_alone);
    return llmr_test_finish();
}

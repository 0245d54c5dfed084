/* Test harness: see check.h. */
#include "check.h"

#include <stdarg.h>
#include <stdlib.h>

static int failures;
static int failed_tests;
static int tests_run;
static bool current_failed;
static const char *skip_reason;

void llmr_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: FAILED ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
    current_failed = true;
}

void llmr_test_run(const char *name, void (*fn)(void))
{
    current_failed = false;
    tests_run++;
    fn();
    if (current_failed)
        failed_tests++;
    fprintf(stderr, "%s %s\n", current_failed ? "FAIL" : "ok  ", name);
}

void llmr_test_skip(const char *why)
{
    skip_reason = why;
}

int llmr_test_finish(void)
{
    if (failures) {
        fprintf(stderr, "%d of %d tests failed (%d failed checks)\n", failed_tests, tests_run,
                failures);
        return 1;
    }
    if (skip_reason) {
        fprintf(stderr, "SKIPPED: %s\n", skip_reason);
        return 77;
    }
    fprintf(stderr, "all %d tests passed\n", tests_run);
    return 0;
}

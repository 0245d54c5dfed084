/* The test harness: checks that record failures and go on, and a runner.
 *
 *   TEST(parses_header) { CHECK_EQ_INT(f(), 3); }
 *   int main(void) { RUN(parses_header); return llmr_test_finish(); }
 *
 * A failed check prints file:line and the values and marks the test failed; the
 * process exits 1 when any check failed, 77 (ctest's skip) when llmr_test_skip was
 * called and nothing failed, else 0. */
#ifndef LLMR_TESTS_CHECK_H
#define LLMR_TESTS_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void llmr_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void llmr_test_run(const char *name, void (*fn)(void));
/* Marks the binary skipped (exit 77) with a reason, when nothing failed. */
void llmr_test_skip(const char *why);
int llmr_test_finish(void);

#define TEST(name) static void name(void)
#define RUN(name) llmr_test_run(#name, name)

#define CHECK(cond)                                                  \
    do {                                                             \
        if (!(cond))                                                 \
            llmr_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);  \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                    \
    do {                                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                                   \
        if (a_ != b_)                                                                         \
            llmr_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_);     \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                    \
    do {                                                                                      \
        const char *a_ = (a), *b_ = (b);                                                      \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                \
            llmr_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,          \
                           a_ ? a_ : "(null)", b_ ? b_ : "(null)");                           \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                                           \
    do {                                                                                      \
        const char *h_ = (hay), *n_ = (needle);                                               \
        if (!h_ || !strstr(h_, n_))                                                           \
            llmr_test_fail(__FILE__, __LINE__, "%s contains \"%s\": got \"%s\"", #hay, n_,    \
                           h_ ? h_ : "(null)");                                               \
    } while (0)

#endif

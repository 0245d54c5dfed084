/* A list of problems found while checking something (a model directory, a request):
 * each names the file it is about, a status code, and a message for a person.
 *
 * Validation collects every problem instead of stopping at the first, so an operator
 * fixes a broken model in one pass.  The list owns its strings.  It keeps at most
 * LLMR_PROBLEMS_MAX entries; past that it counts what it dropped, so a hostile file
 * with a million bad tensors costs bounded memory and output. */
#ifndef LLMR_COMMON_PROBLEMS_H
#define LLMR_COMMON_PROBLEMS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "llmr/status.h"

#define LLMR_PROBLEMS_MAX 200

typedef struct llmr_problem {
    llmr_status code;
    char *file;    /* the file it is about, relative to the checked directory; may be NULL */
    char *message; /* printable text: names from outside are escaped for display */
} llmr_problem;

typedef struct llmr_problems {
    llmr_problem *items;
    size_t count;
    size_t cap;
    size_t dropped;           /* problems not kept because the list was full */
    llmr_status dropped_code; /* the code of the first dropped one */
} llmr_problems;

void llmr_problems_init(llmr_problems *p);
void llmr_problems_free(llmr_problems *p);

/* Adds a problem.  `file` is copied as is (callers pass names they trust or have
 * escaped); the message is formatted.  Allocation failure keeps what fits. */
void llmr_problems_add(llmr_problems *p, llmr_status code, const char *file,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void llmr_problems_vadd(llmr_problems *p, llmr_status code, const char *file,
                        const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

/* Total problems seen, dropped ones included. */
size_t llmr_problems_total(const llmr_problems *p);
/* The code of the first problem, LLMR_OK when there is none. */
llmr_status llmr_problems_first_code(const llmr_problems *p);
/* The code of the first problem added after the list's total was `mark`
 * (llmr_problems_total before a step), LLMR_OK when none was. */
llmr_status llmr_problems_code_since(const llmr_problems *p, size_t mark);
/* True when any kept problem mentions `needle` in its file or message (tests). */
bool llmr_problems_mention(const llmr_problems *p, const char *needle);

#endif

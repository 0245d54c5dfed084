/* Chat templates: a Jinja2 renderer that matches Hugging Face's rendering byte for byte.
 *
 * The environment is the one transformers sets up: ImmutableSandboxedEnvironment with
 * trim_blocks and lstrip_blocks on, the loop controls (break/continue), a
 * {% generation %} block that renders its body, the filter tojson (Python's
 * json.dumps with ensure_ascii=False by default), and the globals raise_exception(msg)
 * and strftime_now(fmt).  Undefined names behave like jinja2's default Undefined
 * (empty when printed, false when tested, an error when used otherwise).  Lists and
 * dicts cannot be changed through their methods (the sandbox).
 *
 * Compile once, render many: a compiled template is immutable and may be rendered
 * from several threads at once.  Every render runs under limits (nesting depth, loop
 * iterations, output size); going past one is an error that names it.
 *
 * Errors are written into a caller's buffer as "line L, column C: what went wrong"
 * (raise_exception's message is passed through as "raise_exception: MESSAGE"). */
#ifndef LLMR_TEMPLATE_TEMPLATE_H
#define LLMR_TEMPLATE_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/strbuf.h"

typedef struct llmr_template llmr_template;

typedef struct llmr_template_limits {
    uint32_t max_depth;        /* nested calls, includes of macros, expression depth */
    uint64_t max_iterations;   /* loop iterations of one render, all loops together */
    size_t max_output;         /* bytes of output */
} llmr_template_limits;

typedef struct llmr_template_options {
    llmr_template_limits limits;
    /* strftime_now's clock: when not NULL, this broken-down time is "now" (tests);
     * otherwise the local time at the call. */
    const struct tm *fixed_now;
} llmr_template_options;

/* Defaults: depth 256, 10 million iterations, 64 MiB of output, the real clock. */
llmr_template_options llmr_template_default_options(void);

/* Compiles template source (any bytes; invalid UTF-8 is an error).  Returns NULL and
 * writes the error (with line and column) into err when the source does not parse. */
llmr_template *llmr_template_compile(const char *src, size_t len, char *err, size_t err_size);
void llmr_template_free(llmr_template *t);

/* Renders with context (a JSON object: its members are the template's variables).
 * Appends the render to out; on error returns false, writes the error into err and
 * leaves out as it was before the call.  opt may be NULL (the defaults). */
bool llmr_template_render(const llmr_template *t, const json_t *context,
                          const llmr_template_options *opt, llmr_strbuf *out, char *err,
                          size_t err_size);

/* The template for models that ship none: ChatML-like, as transformers' old default
 * ("<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then "<|im_start|>assistant\n"
 * when add_generation_prompt). */
const char *llmr_template_default_source(void);

#endif

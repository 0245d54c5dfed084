/* Problem lists: see problems.h. */
#include "common/problems.h"

#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"

void llmr_problems_init(llmr_problems *p)
{
    memset(p, 0, sizeof *p);
}

void llmr_problems_free(llmr_problems *p)
{
    for (size_t i = 0; i < p->count; i++) {
        free(p->items[i].file);
        free(p->items[i].message);
    }
    free(p->items);
    llmr_problems_init(p);
}

static void drop(llmr_problems *p, llmr_status code)
{
    if (p->dropped++ == 0)
        p->dropped_code = code;
}

void llmr_problems_vadd(llmr_problems *p, llmr_status code, const char *file,
                        const char *fmt, va_list ap)
{
    if (p->count >= LLMR_PROBLEMS_MAX) {
        drop(p, code);
        return;
    }
    if (p->count == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        llmr_problem *items = realloc(p->items, cap * sizeof *items);
        if (!items) {
            drop(p, code);
            return;
        }
        p->items = items;
        p->cap = cap;
    }
    llmr_strbuf msg = LLMR_STRBUF_INIT;
    llmr_strbuf_vprintf(&msg, fmt, ap);
    llmr_problem *item = &p->items[p->count];
    item->code = code;
    item->file = file ? strdup(file) : NULL;
    item->message = llmr_strbuf_take(&msg);
    if ((file && !item->file) || !item->message) {
        free(item->file);
        free(item->message);
        drop(p, code);
        return;
    }
    p->count++;
}

void llmr_problems_add(llmr_problems *p, llmr_status code, const char *file,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    llmr_problems_vadd(p, code, file, fmt, ap);
    va_end(ap);
}

size_t llmr_problems_total(const llmr_problems *p)
{
    return p->count + p->dropped;
}

llmr_status llmr_problems_first_code(const llmr_problems *p)
{
    return llmr_problems_code_since(p, 0);
}

llmr_status llmr_problems_code_since(const llmr_problems *p, size_t mark)
{
    if (mark < p->count)
        return p->items[mark].code;
    if (llmr_problems_total(p) > mark)
        return p->dropped_code;
    return LLMR_OK;
}

bool llmr_problems_mention(const llmr_problems *p, const char *needle)
{
    for (size_t i = 0; i < p->count; i++) {
        if (p->items[i].file && strstr(p->items[i].file, needle))
            return true;
        if (strstr(p->items[i].message, needle))
            return true;
    }
    return false;
}

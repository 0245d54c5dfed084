/* Lists of token ids on the command line: see id_list.h. */
#include "cli/id_list.h"

#include <errno.h>
#include <stdlib.h>

int32_t *llmr_id_list_parse(const char *text, uint32_t *n)
{
    size_t cap = 64, count = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *p = text;
    while (ids && *p) {
        while (*p == ',' || *p == ' ' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            free(ids);
            return NULL;
        }
        if (count == cap) {
            int32_t *grown = realloc(ids, 2 * cap * sizeof *ids);
            if (!grown) {
                free(ids);
                return NULL;
            }
            ids = grown;
            cap *= 2;
        }
        ids[count++] = (int32_t)v;
        p = end;
    }
    if (ids && count == 0) {
        free(ids);
        return NULL;
    }
    *n = (uint32_t)count;
    return ids;
}


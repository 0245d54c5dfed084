/* See list_item.h. */
#include "common/list_item.h"

#include <string.h>

bool llmr_list_next(const char **p, const char **item, size_t *n)
{
    const char *s = *p;
    if (!s)
        return false;
    const char *comma = strchr(s, ',');
    const char *end = comma ? comma : s + strlen(s);
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *item = s;
    *n = (size_t)(end - s);
    *p = comma ? comma + 1 : NULL; /* NULL: the last item was read */
    return true;
}

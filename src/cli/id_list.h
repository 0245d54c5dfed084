/* Token ids as the command line takes them: "1,2,3" (commas or spaces). */
#ifndef LLMR_CLI_ID_LIST_H
#define LLMR_CLI_ID_LIST_H

#include <stdint.h>

/* The ids (malloc'd) and their count, or NULL when the text is empty or holds
 * anything but whole numbers from 0 to 2^31-1. */
int32_t *llmr_id_list_parse(const char *text, uint32_t *n);

#endif

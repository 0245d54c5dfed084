/* Names and messages of llmr_status, generated from LLMR_STATUS_LIST. */
#include "llmr/status.h"

static const char *const status_names[] = {
#define STATUS_NAME(name, msg) #name,
    LLMR_STATUS_LIST(STATUS_NAME)
#undef STATUS_NAME
};

static const char *const status_messages[] = {
#define STATUS_MESSAGE(name, msg) msg,
    LLMR_STATUS_LIST(STATUS_MESSAGE)
#undef STATUS_MESSAGE
};

_Static_assert(sizeof status_names / sizeof status_names[0] == LLMR_STATUS_COUNT,
               "one name per status");

const char *llmr_status_name(llmr_status status)
{
    if ((unsigned)status >= LLMR_STATUS_COUNT)
        return "UNKNOWN";
    return status_names[status];
}

const char *llmr_status_message(llmr_status status)
{
    if ((unsigned)status >= LLMR_STATUS_COUNT)
        return "unknown status";
    return status_messages[status];
}

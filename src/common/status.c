/* Names and messages of llmr_status, generated from LLMR_STATUS_LIST.  The tables are
 * indexed by each code's own number (designated initializers), so a gap in the numbers
 * leaves an empty slot, which the checks below and test_common catch, and a number given
 * twice does not compile (-Werror=override-init). */
#include "llmr/status.h"

static const char *const status_names[LLMR_STATUS_COUNT] = {
#define STATUS_NAME(name, number, msg) [number] = #name,
    LLMR_STATUS_LIST(STATUS_NAME)
#undef STATUS_NAME
};

static const char *const status_messages[LLMR_STATUS_COUNT] = {
#define STATUS_MESSAGE(name, number, msg) [number] = msg,
    LLMR_STATUS_LIST(STATUS_MESSAGE)
#undef STATUS_MESSAGE
};

/* As many codes as numbers: with no number given twice, no gap. */
enum {
#define STATUS_ONE(name, number, msg) +1
    STATUS_CODES = 0 LLMR_STATUS_LIST(STATUS_ONE)
#undef STATUS_ONE
};
_Static_assert((int)STATUS_CODES == (int)LLMR_STATUS_COUNT, "status numbers run from 0 without gaps");

const char *llmr_status_name(llmr_status status)
{
    if ((unsigned)status >= LLMR_STATUS_COUNT || !status_names[status])
        return "UNKNOWN";
    return status_names[status];
}

const char *llmr_status_message(llmr_status status)
{
    if ((unsigned)status >= LLMR_STATUS_COUNT || !status_messages[status])
        return "unknown status";
    return status_messages[status];
}

/* llmr status codes: the one list every component reports failures with.
 *
 * The list below is the only place a code is defined; the enum, the names and the
 * messages are all generated from it.  The first ten are the coarse codes of the
 * engine ABI (their numeric values are part of that ABI and never change); the rest
 * are used inside the node and the tools.  A status says what kind of failure
 * happened; the detail (which file, which tensor) travels beside it as text. */
#ifndef LLMR_STATUS_H
#define LLMR_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, NUMBER, "what it means, for a person").  Each code's number is written
 * here, not taken from its place in the list: codes 0 to 9 cross the engine ABI and
 * the worker wire, so reordering or inserting must never renumber them.  The numbers
 * run from 0 without gaps (status.c checks). */
#define LLMR_STATUS_LIST(X)                                                            \
    X(OK, 0, "success")                                                                \
    X(OOM_VRAM, 1, "not enough GPU memory")                                            \
    X(OOM_RAM, 2, "not enough host memory")                                            \
    X(MODEL_CORRUPT, 3, "the model files are damaged or do not match each other")      \
    X(TIMEOUT, 4, "the operation made no progress in time")                            \
    X(CANCELLED, 5, "the operation was cancelled")                                     \
    X(UNSUPPORTED, 6, "not supported")                                                 \
    X(INTERNAL, 7, "internal error")                                                   \
    X(ABI_MISMATCH, 8, "the plugin was built for another ABI version")                 \
    X(LOAD_FAILED, 9, "the model could not be loaded")                                 \
    X(INVALID_ARGUMENT, 10, "invalid argument")                                        \
    X(NOT_FOUND, 11, "not found")                                                      \
    X(IO, 12, "input/output error")                                                    \
    X(LIMIT_EXCEEDED, 13, "a size or count limit was exceeded")

typedef enum llmr_status {
#define LLMR_STATUS_ENUM(name, number, msg) LLMR_##name = number,
    LLMR_STATUS_LIST(LLMR_STATUS_ENUM)
#undef LLMR_STATUS_ENUM
    LLMR_STATUS_COUNT /* one past the last code, which the list gives the highest number */
} llmr_status;

/* "MODEL_CORRUPT" for LLMR_MODEL_CORRUPT; "UNKNOWN" for a value outside the list.
 * The returned string is static. */
const char *llmr_status_name(llmr_status status);

/* A short sentence for people; static; "unknown status" outside the list. */
const char *llmr_status_message(llmr_status status);

#ifdef __cplusplus
}
#endif

#endif

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

/* X(NAME, "what it means, for a person") */
#define LLMR_STATUS_LIST(X)                                                        \
    X(OK, "success")                                                               \
    X(OOM_VRAM, "not enough GPU memory")                                           \
    X(OOM_RAM, "not enough host memory")                                           \
    X(MODEL_CORRUPT, "the model files are damaged or do not match each other")     \
    X(TIMEOUT, "the operation made no progress in time")                           \
    X(CANCELLED, "the operation was cancelled")                                    \
    X(UNSUPPORTED, "not supported")                                                \
    X(INTERNAL, "internal error")                                                  \
    X(ABI_MISMATCH, "the plugin was built for another ABI version")                \
    X(LOAD_FAILED, "the model could not be loaded")                                \
    X(INVALID_ARGUMENT, "invalid argument")                                        \
    X(NOT_FOUND, "not found")                                                      \
    X(IO, "input/output error")                                                    \
    X(LIMIT_EXCEEDED, "a size or count limit was exceeded")

typedef enum llmr_status {
#define LLMR_STATUS_ENUM(name, msg) LLMR_##name,
    LLMR_STATUS_LIST(LLMR_STATUS_ENUM)
#undef LLMR_STATUS_ENUM
    LLMR_STATUS_COUNT
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

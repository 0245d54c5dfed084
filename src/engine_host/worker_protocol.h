/* The wire between the node and an engine worker (docs/engine-host.md): frames on a
 * Unix stream socket, each
 *
 *   u32 length of the rest | u16 type | u16 zero | u64 request id | payload
 *
 * in the byte order of the machine (both ends are the same machine and build).
 * Control messages (open, estimate, load, their replies) carry JSON; the hot path,
 * SUBMIT and EVENT, is binary.  Decoders check every length against the frame, so a
 * garbled frame is an error, never an overread. */
#ifndef LLMR_ENGINE_HOST_WORKER_PROTOCOL_H
#define LLMR_ENGINE_HOST_WORKER_PROTOCOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/engine.h"
#include "llmr/status.h"

#define LLMR_WIRE_MAX_FRAME (256u << 20) /* a prompt of 64M tokens fits */
#define LLMR_WIRE_MAX_TOP 32u

typedef enum llmr_wire_type {
    /* node -> worker */
    LLMR_WIRE_OPEN = 1,    /* JSON {plugin, model_dir, model_name, format, gguf_file} */
    LLMR_WIRE_ESTIMATE = 2, /* JSON load params */
    LLMR_WIRE_LOAD = 3,    /* JSON load params */
    LLMR_WIRE_SUBMIT = 4,  /* binary llmr_wire_submit */
    LLMR_WIRE_CANCEL = 5,  /* the request id only */
    LLMR_WIRE_PING = 6,
    LLMR_WIRE_EXIT = 7,    /* unload and exit */
    /* worker -> node */
    LLMR_WIRE_REPLY = 64,  /* JSON answer to OPEN, ESTIMATE, LOAD: {"status", "message", ...} */
    LLMR_WIRE_EVENT = 65,  /* binary llmr_wire_event */
    LLMR_WIRE_PONG = 66    /* binary llmr_wire_pong */
} llmr_wire_type;

typedef struct llmr_wire_frame {
    uint16_t type;
    uint64_t request_id;
    const uint8_t *payload; /* valid until the next read on the same reader */
    size_t len;
} llmr_wire_frame;

/* Buffered reading of frames from one fd, by one thread. */
typedef struct llmr_wire_reader {
    int fd;
    uint8_t *buf;
    size_t start, end, cap;
} llmr_wire_reader;

void llmr_wire_reader_init(llmr_wire_reader *r, int fd);
void llmr_wire_reader_free(llmr_wire_reader *r);
/* Blocks for the next frame.  LLMR_IO with "closed" in err at a clean end of stream
 * (between frames); LLMR_IO for a read error or a stream cut inside a frame;
 * LLMR_INTERNAL for a frame that breaks the format. */
llmr_status llmr_wire_read(llmr_wire_reader *r, llmr_wire_frame *out, llmr_strbuf *err);

/* Writes one whole frame (header and payload).  Callers that share an fd between
 * threads hold a lock around it.  LLMR_IO when the peer is gone. */
llmr_status llmr_wire_write(int fd, uint16_t type, uint64_t request_id, const void *payload,
                            size_t len, llmr_strbuf *err);
llmr_status llmr_wire_write_json(int fd, uint16_t type, uint64_t request_id, const json_t *value,
                                 llmr_strbuf *err);
/* The frame's payload as a JSON object (NULL with err set otherwise). */
json_t *llmr_wire_json(const llmr_wire_frame *f, llmr_strbuf *err);

/* ---- SUBMIT ------------------------------------------------------------------ */

/* A request as the node sends it: the engine params plus what the worker does
 * itself (stop strings, how text is decoded). */
typedef struct llmr_wire_submit {
    llmr_engine_request_params params; /* prompt and stop_ids point into owned arrays */
    uint32_t stop_string_count;
    char **stop_strings;
    size_t *stop_string_lens;
    bool skip_special;                 /* leave special tokens out of the text */
} llmr_wire_submit;

/* Appends the SUBMIT payload for params (request_id travels in the frame header). */
bool llmr_wire_submit_encode(const llmr_engine_request_params *params,
                             const char *const *stop_strings, const size_t *stop_lens,
                             uint32_t stop_count, bool skip_special, llmr_strbuf *out);
/* Decodes into *out, which owns copies of the arrays (free with ..._free). */
llmr_status llmr_wire_submit_decode(const uint8_t *payload, size_t len, uint64_t request_id,
                                    llmr_wire_submit *out, llmr_strbuf *err);
void llmr_wire_submit_free(llmr_wire_submit *s);

/* ---- EVENT ------------------------------------------------------------------- */

/* One token event as the node receives it; the pointers are into the frame (text,
 * message) or into the struct (top arrays). */
typedef struct llmr_wire_event {
    uint32_t index;
    int32_t id;
    float logprob;
    uint32_t finish;           /* llmr_engine_finish */
    int32_t status;            /* llmr_status */
    uint32_t prompt_tokens;
    uint32_t completion_tokens; /* in the last event */
    uint64_t time_ns;          /* when the engine sampled the token */
    uint64_t sent_ns;          /* when the worker sent the frame */
    const char *text;
    uint32_t text_len;
    const char *message;       /* message_len bytes, not NUL-terminated */
    uint32_t message_len;
    uint32_t top_count;
    int32_t top_ids[LLMR_WIRE_MAX_TOP];
    float top_logprobs[LLMR_WIRE_MAX_TOP];
} llmr_wire_event;

bool llmr_wire_event_encode(const llmr_wire_event *ev, llmr_strbuf *out);
llmr_status llmr_wire_event_decode(const uint8_t *payload, size_t len, llmr_wire_event *out,
                                   llmr_strbuf *err);

/* ---- PONG -------------------------------------------------------------------- */

typedef struct llmr_wire_pong {
    uint64_t vram_bytes;    /* what the engine reports holding (0 without memory()) */
    uint64_t ram_bytes;
    uint64_t rss_bytes;     /* the worker process's resident memory */
    uint64_t host_alloc_bytes; /* held through host->alloc */
    uint32_t in_flight;     /* requests the worker has not finished */
    uint32_t has_memory;    /* the engine offers memory() */
    uint64_t kv_used_tokens; /* the KV cache's positions in use (0: the engine does not say) */
} llmr_wire_pong;

void llmr_wire_pong_encode(const llmr_wire_pong *p, uint8_t out[48]);
llmr_status llmr_wire_pong_decode(const uint8_t *payload, size_t len, llmr_wire_pong *out,
                                  llmr_strbuf *err);

#endif

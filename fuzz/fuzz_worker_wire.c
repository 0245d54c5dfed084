/* Fuzz target: the node <-> engine worker wire (engine_host/worker_protocol.h).  The
 * first byte picks a decoder (submit, event, pong, or the frame reader over a pipe);
 * the rest is its input.  A decoded submit is encoded again and must decode to the
 * same request. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_host/worker_protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void submit_round_trip(const uint8_t *p, size_t n)
{
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_wire_submit s;
    if (llmr_wire_submit_decode(p, n, 7, &s, &err) == LLMR_OK) {
        llmr_strbuf again = LLMR_STRBUF_INIT;
        if (!llmr_wire_submit_encode(&s.params, (const char *const *)s.stop_strings,
                                     s.stop_string_lens, s.stop_string_count, s.skip_special,
                                     &again))
            __builtin_trap();
        if (again.len != n || memcmp(again.data, p, n) != 0) {
            /* only the flag word may differ: bits other than skip_special are dropped */
            llmr_wire_submit t;
            if (llmr_wire_submit_decode((const uint8_t *)again.data, again.len, 7, &t, &err) !=
                    LLMR_OK ||
                t.params.prompt_len != s.params.prompt_len ||
                t.stop_string_count != s.stop_string_count)
                __builtin_trap();
            llmr_wire_submit_free(&t);
        }
        llmr_strbuf_free(&again);
        llmr_wire_submit_free(&s);
    }
    llmr_strbuf_free(&err);
}

static void read_frames(const uint8_t *p, size_t n)
{
    int fds[2];
    if (n > 60000 || pipe(fds) != 0)
        return;
    if (write(fds[1], p, n) != (ssize_t)n) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    close(fds[1]);
    llmr_wire_reader r;
    llmr_wire_reader_init(&r, fds[0]);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    for (int i = 0; i < 64; i++) {
        llmr_wire_frame f;
        llmr_strbuf_reset(&err);
        if (llmr_wire_read(&r, &f, &err) != LLMR_OK)
            break;
        if (f.len > n)
            __builtin_trap();
    }
    llmr_strbuf_free(&err);
    llmr_wire_reader_free(&r);
    close(fds[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    switch (data[0] % 4) {
    case 0:
        submit_round_trip(p, n);
        break;
    case 1: {
        llmr_wire_event ev;
        if (llmr_wire_event_decode(p, n, &ev, &err) == LLMR_OK &&
            (ev.text_len > n || ev.message_len > n || ev.top_count > LLMR_WIRE_MAX_TOP))
            __builtin_trap();
        break;
    }
    case 2: {
        llmr_wire_pong pong;
        llmr_wire_pong_decode(p, n, &pong, &err);
        break;
    }
    default:
        read_frames(p, n);
        break;
    }
    llmr_strbuf_free(&err);
    return 0;
}

/* The node <-> worker wire (engine_host/worker_protocol.h): frames through a real
 * socket, submit and event payloads round-trip, and every way a frame or payload can
 * be cut or padded is refused, never overread. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "engine_host/worker_protocol.h"

TEST(frames_cross_a_socket_whole_and_in_order)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    char big[100000];
    memset(big, 'x', sizeof big);
    CHECK_EQ_INT(llmr_wire_write(sv[0], LLMR_WIRE_PING, 0, NULL, 0, &err), LLMR_OK);
    CHECK_EQ_INT(llmr_wire_write(sv[0], LLMR_WIRE_CANCEL, 42, "ab", 2, &err), LLMR_OK);
    json_t *j = json_pack("{s:s}", "status", "OK");
    CHECK_EQ_INT(llmr_wire_write_json(sv[0], LLMR_WIRE_REPLY, 0, j, &err), LLMR_OK);
    json_decref(j);
    /* larger than a socket buffer: the reader must drain while the writer writes */
    if (fork() == 0) {
        llmr_wire_write(sv[0], LLMR_WIRE_EVENT, 7, big, sizeof big, &err);
        _exit(0);
    }
    close(sv[0]);
    llmr_wire_reader r;
    llmr_wire_reader_init(&r, sv[1]);
    llmr_wire_frame f;
    CHECK_EQ_INT(llmr_wire_read(&r, &f, &err), LLMR_OK);
    CHECK_EQ_INT(f.type, LLMR_WIRE_PING);
    CHECK_EQ_INT(f.len, 0);
    CHECK_EQ_INT(llmr_wire_read(&r, &f, &err), LLMR_OK);
    CHECK_EQ_INT(f.type, LLMR_WIRE_CANCEL);
    CHECK_EQ_INT(f.request_id, 42);
    CHECK(f.len == 2 && memcmp(f.payload, "ab", 2) == 0);
    CHECK_EQ_INT(llmr_wire_read(&r, &f, &err), LLMR_OK);
    json_t *reply = llmr_wire_json(&f, &err);
    CHECK_EQ_STR(json_string_value(json_object_get(reply, "status")), "OK");
    json_decref(reply);
    CHECK_EQ_INT(llmr_wire_read(&r, &f, &err), LLMR_OK);
    CHECK_EQ_INT(f.len, sizeof big);
    CHECK(memcmp(f.payload, big, sizeof big) == 0);
    /* then a clean end of stream */
    CHECK_EQ_INT(llmr_wire_read(&r, &f, &err), LLMR_IO);
    CHECK_EQ_STR(llmr_strbuf_cstr(&err), "closed");
    llmr_wire_reader_free(&r);
    close(sv[1]);
    llmr_strbuf_free(&err);
}

TEST(a_cut_or_broken_frame_is_an_error)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    /* header says 100 bytes follow; 20 do */
    uint8_t frame[36] = {0};
    uint32_t rest = 100;
    memcpy(frame, &rest, 4);
    frame[4] = LLMR_WIRE_EVENT;
    CHECK(write(sv[0], frame, sizeof frame) == (ssize_t)sizeof frame);
    close(sv[0]);
    llmr_wire_reader r;
    llmr_wire_reader_init(&r, sv[1]);
    llmr_wire_frame f;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_wire_read(&r, &f, &err), LLMR_IO);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "in the middle of a frame");
    llmr_wire_reader_free(&r);
    close(sv[1]);
    /* a length over the limit, and a nonzero reserved field */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    rest = LLMR_WIRE_MAX_FRAME + 1;
    memcpy(frame, &rest, 4);
    CHECK(write(sv[0], frame, 16) == 16);
    llmr_wire_reader_init(&r, sv[1]);
    llmr_strbuf_reset(&err);
    CHECK_EQ_INT(llmr_wire_read(&r, &f, &err), LLMR_INTERNAL);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "broken header");
    llmr_wire_reader_free(&r);
    close(sv[0]);
    close(sv[1]);
    llmr_strbuf_free(&err);
}

TEST(submit_payloads_round_trip_and_truncations_are_refused)
{
    llmr_engine_request_params p = llmr_engine_request_default_params();
    int32_t prompt[4] = {9, 8, 7, 200006}, stop_ids[2] = {200002, 200012};
    p.prompt = prompt;
    p.prompt_len = 4;
    p.stop_ids = stop_ids;
    p.stop_id_count = 2;
    p.max_tokens = 99;
    p.temperature = 0.7f;
    p.top_k = 40;
    p.seed = 1234567890123ull;
    p.top_logprobs = 3;
    const char *stops[] = {"\n\n", "</s>"};
    size_t lens[] = {2, 4};
    llmr_strbuf sb = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    CHECK(llmr_wire_submit_encode(&p, stops, lens, 2, true, &sb));
    llmr_wire_submit s;
    CHECK_EQ_INT(llmr_wire_submit_decode((uint8_t *)sb.data, sb.len, 5, &s, &err), LLMR_OK);
    CHECK_EQ_INT(s.params.request_id, 5);
    CHECK_EQ_INT(s.params.prompt_len, 4);
    CHECK_EQ_INT(s.params.prompt[3], 200006);
    CHECK_EQ_INT(s.params.stop_ids[1], 200012);
    CHECK_EQ_INT(s.params.max_tokens, 99);
    CHECK(s.params.temperature == 0.7f);
    CHECK_EQ_INT(s.params.top_k, 40);
    CHECK(s.params.seed == 1234567890123ull);
    CHECK_EQ_INT(s.params.top_logprobs, 3);
    CHECK_EQ_INT(s.stop_string_count, 2);
    CHECK(s.stop_string_lens[1] == 4 && memcmp(s.stop_strings[1], "</s>", 4) == 0);
    CHECK(s.skip_special);
    llmr_wire_submit_free(&s);
    /* every shorter prefix, and one byte too many, is refused */
    for (size_t n = 0; n < sb.len; n++) {
        llmr_strbuf_reset(&err);
        CHECK_EQ_INT(llmr_wire_submit_decode((uint8_t *)sb.data, n, 5, &s, &err), LLMR_INTERNAL);
    }
    llmr_strbuf_putc(&sb, 0);
    CHECK_EQ_INT(llmr_wire_submit_decode((uint8_t *)sb.data, sb.len, 5, &s, &err), LLMR_INTERNAL);
    /* a prompt length that claims more ids than the payload holds */
    uint32_t huge = 0x40000000u;
    memcpy(sb.data, &huge, 4);
    CHECK_EQ_INT(llmr_wire_submit_decode((uint8_t *)sb.data, sb.len - 1, 5, &s, &err),
                 LLMR_INTERNAL);
    llmr_strbuf_free(&sb);
    llmr_strbuf_free(&err);
}

TEST(event_payloads_round_trip_and_lies_are_refused)
{
    llmr_wire_event ev;
    memset(&ev, 0, sizeof ev);
    ev.index = 3;
    ev.id = 42;
    ev.logprob = -0.25f;
    ev.finish = LLMR_ENGINE_FINISH_STOP;
    ev.time_ns = 111;
    ev.sent_ns = 222;
    ev.text = "h\xc3\xa9";
    ev.text_len = 3;
    ev.message = "why";
    ev.message_len = 3;
    ev.top_count = 2;
    ev.top_ids[0] = 42;
    ev.top_ids[1] = 7;
    ev.top_logprobs[0] = -0.25f;
    ev.top_logprobs[1] = -3.0f;
    llmr_strbuf sb = LLMR_STRBUF_INIT, err = LLMR_STRBUF_INIT;
    CHECK(llmr_wire_event_encode(&ev, &sb));
    llmr_wire_event d;
    CHECK_EQ_INT(llmr_wire_event_decode((uint8_t *)sb.data, sb.len, &d, &err), LLMR_OK);
    CHECK_EQ_INT(d.id, 42);
    CHECK_EQ_INT(d.finish, LLMR_ENGINE_FINISH_STOP);
    CHECK(d.text_len == 3 && memcmp(d.text, "h\xc3\xa9", 3) == 0);
    CHECK(d.message_len == 3 && memcmp(d.message, "why", 3) == 0);
    CHECK_EQ_INT(d.top_count, 2);
    CHECK_EQ_INT(d.top_ids[1], 7);
    CHECK(d.top_logprobs[1] == -3.0f);
    CHECK(d.sent_ns == 222);
    for (size_t n = 0; n < sb.len; n++)
        CHECK_EQ_INT(llmr_wire_event_decode((uint8_t *)sb.data, n, &d, &err), LLMR_INTERNAL);
    /* a text length past the end */
    uint32_t lie = 1000;
    memcpy(sb.data + 44, &lie, 4); /* text_len: after 7 u32 and 2 u64 */
    CHECK_EQ_INT(llmr_wire_event_decode((uint8_t *)sb.data, sb.len, &d, &err), LLMR_INTERNAL);
    llmr_strbuf_free(&sb);
    llmr_strbuf_free(&err);
}

TEST(pong_payloads_round_trip_with_the_kv_cache_in_use)
{
    llmr_wire_pong p = {.vram_bytes = 1ull << 40, .ram_bytes = 7, .rss_bytes = 9, .host_alloc_bytes = 11,
                        .in_flight = 3, .has_memory = 1, .kv_used_tokens = 123456789012ull};
    uint8_t buf[48];
    llmr_wire_pong_encode(&p, buf);
    llmr_wire_pong q;
    memset(&q, 0xAB, sizeof q);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_wire_pong_decode(buf, sizeof buf, &q, &err), LLMR_OK);
    CHECK(q.vram_bytes == p.vram_bytes && q.ram_bytes == 7 && q.rss_bytes == 9);
    CHECK(q.host_alloc_bytes == 11 && q.in_flight == 3 && q.has_memory == 1);
    CHECK(q.kv_used_tokens == 123456789012ull);
    CHECK_EQ_INT(llmr_wire_pong_decode(buf, 40, &q, &err), LLMR_INTERNAL); /* a short one */
    llmr_strbuf_free(&err);
}

int main(void)
{
    RUN(frames_cross_a_socket_whole_and_in_order);
    RUN(a_cut_or_broken_frame_is_an_error);
    RUN(submit_payloads_round_trip_and_truncations_are_refused);
    RUN(event_payloads_round_trip_and_lies_are_refused);
    RUN(pong_payloads_round_trip_with_the_kv_cache_in_use);
    return llmr_test_finish();
}

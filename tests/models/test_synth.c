/* The synthetic snapshot writer: random weights that are deterministic for a seed
 * whatever the thread count, with the scales the fill promises (finite BF16, norms
 * near 1, MXFP4 rows of rms near 1/sqrt(in)), the side files, the sparse zeros
 * fill, where the tokenizer comes from, and the parallel safetensors writer under
 * it.  The tokenizer files come from the shared data directory when it is there,
 * else from a stand-in: what is checked is that synth copies them. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/clock.h"
#include "common/fs_util.h"
#include "fixture.h"
#include "models/gpt_oss_preset.h"
#include "models/synth.h"
#include "storage/model_storage.h"

#define SHARD "model-00001-of-00001.safetensors"

/* A path NAME in a new temporary directory, not yet created (kept till exit). */
static const char *new_dir(const char *name)
{
    static char pool[32][4096];
    static int used;
    if (used == 32)
        abort();
    snprintf(pool[used], sizeof pool[0], "%s/%s", fx_tmpdir(), name);
    return pool[used++];
}

/* The tokenizer directory: the shared gpt-oss-20b one, or a stand-in. */
static const char *tokenizer_dir(void)
{
    static char shared[4096];
    static const char *standin;
    const char *s = fx_shared_dir();
    if (s) {
        snprintf(shared, sizeof shared, "%s/models/gpt-oss-20b", s);
        struct stat sb;
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/tokenizer.json", shared);
        if (stat(probe, &sb) == 0)
            return shared;
    }
    if (!standin) {
        standin = fx_tmpdir();
        fx_write_text(standin, "tokenizer.json", "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\"}}");
        fx_write_text(standin, "tokenizer_config.json", "{\"model_max_length\": 4096}");
        fx_write_text(standin, "chat_template.jinja", "{{ messages[0].content }}");
    }
    return standin;
}

static char *read_all(const char *dir, const char *name, size_t *len)
{
    char *data = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    size_t n = 0;
    if (llmr_read_file(fx_path(dir, name), (size_t)1 << 31, &data, &n, &err) != LLMR_OK)
        llmr_test_fail(__FILE__, __LINE__, "reading %s: %s", name, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    if (len)
        *len = n;
    return data;
}

static bool same_file(const char *a_dir, const char *b_dir, const char *name)
{
    size_t la, lb;
    char *a = read_all(a_dir, name, &la), *b = read_all(b_dir, name, &lb);
    bool same = a && b && la == lb && memcmp(a, b, la) == 0;
    free(a);
    free(b);
    return same;
}

static llmr_status synth(const char *preset, const char *out, llmr_synth_fill fill, uint64_t seed,
                         unsigned threads, uint64_t max_shard)
{
    llmr_synth_options o = {.preset = preset, .out_dir = out, .tokenizer_from = tokenizer_dir(),
                            .fill = fill, .seed = seed, .threads = threads,
                            .max_shard_bytes = max_shard};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_status st = llmr_synth_snapshot(&o, &err);
    if (st != LLMR_OK)
        fprintf(stderr, "    synth %s: %s\n", preset, llmr_strbuf_cstr(&err));
    llmr_strbuf_free(&err);
    return st;
}

static llmr_model *open_model(const char *dir)
{
    llmr_model_options opts;
    llmr_model_options_default(&opts);
    opts.map_weights = true;
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_model *m = NULL;
    CHECK_EQ_INT(llmr_model_open(dir, &opts, &m, &p), LLMR_OK);
    for (size_t i = 0; i < p.count; i++)
        fprintf(stderr, "    %s: %s\n", p.items[i].file, p.items[i].message);
    llmr_problems_free(&p);
    if (m)
        CHECK_EQ_INT(m->runtime, LLMR_RUNTIME_GPT_OSS);
    return m;
}

static float bf16_value(const uint8_t *p)
{
    uint32_t b = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static const float fp4_values[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};

/* The rms of each decoded row of an MXFP4 pair (rows x blocks per row); returns
 * the rms over all rows and the extremes over rows. */
static double mxfp4_rms(const uint8_t *blocks, const uint8_t *scales, uint64_t rows,
                        uint64_t nblocks, double *row_min, double *row_max)
{
    double all = 0;
    *row_min = INFINITY;
    *row_max = 0;
    for (uint64_t r = 0; r < rows; r++) {
        double sum = 0;
        for (uint64_t b = 0; b < nblocks; b++) {
            double scale = ldexp(1.0, (int)scales[r * nblocks + b] - 127);
            for (int j = 0; j < 16; j++) {
                uint8_t byte = blocks[(r * nblocks + b) * 16 + j];
                double lo = fp4_values[byte & 15] * scale, hi = fp4_values[byte >> 4] * scale;
                sum += lo * lo + hi * hi;
            }
        }
        all += sum;
        double rms = sqrt(sum / (double)(nblocks * 32));
        *row_min = rms < *row_min ? rms : *row_min;
        *row_max = rms > *row_max ? rms : *row_max;
    }
    return sqrt(all / (double)(rows * nblocks * 32));
}

static bool within(double x, double want, double factor)
{
    return x >= want / factor && x <= want * factor;
}

TEST(tiny_random_is_written_fast_and_opens)
{
    const char *dir = new_dir("tiny");
    uint64_t t0 = llmr_now_ns();
    CHECK_EQ_INT(synth("gpt-oss-tiny", dir, LLMR_SYNTH_FILL_RANDOM, 0, 0, 0), LLMR_OK);
    double seconds = (double)(llmr_now_ns() - t0) / 1e9;
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__)
    const double limit = 3.0;
#else
    const double limit = 30.0; /* unoptimised or sanitised builds */
#endif
    if (seconds > limit)
        llmr_test_fail(__FILE__, __LINE__, "the tiny preset took %.2f s (limit %.0f s)", seconds,
                       limit);
    llmr_model *m = open_model(dir);
    if (!m)
        return;
    CHECK_EQ_INT(m->gpt_oss.vocab_size, 201088);
    CHECK_EQ_INT(m->tensor_count, 2 * 19 + 3);
    CHECK_EQ_INT(json_array_size(m->warnings), 0);
    llmr_model_close(m);
}

TEST(same_seed_same_bytes_for_any_thread_count_and_sharding)
{
    const char *a = new_dir("one-thread"), *b = new_dir("four-threads");
    const char *c = new_dir("other-seed"), *d = new_dir("sharded");
    CHECK_EQ_INT(synth("gpt-oss-tiny", a, LLMR_SYNTH_FILL_RANDOM, 7, 1, 0), LLMR_OK);
    CHECK_EQ_INT(synth("gpt-oss-tiny", b, LLMR_SYNTH_FILL_RANDOM, 7, 4, 0), LLMR_OK);
    CHECK_EQ_INT(synth("gpt-oss-tiny", c, LLMR_SYNTH_FILL_RANDOM, 8, 4, 0), LLMR_OK);
    CHECK_EQ_INT(synth("gpt-oss-tiny", d, LLMR_SYNTH_FILL_RANDOM, 7, 3, 20000000), LLMR_OK);
    CHECK(same_file(a, b, SHARD));
    CHECK(same_file(a, b, "model.safetensors.index.json"));
    CHECK(!same_file(a, c, SHARD));

    /* Another seed changes every tensor, and another sharding none. */
    llmr_model *ma = open_model(a), *mc = open_model(c), *md = open_model(d);
    if (ma && mc && md) {
        CHECK(md->shard_count > 1);
        size_t same_as_other_seed = 0;
        for (size_t i = 0; i < ma->tensor_count; i++) {
            const llmr_model_tensor *ta = &ma->tensors[i];
            const llmr_model_tensor *tc = llmr_model_tensor_find(mc, ta->info->name);
            const llmr_model_tensor *td = llmr_model_tensor_find(md, ta->info->name);
            uint64_t len = ta->info->end - ta->info->begin;
            CHECK(tc && td);
            if (!tc || !td)
                continue;
            const uint8_t *pa = llmr_model_tensor_data(ma, ta);
            if (memcmp(pa, llmr_model_tensor_data(md, td), len) != 0)
                llmr_test_fail(__FILE__, __LINE__, "%s differs with another sharding",
                               ta->info->name);
            same_as_other_seed += memcmp(pa, llmr_model_tensor_data(mc, tc), len) == 0;
        }
        CHECK_EQ_INT(same_as_other_seed, 0);
    }
    llmr_model_close(ma);
    llmr_model_close(mc);
    llmr_model_close(md);
}

/* Mean and standard deviation of a BF16 tensor; false when a value is not finite. */
static bool bf16_stats(const uint8_t *p, uint64_t n, double *mean, double *sd, double *lo,
                       double *hi)
{
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (uint64_t i = 0; i < n; i++) {
        float v = bf16_value(p + 2 * i);
        if (!isfinite(v))
            return false;
        s += v;
        s2 += (double)v * v;
        *lo = v < *lo ? v : *lo;
        *hi = v > *hi ? v : *hi;
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

TEST(random_values_have_the_promised_scales)
{
    const char *dir = new_dir("tiny");
    CHECK_EQ_INT(synth("gpt-oss-tiny", dir, LLMR_SYNTH_FILL_RANDOM, 3, 2, 0), LLMR_OK);
    llmr_model *m = open_model(dir);
    if (!m)
        return;
    size_t norms = 0, linears = 0, experts = 0;
    for (size_t i = 0; i < m->tensor_count; i++) {
        const llmr_st_tensor *t = m->tensors[i].info;
        const uint8_t *p = llmr_model_tensor_data(m, &m->tensors[i]);
        if (t->dtype == LLMR_DTYPE_BF16) {
            uint64_t n = (t->end - t->begin) / 2;
            double mean = 0, sd = 0, lo = 0, hi = 0; /* 0 if bf16_stats fails */
            if (!bf16_stats(p, n, &mean, &sd, &lo, &hi)) {
                llmr_test_fail(__FILE__, __LINE__, "%s has a value that is not finite", t->name);
                continue;
            }
            if (ends_with(t->name, "norm.weight")) {
                norms++;
                if (fabs(mean - 1.0) > 0.03 || lo < 0.75 || hi > 1.25)
                    llmr_test_fail(__FILE__, __LINE__, "%s: mean %.3f, range [%.3f, %.3f]",
                                   t->name, mean, lo, hi);
            } else if (ends_with(t->name, "bias")) {
                /* sigma 0.02: the sample statistics of the larger ones, the range
                 * (6 sigma) of all. */
                if ((n >= 256 && (fabs(mean) > 0.01 || !within(sd, 0.02, 1.3))) || lo < -0.12 ||
                    hi > 0.12)
                    llmr_test_fail(__FILE__, __LINE__, "%s: mean %.4f, sd %.4f, range [%.3f, %.3f]",
                                   t->name, mean, sd, lo, hi);
            } else if (ends_with(t->name, "sinks")) {
                if (lo < 1.0 - 3.0 || hi > 1.0 + 3.0) /* normal(1, 0.5): 6 sigma */
                    llmr_test_fail(__FILE__, __LINE__, "%s: range [%.3f, %.3f]", t->name, lo, hi);
            } else if (t->rank == 2 && !ends_with(t->name, "embed_tokens.weight")) {
                linears++;
                double want = 1.0 / sqrt((double)t->shape[1]);
                if (fabs(mean) > 0.1 * want || !within(sd, want, 1.1))
                    llmr_test_fail(__FILE__, __LINE__, "%s: mean %.4f, sd %.4f, want sd %.4f",
                                   t->name, mean, sd, want);
            }
        } else if (ends_with(t->name, "_blocks")) {
            experts++;
            char scales_name[256];
            snprintf(scales_name, sizeof scales_name, "%.*s_scales",
                     (int)(strlen(t->name) - strlen("_blocks")), t->name);
            const llmr_model_tensor *s = llmr_model_tensor_find(m, scales_name);
            CHECK(s != NULL);
            if (!s)
                continue;
            uint64_t rows = t->shape[0] * t->shape[1], nblocks = t->shape[2];
            double lo, hi, want = 1.0 / sqrt((double)(nblocks * 32));
            double rms = mxfp4_rms(p, llmr_model_tensor_data(m, s), rows, nblocks, &lo, &hi);
            /* Rows of two blocks vary too much to check one by one (the 20b rows are,
             * below); the whole tensor must be on target. */
            if (!within(rms, want, 1.5))
                llmr_test_fail(__FILE__, __LINE__, "%s: rms %.4f, want %.4f", t->name, rms, want);
        }
    }
    CHECK_EQ_INT(norms, 2 * 2 + 1);
    CHECK_EQ_INT(linears, 2 * 5 + 1); /* q, k, v, o, router per layer; lm_head */
    CHECK_EQ_INT(experts, 2 * 2);

    /* The embedding: sigma 1. */
    const llmr_model_tensor *e = llmr_model_tensor_find(m, "model.embed_tokens.weight");
    CHECK(e != NULL);
    if (e) {
        double mean = 0, sd = 0, lo = 0, hi = 0; /* 0 if bf16_stats fails */
        CHECK(bf16_stats(llmr_model_tensor_data(m, e), (e->info->end - e->info->begin) / 2, &mean,
                         &sd, &lo, &hi));
        CHECK(fabs(mean) < 0.01 && within(sd, 1.0, 1.02) && lo < -4 && hi > 4);
    }
    llmr_model_close(m);
}

TEST(gpt_oss_20b_expert_rows_have_rms_near_one_over_sqrt_in)
{
    /* Rows of layer 0's experts as gpt-oss-20b's snapshot has them, made on their own
     * (the fill is the same function of the range whoever asks). */
    const uint64_t rows = 96, nblocks = 2880 / 32;
    const char *names[2][2] = {
        {"model.layers.0.mlp.experts.gate_up_proj_blocks", "model.layers.0.mlp.experts.gate_up_proj_scales"},
        {"model.layers.0.mlp.experts.down_proj_blocks", "model.layers.0.mlp.experts.down_proj_scales"}};
    uint64_t out_rows[2] = {5760, 2880};
    uint8_t *blocks = malloc(rows * nblocks * 16), *scales = malloc(rows * nblocks);
    for (int k = 0; k < 2; k++) {
        llmr_st_write_tensor b = {.name = names[k][0], .dtype = LLMR_DTYPE_U8, .rank = 4,
                                  .shape = {32, out_rows[k], nblocks, 16}};
        llmr_st_write_tensor s = {.name = names[k][1], .dtype = LLMR_DTYPE_U8, .rank = 3,
                                  .shape = {32, out_rows[k], nblocks}};
        /* Rows of the second expert, from a byte offset that is not a multiple of 8. */
        uint64_t first = out_rows[k] + 5;
        llmr_synth_random_fill(&b, 0, first * nblocks * 16, blocks, rows * nblocks * 16);
        llmr_synth_random_fill(&s, 0, first * nblocks, scales, rows * nblocks);
        double lo, hi, want = 1.0 / sqrt(2880.0);
        double rms = mxfp4_rms(blocks, scales, rows, nblocks, &lo, &hi);
        if (!within(lo, want, 1.5) || !within(hi, want, 1.5) || !within(rms, want, 1.3))
            llmr_test_fail(__FILE__, __LINE__, "%s rows: rms %.5f, rows from %.5f to %.5f, want %.5f",
                           names[k][0], rms, lo, hi, want);
        /* Every block's scale is the base exponent or one off it. */
        int min = 255, max = 0;
        for (uint64_t i = 0; i < rows * nblocks; i++) {
            min = scales[i] < min ? scales[i] : min;
            max = scales[i] > max ? scales[i] : max;
        }
        CHECK_EQ_INT(max - min, 2);
    }
    free(blocks);
    free(scales);
}

TEST(fill_ranges_agree_with_the_whole)
{
    /* Any range, even one starting inside an element, gives the whole's bytes. */
    llmr_st_write_tensor ts[] = {
        {.name = "model.layers.0.self_attn.q_proj.weight", .dtype = LLMR_DTYPE_BF16, .rank = 2,
         .shape = {64, 96}},
        {.name = "model.layers.0.mlp.experts.down_proj_blocks", .dtype = LLMR_DTYPE_U8, .rank = 4,
         .shape = {2, 8, 3, 16}},
        {.name = "model.layers.0.mlp.experts.down_proj_scales", .dtype = LLMR_DTYPE_U8, .rank = 3,
         .shape = {2, 8, 3}},
    };
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        uint64_t bytes = 0;
        llmr_st_tensor_bytes(&ts[k], &bytes);
        uint8_t *whole = malloc(bytes), *part = malloc(bytes);
        llmr_synth_random_fill(&ts[k], 11, 0, whole, bytes);
        static const uint64_t cuts[][2] = {{0, 1}, {1, 2}, {3, 7}, {5, 30}, {13, 101}, {64, 9}};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            uint64_t off = cuts[c][0], len = cuts[c][1];
            if (off + len > bytes)
                continue;
            llmr_synth_random_fill(&ts[k], 11, off, part, len);
            if (memcmp(part, whole + off, len) != 0)
                llmr_test_fail(__FILE__, __LINE__, "%s: bytes [%llu, +%llu) differ", ts[k].name,
                               (unsigned long long)off, (unsigned long long)len);
        }
        free(whole);
        free(part);
    }
}

TEST(side_files_are_written)
{
    const char *dir = new_dir("tiny");
    CHECK_EQ_INT(synth("gpt-oss-tiny", dir, LLMR_SYNTH_FILL_ZEROS, 0, 0, 0), LLMR_OK);
    char *text = read_all(dir, "generation_config.json", NULL);
    json_t *gen = text ? json_loads(text, 0, NULL) : NULL;
    json_t *want = json_pack("{s:i, s:b, s:[i,i,i], s:i}", "bos_token_id", 199998, "do_sample", 1,
                             "eos_token_id", 200002, 199999, 200012, "pad_token_id", 199999);
    CHECK(gen != NULL);
    const char *key;
    json_t *value;
    json_object_foreach(want, key, value) {
        if (!json_equal(json_object_get(gen, key), value))
            llmr_test_fail(__FILE__, __LINE__, "generation_config.json %s differs", key);
    }
    json_decref(gen);
    json_decref(want);
    free(text);

    const char *tok = tokenizer_dir();
    size_t len;
    char *template = read_all(dir, "chat_template.jinja", &len);
    CHECK(template != NULL);
    CHECK(same_file(tok, dir, "tokenizer.json"));
    /* The source's template and config (the shared gpt-oss ones, or the stand-in's),
     * not synth's own template. */
    CHECK(same_file(tok, dir, "chat_template.jinja"));
    CHECK(same_file(tok, dir, "tokenizer_config.json"));
    free(template);

    /* Without a template in the source: the stand-in, in harmony's format. */
    const char *tok2 = fx_tmpdir(), *dir2 = new_dir("tiny");
    fx_write_text(tok2, "tokenizer.json", "{\"version\": \"1.0\"}");
    llmr_synth_options o = {.preset = "gpt-oss-tiny", .out_dir = dir2, .tokenizer_from = tok2};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_synth_snapshot(&o, &err), LLMR_OK);
    llmr_strbuf_free(&err);
    template = read_all(dir2, "chat_template.jinja", &len);
    CHECK(template && len == strlen(llmr_synth_chat_template) &&
          strcmp(template, llmr_synth_chat_template) == 0);
    CHECK_CONTAINS(template, "<|start|>system<|message|>You are ChatGPT");
    CHECK_CONTAINS(template, "<|start|>assistant<|channel|>final<|message|>");
    CHECK_CONTAINS(template, "add_generation_prompt");
    free(template);
}

TEST(zeros_fill_is_sparse)
{
    const char *dir = new_dir("tiny");
    CHECK_EQ_INT(synth("gpt-oss-tiny", dir, LLMR_SYNTH_FILL_ZEROS, 0, 0, 0), LLMR_OK);
    struct stat sb;
    CHECK_EQ_INT(stat(fx_path(dir, SHARD), &sb), 0);
    CHECK(sb.st_size > 50000000);
    if ((uint64_t)sb.st_blocks * 512 > 1000000)
        llmr_test_fail(__FILE__, __LINE__, "a zeros shard of %lld bytes takes %lld on disk",
                       (long long)sb.st_size, (long long)sb.st_blocks * 512);

    /* gpt-oss-20b-2l: every width of gpt-oss-20b, two layers. */
    const char *dir2 = new_dir("g2");
    CHECK_EQ_INT(synth("gpt-oss-20b-2l", dir2, LLMR_SYNTH_FILL_ZEROS, 0, 0, 0), LLMR_OK);
    llmr_model *m = open_model(dir2);
    if (m) {
        CHECK_EQ_INT(m->gpt_oss.num_hidden_layers, 2);
        CHECK_EQ_INT(m->gpt_oss.hidden_size, 2880);
        CHECK_EQ_INT(m->gpt_oss.num_local_experts, 32);
        CHECK_EQ_INT(m->gpt_oss.layer_types[0], LLMR_GPT_OSS_SLIDING_ATTENTION);
        CHECK_EQ_INT(m->gpt_oss.layer_types[1], LLMR_GPT_OSS_FULL_ATTENTION);
        CHECK_EQ_INT(m->tensor_count, 2 * 19 + 3);
    }
    llmr_model_close(m);

    /* the sparse fill: the experts' MXFP4 blocks zeros, their scales 2^0 (127), every
     * other tensor the random fill's bytes for the seed */
    const char *dir4 = new_dir("sparse");
    CHECK_EQ_INT(synth("gpt-oss-tiny", dir4, LLMR_SYNTH_FILL_SPARSE, 5, 0, 0), LLMR_OK);
    m = open_model(dir4);
    if (m) {
        size_t scales = 0, blocks = 0, random = 0;
        for (size_t i = 0; i < m->tensor_count; i++) {
            const llmr_model_tensor *t = &m->tensors[i];
            const uint8_t *d = llmr_model_tensor_data(m, t);
            uint64_t bytes = t->info->end - t->info->begin;
            bool is_scales = strstr(t->info->name, "_scales") != NULL;
            bool is_blocks = strstr(t->info->name, "_blocks") != NULL;
            if (!d)
                continue;
            if (is_scales || is_blocks) {
                for (uint64_t b = 0; b < bytes; b++)
                    if (d[b] != (is_scales ? 127 : 0)) {
                        llmr_test_fail(__FILE__, __LINE__, "%s[%llu] = %u", t->info->name,
                                       (unsigned long long)b, d[b]);
                        break;
                    }
                scales += is_scales;
                blocks += is_blocks;
                continue;
            }
            /* the first bytes as the random fill writes this tensor with seed 5 */
            size_t n = bytes < 256 ? (size_t)bytes : 256;
            uint8_t want[256];
            llmr_st_write_tensor wt = {.name = t->info->name, .dtype = t->info->dtype,
                                       .rank = t->info->rank};
            memcpy(wt.shape, t->info->shape, sizeof wt.shape);
            llmr_synth_random_fill(&wt, 5, 0, want, n);
            if (memcmp(d, want, n) != 0)
                llmr_test_fail(__FILE__, __LINE__, "%s: not the random fill", t->info->name);
            random++;
        }
        CHECK(scales > 0 && blocks > 0 && random > 0);
    }
    llmr_model_close(m);

    /* gpt-oss-120b-2l: gpt-oss-120b's 128 experts, two layers. */
    const char *dir3 = new_dir("g120");
    CHECK_EQ_INT(synth("gpt-oss-120b-2l", dir3, LLMR_SYNTH_FILL_ZEROS, 0, 0, 0), LLMR_OK);
    m = open_model(dir3);
    if (m) {
        CHECK_EQ_INT(m->gpt_oss.num_hidden_layers, 2);
        CHECK_EQ_INT(m->gpt_oss.hidden_size, 2880);
        CHECK_EQ_INT(m->gpt_oss.num_local_experts, 128);
        CHECK_EQ_INT(m->gpt_oss.num_experts_per_tok, 4);
        CHECK_EQ_INT(m->tensor_count, 2 * 19 + 3);
    }
    llmr_model_close(m);
}

TEST(tokenizer_is_found_or_the_error_says_where_it_looked)
{
    const char *empty = fx_tmpdir(), *tok = fx_tmpdir();
    fx_write_text(tok, "tokenizer.json", "{\"version\": \"1.0\"}");
    const char *out = new_dir("none");
    const char *nowhere[] = {empty, "/nonexistent/llmr-tokenizer", NULL};
    llmr_synth_options o = {.preset = "gpt-oss-tiny", .out_dir = out, .tokenizer_search = nowhere};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_synth_snapshot(&o, &err), LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), empty);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "/nonexistent/llmr-tokenizer");
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "--tokenizer-from");
    struct stat sb;
    CHECK(stat(out, &sb) != 0); /* nothing written */
    llmr_strbuf_reset(&err);

    o.tokenizer_from = empty; /* given, but without tokenizer.json */
    CHECK_EQ_INT(llmr_synth_snapshot(&o, &err), LLMR_NOT_FOUND);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "has no tokenizer.json");
    llmr_strbuf_reset(&err);

    const char *found[] = {empty, tok, NULL};
    o.tokenizer_from = NULL;
    o.tokenizer_search = found;
    CHECK_EQ_INT(llmr_synth_snapshot(&o, &err), LLMR_OK);
    CHECK(same_file(tok, out, "tokenizer.json"));
    llmr_strbuf_free(&err);
}

/* ---- The parallel writer ---------------------------------------------------------- */

static llmr_status pattern_fill(void *ctx, size_t index, uint64_t offset, uint8_t *buf, size_t len)
{
    uint64_t fail_at = *(const uint64_t *)ctx;
    if (index == 2 && offset <= fail_at && fail_at < offset + len)
        return LLMR_IO;
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)((offset + i) * 31 + index * 7 + ((offset + i) >> 9));
    return LLMR_OK;
}

typedef struct progress_seen {
    pthread_mutex_t lock;
    uint64_t max_done, total, calls;
} progress_seen;

static void note_progress(void *ctx, uint64_t done, uint64_t total)
{
    progress_seen *p = ctx;
    pthread_mutex_lock(&p->lock);
    p->max_done = done > p->max_done ? done : p->max_done;
    p->total = total;
    p->calls++;
    pthread_mutex_unlock(&p->lock);
}

TEST(parallel_writer_matches_the_serial_one_and_fails_cleanly)
{
    llmr_st_write_tensor t[] = {
        {.name = "a", .dtype = LLMR_DTYPE_U8, .rank = 1, .shape = {100003}},
        {.name = "empty", .dtype = LLMR_DTYPE_BF16, .rank = 2, .shape = {0, 4}},
        {.name = "b", .dtype = LLMR_DTYPE_BF16, .rank = 2, .shape = {333, 77}},
        {.name = "c", .dtype = LLMR_DTYPE_U8, .rank = 1, .shape = {5}},
    };
    const char *dir = fx_tmpdir();
    uint64_t no_failure = UINT64_MAX;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_st_write_file(fx_path(dir, "serial"), t, 4, NULL, pattern_fill, &no_failure,
                                    &err),
                 LLMR_OK);
    progress_seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER};
    llmr_st_write_options wo = {.threads = 7, .chunk_bytes = 1001, .progress = note_progress,
                                .progress_ctx = &seen};
    CHECK_EQ_INT(llmr_st_write_file_parallel(fx_path(dir, "parallel"), t, 4, NULL, pattern_fill,
                                             &no_failure, &wo, &err),
                 LLMR_OK);
    size_t la, lb;
    char *a = read_all(dir, "serial", &la), *b = read_all(dir, "parallel", &lb);
    CHECK(a && b && la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
    uint64_t data = 100003 + 333 * 77 * 2 + 5;
    CHECK_EQ_INT(seen.total, data);
    CHECK_EQ_INT(seen.max_done, data);
    CHECK(seen.calls >= data / 1008);

    /* A fill that fails stops the write: the status comes back, no file is left. */
    uint64_t fail_at = 20000;
    CHECK_EQ_INT(llmr_st_write_file_parallel(fx_path(dir, "failed"), t, 4, NULL, pattern_fill,
                                             &fail_at, &wo, &err),
                 LLMR_IO);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "filling tensor b failed");
    struct stat sb;
    CHECK(stat(fx_path(dir, "failed"), &sb) != 0);
    CHECK(stat(fx_path(dir, "failed.partial"), &sb) != 0);
    llmr_strbuf_free(&err);
}

int main(void)
{
    RUN(tiny_random_is_written_fast_and_opens);
    RUN(same_seed_same_bytes_for_any_thread_count_and_sharding);
    RUN(random_values_have_the_promised_scales);
    RUN(gpt_oss_20b_expert_rows_have_rms_near_one_over_sqrt_in);
    RUN(fill_ranges_agree_with_the_whole);
    RUN(side_files_are_written);
    RUN(zeros_fill_is_sparse);
    RUN(tokenizer_is_found_or_the_error_says_where_it_looked);
    RUN(parallel_writer_matches_the_serial_one_and_fails_cleanly);
    return llmr_test_finish();
}

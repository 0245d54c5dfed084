/* Synthetic snapshot writer: see synth.h. */
#define _GNU_SOURCE
#include "models/synth.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs_util.h"
#include "common/json_util.h"
#include "models/gpt_oss_config.h"
#include "models/gpt_oss_preset.h"
#include "storage/st_index.h"

#define MAX_THREADS 1024u

/* Tokenizer-side files copied when present in the tokenizer source. */
static const char *const tokenizer_files[] = {"tokenizer.json", "tokenizer_config.json",
                                              "special_tokens_map.json", "chat_template.jinja"};

/* A stand-in for gpt-oss's chat template, in the harmony format: the fixed system
 * block, a first system message as the developer's instructions, user turns and
 * final-channel assistant turns, and the assistant's header as the generation
 * prompt.  No tools and no analysis channel: enough to drive a synthetic snapshot,
 * not a replacement for the template gpt-oss publishes. */
const char llmr_synth_chat_template[] =
    "{#- llmr's stand-in harmony template for synthetic gpt-oss snapshots: system block,\n"
    "    developer instructions from a first system message, user turns, final-channel\n"
    "    assistant turns.  No tools, no analysis channel. -#}\n"
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: {{ strftime_now(\"%Y-%m-%d\") }}\n"
    "\n"
    "Reasoning: medium\n"
    "\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every "
    "message.<|end|>\n"
    "{%- if messages and messages[0].role == \"system\" -%}\n"
    "<|start|>developer<|message|># Instructions\n"
    "\n"
    "{{ messages[0].content }}\n"
    "\n"
    "<|end|>\n"
    "{%- endif -%}\n"
    "{%- for message in messages -%}\n"
    "{%- if message.role == \"user\" -%}\n"
    "<|start|>user<|message|>{{ message.content }}<|end|>\n"
    "{%- elif message.role == \"assistant\" -%}\n"
    "<|start|>assistant<|channel|>final<|message|>{{ message.content }}<|end|>\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "<|start|>assistant\n"
    "{%- endif -%}\n";

/* ---- The random fill ----------------------------------------------------------
 * A counter-based generator: the 64 random bits for counter c of a tensor are
 * splitmix64's output function applied to key + c * golden, the key a hash of the
 * seed and the tensor's name.  Any element can be drawn without the ones before it,
 * which is what lets threads fill chunks in any order with the same result, and the
 * name (not the position in a preset) keys the stream, so gpt-oss-20b-2l's tensors
 * are gpt-oss-20b's. */

#define GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t draw(uint64_t key, uint64_t counter)
{
    return mix64(key + (counter + 1) * GOLDEN);
}

static uint64_t tensor_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001B3ull;
    return mix64(h ^ mix64(seed + GOLDEN));
}

/* ln(u) for u in (0, 1], a normal float: u = m * 2^e with m in [sqrt(1/2), sqrt(2)),
 * ln(m) = 2 atanh(t), t = (m - 1) / (m + 1), |t| < 0.172, by its series to t^9
 * (truncation error below 1e-9; with float rounding, 1e-6 at worst).  Our own
 * arithmetic rather than libm's, which picks its code by the CPU at run time: built
 * as ISO C (no contraction into FMA), the same binary gives the same bits on every
 * machine. */
static inline float ln_unit(float u)
{
    uint32_t b;
    memcpy(&b, &u, sizeof b);
    uint32_t high = (b & 0x7FFFFFu) > 0x3504F3u; /* mantissa above sqrt(2) */
    int e = (int)(b >> 23) - 127 + (int)high;
    b = (b & 0x7FFFFFu) | (high ? 0x3F000000u : 0x3F800000u); /* m in [sqrt(1/2), sqrt(2)) */
    float m;
    memcpy(&m, &b, sizeof m);
    float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
    float series = 1.0f + t2 * (0.33333333f + t2 * (0.2f + t2 * (0.14285714f + t2 * 0.11111111f)));
    return (float)e * 0.69314718f + 2.0f * t * series;
}

/* cos and sin of 2 pi k / 2^24 for k < 2^24: the quadrant from the top two bits, the
 * angle within it (below pi/2) by Taylor series to the 12th/11th power (error
 * below 3e-7 with float rounding).  Without branches: the quadrant is random. */
static inline void cos_sin_turn(uint32_t k, float *c, float *s)
{
    float a = (float)(k & 0x3FFFFFu) * (1.57079632679f / 4194304.0f), a2 = a * a;
    float sn = a * (1.0f + a2 * (-1.6666667e-1f + a2 * (8.3333333e-3f + a2 * (-1.9841270e-4f +
                   a2 * (2.7557319e-6f + a2 * -2.5052108e-8f)))));
    float cs = 1.0f + a2 * (-0.5f + a2 * (4.1666667e-2f + a2 * (-1.3888889e-3f + a2 *
                   (2.4801587e-5f + a2 * (-2.7557319e-7f + a2 * 2.0876757e-9f)))));
    uint32_t q = k >> 22, flip = (q & 2u) << 30; /* quadrants 2 and 3: both negated */
    float x = q & 1u ? -sn : cs, y = q & 1u ? cs : sn; /* quadrants 1 and 3: turned */
    uint32_t xb, yb;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&yb, &y, sizeof yb);
    xb ^= flip;
    yb ^= flip;
    memcpy(c, &xb, sizeof xb);
    memcpy(s, &yb, sizeof yb);
}

/* Two independent standard normals from 64 random bits (Box-Muller on 24-bit
 * uniforms: the tail is cut at about 5.9 sigma). */
static inline void normal_pair(uint64_t bits, float *z0, float *z1)
{
    float u1 = ((float)(bits >> 40) + 0.5f) * 0x1p-24f; /* (0, 1] */
    float r = sqrtf(-2.0f * ln_unit(u1));
    float c, s;
    cos_sin_turn((uint32_t)(bits & 0xFFFFFFu), &c, &s);
    *z0 = r * c;
    *z1 = r * s;
}

static inline uint16_t bf16_from_float(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    b += 0x7FFFu + ((b >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(b >> 16);
}

static inline void put_u16le(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* FP4 E2M1 codes {0, .5, 1, 1.5, 2, 3, 4, 6} and their negatives, drawn uniformly:
 * the rms of the decoded value is sqrt(68.5 / 8). */
#define FP4_UNIFORM_RMS 2.9261749776799064
/* A block exponent of base-1, base or base+1 at random multiplies the rms by
 * sqrt((1/4 + 1 + 4) / 3). */
#define JITTER_RMS 1.3228756555322954

typedef enum fill_kind { FILL_NORMAL_BF16, FILL_BYTES, FILL_E8M0, FILL_NONE } fill_kind;

typedef struct fill_plan {
    fill_kind kind;
    float mean, sigma; /* FILL_NORMAL_BF16 */
    int base;          /* FILL_E8M0: the exponent byte of jitter 0 */
    uint64_t key;
} fill_plan;

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static fill_plan plan_for(const llmr_st_write_tensor *t, uint64_t seed)
{
    fill_plan p = {.kind = FILL_NONE, .key = tensor_key(seed, t->name)};
    const char *n = t->name;
    if (t->dtype == LLMR_DTYPE_BF16) {
        p.kind = FILL_NORMAL_BF16;
        if (ends_with(n, "embed_tokens.weight")) {
            /* A token's row starts the residual stream, which every block reads
             * through an RMSNorm: its scale matters only against what the blocks
             * add, outputs of linear layers of rms ~1 (below); sigma 1 keeps the two
             * of the same order, so no block drowns the embedding or the reverse. */
            p.sigma = 1.0f;
        } else if (ends_with(n, "norm.weight")) {
            p.mean = 1.0f;
            p.sigma = 0.05f;
        } else if (ends_with(n, ".sinks")) {
            p.mean = 1.0f;
            p.sigma = 0.5f;
        } else if (ends_with(n, "bias")) {
            p.sigma = 0.02f;
        } else if (t->rank == 2 && t->shape[1] > 0) {
            /* W[out][in] on inputs of rms ~1 (they follow an RMSNorm or an
             * attention average): outputs of rms ~1. */
            p.sigma = (float)(1.0 / sqrt((double)t->shape[1]));
        } else {
            p.sigma = 0.02f;
        }
    } else if (t->dtype == LLMR_DTYPE_U8) {
        p.kind = FILL_BYTES;
        if (ends_with(n, "_scales") && t->rank >= 1 && t->shape[t->rank - 1] > 0) {
            double in = 32.0 * (double)t->shape[t->rank - 1];
            double want = 1.0 / sqrt(in) / (FP4_UNIFORM_RMS * JITTER_RMS);
            long e = lround(log2(want));
            p.kind = FILL_E8M0;
            p.base = (int)(e < -126 ? 1 : e > 126 ? 253 : 127 + e); /* base +-1 stays in 0..254 */
        }
    }
    return p;
}

/* Element e of a normal BF16 tensor (the slow path, for ranges not on elements). */
static uint16_t bf16_element(const fill_plan *p, uint64_t e)
{
    float z[2];
    normal_pair(draw(p->key, e / 2), &z[0], &z[1]);
    return bf16_from_float(p->mean + p->sigma * z[e & 1]);
}

static void fill_normal_bf16(const fill_plan *p, uint64_t offset, uint8_t *buf, size_t len)
{
    if ((offset | len) & 1) {
        for (size_t i = 0; i < len; i++) {
            uint16_t v = bf16_element(p, (offset + i) / 2);
            buf[i] = (uint8_t)((offset + i) & 1 ? v >> 8 : v);
        }
        return;
    }
    uint64_t e = offset / 2, end = e + len / 2;
    uint8_t *out = buf;
    float z0, z1;
    if (e < end && (e & 1)) {
        put_u16le(out, bf16_element(p, e));
        out += 2;
        e++;
    }
    for (; e + 1 < end; e += 2, out += 4) {
        normal_pair(draw(p->key, e / 2), &z0, &z1);
        put_u16le(out, bf16_from_float(p->mean + p->sigma * z0));
        put_u16le(out + 2, bf16_from_float(p->mean + p->sigma * z1));
    }
    if (e < end)
        put_u16le(out, bf16_element(p, e));
}

/* Byte i of a uniform-bytes tensor is byte i % 8 of draw(key, i / 8). */
static void fill_bytes(uint64_t key, uint64_t offset, uint8_t *buf, size_t len)
{
    size_t i = 0;
    while (i < len && (offset + i) % 8) {
        buf[i] = (uint8_t)(draw(key, (offset + i) / 8) >> (8 * ((offset + i) % 8)));
        i++;
    }
    for (uint64_t w = (offset + i) / 8; len - i >= 8; i += 8, w++) {
        uint64_t h = draw(key, w);
        for (int k = 0; k < 8; k++)
            buf[i + k] = (uint8_t)(h >> (8 * k));
    }
    for (; i < len; i++)
        buf[i] = (uint8_t)(draw(key, (offset + i) / 8) >> (8 * ((offset + i) % 8)));
}

static void fill_e8m0(const fill_plan *p, uint64_t offset, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint64_t h = draw(p->key, offset + i);
        int jitter = (int)(((h >> 32) * 3) >> 32) - 1; /* -1, 0 or 1, evenly */
        buf[i] = (uint8_t)(p->base + jitter);
    }
}

void llmr_synth_random_fill(const llmr_st_write_tensor *t, uint64_t seed, uint64_t offset,
                            uint8_t *buf, size_t len)
{
    fill_plan p = plan_for(t, seed);
    switch (p.kind) {
    case FILL_NORMAL_BF16:
        fill_normal_bf16(&p, offset, buf, len);
        break;
    case FILL_BYTES:
        fill_bytes(p.key, offset, buf, len);
        break;
    case FILL_E8M0:
        fill_e8m0(&p, offset, buf, len);
        break;
    case FILL_NONE:
        memset(buf, 0, len);
        break;
    }
}

/* The writer's fill callback: the tensors of one shard. */
typedef struct shard_fill {
    const llmr_st_write_tensor *t;
    uint64_t seed;
} shard_fill;

static llmr_status fill_shard(void *ctx, size_t index, uint64_t offset, uint8_t *buf, size_t len)
{
    const shard_fill *f = ctx;
    llmr_synth_random_fill(&f->t[index], f->seed, offset, buf, len);
    return LLMR_OK;
}

/* LLMR_SYNTH_FILL_SPARSE: the experts' MXFP4 blocks zeros (the writer leaves chunks of
 * zeros as holes: nearly all of a model's bytes), their scales 2^0, every other tensor
 * as the random fill writes it, so that the routers spread tokens over the experts as
 * a trained model's do. */
static llmr_status fill_sparse(void *ctx, size_t index, uint64_t offset, uint8_t *buf, size_t len)
{
    const shard_fill *f = ctx;
    const llmr_st_write_tensor *t = &f->t[index];
    if (t->dtype == LLMR_DTYPE_U8 && ends_with(t->name, "_blocks"))
        memset(buf, 0, len);
    else if (t->dtype == LLMR_DTYPE_U8 && ends_with(t->name, "_scales"))
        memset(buf, 127, len);
    else
        llmr_synth_random_fill(t, f->seed, offset, buf, len);
    return LLMR_OK;
}

/* ---- Progress ------------------------------------------------------------------ */

typedef struct progress {
    FILE *out;
    const char *file;      /* the shard being written */
    uint64_t before;       /* bytes of the shards before it */
    uint64_t start_ns;
    atomic_uint_fast64_t last_ns; /* the last line's time */
} progress;

/* The writer's progress callback, called from every thread: a line when a second
 * has passed since the last one, printed by the thread that claims it. */
static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    progress *p = ctx;
    uint_fast64_t now = llmr_now_ns(), last = atomic_load(&p->last_ns);
    if (now < last + 1000000000u || !atomic_compare_exchange_strong(&p->last_ns, &last, now))
        return;
    double s = (double)(now - p->start_ns) / 1e9;
    fprintf(p->out, "synth: %s %.1f of %.1f GB (%.0f%%), %.0f MB/s\n", p->file, done / 1e9,
            total / 1e9, total ? 100.0 * (double)done / (double)total : 100.0,
            s > 0 ? (double)(p->before + done) / 1e6 / s : 0.0);
    fflush(p->out);
}

/* ---- The snapshot -------------------------------------------------------------- */

/* The directory tokenizer files come from (NULL: none), or an error saying where
 * tokenizer.json was looked for. */
static llmr_status find_tokenizer(const llmr_synth_options *o, const char **dir, llmr_strbuf *err)
{
    *dir = NULL;
    if (o->tokenizer_from) {
        if (llmr_dir_has_file(o->tokenizer_from, "tokenizer.json")) {
            *dir = o->tokenizer_from;
            return LLMR_OK;
        }
        llmr_strbuf_printf(err, "%s has no tokenizer.json; the snapshot needs the tokenizer of "
                                "gpt-oss", o->tokenizer_from);
        return LLMR_NOT_FOUND;
    }
    if (!o->tokenizer_search)
        return LLMR_OK;
    for (const char *const *d = o->tokenizer_search; *d; d++)
        if (llmr_dir_has_file(*d, "tokenizer.json")) {
            *dir = *d;
            return LLMR_OK;
        }
    llmr_strbuf_puts(err, "no gpt-oss tokenizer found: looked for tokenizer.json in");
    for (const char *const *d = o->tokenizer_search; *d; d++)
        llmr_strbuf_printf(err, "%s %s", d == o->tokenizer_search ? "" : ",", *d);
    if (!o->tokenizer_search[0])
        llmr_strbuf_puts(err, " (nowhere)");
    llmr_strbuf_puts(err, "; run make (its build fetches the tokenizer beside the llmr binary, "
                          "under data/gpt-oss) or pass --tokenizer-from DIR, a directory with "
                          "gpt-oss's tokenizer.json");
    return LLMR_NOT_FOUND;
}

static llmr_status write_json(const char *dir, const char *name, const json_t *value,
                              llmr_strbuf *err)
{
    char *path = llmr_path_join(dir, name);
    char *text = json_dumps(value, JSON_INDENT(2));
    llmr_status st = LLMR_OOM_RAM;
    if (path && text) {
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: written with its length */
        st = llmr_write_file_atomic(path, text, n + 1, err);
    }
    free(path);
    free(text);
    return st;
}

/* Tokenizer files from `from` (NULL: none), and a chat template: the source's, or
 * the stand-in. */
static llmr_status write_tokenizer(const char *from, const char *out_dir, llmr_strbuf *err)
{
    llmr_status st;
    bool template_copied = false;
    for (size_t i = 0; from && i < sizeof tokenizer_files / sizeof *tokenizer_files; i++) {
        if (!llmr_dir_has_file(from, tokenizer_files[i]))
            continue;
        if ((st = llmr_copy_file(from, out_dir, tokenizer_files[i], err)) != LLMR_OK)
            return st;
        template_copied |= strcmp(tokenizer_files[i], "chat_template.jinja") == 0;
    }
    if (template_copied)
        return LLMR_OK;
    char *path = llmr_path_join(out_dir, "chat_template.jinja");
    st = path ? llmr_write_file_atomic(path, llmr_synth_chat_template,
                                       sizeof llmr_synth_chat_template - 1, err)
              : LLMR_OOM_RAM;
    free(path);
    return st;
}

static void shard_name(char *buf, size_t size, size_t i, size_t n)
{
    snprintf(buf, size, "model-%05zu-of-%05zu.safetensors", i + 1, n);
}

/* Assigns tensors to shards in order, starting a new one past max_bytes. */
static size_t assign_shards(const llmr_st_write_tensor *t, size_t n, uint64_t max_bytes,
                            size_t *shard_of)
{
    size_t shard = 0;
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = 0;
        llmr_st_tensor_bytes(&t[i], &bytes);
        if (used > 0 && used + bytes > max_bytes) {
            shard++;
            used = 0;
        }
        shard_of[i] = shard;
        used += bytes;
    }
    return n ? shard + 1 : 0;
}

static unsigned thread_count(unsigned asked)
{
    if (asked)
        return asked > MAX_THREADS ? MAX_THREADS : asked;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online < 1 ? 1 : online > (long)MAX_THREADS ? MAX_THREADS : (unsigned)online;
}

static llmr_status write_shards(const llmr_synth_options *o, const llmr_st_write_tensor *t,
                                size_t n, llmr_strbuf *err)
{
    llmr_status st = LLMR_OOM_RAM;
    size_t *shard_of = calloc(n ? n : 1, sizeof *shard_of);
    json_t *map = json_object(), *index = NULL;
    json_t *meta = json_pack("{s:s}", "format", "pt");
    if (!shard_of || !map || !meta)
        goto done;
    uint64_t max = o->max_shard_bytes ? o->max_shard_bytes : LLMR_SYNTH_DEFAULT_SHARD_BYTES;
    size_t shards = assign_shards(t, n, max, shard_of);
    bool random = o->fill == LLMR_SYNTH_FILL_RANDOM;
    unsigned threads = o->fill == LLMR_SYNTH_FILL_ZEROS ? 1 : thread_count(o->threads);
    uint64_t total = 0, start = llmr_now_ns();
    char name[64];
    progress pr = {.out = o->progress, .file = name, .start_ns = start};
    atomic_init(&pr.last_ns, start);
    llmr_st_write_options wo = {.threads = threads, .progress = o->progress ? on_progress : NULL,
                                .progress_ctx = &pr};
    for (size_t s = 0, first = 0; s < shards; s++) {
        size_t count = 0;
        uint64_t bytes = 0;
        while (first + count < n && shard_of[first + count] == s) {
            uint64_t b = 0;
            llmr_st_tensor_bytes(&t[first + count], &b);
            bytes += b;
            count++;
        }
        shard_name(name, sizeof name, s, shards);
        for (size_t i = first; i < first + count; i++)
            json_object_set_new(map, t[i].name, json_string(name));
        pr.before = total;
        shard_fill sf = {.t = t + first, .seed = o->seed};
        char *path = llmr_path_join(o->out_dir, name);
        llmr_st_fill_fn fill = random ? fill_shard : o->fill == LLMR_SYNTH_FILL_SPARSE ? fill_sparse : NULL;
        st = path ? llmr_st_write_file_parallel(path, t + first, count, meta, fill, &sf, &wo, err)
                  : LLMR_OOM_RAM;
        free(path);
        if (st != LLMR_OK)
            goto done;
        total += bytes;
        first += count;
    }
    index = json_pack("{s:{s:I}, s:O}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
    st = index ? write_json(o->out_dir, LLMR_ST_INDEX_FILE, index, err) : LLMR_OOM_RAM;
    if (st == LLMR_OK && o->progress) {
        double s = (double)(llmr_now_ns() - start) / 1e9;
        if (random)
            fprintf(o->progress,
                    "synth: wrote %.2f GB (%zu tensors in %zu shards, seed %llu, %u threads) "
                    "in %.1f s, %.0f MB/s\n",
                    total / 1e9, n, shards, (unsigned long long)o->seed, threads, s,
                    s > 0 ? total / 1e6 / s : 0.0);
        else if (o->fill == LLMR_SYNTH_FILL_SPARSE)
            fprintf(o->progress,
                    "synth: wrote %.2f GB (%zu tensors in %zu shards, the experts' MXFP4 blocks "
                    "as sparse zeros with scales 2^0, the rest random with seed %llu) in %.1f s\n",
                    total / 1e9, n, shards, (unsigned long long)o->seed, s);
        else
            fprintf(o->progress,
                    "synth: wrote %.2f GB (%zu tensors in %zu shards, zeros as sparse files) "
                    "in %.1f s\n",
                    total / 1e9, n, shards, s);
    }
done:
    if (st == LLMR_OOM_RAM && err->len == 0)
        llmr_strbuf_puts(err, "out of memory");
    free(shard_of);
    json_decref(map);
    json_decref(meta);
    json_decref(index);
    return st;
}

llmr_status llmr_synth_snapshot(const llmr_synth_options *o, llmr_strbuf *err)
{
    json_t *config = llmr_gpt_oss_preset_config(o->preset);
    if (!config) {
        llmr_strbuf_printf(err, "unknown preset \"%s\"; presets:", o->preset);
        for (const char *const *p = llmr_gpt_oss_preset_names; *p; p++)
            llmr_strbuf_printf(err, " %s", *p);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_status st;
    json_t *generation = NULL;
    llmr_st_write_tensor *tensors = NULL;
    llmr_tensor_specs specs;
    llmr_tensor_specs_init(&specs);
    const char *tokenizer = NULL;
    if (o->fill != LLMR_SYNTH_FILL_ZEROS && o->fill != LLMR_SYNTH_FILL_RANDOM &&
        o->fill != LLMR_SYNTH_FILL_SPARSE) {
        llmr_strbuf_puts(err, "unknown fill");
        st = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    if (!llmr_dir_is_empty_or_absent(o->out_dir)) {
        llmr_strbuf_printf(err, "%s exists and is not empty; choose a new directory", o->out_dir);
        st = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    /* Before anything is written: a missing tokenizer leaves no half snapshot. */
    if ((st = find_tokenizer(o, &tokenizer, err)) != LLMR_OK)
        goto done;
    if ((st = llmr_mkdir_p(o->out_dir, err)) != LLMR_OK)
        goto done;

    llmr_gpt_oss_config cfg;
    llmr_strbuf unsupported = LLMR_STRBUF_INIT;
    llmr_problems problems;
    llmr_problems_init(&problems);
    st = llmr_gpt_oss_config_parse(config, "config.json", &cfg, &unsupported, &problems);
    if (st != LLMR_OK)
        llmr_strbuf_printf(err, "preset %s does not parse: %s%s", o->preset,
                           llmr_strbuf_cstr(&unsupported),
                           problems.count ? problems.items[0].message : "");
    llmr_strbuf_free(&unsupported);
    llmr_problems_free(&problems);
    if (st != LLMR_OK) {
        st = LLMR_INTERNAL;
        goto done;
    }
    llmr_gpt_oss_expected_tensors(&cfg, &specs);
    tensors = calloc(specs.count ? specs.count : 1, sizeof *tensors);
    if (specs.failed || !tensors) {
        llmr_strbuf_puts(err, "out of memory");
        st = LLMR_OOM_RAM;
        goto done;
    }
    for (size_t i = 0; i < specs.count; i++) {
        tensors[i].name = specs.items[i].name;
        tensors[i].dtype = specs.items[i].dtype;
        tensors[i].rank = specs.items[i].rank;
        memcpy(tensors[i].shape, specs.items[i].shape, sizeof specs.items[i].shape);
    }
    generation = llmr_gpt_oss_generation_config();
    if (o->progress && tokenizer)
        fprintf(o->progress, "synth: tokenizer files from %s\n", tokenizer);
    if ((st = write_json(o->out_dir, "config.json", config, err)) != LLMR_OK ||
        (st = write_json(o->out_dir, "generation_config.json", generation, err)) != LLMR_OK ||
        (st = write_tokenizer(tokenizer, o->out_dir, err)) != LLMR_OK ||
        (st = write_shards(o, tensors, specs.count, err)) != LLMR_OK)
        goto done;
done:
    free(tensors);
    llmr_tensor_specs_free(&specs);
    json_decref(config);
    json_decref(generation);
    return st;
}

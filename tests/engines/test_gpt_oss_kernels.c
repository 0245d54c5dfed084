/* The gpt-oss CPU path against double precision.
 *
 * First the pieces, each against numbers worked out by hand or by the formula in
 * double: the FP4 table and MXFP4 decoding, BF16, RMSNorm, the YaRN frequency table
 * of gpt-oss-20b, RoPE, the softmax with a sink, the router's top-k, the clamped
 * SwiGLU.  Then a whole model: a small gpt-oss (2 layers, grouped KV heads, a 4-token
 * window, MXFP4 experts, YaRN) with random weights and 150 tokens (two prefill chunks,
 * the sliding layer's ring wrapping), run by the engine's forward pass
 * and by a straightforward double-precision evaluation written here from the
 * definitions (two-pass softmax with the sink as an extra column, explicit masks,
 * weights decoded element by element); the logits must agree at every position. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_forward.h"
#include "cpu_kernels.h"
#include "model.h"

#define NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))

/* ---- pieces ------------------------------------------------------------------------ */

TEST(fp4_and_mxfp4_decode_as_specified)
{
    static const double table[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6};
    for (unsigned c = 0; c < 16; c++)
        CHECK(gpt_fp4_value(c) == table[c]);
    /* one row of 64 values: two groups; byte j: element 2j low nibble, 2j+1 high */
    uint8_t blocks[32] = {0}, scales[2] = {128, 125};
    blocks[0] = 0x21;  /* elements 0, 1: codes 1 (0.5) and 2 (1.0) */
    blocks[1] = 0xF9;  /* elements 2, 3: codes 9 (-0.5) and 15 (-6) */
    blocks[16] = 0x07; /* element 32: code 7 (6.0), element 33: 0 */
    gpt_mxfp4 m = {blocks, scales, 1, 64};
    float row[64];
    gpt_mxfp4_row(&m, 0, row);
    CHECK(row[0] == 0.5f * 2);  /* 2^(128-127) */
    CHECK(row[1] == 1.0f * 2);
    CHECK(row[2] == -0.5f * 2);
    CHECK(row[3] == -6.0f * 2);
    CHECK(row[32] == 6.0f / 4); /* 2^(125-127) */
    CHECK(row[33] == 0.0f);
    CHECK(row[63] == 0.0f);
}

TEST(bf16_and_f16_decode)
{
    CHECK(gpt_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(gpt_bf16_to_f32(0xC000) == -2.0f);
    CHECK(gpt_bf16_to_f32(0x3E80) == 0.25f);
    CHECK(gpt_f16_to_f32(0x3C00) == 1.0f);
    CHECK(gpt_f16_to_f32(0xC100) == -2.5f);
    CHECK(gpt_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* the smallest subnormal */
    CHECK(isinf(gpt_f16_to_f32(0x7C00)));
}

TEST(rmsnorm_matches_the_definition)
{
    float x[4] = {1, -2, 3, -4}, w[4] = {1, 0.5f, 2, 1}, out[4];
    gpt_rmsnorm(out, x, w, 4, 1e-5f);
    double r = 1.0 / sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-5); /* 1/sqrt(7.50001) */
    NEAR(out[0], 1 * r, 1e-6);
    NEAR(out[1], -2 * 0.5 * r, 1e-6);
    NEAR(out[2], 3 * 2 * r, 1e-6);
    NEAR(out[3], -4 * r, 1e-6);
}

TEST(yarn_table_of_gpt_oss_20b)
{
    gpt_yarn y = {32.0, 32.0, 1.0, 4096, false};
    gpt_rope r;
    CHECK(gpt_rope_init(&r, 64, 150000.0, &y));
    /* attention factor 0.1 ln 32 + 1 */
    NEAR(r.attn_factor, 1.3465735902799727, 1e-12);
    /* correction range: low = 64 ln(4096 / (32 * 2 pi)) / (2 ln 150000) = 8.0930...,
     * high = 64 ln(4096 / (2 pi)) / (2 ln 150000) = 17.398025...; frequency i below
     * low keeps its original value, above high is divided by the factor */
    NEAR(r.inv_freq[0], 1.0, 1e-15);
    NEAR(r.inv_freq[8], pow(150000.0, -16.0 / 64), 1e-15 + 1e-12 * pow(150000.0, -16.0 / 64));
    double f31 = pow(150000.0, -62.0 / 64);
    NEAR(r.inv_freq[31], f31 / 32, 1e-18);
    NEAR(r.inv_freq[18], pow(150000.0, -36.0 / 64) / 32, 1e-15);
    /* in between, a linear blend: i = 12 lies (12 - low) / (high - low) of the way */
    double low = 64 * log(4096 / (32 * 2 * 3.14159265358979323846)) / (2 * log(150000.0));
    double high = 64 * log(4096 / (2 * 3.14159265358979323846)) / (2 * log(150000.0));
    NEAR(low, 8.092779, 1e-6);
    NEAR(high, 17.398025, 1e-6);
    double ramp = (12 - low) / (high - low), base = pow(150000.0, -24.0 / 64);
    NEAR(r.inv_freq[12], base / 32 * ramp + base * (1 - ramp), 1e-15);
    gpt_rope_free(&r);
}

TEST(rope_rotates_halves)
{
    gpt_rope r;
    CHECK(gpt_rope_init(&r, 4, 10000.0, NULL)); /* inv_freq {1, 0.01} */
    float x[4] = {1, 2, 3, 4};
    gpt_rope_apply(&r, x, 1, 4, 3);
    /* pairs (x0, x2) at angle 3 and (x1, x3) at angle 0.03 */
    NEAR(x[0], 1 * cos(3.0) - 3 * sin(3.0), 1e-6);
    NEAR(x[2], 3 * cos(3.0) + 1 * sin(3.0), 1e-6);
    NEAR(x[1], 2 * cos(0.03) - 4 * sin(0.03), 1e-6);
    NEAR(x[3], 4 * cos(0.03) + 2 * sin(0.03), 1e-6);
    gpt_rope_free(&r);
}

TEST(attention_sink_takes_probability_but_gives_no_value)
{
    /* one head of 2 dims, keys whose scores are 1 and 2 after scaling, sink 0.5 */
    float q[2] = {1, 0}, k[4] = {1, 0, 2, 0}, v[4] = {10, 0, 0, 10}, acc[2], out[2];
    gpt_attn a;
    gpt_attn_begin(&a, acc, 2, 0.5f);
    gpt_attn_keys(&a, q, k, v, 1, 1.0f);
    gpt_attn_keys(&a, q, k + 2, v + 2, 1, 1.0f); /* in two runs, as a wrapped ring */
    gpt_attn_end(&a, out);
    double e1 = exp(1.0), e2 = exp(2.0), es = exp(0.5), z = e1 + e2 + es;
    NEAR(out[0], 10 * e1 / z, 1e-5);
    NEAR(out[1], 10 * e2 / z, 1e-5);
}

TEST(router_takes_the_top_k_and_softmaxes_them)
{
    float logits[5] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
    uint32_t idx[3];
    float w[3];
    gpt_router_topk(logits, 5, 3, idx, w);
    CHECK_EQ_INT(idx[0], 1); /* the tie goes to the lower index */
    CHECK_EQ_INT(idx[1], 3);
    CHECK_EQ_INT(idx[2], 4);
    double z = 2 * exp(3.0) + exp(2.0);
    NEAR(w[0], exp(3.0) / z, 1e-6);
    NEAR(w[2], exp(2.0) / z, 1e-6);
}

TEST(swiglu_clamps_gate_and_up)
{
    float gu[6] = {1.0f, 2.0f, 10.0f, -9.0f, -3.0f, 8.0f}, out[3];
    gpt_swiglu(out, gu, 3, 1.702f, 7.0f);
    double g = 1.0, u = 2.0;
    NEAR(out[0], (u + 1) * g / (1 + exp(-1.702 * g)), 1e-5);
    g = 7.0, u = -7.0; /* both clamped */
    NEAR(out[1], (u + 1) * g / (1 + exp(-1.702 * g)), 1e-5);
    g = -3.0, u = 7.0; /* gate has no lower clamp */
    NEAR(out[2], (u + 1) * g / (1 + exp(-1.702 * g)), 1e-5);
}

/* ---- a whole model ------------------------------------------------------------------ */

enum { H = 64, L = 2, NH = 4, NKV = 2, HD = 16, E = 4, K = 2, I = 64, V = 300, WIN = 4, T = 150 };

static uint64_t rng = 88172645463325252ull;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static uint16_t to_bf16(double v)
{
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fff + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

typedef struct synth_tensor {
    char name[96];
    char dtype[8];
    uint32_t rank;
    uint64_t shape[4];
    void *data;
    uint64_t size;
} synth_tensor;

static synth_tensor tensors[64];
static size_t n_tensors;

static void *add(const char *name, const char *dtype, uint32_t rank, const uint64_t *shape)
{
    synth_tensor *t = &tensors[n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->rank = rank;
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++)
        count *= t->shape[i] = shape[i];
    t->size = count * (strcmp(dtype, "U8") == 0 ? 1 : 2);
    t->data = calloc(count, strcmp(dtype, "U8") == 0 ? 1 : 2);
    return t->data;
}

static void bf16_tensor(const char *name, uint32_t rank, const uint64_t *shape, double mean,
                        double spread)
{
    uint16_t *d = add(name, "BF16", rank, shape);
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++)
        count *= shape[i];
    for (uint64_t i = 0; i < count; i++)
        d[i] = to_bf16(mean + spread * (2 * uniform() - 1));
}

static void mxfp4_tensors(const char *base, uint64_t rows, uint64_t cols)
{
    char name[96];
    if (snprintf(name, sizeof name, "%s_blocks", base) >= (int)sizeof name)
        abort(); /* the names are this file's own, all short */
    uint8_t *b = add(name, "U8", 4, (uint64_t[]){E, rows, cols / 32, 16});
    for (uint64_t i = 0; i < E * rows * cols / 2; i++)
        b[i] = (uint8_t)(uniform() * 256);
    if (snprintf(name, sizeof name, "%s_scales", base) >= (int)sizeof name)
        abort();
    uint8_t *s = add(name, "U8", 3, (uint64_t[]){E, rows, cols / 32});
    for (uint64_t i = 0; i < E * rows * cols / 32; i++)
        s[i] = (uint8_t)(123 + (int)(uniform() * 3)); /* 2^-4 .. 2^-2 */
}

static void build_model(void)
{
    char n[96];
    bf16_tensor("model.embed_tokens.weight", 2, (uint64_t[]){V, H}, 0, 1.0);
    bf16_tensor("lm_head.weight", 2, (uint64_t[]){V, H}, 0, 0.2);
    bf16_tensor("model.norm.weight", 1, (uint64_t[]){H}, 1, 0.1);
    for (int l = 0; l < L; l++) {
#define T_(fmt) (snprintf(n, sizeof n, "model.layers.%d." fmt, l), n)
        bf16_tensor(T_("input_layernorm.weight"), 1, (uint64_t[]){H}, 1, 0.1);
        bf16_tensor(T_("post_attention_layernorm.weight"), 1, (uint64_t[]){H}, 1, 0.1);
        bf16_tensor(T_("self_attn.q_proj.weight"), 2, (uint64_t[]){NH * HD, H}, 0, 0.2);
        bf16_tensor(T_("self_attn.k_proj.weight"), 2, (uint64_t[]){NKV * HD, H}, 0, 0.2);
        bf16_tensor(T_("self_attn.v_proj.weight"), 2, (uint64_t[]){NKV * HD, H}, 0, 0.2);
        bf16_tensor(T_("self_attn.o_proj.weight"), 2, (uint64_t[]){H, NH * HD}, 0, 0.2);
        bf16_tensor(T_("self_attn.q_proj.bias"), 1, (uint64_t[]){NH * HD}, 0, 0.1);
        bf16_tensor(T_("self_attn.k_proj.bias"), 1, (uint64_t[]){NKV * HD}, 0, 0.1);
        bf16_tensor(T_("self_attn.v_proj.bias"), 1, (uint64_t[]){NKV * HD}, 0, 0.1);
        bf16_tensor(T_("self_attn.o_proj.bias"), 1, (uint64_t[]){H}, 0, 0.1);
        bf16_tensor(T_("self_attn.sinks"), 1, (uint64_t[]){NH}, 1, 1.0);
        bf16_tensor(T_("mlp.router.weight"), 2, (uint64_t[]){E, H}, 0, 0.3);
        bf16_tensor(T_("mlp.router.bias"), 1, (uint64_t[]){E}, 0, 0.1);
        snprintf(n, sizeof n, "model.layers.%d.mlp.experts.gate_up_proj", l);
        mxfp4_tensors(n, 2 * I, H);
        snprintf(n, sizeof n, "model.layers.%d.mlp.experts.down_proj", l);
        mxfp4_tensors(n, H, I);
        bf16_tensor(T_("mlp.experts.gate_up_proj_bias"), 2, (uint64_t[]){E, 2 * I}, 0, 0.1);
        bf16_tensor(T_("mlp.experts.down_proj_bias"), 2, (uint64_t[]){E, H}, 0, 0.1);
#undef T_
    }
}

static const synth_tensor *get(const char *fmt, int layer)
{
    char n[96];
    snprintf(n, sizeof n, fmt, layer);
    for (size_t i = 0; i < n_tensors; i++)
        if (strcmp(tensors[i].name, n) == 0)
            return &tensors[i];
    return NULL;
}

static double w_bf16(const synth_tensor *t, uint64_t i)
{
    return gpt_bf16_to_f32(((const uint16_t *)t->data)[i]);
}

/* Element (row, col) of expert e of an MXFP4 stack, decoded by the definition. */
static double w_fp4(const synth_tensor *blocks, const synth_tensor *scales, int e, uint64_t rows,
                    uint64_t cols, uint64_t row, uint64_t col)
{
    uint64_t flat = ((uint64_t)e * rows + row) * cols + col;
    uint8_t byte = ((const uint8_t *)blocks->data)[flat / 2];
    static const double fp4[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6};
    double v = fp4[col % 2 ? byte >> 4 : byte & 15];
    return ldexp(v, (int)((const uint8_t *)scales->data)[flat / 32] - 127);
}

static void norm_d(double *out, const double *x, const synth_tensor *w)
{
    double ss = 0;
    for (int i = 0; i < H; i++)
        ss += x[i] * x[i];
    double r = 1 / sqrt(ss / H + 1e-5);
    for (int i = 0; i < H; i++)
        out[i] = w_bf16(w, (uint64_t)i) * x[i] * r;
}

static void linear_d(double *out, const double *x, const synth_tensor *w, const synth_tensor *b,
                     int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        double s = b ? w_bf16(b, (uint64_t)r) : 0;
        for (int c = 0; c < cols; c++)
            s += w_bf16(w, (uint64_t)r * cols + c) * x[c];
        out[r] = s;
    }
}

/* The YaRN table again, from the formula, in double. */
static void inv_freq_d(double *f)
{
    double pi = 3.14159265358979323846, theta = 150000, factor = 32;
    double low = HD * log(4096 / (32 * 2 * pi)) / (2 * log(theta));
    double high = HD * log(4096 / (1 * 2 * pi)) / (2 * log(theta));
    if (low < 0)
        low = 0;
    if (high > HD - 1)
        high = HD - 1;
    for (int i = 0; i < HD / 2; i++) {
        double base = pow(theta, 2.0 * i / HD), ramp = (i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        f[i] = (1 / (factor * base)) * ramp + (1 / base) * (1 - ramp);
    }
}

static void rope_d(double *v, int pos, const double *f)
{
    double m = 0.1 * log(32.0) + 1;
    for (int i = 0; i < HD / 2; i++) {
        double c = cos(pos * f[i]) * m, s = sin(pos * f[i]) * m, a = v[i], b = v[i + HD / 2];
        v[i] = a * c - b * s;
        v[i + HD / 2] = b * c + a * s;
    }
}

/* The whole model in double for tokens ids[0..T): logits for every position. */
static void reference(const int32_t *ids, double *logits)
{
    static double x[T][H], xn[T][H], q[T][NH * HD], k[T][NKV * HD], v[T][NKV * HD];
    double f[HD / 2];
    inv_freq_d(f);
    const synth_tensor *emb = get("model.embed_tokens.weight", 0);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < H; i++)
            x[t][i] = w_bf16(emb, (uint64_t)ids[t] * H + i);
    for (int l = 0; l < L; l++) {
        bool sliding = l % 2 == 0;
        for (int t = 0; t < T; t++) {
            norm_d(xn[t], x[t], get("model.layers.%d.input_layernorm.weight", l));
            linear_d(q[t], xn[t], get("model.layers.%d.self_attn.q_proj.weight", l),
                     get("model.layers.%d.self_attn.q_proj.bias", l), NH * HD, H);
            linear_d(k[t], xn[t], get("model.layers.%d.self_attn.k_proj.weight", l),
                     get("model.layers.%d.self_attn.k_proj.bias", l), NKV * HD, H);
            linear_d(v[t], xn[t], get("model.layers.%d.self_attn.v_proj.weight", l),
                     get("model.layers.%d.self_attn.v_proj.bias", l), NKV * HD, H);
            for (int h = 0; h < NH; h++)
                rope_d(q[t] + h * HD, t, f);
            for (int h = 0; h < NKV; h++)
                rope_d(k[t] + h * HD, t, f);
        }
        const synth_tensor *sinks = get("model.layers.%d.self_attn.sinks", l);
        for (int t = 0; t < T; t++) {
            double attn[NH * HD], o[H];
            for (int h = 0; h < NH; h++) {
                int kvh = h / (NH / NKV);
                double logit[T + 1], mx = -INFINITY;
                for (int j = 0; j <= t; j++) { /* causal; sliding: the last WIN only */
                    if (sliding && t - j >= WIN) {
                        logit[j] = -INFINITY;
                        continue;
                    }
                    double s = 0;
                    for (int d = 0; d < HD; d++)
                        s += q[t][h * HD + d] * k[j][kvh * HD + d];
                    logit[j] = s / sqrt((double)HD);
                    mx = fmax(mx, logit[j]);
                }
                logit[t + 1] = w_bf16(sinks, (uint64_t)h); /* the sink column */
                mx = fmax(mx, logit[t + 1]);
                double z = 0;
                for (int j = 0; j <= t + 1; j++)
                    z += exp(logit[j] - mx);
                for (int d = 0; d < HD; d++) {
                    double s = 0;
                    for (int j = 0; j <= t; j++)
                        s += exp(logit[j] - mx) / z * v[j][kvh * HD + d];
                    attn[h * HD + d] = s;
                }
            }
            linear_d(o, attn, get("model.layers.%d.self_attn.o_proj.weight", l),
                     get("model.layers.%d.self_attn.o_proj.bias", l), H, NH * HD);
            for (int i = 0; i < H; i++)
                x[t][i] += o[i];
        }
        char name[96];
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj_blocks", l);
        const synth_tensor *gub = get(name, 0);
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj_scales", l);
        const synth_tensor *gus = get(name, 0);
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj_blocks", l);
        const synth_tensor *db = get(name, 0);
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj_scales", l);
        const synth_tensor *ds = get(name, 0);
        const synth_tensor *gu_bias = get("model.layers.%d.mlp.experts.gate_up_proj_bias", l);
        const synth_tensor *d_bias = get("model.layers.%d.mlp.experts.down_proj_bias", l);
        for (int t = 0; t < T; t++) {
            double r[E], nx[H], out[H] = {0};
            norm_d(nx, x[t], get("model.layers.%d.post_attention_layernorm.weight", l));
            linear_d(r, nx, get("model.layers.%d.mlp.router.weight", l),
                     get("model.layers.%d.mlp.router.bias", l), E, H);
            int top[K];
            for (int j = 0; j < K; j++) { /* the K largest, ties to the lower index */
                top[j] = -1;
                for (int e = 0; e < E; e++) {
                    bool used = false;
                    for (int u = 0; u < j; u++)
                        used |= top[u] == e;
                    if (!used && (top[j] < 0 || r[e] > r[top[j]]))
                        top[j] = e;
                }
            }
            double z = 0;
            for (int j = 0; j < K; j++)
                z += exp(r[top[j]] - r[top[0]]);
            for (int j = 0; j < K; j++) {
                int e = top[j];
                double wgt = exp(r[e] - r[top[0]]) / z, gu[2 * I], act[I];
                for (int row = 0; row < 2 * I; row++) {
                    double s = w_bf16(gu_bias, (uint64_t)e * 2 * I + row);
                    for (int c = 0; c < H; c++)
                        s += w_fp4(gub, gus, e, 2 * I, H, (uint64_t)row, (uint64_t)c) * nx[c];
                    gu[row] = s;
                }
                for (int i = 0; i < I; i++) {
                    double g = fmin(gu[2 * i], 7.0), u = fmax(fmin(gu[2 * i + 1], 7.0), -7.0);
                    act[i] = (u + 1) * g / (1 + exp(-1.702 * g));
                }
                for (int row = 0; row < H; row++) {
                    double s = w_bf16(d_bias, (uint64_t)e * H + row);
                    for (int c = 0; c < I; c++)
                        s += w_fp4(db, ds, e, H, I, (uint64_t)row, (uint64_t)c) * act[c];
                    out[row] += wgt * s;
                }
            }
            for (int i = 0; i < H; i++)
                x[t][i] += out[i];
        }
    }
    for (int t = 0; t < T; t++) {
        double nx[H];
        norm_d(nx, x[t], get("model.norm.weight", 0));
        linear_d(logits + (size_t)t * V, nx, get("lm_head.weight", 0), NULL, V, H);
    }
}

static const char config[] =
    "{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"num_key_value_heads\":2,\"head_dim\":16,\"vocab_size\":300,\"num_local_experts\":4,"
    "\"num_experts_per_tok\":2,\"intermediate_size\":64,\"sliding_window\":4,"
    "\"max_position_embeddings\":131072,\"rope_theta\":150000.0,\"rms_norm_eps\":1e-05,"
    "\"swiglu_limit\":7.0,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":32.0,"
    "\"beta_fast\":32.0,\"beta_slow\":1.0,\"original_max_position_embeddings\":4096,"
    "\"truncate\":false},\"layer_types\":[\"sliding_attention\",\"full_attention\"],"
    "\"eos_token_ids\":[299]}";

/* The model built in memory, as the host would describe it to the engine. */
static void describe_model(llmr_engine_model_desc *d, llmr_engine_tensor *et)
{
    for (size_t i = 0; i < n_tensors; i++) {
        et[i].name = tensors[i].name;
        et[i].dtype = tensors[i].dtype;
        et[i].rank = tensors[i].rank;
        memcpy(et[i].shape, tensors[i].shape, sizeof tensors[i].shape);
        et[i].data = tensors[i].data;
        et[i].size = tensors[i].size;
    }
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = "test";
    d->dir = "/nonexistent";
    d->format = "safetensors";
    d->runtime = "gpt_oss";
    d->checked_config_json = config;
    d->tensors = et;
    d->tensor_count = n_tensors;
}

static double rel_l2(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / den);
}

TEST(a_whole_model_matches_double_precision_at_every_position)
{
    build_model();
    llmr_engine_tensor et[64];
    llmr_engine_model_desc d;
    describe_model(&d, et);
    gpt_model m;
    char err[512] = "";
    CHECK_EQ_INT(gpt_model_bind(&m, &d, 2, err), LLMR_OK);
    if (err[0])
        fprintf(stderr, "%s\n", err);
    CHECK_EQ_INT(m.cfg.n_eos, 1);
    CHECK_EQ_INT(m.cfg.eos[0], 299);
    int32_t ids[T];
    for (int t = 0; t < T; t++)
        ids[t] = (int32_t)(uniform() * V);
    static double want[T * V];
    reference(ids, want);
    /* the prompt at once (chunked) and with positions through the window... */
    static float got[T * V];
    gpt_state st;
    CHECK_EQ_INT(gpt_state_init(&st, &m, T, 2, NULL), LLMR_OK); /* grows while running */
    CHECK_EQ_INT(gpt_forward(&st, ids, T, got, T), LLMR_OK);
    for (int t = 0; t < T; t++) {
        double e = rel_l2(got + (size_t)t * V, want + (size_t)t * V, V);
        if (e > 1e-5)
            fprintf(stderr, "position %d: relative L2 %.3g\n", t, e);
        CHECK(e < 1e-5);
    }
    gpt_state_free(&st);
    /* ...and one token at a time, as decoding goes: the same logits */
    CHECK_EQ_INT(gpt_state_init(&st, &m, T, 4, NULL), LLMR_OK);
    float one[V];
    for (int t = 0; t < T; t++) {
        CHECK_EQ_INT(gpt_forward(&st, ids + t, 1, one, 1), LLMR_OK);
        CHECK(rel_l2(one, want + (size_t)t * V, V) < 1e-5);
    }
    gpt_state_free(&st);
    /* ids outside the vocabulary and past the cache are refused */
    CHECK_EQ_INT(gpt_state_init(&st, &m, 2, 2, NULL), LLMR_OK);
    int32_t bad = V;
    CHECK_EQ_INT(gpt_forward(&st, &bad, 1, one, 1), LLMR_UNSUPPORTED);
    CHECK_EQ_INT(gpt_forward(&st, ids, 3, one, 1), LLMR_UNSUPPORTED);
    gpt_state_free(&st);
    gpt_model_free(&m);
    for (size_t i = 0; i < n_tensors; i++)
        free(tensors[i].data);
}

TEST(a_missing_or_misshapen_tensor_is_named)
{
    n_tensors = 0;
    build_model();
    llmr_engine_tensor et[64];
    llmr_engine_model_desc d;
    describe_model(&d, et);
    d.tensor_count = n_tensors - 1; /* the last: layer 1's down_proj_bias */
    gpt_model m;
    char err[512] = "";
    CHECK_EQ_INT(gpt_model_bind(&m, &d, 1, err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(err, "model.layers.1.mlp.experts.down_proj_bias is missing");
    d.tensor_count = n_tensors;
    et[5].shape[0] = 7; /* a wrong row count */
    CHECK_EQ_INT(gpt_model_bind(&m, &d, 1, err), LLMR_MODEL_CORRUPT);
    CHECK_CONTAINS(err, et[5].name);
    for (size_t i = 0; i < n_tensors; i++)
        free(tensors[i].data);
}

int main(void)
{
    RUN(fp4_and_mxfp4_decode_as_specified);
    RUN(bf16_and_f16_decode);
    RUN(rmsnorm_matches_the_definition);
    RUN(yarn_table_of_gpt_oss_20b);
    RUN(rope_rotates_halves);
    RUN(attention_sink_takes_probability_but_gives_no_value);
    RUN(router_takes_the_top_k_and_softmaxes_them);
    RUN(swiglu_clamps_gate_and_up);
    RUN(a_whole_model_matches_double_precision_at_every_position);
    RUN(a_missing_or_misshapen_tensor_is_named);
    return llmr_test_finish();
}

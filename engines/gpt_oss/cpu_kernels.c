/* The gpt-oss CPU arithmetic: see cpu_kernels.h. */
#include "cpu_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GPT_PI 3.14159265358979323846

/* ---- number formats ------------------------------------------------------------ */

float gpt_bf16_to_f32(uint16_t v)
{
    uint32_t bits = (uint32_t)v << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float gpt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void gpt_decode(const void *data, gpt_dtype dtype, size_t first, size_t n, float *out)
{
    if (dtype == GPT_DT_F32) {
        memcpy(out, (const float *)data + first, n * sizeof *out);
        return;
    }
    const uint16_t *p = (const uint16_t *)data + first;
    if (dtype == GPT_DT_BF16)
        for (size_t i = 0; i < n; i++)
            out[i] = gpt_bf16_to_f32(p[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = gpt_f16_to_f32(p[i]);
}

static const float fp4_values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float gpt_fp4_value(unsigned code)
{
    return fp4_values[code & 15];
}

void gpt_mxfp4_row(const gpt_mxfp4 *m, uint32_t row, float *out)
{
    uint32_t groups = m->cols / 32;
    const uint8_t *blocks = m->blocks + (size_t)row * groups * 16;
    const uint8_t *scales = m->scales + (size_t)row * groups;
    for (uint32_t g = 0; g < groups; g++) {
        float s = ldexpf(1.0f, (int)scales[g] - 127);
        const uint8_t *b = blocks + (size_t)g * 16;
        float *o = out + (size_t)g * 32;
        for (int j = 0; j < 16; j++) {
            o[2 * j] = fp4_values[b[j] & 15] * s;
            o[2 * j + 1] = fp4_values[b[j] >> 4] * s;
        }
    }
}

/* ---- norms and dot products ------------------------------------------------------ */

void gpt_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / n + eps));
    for (uint32_t i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * r);
}

/* Eight independent sums, so the compiler can keep them in vector lanes; the order
 * is fixed, so the result does not depend on threads. */
static float dot(const float *a, const float *b, uint32_t n)
{
    float s[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    float t = 0;
    for (; i < n; i++)
        t += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}

typedef struct linear_job {
    float *Y;
    const float *X;
    uint32_t T;
    const gpt_matrix *W;
    const gpt_mxfp4 *Q;
    const float *bias;
    uint32_t rows, cols;
} linear_job;

#define ROW_ON_STACK 8192u

static void linear_rows(void *ctx, size_t begin, size_t end)
{
    const linear_job *j = ctx;
    float stack_row[ROW_ON_STACK];
    float *row = j->cols <= ROW_ON_STACK ? stack_row : malloc((size_t)j->cols * sizeof *row);
    for (size_t r = begin; r < end; r++) {
        float b = j->bias ? j->bias[r] : 0.0f;
        if (!row) { /* out of memory for a wide row: decode element by element */
            for (uint32_t t = 0; t < j->T; t++) {
                const float *x = j->X + (size_t)t * j->cols;
                float s = 0, w;
                for (uint32_t c = 0; c < j->cols; c++) {
                    if (j->Q) {
                        uint8_t byte = j->Q->blocks[(r * j->cols + c) / 2];
                        w = gpt_fp4_value(c % 2 ? byte >> 4 : byte & 15) *
                            ldexpf(1.0f, (int)j->Q->scales[(r * j->cols + c) / 32] - 127);
                    } else {
                        gpt_decode(j->W->data, j->W->dtype, r * j->cols + c, 1, &w);
                    }
                    s += w * x[c];
                }
                j->Y[(size_t)t * j->rows + r] = s + b;
            }
            continue;
        }
        if (j->Q)
            gpt_mxfp4_row(j->Q, (uint32_t)r, row);
        else
            gpt_decode(j->W->data, j->W->dtype, r * j->cols, j->cols, row);
        for (uint32_t t = 0; t < j->T; t++)
            j->Y[(size_t)t * j->rows + r] = dot(row, j->X + (size_t)t * j->cols, j->cols) + b;
    }
    if (row != stack_row)
        free(row);
}

void gpt_linear(gpt_pool *pool, float *Y, const float *X, uint32_t T, const gpt_matrix *W,
                const float *bias)
{
    linear_job j = {Y, X, T, W, NULL, bias, W->rows, W->cols};
    gpt_pool_for(pool, W->rows, linear_rows, &j);
}

void gpt_linear_mxfp4(gpt_pool *pool, float *Y, const float *X, uint32_t T, const gpt_mxfp4 *W,
                      const float *bias)
{
    linear_job j = {Y, X, T, NULL, W, bias, W->rows, W->cols};
    gpt_pool_for(pool, W->rows, linear_rows, &j);
}

/* ---- RoPE and YaRN ------------------------------------------------------------------ */

/* The dimension at which a frequency turns num_rotations times over the original
 * context (YaRN's correction dimension). */
static double correction_dim(double num_rotations, double dim, double base, double max_pos)
{
    return dim * log(max_pos / (num_rotations * 2 * GPT_PI)) / (2 * log(base));
}

bool gpt_rope_init(gpt_rope *r, uint32_t head_dim, double theta, const gpt_yarn *y)
{
    r->half = head_dim / 2;
    r->inv_freq = malloc(r->half * sizeof *r->inv_freq);
    r->attn_factor = 1.0;
    if (!r->inv_freq)
        return false;
    double low = 0, high = 0;
    if (y) {
        low = correction_dim(y->beta_fast, head_dim, theta, y->original_max_position);
        high = correction_dim(y->beta_slow, head_dim, theta, y->original_max_position);
        if (y->truncate) {
            low = floor(low);
            high = ceil(high);
        }
        if (low < 0)
            low = 0;
        if (high > head_dim - 1)
            high = head_dim - 1;
        if (low == high)
            high += 0.001; /* no division by zero in the ramp */
        r->attn_factor = y->factor > 1 ? 0.1 * log(y->factor) + 1.0 : 1.0;
    }
    for (uint32_t i = 0; i < r->half; i++) {
        double pos_freq = pow(theta, (2.0 * i) / head_dim);
        double extrapolation = 1.0 / pos_freq;
        if (!y) {
            r->inv_freq[i] = extrapolation;
            continue;
        }
        double interpolation = 1.0 / (y->factor * pos_freq);
        double ramp = (i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double extrapolation_weight = 1.0 - ramp;
        r->inv_freq[i] = interpolation * (1 - extrapolation_weight) +
                         extrapolation * extrapolation_weight;
    }
    return true;
}

void gpt_rope_free(gpt_rope *r)
{
    free(r->inv_freq);
    r->inv_freq = NULL;
}

void gpt_rope_apply(const gpt_rope *r, float *x, uint32_t n_heads, uint32_t head_dim, uint32_t pos)
{
    uint32_t half = head_dim / 2;
    for (uint32_t i = 0; i < half; i++) {
        double angle = (double)pos * r->inv_freq[i];
        float c = (float)(cos(angle) * r->attn_factor), s = (float)(sin(angle) * r->attn_factor);
        for (uint32_t h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * head_dim;
            float a = v[i], b = v[i + half];
            v[i] = a * c - b * s;
            v[i + half] = b * c + a * s;
        }
    }
}

/* ---- router and activation ------------------------------------------------------------ */

void gpt_router_topk(const float *logits, uint32_t n, uint32_t k, uint32_t *idx, float *weight)
{
    for (uint32_t j = 0; j < k; j++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < n; i++) {
            bool taken = false;
            for (uint32_t t = 0; t < j; t++)
                taken |= idx[t] == i;
            if (!taken && (best == UINT32_MAX || logits[i] > logits[best]))
                best = i;
        }
        idx[j] = best;
    }
    double sum = 0, e[64];
    for (uint32_t j = 0; j < k; j++) {
        e[j] = exp((double)logits[idx[j]] - logits[idx[0]]);
        sum += e[j];
    }
    for (uint32_t j = 0; j < k; j++)
        weight[j] = (float)(e[j] / sum);
}

void gpt_swiglu(float *out, const float *gate_up, uint32_t inter, float alpha, float limit)
{
    for (uint32_t i = 0; i < inter; i++) {
        float gate = gate_up[2 * i], up = gate_up[2 * i + 1];
        gate = gate > limit ? limit : gate;
        up = up > limit ? limit : up < -limit ? -limit : up;
        float glu = gate / (1.0f + expf(-alpha * gate));
        out[i] = (up + 1.0f) * glu;
    }
}

/* ---- attention with a sink ------------------------------------------------------------------ */

void gpt_attn_begin(gpt_attn *a, float *acc, uint32_t hd, float sink)
{
    a->m = sink;
    a->l = 1.0; /* exp(sink - m) */
    a->acc = acc;
    a->hd = hd;
    memset(acc, 0, hd * sizeof *acc);
}

void gpt_attn_keys(gpt_attn *a, const float *q, const float *k, const float *v, uint32_t count,
                   float scale)
{
    uint32_t hd = a->hd;
    for (uint32_t j = 0; j < count; j++) {
        float s = dot(q, k + (size_t)j * hd, hd) * scale;
        if (s > a->m) { /* a new maximum: rescale what was summed */
            float c = expf(a->m - s);
            a->l *= c;
            for (uint32_t d = 0; d < hd; d++)
                a->acc[d] *= c;
            a->m = s;
        }
        float p = expf(s - a->m);
        a->l += p;
        const float *vj = v + (size_t)j * hd;
        for (uint32_t d = 0; d < hd; d++)
            a->acc[d] += p * vj[d];
    }
}

void gpt_attn_end(const gpt_attn *a, float *out)
{
    float inv = (float)(1.0 / a->l);
    for (uint32_t d = 0; d < a->hd; d++)
        out[d] = a->acc[d] * inv;
}

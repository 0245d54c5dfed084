/* The arithmetic of the gpt-oss CPU path, in fp32 with weights decoded on the fly:
 * number formats (BF16, F16, MXFP4), RMSNorm, linear layers over BF16/F16/F32 and
 * MXFP4 weights, RoPE with YaRN, the router's top-k, the clamped SwiGLU, and the
 * softmax with an attention sink.  Each function is the plain definition of
 * ../shared/DESIGN.md section 5, written to be checked against a double-precision
 * evaluation (tests/engines/test_gpt_oss_kernels.c). */
#ifndef GPT_OSS_CPU_KERNELS_H
#define GPT_OSS_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "thread_pool.h"

typedef enum gpt_dtype { GPT_DT_BF16, GPT_DT_F16, GPT_DT_F32 } gpt_dtype;

/* A row-major matrix [rows][cols] of floating-point weights. */
typedef struct gpt_matrix {
    const void *data;
    gpt_dtype dtype;
    uint32_t rows, cols;
} gpt_matrix;

/* One MXFP4 matrix [rows][cols]: blocks [rows][cols/32][16] (byte j holds element 2j
 * in its low nibble, 2j+1 in its high one), scales [rows][cols/32] (E8M0). */
typedef struct gpt_mxfp4 {
    const uint8_t *blocks;
    const uint8_t *scales;
    uint32_t rows, cols;
} gpt_mxfp4;

float gpt_bf16_to_f32(uint16_t v);
float gpt_f16_to_f32(uint16_t v);
/* n values of a weight array from element `first` on, as floats. */
void gpt_decode(const void *data, gpt_dtype dtype, size_t first, size_t n, float *out);

/* The E2M1 value of a 4-bit code (0..15). */
float gpt_fp4_value(unsigned code);
/* Row `row` of an MXFP4 matrix as floats (cols of them). */
void gpt_mxfp4_row(const gpt_mxfp4 *m, uint32_t row, float *out);

/* out = x / sqrt(mean(x^2) + eps) * w, over n values (out may be x). */
void gpt_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);

/* Y[t][r] = sum_c W[r][c] X[t][c] + bias[r] for t < T (bias may be NULL).  X rows are
 * W->cols floats, Y rows W->rows floats.  Rows are shared out over the pool. */
void gpt_linear(gpt_pool *pool, float *Y, const float *X, uint32_t T, const gpt_matrix *W,
                const float *bias);
void gpt_linear_mxfp4(gpt_pool *pool, float *Y, const float *X, uint32_t T, const gpt_mxfp4 *W,
                      const float *bias);

/* Rotary embedding: inv_freq for each of head_dim/2 frequencies, and the factor cos
 * and sin are scaled by (YaRN's attention factor; 1 without YaRN). */
typedef struct gpt_rope {
    uint32_t half;
    double *inv_freq;
    double attn_factor;
} gpt_rope;

typedef struct gpt_yarn {
    double factor, beta_fast, beta_slow, original_max_position;
    bool truncate;
} gpt_yarn;

/* yarn NULL: plain RoPE.  Returns false when out of memory. */
bool gpt_rope_init(gpt_rope *r, uint32_t head_dim, double theta, const gpt_yarn *yarn);
void gpt_rope_free(gpt_rope *r);
/* Rotates n_heads vectors of head_dim floats at position pos, half-split (the first
 * half of a head pairs with the second). */
void gpt_rope_apply(const gpt_rope *r, float *x, uint32_t n_heads, uint32_t head_dim,
                    uint32_t pos);

/* The k largest of n logits (ties to the lower index), and the softmax over them. */
void gpt_router_topk(const float *logits, uint32_t n, uint32_t k, uint32_t *idx, float *weight);

/* out[i] = (up + 1) * gate * sigmoid(alpha * gate), gate = min(gate_up[2i], limit),
 * up = clamp(gate_up[2i+1], -limit, limit), for i < inter. */
void gpt_swiglu(float *out, const float *gate_up, uint32_t inter, float alpha, float limit);

/* Attention of one query head with a sink, as an online softmax over the keys in
 * any number of contiguous runs: begin with the sink's logit (it counts in the
 * softmax's sum but brings no value), feed runs of keys and values, end.  The result
 * is sum_j p_j v_j with p = softmax([scale q.k_0, ..., scale q.k_n-1, sink]) without
 * its last entry. */
typedef struct gpt_attn {
    float m;      /* the largest logit so far */
    double l;     /* sum of exp(logit - m) so far */
    float *acc;   /* hd floats: sum of exp(logit - m) v */
    uint32_t hd;
} gpt_attn;

void gpt_attn_begin(gpt_attn *a, float *acc, uint32_t hd, float sink);
/* count keys and values, each row hd floats, consecutive in memory. */
void gpt_attn_keys(gpt_attn *a, const float *q, const float *k, const float *v, uint32_t count,
                   float scale);
void gpt_attn_end(const gpt_attn *a, float *out);

#endif

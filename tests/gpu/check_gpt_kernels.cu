/* Device check of every kernel of the gpt-oss CUDA path against the CPU reference
 * (engines/gpt_oss/cpu_kernels.c), on random inputs at gpt-oss-20b's widths (and the
 * tiny preset's head_dim 16 for attention).  Inputs that the GPU takes as fp16 (or the
 * embedding's bf16) are given to the CPU as the same values, so what differs is the
 * GPU's own rounding (fp16 outputs, split fp16 in the attention block) and the order
 * of fp32 sums.
 * Each case prints its relative L2 error and its tolerance; exit 1 when any case
 * fails.
 *
 * Usage: gpt-oss-kernel-check (needs a CUDA GPU of compute capability 8.0 or newer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "cpu_kernels.h"
}
#include "kernels.cuh"
#include "blas_gemm.cuh"

static int failures;

#include "cuda_ok.h"

/* ---- helpers -------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64()
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)((next_u64() >> 40) * (1.0 / 16777216.0));
}

static uint16_t to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h)
{
    return gpt_bf16_to_f32(h);
}

static uint16_t to_h(float f)
{
    __half h = __float2half_rn(f);
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static float from_h(uint16_t h)
{
    return gpt_f16_to_f32(h);
}

/* n random values, as bf16 bits and as the floats they are */
static void random_bf16(std::vector<uint16_t> &bits, std::vector<float> &vals, size_t n, float scale)
{
    bits.resize(n);
    vals.resize(n);
    for (size_t i = 0; i < n; i++) {
        bits[i] = to_bf16(uniform(-scale, scale));
        vals[i] = from_bf16(bits[i]);
    }
}

/* n random values, as fp16 bits and as the floats they are */
static void random_h(std::vector<uint16_t> &bits, std::vector<float> &vals, size_t n, float scale)
{
    bits.resize(n);
    vals.resize(n);
    for (size_t i = 0; i < n; i++) {
        bits[i] = to_h(uniform(-scale, scale));
        vals[i] = from_h(bits[i]);
    }
}

/* x as split fp16 (kernels.cuh), on the host */
static void split_h(const std::vector<float> &x, std::vector<uint16_t> &hi, std::vector<uint16_t> &lo)
{
    hi.resize(x.size());
    lo.resize(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        hi[i] = to_h(x[i]);
        lo[i] = to_h(x[i] - from_h(hi[i]));
    }
}

static std::vector<float> random_f32(size_t n, float scale)
{
    std::vector<float> v(n);
    for (auto &x : v)
        x = uniform(-scale, scale);
    return v;
}

template <typename T>
static T *upload(const std::vector<T> &v)
{
    T *d = nullptr;
    CUDA_OK(cudaMalloc(&d, v.size() * sizeof(T) + 16));
    CUDA_OK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

template <typename T>
static T *dev(size_t n)
{
    T *d = nullptr;
    CUDA_OK(cudaMalloc(&d, n * sizeof(T) + 16));
    CUDA_OK(cudaMemset(d, 0, n * sizeof(T) + 16));
    return d;
}

template <typename T>
static std::vector<T> download(const T *d, size_t n)
{
    std::vector<T> v(n);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}

static std::vector<float> h_to_floats(const std::vector<uint16_t> &b)
{
    std::vector<float> f(b.size());
    for (size_t i = 0; i < b.size(); i++)
        f[i] = from_h(b[i]);
    return f;
}

static double rel_l2(const float *got, const float *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void report(const char *kernel, const char *what, double err, double tol)
{
    bool ok = err <= tol && !isnan(err);
    printf("%-26s %-44s %10.3e %9.1e %s\n", kernel, what, err, tol, ok ? "PASS" : "FAIL");
    if (!ok)
        failures++;
}

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}

static gpt_pool *pool;

/* ---- cases ----------------------------------------------------------------------------------- */

static void check_conversions()
{
    std::vector<uint16_t> b;
    std::vector<float> f;
    random_bf16(b, f, 100000, 3.0f);
    b[17] = to_bf16(1e5f); /* beyond fp16: saturates, counted */
    f[17] = 65504.0f;
    uint16_t *d = upload(b);
    unsigned long long *over = dev<unsigned long long>(1);
    check(k_bf16_to_f16(d, b.size(), over, 0), "k_bf16_to_f16");
    auto got = h_to_floats(download(d, b.size()));
    report("k_bf16_to_f16", "100000 values", rel_l2(got.data(), f.data(), f.size()), 1e-9);
    report("k_bf16_to_f16", "overflows counted (want 1): |count - 1|",
           fabs((double)download(over, 1)[0] - 1.0), 0);
    std::vector<uint8_t> bytes(70000);
    for (auto &x : bytes)
        x = (uint8_t)(110 + next_u64() % 20);
    bytes[3] = 104;
    bytes[69999] = 141;
    uint32_t init[2] = {255, 0};
    uint32_t *range = upload(std::vector<uint32_t>(init, init + 2));
    check(k_byte_range(upload(bytes), bytes.size(), range, 0), "k_byte_range");
    auto r = download(range, 2);
    report("k_byte_range", "min 104, max 141: errors", fabs(r[0] - 104.0) + fabs(r[1] - 141.0), 0);

    /* the experts' blocks laid out (kernels.cuh): word i of a group, nibble n holds value
     * 2i + 8 (n / 2) + n % 2 of the file's group, its magnitude in the nibble's bits 0-2
     * and its sign at bit 8n + 7 (n < 4) or 8 (n - 4) + 3 */
    std::vector<uint8_t> file(4096 * 16);
    for (auto &x : file)
        x = (uint8_t)next_u64();
    uint8_t *laid = upload(file);
    check(k_mxfp4_lay_out(laid, file.size() / 16, 0), "k_mxfp4_lay_out");
    auto words = download(reinterpret_cast<uint32_t *>(laid), file.size() / 4);
    size_t wrong = 0;
    for (size_t grp = 0; grp < file.size() / 16; grp++)
        for (uint32_t i = 0; i < 4; i++)
            for (uint32_t n = 0; n < 8; n++) {
                uint32_t v = 2 * i + 8 * (n / 2) + n % 2, nib = file[grp * 16 + v / 2] >> (4 * (v % 2)) & 15u;
                uint32_t w = words[grp * 4 + i], sign_at = n < 4 ? 8 * n + 7 : 8 * (n - 4) + 3;
                wrong += (w >> (4 * n) & 7u) != (nib & 7u) || (w >> sign_at & 1u) != nib >> 3;
            }
    report("k_mxfp4_lay_out", "4096 groups: values misplaced", (double)wrong, 0);
}

/* An experts' blocks on the device as the loader keeps them (laid out). */
static uint8_t *upload_laid(const std::vector<uint8_t> &blocks)
{
    uint8_t *d = upload(blocks);
    check(k_mxfp4_lay_out(d, blocks.size() / 16, 0), "k_mxfp4_lay_out");
    return d;
}

static void check_rmsnorm()
{
    const uint32_t T = 5, H = 2880;
    auto x = random_f32(T * H, 3.0f), w = random_f32(H, 1.5f);
    std::vector<float> want(T * H);
    for (uint32_t t = 0; t < T; t++)
        gpt_rmsnorm(&want[t * H], &x[t * H], w.data(), H, 1e-5f);
    float *dx = upload(x), *dw = upload(w), *df = dev<float>(T * H);
    f16 *db = dev<f16>(T * H), *dl = dev<f16>(T * H);
    check(k_rmsnorm(db, NULL, df, dx, dw, T, H, 1e-5f, 0), "k_rmsnorm");
    auto got = download(df, T * H);
    report("k_rmsnorm", "fp32 out, 5 x 2880", rel_l2(got.data(), want.data(), T * H), 1e-6);
    auto gb = download(reinterpret_cast<uint16_t *>(db), T * H);
    auto gbf = h_to_floats(gb);
    report("k_rmsnorm", "fp16 out", rel_l2(gbf.data(), want.data(), T * H), 1e-3);
    check(k_rmsnorm(db, dl, NULL, dx, dw, T, H, 1e-5f, 0), "k_rmsnorm");
    auto hi = h_to_floats(download(reinterpret_cast<uint16_t *>(db), T * H));
    auto lo = h_to_floats(download(reinterpret_cast<uint16_t *>(dl), T * H));
    for (size_t i = 0; i < hi.size(); i++)
        hi[i] += lo[i];
    report("k_rmsnorm", "split fp16 out (hi + lo)", rel_l2(hi.data(), want.data(), T * H), 1e-6);
    check(cudaMemset(db, 0xFF, T * H * sizeof(f16)), "poison");
    check(k_rmsnorm_operand_order(db, df, dx, dw, T, H, 1e-5f, 0), "k_rmsnorm_operand_order");
    auto ob = download(reinterpret_cast<uint16_t *>(db), T * H);
    size_t moved = 0;
    for (uint32_t i = 0; i < T * H; i++)
        moved += ob[mx_operand_index(i)] != gb[i];
    report("k_rmsnorm_operand_order", "fp16 values not where the operand order puts them", (double)moved, 0);
}

static void check_embed()
{
    const uint32_t V = 1000, H = 2880;
    std::vector<uint16_t> eb;
    std::vector<float> ef;
    random_bf16(eb, ef, (size_t)V * H, 1.0f);
    std::vector<int32_t> ids = {5, 999, 0, 5};
    bf16 *de = reinterpret_cast<bf16 *>(upload(eb));
    int32_t *di = upload(ids);
    float *dx = dev<float>(ids.size() * H);
    check(k_embed(dx, de, di, (uint32_t)ids.size(), H, 0), "k_embed");
    auto got = download(dx, ids.size() * H);
    std::vector<float> want(ids.size() * H);
    for (size_t t = 0; t < ids.size(); t++)
        memcpy(&want[t * H], &ef[(size_t)ids[t] * H], H * 4);
    report("k_embed", "4 ids", rel_l2(got.data(), want.data(), want.size()), 0);
}

/* Y = X W^T + b on the CPU with W fp16 */
static void cpu_linear(std::vector<float> &Y, const std::vector<float> &X, uint32_t T,
                       const std::vector<uint16_t> &W, uint32_t rows, uint32_t cols,
                       const float *bias)
{
    gpt_matrix m = {W.data(), GPT_DT_F16, rows, cols};
    Y.resize((size_t)T * rows);
    gpt_linear(pool, Y.data(), X.data(), T, &m, bias);
}

static void check_gemm(uint32_t M, uint32_t N, uint32_t K, uint32_t tile = 0)
{
    std::vector<uint16_t> ab, bb;
    std::vector<float> af, bf;
    random_h(ab, af, (size_t)M * K, 1.0f);
    random_h(bb, bf, (size_t)N * K, 0.05f);
    auto bias = random_f32(N, 0.5f), c0 = random_f32((size_t)M * N, 1.0f);
    std::vector<float> want;
    cpu_linear(want, af, M, bb, N, K, bias.data());
    f16 *dA = reinterpret_cast<f16 *>(upload(ab)), *dB = reinterpret_cast<f16 *>(upload(bb));
    float *dbias = upload(bias), *dC = upload(c0);
    /* the split of K (products of few rows) where the engine gives a scratch */
    size_t parts = k_gemm_split_scratch_bytes(M, N);
    float *dparts = parts ? dev<float>(parts / sizeof(float)) : NULL;
    char what[96];
    const char *tile_name = tile == GPT_GEMM_TILE_LARGE8 ? ", large tile of 8 warps" : "";
    snprintf(what, sizeof what, "M %u, N %u, K %u%s", M, N, K, tile_name);
    check(k_gemm_f16_tile(tile, dC, dA, NULL, dB, dbias, M, N, K, 0, NULL, 0), "k_gemm_f16");
    auto got = download(dC, (size_t)M * N);
    report("k_gemm_f16", what, rel_l2(got.data(), want.data(), want.size()), 1e-5);
    for (size_t i = 0; i < want.size(); i++)
        want[i] += got[i];
    check(k_gemm_f16_tile(tile, dC, dA, NULL, dB, dbias, M, N, K, 1, dparts, 0), "k_gemm_f16");
    got = download(dC, (size_t)M * N);
    snprintf(what, sizeof what, "M %u, N %u, K %u, accumulate%s%s", M, N, K, dparts ? ", K split" : "", tile_name);
    report("k_gemm_f16", what, rel_l2(got.data(), want.data(), want.size()), 1e-5);

    /* split fp16 A: the product of the fp32 values (fp16 alone would be ~3e-4 off) */
    auto ax = random_f32((size_t)M * K, 1.0f);
    std::vector<uint16_t> ahi, alo;
    split_h(ax, ahi, alo);
    cpu_linear(want, ax, M, bb, N, K, bias.data());
    check(k_gemm_f16_tile(tile, dC, reinterpret_cast<f16 *>(upload(ahi)), reinterpret_cast<f16 *>(upload(alo)),
                     dB, dbias, M, N, K, 0, dparts, 0),
          "k_gemm_f16");
    got = download(dC, (size_t)M * N);
    snprintf(what, sizeof what, "M %u, N %u, K %u, split fp16 A%s%s", M, N, K, dparts ? ", K split" : "", tile_name);
    report("k_gemm_f16", what, rel_l2(got.data(), want.data(), want.size()), 1e-5);
}

/* A product of split fp16 A onto C with a bias: random fp16 weights B, the bias, C
 * before, X in fp32 split into hi + lo, and the C the CPU reference wants (C before +
 * X B^T + bias). */
struct SplitCase {
    std::vector<uint16_t> bb, ahi, alo;
    std::vector<float> bias, c0, want;
    SplitCase(uint32_t M, uint32_t N, uint32_t K)
    {
        std::vector<float> bf;
        random_h(bb, bf, (size_t)N * K, 0.05f);
        bias = random_f32(N, 0.5f);
        c0 = random_f32((size_t)M * N, 1.0f);
        auto ax = random_f32((size_t)M * K, 1.0f);
        split_h(ax, ahi, alo);
        cpu_linear(want, ax, M, bb, N, K, bias.data());
        for (size_t i = 0; i < want.size(); i++)
            want[i] += c0[i];
    }
};

/* k_gemm_f16_shape: split fp16 A, accumulated onto C, in tiles of bm rows with K in
 * `splits` parts (the step bench's shapes) */
static void check_gemm_shape(uint32_t M, uint32_t N, uint32_t K, uint32_t bm, uint32_t splits)
{
    SplitCase c(M, N, K);
    float *dC = upload(c.c0), *dparts = dev<float>((size_t)splits * M * N);
    check(k_gemm_f16_shape(bm, splits, dC, reinterpret_cast<f16 *>(upload(c.ahi)),
                           reinterpret_cast<f16 *>(upload(c.alo)), reinterpret_cast<f16 *>(upload(c.bb)),
                           upload(c.bias), M, N, K, 1, dparts, 0),
          "k_gemm_f16_shape");
    auto got = download(dC, (size_t)M * N);
    char what[96];
    snprintf(what, sizeof what, "M %u, N %u, K %u, split fp16 A, accumulate, tile %u, %u parts", M, N, K, bm, splits);
    report("k_gemm_f16_shape", what, rel_l2(got.data(), c.want.data(), c.want.size()), 1e-5);
}

/* k_gemm_f16_wgmma (Hopper): split fp16 A accumulated onto C with the bias, K in
 * `splits` parts (0: its pick); then fp16 A alone onto nothing, K whole */
static void check_gemm_wgmma(uint32_t M, uint32_t N, uint32_t K, uint32_t splits)
{
    if (!k_wgmma_available()) {
        printf("%-26s %-44s (not checked: not compute capability 9.0)\n", "k_gemm_f16_wgmma", "");
        return;
    }
    SplitCase c(M, N, K);
    float *dC = upload(c.c0), *dbias = upload(c.bias);
    float *dparts = dev<float>((size_t)GPT_GEMM_WGMMA_SPLITS_MAX * M * N);
    f16 *dB = reinterpret_cast<f16 *>(upload(c.bb)), *dhi = reinterpret_cast<f16 *>(upload(c.ahi));
    check(k_gemm_f16_wgmma(splits, dC, dhi, reinterpret_cast<f16 *>(upload(c.alo)), dB, dbias, M, N, K, 1, dparts, 0),
          "k_gemm_f16_wgmma");
    auto got = download(dC, (size_t)M * N);
    char what[96];
    snprintf(what, sizeof what, "M %u, N %u, K %u, split fp16 A, accumulate, %u parts%s", M, N, K, splits,
             splits ? "" : " (its pick)");
    report("k_gemm_f16_wgmma", what, rel_l2(got.data(), c.want.data(), c.want.size()), 1e-5);
    std::vector<float> hi_f(c.ahi.size()), want;
    for (size_t i = 0; i < c.ahi.size(); i++)
        hi_f[i] = __half2float(__ushort_as_half(c.ahi[i]));
    cpu_linear(want, hi_f, M, c.bb, N, K, NULL);
    check(k_gemm_f16_wgmma(1, dC, dhi, NULL, dB, NULL, M, N, K, 0, NULL, 0), "k_gemm_f16_wgmma");
    got = download(dC, (size_t)M * N);
    snprintf(what, sizeof what, "M %u, N %u, K %u, fp16 A, K whole", M, N, K);
    report("k_gemm_f16_wgmma", what, rel_l2(got.data(), want.data(), want.size()), 1e-5);
}

/* The engine sizes its split scratch once, for its most rows a step: the scratch of M rows
 * must serve every step of fewer, whose wgmma products may take up to
 * GPT_GEMM_WGMMA_SPLITS_MAX parts (a scratch of 65 rows once held fewer bytes than one of
 * 64 needs) */
static void check_split_scratch_sizes()
{
    size_t short_steps = 0;
    for (uint32_t N : {136u, 2880u, 5120u})
        for (uint32_t M = 1; M <= 256; M++) {
            size_t have = k_gemm_split_scratch_bytes(M, N);
            size_t wgmma = (size_t)GPT_GEMM_WGMMA_SPLITS_MAX * (M < 64 ? M : 64) * N * sizeof(float);
            short_steps += have < wgmma || (M > 1 && have < k_gemm_split_scratch_bytes(M - 1, N));
        }
    report("k_gemm_split_scratch_bytes", "row counts whose scratch is short of fewer rows' need",
           (double)short_steps, 0);
}

/* blas_gemm_f16 (cuBLAS, where the machine has it): split fp16 A, accumulated onto C,
 * with the bias; and fp16 A alone onto nothing */
static void check_blas_gemm(uint32_t M, uint32_t N, uint32_t K)
{
    static BlasGemm *blas;
    static bool tried;
    if (!tried) {
        char why[160] = "";
        tried = true;
        if (!(blas = blas_gemm_open(why, sizeof why)))
            printf("%-26s %-44s (not checked: %s)\n", "blas_gemm_f16", "cuBLAS", why);
    }
    if (!blas)
        return;
    SplitCase c(M, N, K);
    std::vector<uint16_t> &ahi = c.ahi, &bb = c.bb;
    std::vector<float> &want = c.want;
    float *dC = upload(c.c0), *dbias = upload(c.bias);
    f16 *dB = reinterpret_cast<f16 *>(upload(bb)), *dhi = reinterpret_cast<f16 *>(upload(ahi));
    check(blas_gemm_f16(blas, dC, dhi, reinterpret_cast<f16 *>(upload(c.alo)), dB, dbias, M, N, K, 1, 0),
          "blas_gemm_f16");
    auto got = download(dC, (size_t)M * N);
    char what[96];
    snprintf(what, sizeof what, "M %u, N %u, K %u, split fp16 A, accumulate", M, N, K);
    report("blas_gemm_f16", what, rel_l2(got.data(), want.data(), want.size()), 1e-5);
    std::vector<float> hi_f(ahi.size());
    for (size_t i = 0; i < ahi.size(); i++)
        hi_f[i] = __half2float(__ushort_as_half(ahi[i]));
    cpu_linear(want, hi_f, M, bb, N, K, NULL);
    check(blas_gemm_f16(blas, dC, dhi, NULL, dB, NULL, M, N, K, 0, 0), "blas_gemm_f16");
    got = download(dC, (size_t)M * N);
    snprintf(what, sizeof what, "M %u, N %u, K %u, fp16 A", M, N, K);
    report("blas_gemm_f16", what, rel_l2(got.data(), want.data(), want.size()), 1e-5);
}

static void check_gemv(uint32_t rows, uint32_t cols)
{
    std::vector<uint16_t> wb;
    std::vector<float> wf;
    random_h(wb, wf, (size_t)rows * cols, 0.05f);
    auto x = random_f32(cols, 1.0f), bias = random_f32(rows, 0.5f), y0 = random_f32(rows, 1.0f);
    std::vector<float> want;
    cpu_linear(want, x, 1, wb, rows, cols, bias.data());
    float *dy = upload(y0), *dx = upload(x), *db = upload(bias);
    f16 *dW = reinterpret_cast<f16 *>(upload(wb));
    char what[96];
    snprintf(what, sizeof what, "%u x %u", rows, cols);
    check(k_gemv_f16(dy, dW, db, dx, NULL, 0.0f, rows, cols, 0, 0), "k_gemv_f16");
    auto got = download(dy, rows);
    report("k_gemv_f16", what, rel_l2(got.data(), want.data(), rows), 1e-5);
    for (uint32_t i = 0; i < rows; i++)
        want[i] += got[i];
    check(k_gemv_f16(dy, dW, db, dx, NULL, 0.0f, rows, cols, 1, 0), "k_gemv_f16");
    got = download(dy, rows);
    snprintf(what, sizeof what, "%u x %u, accumulate", rows, cols);
    report("k_gemv_f16", what, rel_l2(got.data(), want.data(), rows), 1e-5);

    /* with the RMSNorm inside: against gpt_rmsnorm then the product */
    auto nw = random_f32(cols, 1.0f);
    std::vector<float> xn(cols);
    gpt_rmsnorm(xn.data(), x.data(), nw.data(), cols, 1e-5f);
    cpu_linear(want, xn, 1, wb, rows, cols, bias.data());
    float *dnw = upload(nw);
    check(k_gemv_f16(dy, dW, db, dx, dnw, 1e-5f, rows, cols, 0, 0), "k_gemv_f16");
    got = download(dy, rows);
    snprintf(what, sizeof what, "%u x %u, RMSNorm first", rows, cols);
    report("k_gemv_f16", what, rel_l2(got.data(), want.data(), rows), 1e-5);
}

/* Random MXFP4 experts [E][rows][cols]: blocks and scales (around 2^-6). */
struct Experts {
    std::vector<uint8_t> blocks, scales;
    std::vector<float> bias;
    uint32_t E, rows, cols;
    gpt_mxfp4 view(uint32_t e) const
    {
        size_t g = (size_t)rows * (cols / 32);
        return {blocks.data() + e * g * 16, scales.data() + e * g, rows, cols};
    }
};

static Experts random_experts(uint32_t E, uint32_t rows, uint32_t cols, bool normal_scales = false)
{
    Experts x;
    x.E = E;
    x.rows = rows;
    x.cols = cols;
    size_t g = (size_t)E * rows * (cols / 32);
    x.blocks.resize(g * 16);
    x.scales.resize(g);
    for (auto &b : x.blocks)
        b = (uint8_t)next_u64();
    /* mostly 2^-9 .. 2^-4, and one group in 16 at the ends of the loader's range
     * [104, 140]; normal_scales: the low end 114 (from 114 on every product is a normal
     * fp16, and k_moe_wgmma.cu folds the scale into its decode) */
    const uint32_t low = normal_scales ? 114 : 104, lows = normal_scales ? 4 : 10;
    for (auto &s : x.scales) {
        uint64_t r = next_u64();
        s = (uint8_t)(r % 16 ? 118 + (r >> 8) % 6 : (r >> 8) % 2 ? low + (r >> 16) % lows : 136 + (r >> 16) % 5);
    }
    x.bias = random_f32((size_t)E * rows, 0.2f);
    return x;
}

static float swiglu_ref(float g, float u)
{
    float o;
    float gu[2] = {g, u};
    gpt_swiglu(&o, gu, 1, 1.702f, 7.0f);
    return o;
}

/* T tokens: 16 gives 32 experts about 2 rows each and 64 of 128 experts 2 (gpt-oss-120b
 * at 64 sequences; the fragments kernel, most experts' last n8 tile empty), 64 of 32
 * about 8 (fragments), 256 about 32,
 * 600 about 75 and 1,200 about 150 (on Hopper the wgmma kernel, 64 and then 128 token
 * rows a block, the widest products and several blocks an expert; elsewhere the 64- and
 * 128-row tiles), 600 of 128 experts about 19 (on Hopper the wgmma kernel's 64 rows,
 * elsewhere fragments, 32 rows).  Every tile runs on
 * the same products; the wgmma ones only where k_wgmma_available(). */
static void check_moe_prefill(uint32_t T, uint32_t E, bool normal_scales = false, uint32_t width = 2880)
{
    const uint32_t k = 4, H = width, I = width;
    char what[96];
    Experts gu = random_experts(E, 2 * I, H, normal_scales), dn = random_experts(E, H, I, normal_scales);
    std::vector<uint16_t> xb;
    std::vector<float> xf;
    random_h(xb, xf, (size_t)T * H, 1.0f);
    std::vector<int32_t> ids(T * k);
    std::vector<float> w(T * k);
    for (uint32_t t = 0; t < T; t++) {
        uint32_t first = (uint32_t)(next_u64() % E);
        for (uint32_t j = 0; j < k; j++) { /* distinct experts per token */
            ids[t * k + j] = (int32_t)((first + j * 7) % E);
            w[t * k + j] = 0.25f + 0.1f * j;
        }
    }
    int32_t *dids = upload(ids), *drows = dev<int32_t>(T * k), *dslot = dev<int32_t>(T * k);
    uint32_t *dcounts = dev<uint32_t>(E), *doff = dev<uint32_t>(E + 1);
    check(k_moe_group(drows, dslot, dcounts, doff, dids, T, k, E, 0), "k_moe_group");
    auto rows = download(drows, T * k);
    auto slot = download(dslot, T * k);
    auto off = download(doff, E + 1);
    /* grouping: every pair in its expert's range, pointing back at its token */
    double bad = 0;
    for (uint32_t p = 0; p < T * k; p++) {
        int32_t e = ids[p], s = slot[p];
        bool ok = s >= (int32_t)off[e] && s < (int32_t)off[e + 1] && rows[s] == (int32_t)(p / k);
        bad += !ok;
    }
    /* stable: within an expert the slots follow the tokens' order */
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t s2 = off[e] + 1; s2 < off[e + 1]; s2++)
            bad += rows[s2] <= rows[s2 - 1];
    snprintf(what, sizeof what, "%u tokens x 4 of %u experts, stable", T, E);
    report("k_moe_group", what, bad, 0);

    f16 *dx = reinterpret_cast<f16 *>(upload(xb));
    uint8_t *gub = upload_laid(gu.blocks), *gus = upload(gu.scales), *dnb = upload_laid(dn.blocks),
            *dns = upload(dn.scales);
    float *gubias = upload(gu.bias), *dnbias = upload(dn.bias);
    f16 *dact = dev<f16>((size_t)T * k * I);
    /* CPU: per expert, its gate_up on its slots' token rows (one call: each weight row
     * decoded once for all of them), then SwiGLU */
    std::vector<float> want_act((size_t)T * k * I), gu_in, gu_out;
    for (uint32_t e = 0; e < E; e++) {
        uint32_t n = off[e + 1] - off[e];
        if (!n)
            continue;
        gu_in.resize((size_t)n * H);
        gu_out.resize((size_t)n * 2 * I);
        for (uint32_t j = 0; j < n; j++)
            memcpy(&gu_in[(size_t)j * H], &xf[(size_t)rows[off[e] + j] * H], H * sizeof(float));
        gpt_mxfp4 m = gu.view(e);
        gpt_linear_mxfp4(pool, gu_out.data(), gu_in.data(), n, &m, &gu.bias[(size_t)e * 2 * I]);
        for (uint32_t j = 0; j < n; j++)
            for (uint32_t i = 0; i < I; i++)
                want_act[(size_t)(off[e] + j) * I + i] =
                    swiglu_ref(gu_out[(size_t)j * 2 * I + 2 * i], gu_out[(size_t)j * 2 * I + 2 * i + 1]);
    }
    /* every tile on the same products (0: the one k_gemm_mxfp4_grouped picks, last, so
     * that its act feeds down) */
    const uint32_t tiles[] = {GPT_MOE_TILE_FRAGMENTS16, GPT_MOE_TILE_FRAGMENTS32, GPT_MOE_TILE_WGMMA64,
                              GPT_MOE_TILE_WGMMA128, 32, 64, 128, 0};
    std::vector<float> act;
    auto skipped = [&](uint32_t tile) {
        return ((tile == GPT_MOE_TILE_WGMMA64 || tile == GPT_MOE_TILE_WGMMA128) && !k_wgmma_available()) ||
               (tile == GPT_MOE_TILE_FRAGMENTS32 && width % 320); /* its steps of 160 */
    };
    for (uint32_t tile : tiles) { /* each run on a poisoned output (0xFFFF: fp16 NaN) */
        if (skipped(tile))
            continue;
        check(cudaMemset(dact, 0xFF, (size_t)T * k * I * sizeof(f16)), "poison act");
        check(k_gemm_mxfp4_grouped_tile(tile, NULL, dact, dx, drows, gub, gus, gubias, doff, E, T,
                                        T * k, 2 * I, H, 1.702f, 7.0f, 0),
              "k_gemm_mxfp4_grouped (gate_up)");
        auto act_b = download(reinterpret_cast<uint16_t *>(dact), (size_t)T * k * I);
        act = h_to_floats(act_b);
        snprintf(what, sizeof what, "gate_up + SwiGLU, %u slots, %u x %u, tile %s%u%s", T * k, 2 * I, H,
                 tile ? "" : "auto ", tile, normal_scales ? ", normal" : "");
        report("k_gemm_mxfp4_grouped", what, rel_l2(act.data(), want_act.data(), want_act.size()), 1e-3);
    }

    /* the fragments kernel with its tokens in the operand order (each row by groups of
     * 32), writing act in that order: the same products */
    std::vector<uint16_t> xb_operand(xb.size());
    for (size_t i = 0; i < xb.size(); i++)
        xb_operand[mx_operand_index((uint32_t)i)] = xb[i];
    f16 *dx_operand = reinterpret_cast<f16 *>(upload(xb_operand)), *dact_operand = dev<f16>((size_t)T * k * I);
    check(cudaMemset(dact_operand, 0xFF, (size_t)T * k * I * sizeof(f16)), "poison act");
    check(k_gemm_mxfp4_grouped_tile(GPT_MOE_TILE_FRAGMENTS16_OPERAND, NULL, dact_operand, dx_operand, drows, gub,
                                    gus, gubias, doff, E, T, T * k, 2 * I, H, 1.702f, 7.0f, 0),
          "k_gemm_mxfp4_grouped (gate_up, operand order)");
    {
        auto ob = download(reinterpret_cast<uint16_t *>(dact_operand), (size_t)T * k * I);
        std::vector<uint16_t> back(ob.size());
        for (size_t i = 0; i < ob.size(); i++)
            back[i] = ob[mx_operand_index((uint32_t)i)];
        auto got = h_to_floats(back);
        snprintf(what, sizeof what, "gate_up + SwiGLU, %u slots, tile %u (tokens, act in the operand order)", T * k,
                 GPT_MOE_TILE_FRAGMENTS16_OPERAND);
        report("k_gemm_mxfp4_grouped", what, rel_l2(got.data(), want_act.data(), want_act.size()), 1e-3);
    }

    float *dout = dev<float>((size_t)T * k * H);
    std::vector<float> want_out((size_t)T * k * H), out;
    for (uint32_t e = 0; e < E; e++) { /* an expert's slots are contiguous: one call each */
        gpt_mxfp4 m = dn.view(e);
        if (off[e + 1] > off[e])
            gpt_linear_mxfp4(pool, &want_out[(size_t)off[e] * H], &act[(size_t)off[e] * I],
                             off[e + 1] - off[e], &m, &dn.bias[(size_t)e * H]);
    }
    for (uint32_t tile : tiles) {
        if (skipped(tile))
            continue;
        check(cudaMemset(dout, 0xFF, (size_t)T * k * H * sizeof(float)), "poison out");
        check(k_gemm_mxfp4_grouped_tile(tile, dout, NULL, dact, NULL, dnb, dns, dnbias, doff, E, T,
                                        T * k, H, I, 1.702f, 7.0f, 0),
              "k_gemm_mxfp4_grouped (down)");
        out = download(dout, (size_t)T * k * H);
        snprintf(what, sizeof what, "down, %u slots, %u x %u, tile %s%u%s", T * k, H, I, tile ? "" : "auto ",
                 tile, normal_scales ? ", normal" : "");
        report("k_gemm_mxfp4_grouped", what, rel_l2(out.data(), want_out.data(), want_out.size()), 1e-5);
    }
    { /* down from the same act in the operand order */
        auto act_b = download(reinterpret_cast<uint16_t *>(dact), (size_t)T * k * I);
        std::vector<uint16_t> act_operand(act_b.size());
        for (size_t i = 0; i < act_b.size(); i++)
            act_operand[mx_operand_index((uint32_t)i)] = act_b[i];
        f16 *da = reinterpret_cast<f16 *>(upload(act_operand));
        float *dout2 = dev<float>((size_t)T * k * H);
        check(cudaMemset(dout2, 0xFF, (size_t)T * k * H * sizeof(float)), "poison out");
        check(k_gemm_mxfp4_grouped_tile(GPT_MOE_TILE_FRAGMENTS16_OPERAND, dout2, NULL, da, NULL, dnb, dns, dnbias,
                                        doff, E, T, T * k, H, I, 1.702f, 7.0f, 0),
              "k_gemm_mxfp4_grouped (down, operand order)");
        auto out2 = download(dout2, (size_t)T * k * H);
        snprintf(what, sizeof what, "down, %u slots, tile %u (act in the operand order)", T * k,
                 GPT_MOE_TILE_FRAGMENTS16_OPERAND);
        report("k_gemm_mxfp4_grouped", what, rel_l2(out2.data(), want_out.data(), want_out.size()), 1e-5);
    }


    auto x0 = random_f32((size_t)T * H, 1.0f);
    float *dxr = upload(x0), *dw = upload(w);
    check(k_moe_combine(dxr, dout, dslot, dw, T, k, H, 0), "k_moe_combine");
    auto got = download(dxr, (size_t)T * H);
    std::vector<float> want = x0;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t j = 0; j < k; j++)
            for (uint32_t h = 0; h < H; h++)
                want[(size_t)t * H + h] += w[t * k + j] * out[(size_t)slot[t * k + j] * H + h];
    snprintf(what, sizeof what, "%u tokens", T);
    report("k_moe_combine", what, rel_l2(got.data(), want.data(), want.size()), 1e-6);

    /* the combine with the next norm in one launch: x and the split fp16 norm the same
     * bits as k_moe_combine then k_rmsnorm give */
    auto nw = random_f32(H, 1.5f);
    float *dnw = upload(nw), *dx2 = upload(x0);
    f16 *hi1 = dev<f16>((size_t)T * H), *lo1 = dev<f16>((size_t)T * H);
    f16 *hi2 = dev<f16>((size_t)T * H), *lo2 = dev<f16>((size_t)T * H);
    check(k_rmsnorm(hi1, lo1, NULL, dxr, dnw, T, H, 1e-5f, 0), "k_rmsnorm");
    check(k_moe_combine_rmsnorm(dx2, dout, dslot, dw, T, k, H, hi2, lo2, dnw, 1e-5f, 0), "k_moe_combine_rmsnorm");
    auto x1 = download(dxr, (size_t)T * H), x2 = download(dx2, (size_t)T * H);
    auto h1 = download(reinterpret_cast<uint16_t *>(hi1), (size_t)T * H), h2 = download(reinterpret_cast<uint16_t *>(hi2), (size_t)T * H);
    auto l1 = download(reinterpret_cast<uint16_t *>(lo1), (size_t)T * H), l2 = download(reinterpret_cast<uint16_t *>(lo2), (size_t)T * H);
    size_t differ = 0;
    for (size_t i = 0; i < x1.size(); i++)
        differ += memcmp(&x1[i], &x2[i], sizeof(float)) != 0 || h1[i] != h2[i] || l1[i] != l2[i];
    snprintf(what, sizeof what, "%u tokens: values unlike the two kernels'", T);
    report("k_moe_combine_rmsnorm", what, (double)differ, 0);
}

/* The decode step's experts: their fp16 inputs in the operand order (kernels.cuh); the
 * CPU is given the same fp16 values, in order. */
static std::vector<uint16_t> to_operand_order(const std::vector<float> &v)
{
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < v.size(); i++)
        out[mx_operand_index((uint32_t)i)] = to_h(v[i]);
    return out;
}

static std::vector<float> from_operand_order(const std::vector<uint16_t> &b)
{
    std::vector<float> out(b.size());
    for (size_t i = 0; i < b.size(); i++)
        out[i] = from_h(b[mx_operand_index((uint32_t)i)]);
    return out;
}

static void check_moe_decode()
{
    const uint32_t E = 32, k = 4, H = 2880, I = 2880;
    Experts gu = random_experts(E, 2 * I, H), dn = random_experts(E, H, I);
    auto x = random_f32(H, 3.0f), x0 = random_f32(H, 1.0f), nw = random_f32(H, 1.0f);
    std::vector<float> xn(H);
    gpt_rmsnorm(xn.data(), x.data(), nw.data(), H, 1e-5f);
    std::vector<uint16_t> xq = to_operand_order(xn);
    std::vector<float> xq_f = from_operand_order(xq); /* xn as the fp16 the GPU is given */
    std::vector<int32_t> ids = {3, 17, 0, 31};
    std::vector<float> w = {0.4f, 0.3f, 0.2f, 0.1f};
    std::vector<float> want_act(k * I), gu_out(2 * I);
    for (uint32_t j = 0; j < k; j++) {
        gpt_mxfp4 m = gu.view(ids[j]);
        gpt_linear_mxfp4(pool, gu_out.data(), xq_f.data(), 1, &m, &gu.bias[(size_t)ids[j] * 2 * I]);
        for (uint32_t i = 0; i < I; i++)
            want_act[j * I + i] = swiglu_ref(gu_out[2 * i], gu_out[2 * i + 1]);
    }
    uint8_t *gub = upload_laid(gu.blocks), *gus = upload(gu.scales), *dnb = upload_laid(dn.blocks),
            *dns = upload(dn.scales);
    float *gubias = upload(gu.bias), *dnbias = upload(dn.bias), *dxr = upload(x0),
          *dw = upload(w);
    f16 *dxq = reinterpret_cast<f16 *>(upload(xq)), *dact = dev<f16>(k * I);
    int32_t *dids = upload(ids);
    check(k_moe_gate_up_gemv(dact, gub, gus, gubias, dids, dxq, k, H, I, 1.702f, 7.0f, 0),
          "k_moe_gate_up_gemv");
    auto act_b = download(reinterpret_cast<uint16_t *>(dact), k * I);
    auto act = from_operand_order(act_b);
    report("k_moe_gate_up_gemv", "4 experts, 5760 x 2880, SwiGLU, fp16 out",
           rel_l2(act.data(), want_act.data(), k * I), 1e-3);
    size_t scratch_bytes = k_moe_down_scratch_bytes(k, H);
    uint8_t *scratch = dev<uint8_t>(scratch_bytes);
    CUDA_OK(cudaMemset(scratch, 0, scratch_bytes));
    std::vector<float> want = x0, d(H);
    for (uint32_t j = 0; j < k; j++) {
        gpt_mxfp4 m = dn.view(ids[j]);
        gpt_linear_mxfp4(pool, d.data(), &act[j * I], 1, &m, &dn.bias[(size_t)ids[j] * H]);
        for (uint32_t h = 0; h < H; h++)
            want[h] += w[j] * d[h];
    }
    /* twice: the second launch finds the tile counters the first left */
    for (int round = 0; round < 2; round++) {
        check(k_moe_down_gemv(dxr, dnb, dns, dnbias, dids, dw, dact, scratch, k, H, I, 0),
              "k_moe_down_gemv");
        auto got = download(dxr, H);
        report("k_moe_down_gemv", round ? "the same again (counters reset)" : "4 experts, 2880 x 2880, weighted sum",
               rel_l2(got.data(), want.data(), H), 1e-5);
        if (!round)
            for (uint32_t j = 0; j < k; j++) {
                gpt_mxfp4 m = dn.view(ids[j]);
                gpt_linear_mxfp4(pool, d.data(), &act[j * I], 1, &m, &dn.bias[(size_t)ids[j] * H]);
                for (uint32_t h = 0; h < H; h++)
                    want[h] += w[j] * d[h];
            }
    }
}

/* The E8M0 scales' whole range that the loader lets through (2^-23 .. 2^13, fp16
 * subnormal below 2^-14): one expert whose row h has scale 104 + h % 37 in every group;
 * the error measured per scale, so small rows are not drowned by large ones. */
static void check_moe_decode_scales()
{
    const uint32_t k = 1, H = 2880, I = 2880;
    Experts dn = random_experts(2, H, I);
    for (uint32_t h = 0; h < H; h++)
        for (uint32_t c = 0; c < I / 32; c++)
            dn.scales[((size_t)H + h) * (I / 32) + c] = (uint8_t)(104 + h % 37);
    std::fill(dn.bias.begin(), dn.bias.end(), 0.0f);
    std::vector<uint16_t> act = to_operand_order(random_f32(I, 1.0f));
    std::vector<float> act_f = from_operand_order(act), want(H), x0(H, 0.0f);
    std::vector<int32_t> ids = {1};
    std::vector<float> w = {1.0f};
    gpt_mxfp4 m = dn.view(1);
    gpt_linear_mxfp4(pool, want.data(), act_f.data(), 1, &m, &dn.bias[H]);
    size_t scratch_bytes = k_moe_down_scratch_bytes(k, H);
    uint8_t *scratch = dev<uint8_t>(scratch_bytes);
    CUDA_OK(cudaMemset(scratch, 0, scratch_bytes));
    float *dx = upload(x0), *dnbias = upload(dn.bias), *dw = upload(w);
    check(k_moe_down_gemv(dx, upload_laid(dn.blocks), upload(dn.scales), dnbias, upload(ids), dw,
                          reinterpret_cast<f16 *>(upload(act)), scratch, k, H, I, 0),
          "k_moe_down_gemv");
    auto got = download(dx, H);
    double worst = 0;
    for (uint32_t s = 0; s < 37; s++) {
        std::vector<float> a, b;
        for (uint32_t h = s; h < H; h += 37) {
            a.push_back(got[h]);
            b.push_back(want[h]);
        }
        worst = std::max(worst, rel_l2(a.data(), b.data(), a.size()));
    }
    report("k_moe_down_gemv", "scales 2^-23 .. 2^13: worst of 37", worst, 1e-5);
}

static void check_router(uint32_t E)
{
    const uint32_t T = 33, H = 2880, k = 4;
    char what[96];
    std::vector<uint16_t> wb;
    std::vector<float> wf;
    auto xf = random_f32((size_t)T * H, 1.0f);
    random_h(wb, wf, (size_t)E * H, 0.05f);
    auto b = random_f32(E, 0.1f);
    std::vector<float> logits;
    cpu_linear(logits, xf, T, wb, E, H, b.data());
    std::vector<int32_t> want_ids(T * k);
    std::vector<float> want_w(T * k);
    for (uint32_t t = 0; t < T; t++) {
        uint32_t idx[8];
        gpt_router_topk(&logits[t * E], E, k, idx, &want_w[t * k]);
        for (uint32_t j = 0; j < k; j++)
            want_ids[t * k + j] = (int32_t)idx[j];
    }
    float *dx = upload(xf);
    f16 *dW = reinterpret_cast<f16 *>(upload(wb));
    float *db = upload(b), *dw = dev<float>(T * k);
    int32_t *di = dev<int32_t>(T * k);
    check(k_router(di, dw, dx, dW, db, T, H, E, k, 0), "k_router");
    auto ids = download(di, T * k);
    auto w = download(dw, T * k);
    double differ = 0;
    for (uint32_t i = 0; i < T * k; i++)
        differ += ids[i] != want_ids[i];
    snprintf(what, sizeof what, "33 tokens, top 4 of %u: ids that differ", E);
    report("k_router", what, differ, 0);
    report("k_router", "their softmax weights", rel_l2(w.data(), want_w.data(), T * k), 1e-5);

    /* the decode step's router in one launch, from the raw residual (normed inside), with
     * the rows of the 4th and 5th largest logits made equal: the lower expert wins */
    auto x1 = random_f32(H, 3.0f), nw = random_f32(H, 1.0f);
    std::vector<float> xn(H), l1;
    gpt_rmsnorm(xn.data(), x1.data(), nw.data(), H, 1e-5f);
    cpu_linear(l1, xn, 1, wb, E, H, b.data());
    std::vector<uint32_t> order(E);
    for (uint32_t e = 0; e < E; e++)
        order[e] = e;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t c) { return l1[a] > l1[c]; });
    std::vector<uint16_t> wt = wb;
    std::vector<float> bt = b;
    std::copy(wt.begin() + (size_t)order[3] * H, wt.begin() + (size_t)(order[3] + 1) * H,
              wt.begin() + (size_t)order[4] * H);
    bt[order[4]] = bt[order[3]];
    cpu_linear(l1, xn, 1, wt, E, H, bt.data());
    uint32_t idx[8];
    float want1[8];
    gpt_router_topk(l1.data(), E, k, idx, want1);
    float *dx1 = upload(x1), *dnw = upload(nw), *dbt = upload(bt);
    f16 *dwt = reinterpret_cast<f16 *>(upload(wt)), *dxq = dev<f16>(H);
    check(k_router_decode(di, dw, dxq, dx1, dnw, 1e-5f, dwt, dbt, H, E, k, 0), "k_router_decode");
    auto ids1 = download(di, k);
    auto w1 = download(dw, k);
    double differ1 = 0;
    for (uint32_t j = 0; j < k; j++)
        differ1 += ids1[j] != (int32_t)idx[j];
    snprintf(what, sizeof what, "top 4 of %u, a tie at the 4th: ids that differ", E);
    report("k_router_decode", what, differ1, 0);
    report("k_router_decode", "their softmax weights", rel_l2(w1.data(), want1, k), 1e-5);
    auto xq = h_to_floats(download(reinterpret_cast<uint16_t *>(dxq), H));
    std::vector<float> xq_want(H);
    for (uint32_t i = 0; i < H; i++)
        xq_want[mx_operand_index(i)] = xn[i];
    report("k_router_decode", "the normed input, fp16 in the operand order",
           rel_l2(xq.data(), xq_want.data(), H), 1e-3);

    /* the MLP's norm and the router in one launch: the same bits as k_rmsnorm (or
     * k_rmsnorm_operand_order) then k_router, from a raw residual of T rows */
    auto xr = random_f32((size_t)T * H, 3.0f);
    float *dxr = upload(xr), *f1 = dev<float>((size_t)T * H), *f2 = dev<float>((size_t)T * H);
    f16 *h1 = dev<f16>((size_t)T * H), *h2 = dev<f16>((size_t)T * H);
    float *w2 = dev<float>(T * k);
    int32_t *i2 = dev<int32_t>(T * k);
    for (bool operand : {false, true}) {
        if (operand)
            check(k_rmsnorm_operand_order(h1, f1, dxr, dnw, T, H, 1e-5f, 0), "k_rmsnorm_operand_order");
        else
            check(k_rmsnorm(h1, NULL, f1, dxr, dnw, T, H, 1e-5f, 0), "k_rmsnorm");
        check(k_router(di, dw, f1, dW, db, T, H, E, k, 0), "k_router");
        check(k_rmsnorm_router(h2, f2, operand, dxr, dnw, 1e-5f, i2, w2, dW, db, T, H, E, k, 0), "k_rmsnorm_router");
        auto a_f = download(f1, (size_t)T * H), b_f = download(f2, (size_t)T * H);
        auto a_h = download(reinterpret_cast<uint16_t *>(h1), (size_t)T * H);
        auto b_h = download(reinterpret_cast<uint16_t *>(h2), (size_t)T * H);
        auto a_i = download(di, T * k), b_i = download(i2, T * k);
        auto a_w = download(dw, T * k), b_w = download(w2, T * k);
        size_t unlike = 0;
        for (size_t i = 0; i < a_f.size(); i++)
            unlike += memcmp(&a_f[i], &b_f[i], sizeof(float)) != 0 || a_h[i] != b_h[i];
        for (uint32_t i = 0; i < T * k; i++)
            unlike += a_i[i] != b_i[i] || memcmp(&a_w[i], &b_w[i], sizeof(float)) != 0;
        snprintf(what, sizeof what, "33 tokens, %u experts%s: values unlike the two kernels'", E,
                 operand ? ", the operand order" : "");
        report("k_rmsnorm_router", what, (double)unlike, 0);
    }
}

static gpt_rope make_rope()
{
    gpt_rope r;
    gpt_yarn y = {32.0, 32.0, 1.0, 4096.0, false};
    if (!gpt_rope_init(&r, 64, 150000.0, &y)) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return r;
}

/* fp8 e4m3 (OCP): 4 exponent bits (bias 7), 3 of mantissa, subnormals, no infinity,
 * 0x7F and 0xFF NaN.  The encoder rounds to the nearest finite value, ties to the even
 * code, saturating at 448 (what the GPU's cvt with satfinite does). */
static float e4m3_value(uint8_t b)
{
    int e = (b >> 3) & 15, m = b & 7;
    float v = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
    return b & 0x80 ? -v : v;
}

static uint8_t e4m3_encode(float x)
{
    float a = fabsf(x);
    uint8_t best = 0;
    for (uint8_t c = 1; c <= 0x7E; c++) {
        float d = fabsf(e4m3_value(c) - a), db = fabsf(e4m3_value(best) - a);
        if (d < db || (d == db && !(c & 1)))
            best = c;
    }
    return (uint8_t)(best | (x < 0 ? 0x80 : 0));
}

/* A paged cache of `blocks` blocks of B positions ([block][kv_head][B][hd] for K and V;
 * fp16, or fp8 e4m3 with a scale per row) and its CPU twin in fp32: the fp16 values, or
 * each fp8 value times its row's scale rounded to fp16, as the attention reads it. */
struct Paged {
    uint32_t blocks, B, kvh, hd;
    bool fp8;
    std::vector<float> k, v;
    KvCache dev;
    size_t at(uint32_t slot, uint32_t h) const
    {
        return (((size_t)(slot / B) * kvh + h) * B + slot % B) * hd;
    }
};

static Paged make_paged(uint32_t blocks, uint32_t B, uint32_t kvh, uint32_t hd, bool fp8 = false)
{
    Paged c;
    c.blocks = blocks;
    c.B = B;
    c.kvh = kvh;
    c.hd = hd;
    c.fp8 = fp8;
    size_t n = (size_t)blocks * B * kvh * hd;
    c.dev = KvCache{nullptr, nullptr, nullptr, nullptr};
    if (!fp8) {
        std::vector<uint16_t> kb, vb;
        random_h(kb, c.k, n, 1.0f);
        random_h(vb, c.v, n, 1.0f);
        c.dev.k = upload(kb);
        c.dev.v = upload(vb);
        return c;
    }
    for (int which = 0; which < 2; which++) {
        std::vector<uint8_t> bytes(n);
        std::vector<float> scales(n / hd), &vals = which ? c.v : c.k;
        vals.resize(n);
        for (size_t r = 0; r < n / hd; r++) {
            scales[r] = (float)(0.001 + 0.01 * (double)(next_u64() % 1000) / 1000.0);
            for (uint32_t i = 0; i < hd; i++) {
                uint8_t b;
                do
                    b = (uint8_t)next_u64();
                while ((b & 0x7F) == 0x7F); /* no NaN */
                bytes[r * hd + i] = b;
                vals[r * hd + i] = from_h(to_h(e4m3_value(b) * scales[r]));
            }
        }
        (which ? c.dev.v : c.dev.k) = upload(bytes);
        (which ? c.dev.vscale : c.dev.kscale) = upload(scales);
    }
    return c;
}

static void check_rope_kv()
{
    const uint32_t heads = 64, kvh = 8, hd = 64, T = 3, positions = 8192, B = 16;
    const uint32_t QW = heads * hd, KW = kvh * hd, W = QW + 2 * KW;
    const uint32_t pos[T] = {5000, 17, 900}, slot[T] = {7 * B + 5000 % B, 2 * B + 17 % B, 30 * B + 900 % B};
    gpt_rope r = make_rope();
    double *dinv = nullptr;
    CUDA_OK(cudaMalloc(&dinv, r.half * sizeof(double)));
    CUDA_OK(cudaMemcpy(dinv, r.inv_freq, r.half * sizeof(double), cudaMemcpyHostToDevice));
    float2 *dcs = dev<float2>((size_t)positions * r.half);
    check(k_rope_table(dcs, dinv, r.attn_factor, positions, r.half, 0), "k_rope_table");
    auto qkv = random_f32((size_t)T * W, 1.0f);
    std::vector<float> want = qkv;
    std::vector<StepToken> tok(T);
    for (uint32_t t = 0; t < T; t++) {
        gpt_rope_apply(&r, &want[t * W], heads, hd, pos[t]);
        gpt_rope_apply(&r, &want[t * W + QW], kvh, hd, pos[t]);
        tok[t] = StepToken{pos[t], {0, 0}, {slot[t], 0}};
    }
    Paged c = make_paged(32, B, kvh, hd);
    float *d = upload(qkv);
    StepToken *dtok = upload(tok);
    check(k_rope_kv_paged(d, c.dev, dtok, 0, dcs, T, heads, kvh, hd, B, 0), "k_rope_kv_paged");
    auto got = download(d, (size_t)T * W);
    report("k_rope_kv_paged", "YaRN (factor 32), 3 tokens at 5000/17/900",
           rel_l2(got.data(), want.data(), want.size()), 1e-6);
    size_t n = (size_t)c.blocks * B * kvh * hd;
    auto ck = h_to_floats(download(static_cast<uint16_t *>(c.dev.k), n));
    auto cv = h_to_floats(download(static_cast<uint16_t *>(c.dev.v), n));
    double bad_k = 0, bad_v = 0;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < kvh; h++)
            for (uint32_t i = 0; i < hd; i++) {
                size_t at = c.at(slot[t], h) + i;
                bad_k += ck[at] != from_h(to_h(want[t * W + QW + h * hd + i]));
                bad_v += cv[at] != from_h(to_h(want[t * W + QW + KW + h * hd + i]));
            }
    report("k_rope_kv_paged", "k into its block as fp16 (values wrong)", bad_k, 0);
    report("k_rope_kv_paged", "v into its block as fp16 (values wrong)", bad_v, 0);

    /* fp8: each row's bytes and scale as the definition gives them from the rotated row
     * (the GPU's own, so that the check is exact) */
    Paged c8 = make_paged(32, B, kvh, hd, true);
    float *d8 = upload(qkv);
    check(k_rope_kv_paged(d8, c8.dev, dtok, 0, dcs, T, heads, kvh, hd, B, 0), "k_rope_kv_paged fp8");
    auto got8 = download(d8, (size_t)T * W);
    auto kb = download(static_cast<uint8_t *>(c8.dev.k), n), vb = download(static_cast<uint8_t *>(c8.dev.v), n);
    auto ks = download(c8.dev.kscale, n / hd), vs = download(c8.dev.vscale, n / hd);
    double bad_bytes = 0, bad_scales = 0, err = 0, norm = 0;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t which = 0; which < 2; which++)
            for (uint32_t h = 0; h < kvh; h++) {
                const float *src = &got8[t * W + QW + which * KW + h * hd];
                float amax = 0;
                for (uint32_t i = 0; i < hd; i++)
                    amax = fmaxf(amax, fabsf(src[i]));
                amax = fminf(amax, 65504.0f);
                float inv = amax > 0 ? 448.0f / amax : 1.0f, scale = amax > 0 ? amax / 448.0f : 1.0f;
                size_t at = c8.at(slot[t], h);
                const auto &bytes = which ? vb : kb;
                bad_scales += (which ? vs : ks)[at / hd] != scale;
                for (uint32_t i = 0; i < hd; i++) {
                    bad_bytes += bytes[at + i] != e4m3_encode(src[i] * inv);
                    double back = e4m3_value(bytes[at + i]) * scale;
                    err += (back - src[i]) * (back - src[i]);
                    norm += (double)src[i] * src[i];
                }
            }
    report("k_rope_kv_paged", "k and v into their blocks as fp8 (bytes wrong)", bad_bytes, 0);
    report("k_rope_kv_paged", "  their rows' scales (wrong)", bad_scales, 0);
    report("k_rope_kv_paged", "  relative L2 of the fp8 values (e4m3: < 2^-4)", sqrt(err / norm), 0.0625);
    gpt_rope_free(&r);
}

/* The CPU's attention of one query over keys given by a function of position. */
template <typename KF, typename VF>
static void cpu_attend(float *out, const float *q, uint32_t hd, float sink, uint32_t lo, uint32_t hi,
                       KF key, VF value)
{
    std::vector<float> acc(hd), kr(hd), vr(hd);
    gpt_attn a;
    gpt_attn_begin(&a, acc.data(), hd, sink);
    for (uint32_t p = lo; p <= hi; p++) {
        key(p, kr.data());
        value(p, vr.data());
        gpt_attn_keys(&a, q, kr.data(), vr.data(), 1, 1.0f / sqrtf((float)hd));
    }
    gpt_attn_end(&a, out);
}

/* A step over a paged cache: sequence s has length len[s] and its blocks shuffled over
 * the pool; the step runs run[s] tokens at its end (1: a decode, more: a prompt chunk).
 * Checked in both outputs (split fp16, fp32) against the CPU. */
static void check_attention_paged(uint32_t heads, uint32_t kvh, uint32_t hd, uint32_t window,
                                  std::vector<uint32_t> len, std::vector<uint32_t> run,
                                  uint32_t splits, bool fp8 = false)
{
    const uint32_t B = 16, QW = heads * hd, KW = kvh * hd, W = QW + 2 * KW, group = heads / kvh;
    uint32_t need = 0;
    for (uint32_t L : len)
        need += (L + B - 1) / B;
    Paged c = make_paged(need + 5, B, kvh, hd, fp8);
    std::vector<uint32_t> order(c.blocks);
    for (uint32_t i = 0; i < c.blocks; i++)
        order[i] = i;
    for (uint32_t i = c.blocks - 1; i > 0; i--) /* shuffled: tables are not contiguous */
        std::swap(order[i], order[next_u64() % (i + 1)]);
    std::vector<uint32_t> tables;
    std::vector<StepToken> tok;
    uint32_t used = 0;
    for (size_t s = 0; s < len.size(); s++) {
        uint32_t at = (uint32_t)tables.size(), nb = (len[s] + B - 1) / B;
        for (uint32_t i = 0; i < nb; i++)
            tables.push_back(order[used++]);
        for (uint32_t j = 0; j < run[s]; j++) {
            uint32_t p = len[s] - run[s] + j;
            tok.push_back(StepToken{p, {at, at}, {tables[at + p / B] * B + p % B, 0}});
        }
    }
    const uint32_t T = (uint32_t)tok.size();
    auto qkv = random_f32((size_t)T * W, 1.0f), sinks = random_f32(heads, 2.0f);
    std::vector<float> want((size_t)T * QW);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < heads; h++) {
            uint32_t g = h / group, pos = tok[t].pos, at = tok[t].table[0];
            uint32_t lo = window && pos + 1 > window ? pos + 1 - window : 0;
            auto slot = [&](uint32_t p) { return tables[at + p / B] * B + p % B; };
            cpu_attend(&want[(size_t)t * QW + h * hd], &qkv[(size_t)t * W + h * hd], hd, sinks[h], lo,
                       pos, [&](uint32_t p, float *o) { memcpy(o, &c.k[c.at(slot(p), g)], hd * 4); },
                       [&](uint32_t p, float *o) { memcpy(o, &c.v[c.at(slot(p), g)], hd * 4); });
        }
    float *dqkv = upload(qkv), *ds = upload(sinks), *dout = dev<float>((size_t)T * QW);
    float *dscratch = dev<float>(k_attention_paged_scratch_floats(T * splits, heads, hd));
    f16 *dhi = dev<f16>((size_t)T * QW), *dlo = dev<f16>((size_t)T * QW);
    StepToken *dtok = upload(tok);
    uint32_t *dtab = upload(tables);
    check(k_attention_paged(dhi, dlo, dout, dscratch, dqkv, c.dev, dtok, dtab, 0, ds, T, heads,
                            kvh, hd, B, window, splits, 0),
          "k_attention_paged");
    auto got = download(dout, (size_t)T * QW);
    auto hi = h_to_floats(download(reinterpret_cast<uint16_t *>(dhi), (size_t)T * QW));
    auto lo = h_to_floats(download(reinterpret_cast<uint16_t *>(dlo), (size_t)T * QW));
    for (size_t i = 0; i < hi.size(); i++)
        hi[i] += lo[i];
    char what[96];
    snprintf(what, sizeof what, "hd %u, %zu seqs, %u tokens, %s %u, %u splits%s", hd, len.size(), T,
             window ? "window" : "full", window ? window : len[0], splits, fp8 ? ", fp8 cache" : "");
    report("k_attention_paged", what, rel_l2(got.data(), want.data(), want.size()), 1e-5);
    report("k_attention_paged", "  the same as split fp16", rel_l2(hi.data(), want.data(), want.size()),
           1e-5);
}

/* k_apply_penalties against the CPU sampler's arithmetic (sampler.c), bit for bit: three
 * rows (repetition with prompt tokens, frequency and presence, all three), one without
 * entries left alone. */
static void check_penalties()
{
    const uint32_t V = 5000, R = 4;
    auto logits = random_f32((size_t)R * V, 3.0f);
    std::vector<PickRow> rows(R);
    std::vector<PenEntry> pen;
    const float rep[R] = {1.3f, 1.0f, 0.85f, 1.0f}, pres[R] = {0.0f, 0.7f, -0.4f, 0.0f},
                freq[R] = {0.0f, 0.35f, 1.1f, 0.0f};
    for (uint32_t r = 0; r < R; r++) {
        rows[r] = PickRow{};
        rows[r].repetition = rep[r];
        rows[r].presence = pres[r];
        rows[r].frequency = freq[r];
        rows[r].pen_first = (uint32_t)pen.size();
        uint32_t n = r == 3 ? 0 : 300 + 100 * r;
        std::vector<bool> used(V, false);
        for (uint32_t j = 0; j < n; j++) {
            int32_t id;
            do
                id = (int32_t)(next_u64() % V);
            while (used[id]);
            used[id] = true;
            pen.push_back(PenEntry{id, (uint32_t)(next_u64() % 4)}); /* 0: a prompt token */
        }
        rows[r].pen_count = n;
    }
    std::vector<float> want = logits;
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t j = 0; j < rows[r].pen_count; j++) {
            const PenEntry &e = pen[rows[r].pen_first + j];
            volatile float x = want[(size_t)r * V + e.id]; /* each operation rounded alone */
            if (rep[r] != 1.0f)
                x = x > 0.0f ? x / rep[r] : x * rep[r];
            if (e.count) {
                volatile float f = freq[r] * (float)e.count;
                x = x - f;
                x = x - pres[r];
            }
            want[(size_t)r * V + e.id] = x;
        }
    float *d = upload(logits);
    check(k_apply_penalties(d, upload(rows), upload(pen), R, V, 0), "k_apply_penalties");
    auto got = download(d, (size_t)R * V);
    double wrong = 0, changed = 0;
    for (size_t i = 0; i < got.size(); i++) {
        wrong += memcmp(&got[i], &want[i], 4) != 0;
        changed += got[i] != logits[i];
    }
    report("k_apply_penalties", "4 rows of 5,000: repetition, frequency + presence, all (wrong)", wrong, 0);
    report("k_apply_penalties", "  logits the penalties changed (none would fail)", changed > 500 ? 0 : 1, 0);
}

static void check_pick_rows()
{
    const uint32_t V = 201088;
    auto logits = random_f32(2 * (size_t)V, 8.0f);
    logits[123457] = 9.5f;
    logits[V + 7] = logits[V + 200000] = 12.0f; /* row 1: a tie across slices */
    double mx = -1e30, sum = 0;
    uint32_t arg = 0;
    for (uint32_t i = 0; i < V; i++)
        if (logits[i] > mx) {
            mx = logits[i];
            arg = i;
        }
    for (uint32_t i = 0; i < V; i++)
        sum += exp(logits[i] - mx);
    float *dl = upload(logits);
    void *scratch = nullptr;
    CUDA_OK(cudaMalloc(&scratch, k_pick_rows_scratch_bytes(2000)));
    std::vector<PickRow> rows = {PickRow{0.0f, 0, 0, 0, 0, 0}, PickRow{0.0f, 0, 0, 0, 0, 0}};
    PickOut *dout = dev<PickOut>(2000);
    check(k_pick_rows(dout, upload(rows), dl, 2, V, scratch, false, 0), "k_pick_rows");
    auto got = download(dout, 2);
    report("k_pick_rows", "greedy: id differs from argmax", got[0].id != (int32_t)arg, 0);
    double want_lp = logits[arg] - mx - log(sum);
    report("k_pick_rows", "greedy: logprob (absolute error)", fabs(got[0].logprob - want_lp), 1e-4);
    report("k_pick_rows", "greedy: a tie keeps the lower id", got[1].id != 7, 0);

    /* draws at temperature 2 over 4 logits, 2000 rows a launch, the step counter making
     * each fresh: frequencies against softmax(l / 2) */
    const uint32_t R = 2000, launches = 10;
    std::vector<float> small;
    for (uint32_t r = 0; r < R; r++)
        small.insert(small.end(), {0.0f, 1.0f, 2.0f, 3.0f});
    float *dsm = upload(small);
    std::vector<int> counts(4, 0);
    for (uint32_t l = 0; l < launches; l++) {
        std::vector<PickRow> pr(R);
        for (uint32_t r = 0; r < R; r++)
            pr[r] = PickRow{2.0f, 0, 42, (uint64_t)l * R + r, 0, 0};
        check(k_pick_rows(dout, upload(pr), dsm, R, 4, scratch, false, 0), "k_pick_rows");
        for (const PickOut &o : download(dout, R))
            counts[o.id & 3]++;
    }
    double norm = 0, worst = 0;
    for (int i = 0; i < 4; i++)
        norm += exp(small[i] / 2.0);
    for (int i = 0; i < 4; i++) {
        double p = exp(small[i] / 2.0) / norm, f = (double)counts[i] / (R * launches);
        double z = fabs(f - p) / sqrt(p * (1 - p) / (R * launches));
        worst = z > worst ? z : worst;
    }
    report("k_pick_rows", "T=2: worst |freq - p| in std devs (20000)", worst, 4.5);
}

/* The CPU sampler's filters (sampler.c) by their definition: the order is logit
 * descending then id ascending; top_k keeps its first k, top_p the shortest prefix of
 * those whose weight reaches top_p of theirs, min_p the weights >= min_p.  How many
 * tokens stay (a prefix of the order). */
static size_t kept_by_definition(const std::vector<float> &l, const std::vector<uint32_t> &order,
                                 float T, uint32_t top_k, float top_p, float min_p)
{
    size_t n = order.size();
    if (top_k > 0 && top_k < n)
        n = top_k;
    double mx = l[order[0]];
    if (top_p > 0 && top_p < 1) {
        double total = 0, acc = 0;
        for (size_t j = 0; j < n; j++)
            total += exp((l[order[j]] - mx) / T);
        size_t j = 0;
        while (j < n && acc < top_p * total)
            acc += exp((l[order[j++]] - mx) / T);
        n = j;
    }
    if (min_p > 0) {
        size_t j = 0;
        while (j < n && exp((l[order[j]] - mx) / T) >= min_p)
            j++;
        n = j;
    }
    return n;
}

static void check_pick_cuts()
{
    const uint32_t V = 201088;
    struct Case {
        float T;
        uint32_t k;
        float p, minp;
        bool ties;
    } cases[] = {{1.0f, 50, 0, 0, false},     {0.7f, 0, 0.9f, 0, false},  {1.0f, 0, 0.5f, 0.05f, false},
                 {1.3f, 1000, 0.95f, 0, false}, {1.0f, 0, 0, 0.2f, false}, {1.0f, 7, 0, 0, true},
                 {1.0f, 0, 0.3f, 0, true},     {0.5f, 40000, 0.99f, 0, false}};
    const uint32_t R = sizeof cases / sizeof cases[0];
    std::vector<float> logits;
    std::vector<PickRow> rows;
    for (uint32_t r = 0; r < R; r++) {
        auto row = random_f32(V, 6.0f);
        if (cases[r].ties) /* ten equal best logits, some across slices: the cut falls among them */
            for (uint32_t j = 0; j < 10; j++)
                row[(j * 19997u + 11u) % V] = 9.0f;
        logits.insert(logits.end(), row.begin(), row.end());
        rows.push_back(PickRow{cases[r].T, cases[r].k, 1, 0, cases[r].p, cases[r].minp});
    }
    PickCut *dcut = dev<PickCut>(R);
    void *cut_scratch = dev<uint8_t>(k_pick_cuts_scratch_bytes(R));
    check(k_pick_cuts(dcut, upload(rows), upload(logits), R, V, cut_scratch, 0), "k_pick_cuts");
    auto cuts = download(dcut, R);
    for (uint32_t r = 0; r < R; r++) {
        std::vector<float> l(logits.begin() + (size_t)r * V, logits.begin() + (size_t)(r + 1) * V);
        std::vector<uint32_t> order(V);
        for (uint32_t i = 0; i < V; i++)
            order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](uint32_t a, uint32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
        size_t want = kept_by_definition(l, order, cases[r].T, cases[r].k, cases[r].p, cases[r].minp);
        /* the cut keeps exactly the first `want` of the order */
        size_t bad = 0;
        for (uint32_t j = 0; j < V; j++) {
            uint32_t i = order[j];
            bool kept = l[i] > cuts[r].t || (l[i] == cuts[r].t && (int32_t)i <= cuts[r].id_max);
            bad += kept != (j < want);
        }
        char what[96];
        snprintf(what, sizeof what, "T %.1f k %u p %.2f min_p %.2f%s: %zu kept", cases[r].T, cases[r].k,
                 cases[r].p, cases[r].minp, cases[r].ties ? ", ties" : "", want);
        report("k_pick_cuts", what, (double)bad, 0);
    }

    /* draws through the filters over 6 logits, 2000 rows a launch: frequencies against
     * the kept tokens' renormalised softmax(l / T) */
    const uint32_t N = 2000, launches = 10;
    const float six[6] = {3.0f, 2.5f, 2.0f, 1.0f, 0.5f, 0.0f};
    std::vector<float> small;
    for (uint32_t r = 0; r < N; r++)
        small.insert(small.end(), six, six + 6);
    float *dsm = upload(small);
    void *scratch = nullptr;
    CUDA_OK(cudaMalloc(&scratch, k_pick_rows_scratch_bytes(N)));
    PickOut *dout = dev<PickOut>(N);
    struct Draw {
        uint32_t k;
        float p, minp;
        uint32_t kept;
    } draws[] = {{3, 0, 0, 3}, {0, 0.6f, 0, 0}, {0, 0, 0.3f, 0}};
    for (Draw &d : draws) {
        std::vector<float> l(six, six + 6);
        std::vector<uint32_t> order = {0, 1, 2, 3, 4, 5};
        d.kept = (uint32_t)kept_by_definition(l, order, 1.0f, d.k, d.p, d.minp);
        std::vector<int> counts(6, 0);
        for (uint32_t L = 0; L < launches; L++) {
            std::vector<PickRow> pr(N);
            for (uint32_t r = 0; r < N; r++)
                pr[r] = PickRow{1.0f, d.k, 7, (uint64_t)L * N + r, d.p, d.minp};
            check(k_pick_rows(dout, upload(pr), dsm, N, 6, scratch, true, 0), "k_pick_rows");
            for (const PickOut &o : download(dout, N))
                counts[o.id >= 0 && o.id < 6 ? o.id : 5]++;
        }
        double norm = 0, worst = 0;
        for (uint32_t i = 0; i < d.kept; i++)
            norm += exp(six[i]);
        for (uint32_t i = 0; i < 6; i++) {
            double pr = i < d.kept ? exp(six[i]) / norm : 0.0, f = (double)counts[i] / (N * launches);
            double z = pr > 0 && pr < 1 ? fabs(f - pr) / sqrt(pr * (1 - pr) / (N * launches))
                                        : (f == pr ? 0.0 : 1e9);
            worst = z > worst ? z : worst;
        }
        char what[96];
        snprintf(what, sizeof what, "draws, k %u p %.1f min_p %.1f (%u kept): worst in std devs", d.k, d.p,
                 d.minp, d.kept);
        report("k_pick_rows", what, worst, 4.5);
    }
}

int main()
{
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
        fprintf(stderr, "gpt-oss-kernel-check: no CUDA device\n");
        return 2;
    }
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("gpt-oss kernels against the CPU reference on %s (cc %d.%d)\n", prop.name, prop.major,
           prop.minor);
    printf("%-26s %-44s %10s %9s\n", "kernel", "case", "rel. err", "tolerance");
    pool = gpt_pool_create(0);
    check_conversions();
    check_embed();
    check_rmsnorm();
    check_gemv(5120, 2880);
    check_gemv(2880, 4096);
    check_gemm(300, 392, 2880);
    check_gemm(1024, 5120, 2880);
    check_gemm(7, 64, 64);
    check_gemm(40, 5120, 2880);
    check_gemm(100, 2880, 4096);
    check_gemm(200, 5120, 2880);  /* 64-row tiles: a step of many sequences */
    check_gemm(48, 135168, 2880); /* 64-row tiles, K whole: lm_head over a step of few rows */
    check_gemm(80, 135168, 2880); /* 128-row tiles for few rows: lm_head over a step */
    check_gemm(16, 2880, 4096);   /* K in 8 parts: the output projection of a few sequences */
    check_gemm(300, 392, 2880, GPT_GEMM_TILE_LARGE8); /* the large tile of 8 warps (the bench's) */
    check_gemm(80, 135168, 2880, GPT_GEMM_TILE_LARGE8);
    check_gemm_shape(64, 5120, 2880, 64, 6);
    check_gemm_shape(100, 2880, 4096, 128, 3);
    check_gemm_shape(256, 5120, 2880, 32, 8);
    check_gemm_shape(37, 392, 2880, 64, 1);
    /* the wgmma kernel of steps of up to 64 rows: gpt-oss's QKV and O, every width of
     * its products (rows to 16, 32, 48, 64), a last block of half its weight rows (N
     * 2880), N not a multiple of 16, and K in each number of parts */
    check_gemm_wgmma(64, 5120, 2880, 0);
    check_gemm_wgmma(64, 2880, 4096, 0);
    check_gemm_wgmma(1, 5120, 2880, 0);
    check_gemm_wgmma(13, 2880, 4096, 0);
    check_gemm_wgmma(32, 392, 2880, 0);
    check_gemm_wgmma(47, 5120, 2880, 16);
    check_gemm_wgmma(50, 2888, 640, 3);
    check_gemm_wgmma(64, 136, 64, 1);
    check_split_scratch_sizes();
    check_blas_gemm(7, 64, 64);
    check_blas_gemm(256, 5120, 2880);
    check_blas_gemm(300, 2880, 4096);
    check_blas_gemm(48, 135168, 2880);
    check_router(32);
    check_router(128); /* gpt-oss-120b */
    check_router(8);   /* fewer experts than the fused norm's 16 warps (as the tiny preset) */
    check_rope_kv();
    check_moe_decode();
    check_moe_decode_scales();
    check_moe_prefill(16, 32);
    check_moe_prefill(64, 128); /* gpt-oss-120b at 64 sequences */
    check_moe_prefill(64, 32);
    check_moe_prefill(256, 32);
    check_moe_prefill(256, 32, true); /* every scale in [114, 140]: k_moe_wgmma's folded decode */
    check_moe_prefill(600, 32);
    check_moe_prefill(1200, 32, true);
    check_moe_prefill(600, 128); /* gpt-oss-120b */
    check_moe_prefill(16, 8, false, 192); /* K not a multiple of 320: the fragments kernel's steps of 64 */
    if (!k_wgmma_available())
        printf("%-26s %-44s (not checked: compute capability is not 9.0)\n", "k_moe_gemm_wgmma", "tiles 18, 19");
    {   /* the scale folded into the E2M1 decode's tables, against decode times scale */
        uint32_t *bad = dev<uint32_t>(1);
        check(k_e2m1_scaled_tables_check(bad), "k_e2m1_scaled_tables_check");
        report("e2m1 scaled tables", "s 114..140, 16384 words, pairs that differ", download(bad, 1)[0], 0);
    }
    /* decodes of long and short contexts, one and several splits */
    check_attention_paged(64, 8, 64, 0, {3000}, {1}, 32);
    check_attention_paged(64, 8, 64, 0, {5, 300, 1200}, {1, 1, 1}, 8);
    check_attention_paged(64, 8, 64, 128, {2999, 40}, {1, 1}, 3);
    /* prompt chunks beside decodes, full and sliding */
    check_attention_paged(64, 8, 64, 0, {350, 77, 1000}, {150, 1, 64}, 1);
    check_attention_paged(64, 8, 64, 128, {350, 77, 1000}, {150, 1, 64}, 1);
    check_attention_paged(4, 2, 16, 0, {300, 37}, {100, 1}, 1);
    check_attention_paged(4, 2, 16, 128, {194, 20}, {64, 1}, 2);
    /* the same over an fp8 cache */
    check_attention_paged(64, 8, 64, 0, {3000}, {1}, 32, true);
    check_attention_paged(64, 8, 64, 128, {2999, 40}, {1, 1}, 3, true);
    check_attention_paged(64, 8, 64, 0, {350, 77, 1000}, {150, 1, 64}, 1, true);
    check_attention_paged(4, 2, 16, 128, {194, 20}, {64, 1}, 2, true);
    check_pick_rows();
    check_pick_cuts();
    check_penalties();
    gpt_pool_free(pool);
    printf("RESULT kernels %s (%d failing)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

/* Development timing of the gpt-oss decode step's weight-bound kernels, each alone, at
 * gpt-oss-20b's shapes: the MXFP4 experts' gate_up and down GEMVs (for several slice
 * lengths: how many 4-group steps a warp takes) and the fp16 GEMVs of the attention
 * block, the router and lm_head.  Each kernel runs over 24 layers' worth of distinct
 * weights (more than the L2 holds) so every launch reads from HBM; the time per launch
 * is the mean of back-to-back launches, gaps between kernels included, as in the
 * decode step.  It checks nothing: correctness is gpt-oss-kernel-check's; the targets
 * are `llmr bench engine`'s.  It includes k_gemv.cu itself, to reach its templates.
 *
 * Usage: gpt-oss-decode-kernel-bench [--reps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "k_gemv.cu"

#include "bench_weights.cuh"

static const uint32_t LAYERS = BW_LAYERS, E = BW_E, K = 4, H = BW_H, I = BW_I, QKV = BW_QKV, QW = BW_QW,
                      VOCAB = 201088;

static int reps = 10;

/* Mean microseconds per launch of launch(l) over reps x LAYERS launches. */
template <typename F> static double time_us(F launch)
{
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    for (uint32_t l = 0; l < LAYERS; l++) /* warm-up */
        launch(l);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(a));
    for (int r = 0; r < reps; r++)
        for (uint32_t l = 0; l < LAYERS; l++)
            launch(l);
    CUDA_OK(cudaEventRecord(b));
    CUDA_OK(cudaEventSynchronize(b));
    CUDA_OK(cudaGetLastError());
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    return 1000.0 * ms / (reps * LAYERS);
}

static void row(const char *name, double us, double bytes)
{
    printf("%-34s %9.2f us %8.0f GB/s\n", name, us, bytes / us / 1e3);
}

template <int S> static void gate_up(f16 *act, const uint8_t *b, const uint8_t *s, const float *bias,
                                     const int32_t *ids, const f16 *x)
{
    uint32_t slices = slices_for<S>(H / 32);
    dim3 grid(2 * I / 16, K);
    launch(moe_gate_up_kernel<S>, grid, dim3(32 * slices), tile_smem_bytes<S>(slices), (cudaStream_t)0,
           act, b, s, bias, ids, x, H, I, 1.702f, 7.0f);
}

template <int S> static void down(float *x, const uint8_t *b, const uint8_t *s, const float *bias,
                                  const int32_t *ids, const float *w, const f16 *act, void *scratch)
{
    uint32_t slices = slices_for<S>(I / 32);
    float *partial = static_cast<float *>(scratch);
    dim3 grid(H / 16, K);
    launch(moe_down_kernel<S>, grid, dim3(32 * slices), tile_smem_bytes<S>(slices), (cudaStream_t)0,
           x, b, s, bias, ids, w, act, partial, reinterpret_cast<uint32_t *>(partial + K * H), K, H, I);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20);

    BenchLayers layers = bench_layers();
    std::vector<uint8_t *> &gub = layers.gub, &gus = layers.gus, &dnb = layers.dnb, &dns = layers.dns;
    std::vector<f16 *> &wqkv = layers.wqkv, &wo = layers.wo, &wr = layers.wr;
    f16 *lm = dev<f16>((size_t)VOCAB * H);
    fill_halves<<<4096, 256>>>(lm, (size_t)VOCAB * H, 99);
    float *gbias = dev<float>((size_t)E * 2 * I), *dbias = dev<float>((size_t)E * H);
    CUDA_OK(cudaMemset(gbias, 0, (size_t)E * 2 * I * sizeof(float)));
    CUDA_OK(cudaMemset(dbias, 0, (size_t)E * H * sizeof(float)));
    /* the routed experts of each layer: 4 distinct of 32 */
    std::vector<int32_t> ids_h(LAYERS * K);
    for (uint32_t l = 0; l < LAYERS; l++)
        for (uint32_t j = 0; j < K; j++)
            ids_h[l * K + j] = (int32_t)((l * 7 + j * 9) % E);
    int32_t *ids = dev<int32_t>(LAYERS * K);
    CUDA_OK(cudaMemcpy(ids, ids_h.data(), ids_h.size() * 4, cudaMemcpyHostToDevice));
    float w_h[K] = {0.4f, 0.3f, 0.2f, 0.1f};
    float *w = dev<float>(K), *x = dev<float>(H), *y = dev<float>(VOCAB), *nw = dev<float>(H);
    CUDA_OK(cudaMemcpy(w, w_h, sizeof w_h, cudaMemcpyHostToDevice));
    std::vector<float> ones(H, 1.0f);
    CUDA_OK(cudaMemcpy(x, ones.data(), H * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(nw, ones.data(), H * 4, cudaMemcpyHostToDevice));
    f16 *xq = dev<f16>(H), *act = dev<f16>(K * I);
    fill_halves<<<16, 256>>>(xq, H, 3);
    fill_halves<<<16, 256>>>(act, K * I, 4);
    size_t scratch_bytes = k_moe_down_scratch_bytes(K, H);
    void *scratch = dev<uint8_t>(scratch_bytes);
    CUDA_OK(cudaMemset(scratch, 0, scratch_bytes));
    CUDA_OK(cudaDeviceSynchronize());

    double gu_bytes = K * (2.0 * I * H / 2 + 2.0 * I * H / 32);
    double dn_bytes = K * (1.0 * H * I / 2 + 1.0 * H * I / 32);
    printf("%-34s %12s %13s\n", "kernel (gpt-oss-20b shapes)", "per launch", "weights read");
#define GATE_UP(S) \
    row("moe gate_up, steps " #S, \
        time_us([&](uint32_t l) { gate_up<S>(act, gub[l], gus[l], gbias, ids + l * K, xq); }), gu_bytes)
#define DOWN(S) \
    row("moe down, steps " #S, \
        time_us([&](uint32_t l) { down<S>(x, dnb[l], dns[l], dbias, ids + l * K, w, act, scratch); }), \
        dn_bytes)
    GATE_UP(2);
    GATE_UP(3);
    GATE_UP(4);
    DOWN(2);
    DOWN(3);
    DOWN(4);
    row("k_moe_gate_up_gemv", time_us([&](uint32_t l) {
            k_moe_gate_up_gemv(act, gub[l], gus[l], gbias, ids + l * K, xq, K, H, I, 1.702f, 7.0f, 0);
        }), gu_bytes);
    row("k_moe_down_gemv", time_us([&](uint32_t l) {
            k_moe_down_gemv(x, dnb[l], dns[l], dbias, ids + l * K, w, act, scratch, K, H, I, 0);
        }), dn_bytes);
    row("k_gemv_f16 qkv 5120x2880 +norm", time_us([&](uint32_t l) {
            k_gemv_f16(y, wqkv[l], NULL, x, nw, 1e-5f, QKV, H, 0, 0);
        }), 2.0 * QKV * H);
    row("k_gemv_f16 o 2880x4096", time_us([&](uint32_t l) {
            k_gemv_f16(y, wo[l], NULL, y + 8192, NULL, 0.0f, H, QW, 1, 0);
        }), 2.0 * H * QW);
    row("k_router_decode 32x2880", time_us([&](uint32_t l) {
            k_router_decode(ids + l * K, y, xq, x, nw, 1e-5f, wr[l], y + 64, H, E, K, 0);
        }), 2.0 * E * H);
    reps = reps > 2 ? reps / 2 : 1;
    row("k_gemv_f16 lm_head 201088x2880", time_us([&](uint32_t) {
            k_gemv_f16(y, lm, NULL, x, nw, 1e-5f, VOCAB, H, 0, 0);
        }), 2.0 * VOCAB * H);
    return 0;
}

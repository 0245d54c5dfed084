/* Development timing of the kernels of one decode step of B sequences (the step path,
 * gpt_cuda_step.cu) at gpt-oss-20b's shapes: per layer the attention block's GEMMs,
 * RoPE with the paged KV write, paged attention over a context of C positions, the
 * router, the grouping by expert, the grouped MXFP4 GEMMs and their combine; then
 * lm_head and the pick.  Random weights, 24 layers' worth of distinct ones (more than
 * the L2 holds), each token routed to 4 random experts of 32.  The time per launch is
 * the mean of back-to-back launches; the table's last line adds them up as one step.
 * Then the experts' two products again with each tile of k_gemm_mxfp4_grouped_tile (16
 * and 17: the fragments kernel with 16 or 32 token rows a block, 20 the 16-row one with
 * its tokens in the operand order; 18 and 19 the wgmma kernel's 64 and 128 rows, on
 * Hopper; 32, 64, 128 rows of the grouped GEMM's tiles), to see where each pays; the dense products with the large
 * tile of 8 warps that the one of 4 replaced.  Batches past 256
 * stand for prefill chunks (their lm_head and pick take 256 rows).
 * It checks nothing: correctness is gpt-oss-kernel-check's.
 *
 * Usage: gpt-oss-step-kernel-bench [--batch 8,64,256] [--context 300] [--reps N] [--gemm-shapes] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "bench_weights.cuh"
#include "blas_gemm.cuh"

static const uint32_t LAYERS = BW_LAYERS, E = BW_E, K = 4, H = BW_H, I = BW_I, HEADS = 64, KVH = 8,
                      HD = 64, QW = HEADS * HD, QKV = QW + 2 * KVH * HD, VOCAB = 201088, B = 16;

__global__ void fill_floats(float *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u ^ seed;
        z ^= z >> 15;
        p[i] = ((int)(z % 2001) - 1000) * 1e-3f;
    }
}

static int reps = 5;

template <typename F> static double time_us(F launch)
{
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    for (uint32_t l = 0; l < LAYERS; l++)
        CUDA_OK(launch(l));
    CUDA_OK(cudaEventRecord(a));
    for (int r = 0; r < reps; r++)
        for (uint32_t l = 0; l < LAYERS; l++)
            CUDA_OK(launch(l));
    CUDA_OK(cudaEventRecord(b));
    CUDA_OK(cudaEventSynchronize(b));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    return 1000.0 * ms / (reps * LAYERS);
}

int main(int argc, char **argv)
{
    std::vector<uint32_t> batches = {8, 64, 256};
    uint32_t context = 300;
    bool shapes_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gemm-shapes"))
            shapes_only = true;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--context") && i + 1 < argc)
            context = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            batches.clear();
            for (char *t = strtok(argv[++i], ","); t; t = strtok(NULL, ","))
                batches.push_back((uint32_t)atoi(t));
        } else {
            fprintf(stderr, "usage: %s [--batch 8,64,256] [--context 300] [--reps N] [--gemm-shapes]\n"
                            "  --gemm-shapes: only the dense products (QKV, O, lm_head) in every shape\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; decode steps at context %u\n", prop.name, prop.multiProcessorCount,
           context);
    uint32_t TMAX = 256;
    for (uint32_t T : batches)
        TMAX = T > TMAX ? T : TMAX;
    BenchLayers layers = bench_layers();
    std::vector<uint8_t *> &gub = layers.gub, &gus = layers.gus, &dnb = layers.dnb, &dns = layers.dns;
    std::vector<f16 *> &wqkv = layers.wqkv, &wo = layers.wo, &wr = layers.wr;
    f16 *lm = dev<f16>((size_t)VOCAB * H);
    fill_halves<<<4096, 256>>>(lm, (size_t)VOCAB * H, 99);
    float *gbias = dev<float>((size_t)E * 2 * I), *dbias = dev<float>((size_t)E * H), *rbias = dev<float>(E);
    CUDA_OK(cudaMemset(rbias, 0, E * sizeof(float)));
    CUDA_OK(cudaMemset(gbias, 0, (size_t)E * 2 * I * sizeof(float)));
    CUDA_OK(cudaMemset(dbias, 0, (size_t)E * H * sizeof(float)));
    float *x = dev<float>((size_t)TMAX * H), *xf = dev<float>((size_t)TMAX * H);
    float *qkv = dev<float>((size_t)TMAX * QKV), *moe_out = dev<float>((size_t)TMAX * K * H);
    float *nw = dev<float>(H), *sinks = dev<float>(HEADS), *ew = dev<float>(TMAX * K);
    float *logits = dev<float>((size_t)TMAX * VOCAB), *xg = dev<float>((size_t)TMAX * H);
    float *parts = dev<float>(k_gemm_split_scratch_bytes(256, QKV) / 4 + 1);
    float *shape_parts = dev<float>((size_t)GPT_GEMM_WGMMA_SPLITS_MAX * TMAX * QKV); /* the shapes' sweeps */
    float *asplit = dev<float>(k_attention_paged_scratch_floats(TMAX, HEADS, HD));
    f16 *xn = dev<f16>((size_t)TMAX * H), *xn_lo = dev<f16>((size_t)TMAX * H);
    f16 *attn = dev<f16>((size_t)TMAX * QW), *attn_lo = dev<f16>((size_t)TMAX * QW);
    f16 *act = dev<f16>((size_t)TMAX * K * I);
    fill_floats<<<1024, 256>>>(x, (size_t)TMAX * H, 1);
    fill_floats<<<1024, 256>>>(qkv, (size_t)TMAX * QKV, 2);
    fill_floats<<<16, 256>>>(nw, H, 3);
    fill_floats<<<1, 64>>>(sinks, HEADS, 4);
    fill_halves<<<1024, 256>>>(xn, (size_t)TMAX * H, 5);
    fill_halves<<<1024, 256>>>(xn_lo, (size_t)TMAX * H, 6);
    fill_halves<<<1024, 256>>>(attn, (size_t)TMAX * QW, 7);
    fill_halves<<<1024, 256>>>(attn_lo, (size_t)TMAX * QW, 8);
    fill_halves<<<1024, 256>>>(act, (size_t)TMAX * K * I, 9);
    int32_t *eids = dev<int32_t>(TMAX * K), *rows = dev<int32_t>(TMAX * K),
            *slot_of = dev<int32_t>(TMAX * K), *lrows = dev<int32_t>(TMAX);
    uint32_t *counts = dev<uint32_t>(E), *offsets = dev<uint32_t>(E + 1);
    /* the KV cache: every sequence `context` positions in blocks of its own */
    uint32_t per_seq = (context + B - 1) / B, blocks = TMAX * per_seq;
    kv_t *kc = dev<kv_t>((size_t)blocks * KVH * B * HD), *vc = dev<kv_t>((size_t)blocks * KVH * B * HD);
    fill_halves<<<4096, 256>>>(kc, (size_t)blocks * KVH * B * HD, 10);
    fill_halves<<<4096, 256>>>(vc, (size_t)blocks * KVH * B * HD, 11);
    const KvCache kv16 = {kc, vc, nullptr, nullptr};
    /* the same cache in fp8 (bytes of 0x30: 0.5 in e4m3; scales 0: the timing does not care) */
    KvCache kv8 = {dev<uint8_t>((size_t)blocks * KVH * B * HD), dev<uint8_t>((size_t)blocks * KVH * B * HD),
                   dev<float>((size_t)blocks * KVH * B), dev<float>((size_t)blocks * KVH * B)};
    CUDA_OK(cudaMemset(kv8.k, 0x30, (size_t)blocks * KVH * B * HD));
    CUDA_OK(cudaMemset(kv8.v, 0x30, (size_t)blocks * KVH * B * HD));
    CUDA_OK(cudaMemset(kv8.kscale, 0, (size_t)blocks * KVH * B * 4));
    CUDA_OK(cudaMemset(kv8.vscale, 0, (size_t)blocks * KVH * B * 4));
    std::vector<uint32_t> tables(blocks);
    std::vector<StepToken> tok(TMAX);
    std::vector<int32_t> ids(TMAX * K), lr(TMAX);
    srand(5);
    for (uint32_t i = 0; i < blocks; i++)
        tables[i] = i;
    for (uint32_t t = 0; t < TMAX; t++) {
        uint32_t pos = context - 1, at = t * per_seq;
        tok[t] = StepToken{pos, {at, at}, {tables[at + pos / B] * B + pos % B, tables[at + pos / B] * B + pos % B}};
        lr[t] = (int32_t)t;
        for (uint32_t j = 0; j < K; j++) { /* 4 distinct experts */
            int32_t e;
            bool again;
            do {
                e = rand() % E;
                again = false;
                for (uint32_t q = 0; q < j; q++)
                    again |= ids[t * K + q] == e;
            } while (again);
            ids[t * K + j] = e;
        }
    }
    StepToken *dtok = dev<StepToken>(TMAX);
    uint32_t *dtables = dev<uint32_t>(blocks);
    CUDA_OK(cudaMemcpy(dtok, tok.data(), TMAX * sizeof(StepToken), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dtables, tables.data(), blocks * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(eids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(lrows, lr.data(), TMAX * 4, cudaMemcpyHostToDevice));
    std::vector<PickRow> pr(TMAX, PickRow{0.0f, 0, 1, 0, 0, 0});
    PickRow *dpr = dev<PickRow>(TMAX), *dpr_p = dev<PickRow>(TMAX);
    CUDA_OK(cudaMemcpy(dpr, pr.data(), TMAX * sizeof(PickRow), cudaMemcpyHostToDevice));
    std::vector<PickRow> pr_p(TMAX, PickRow{1.0f, 0, 1, 0, 0.9f, 0});
    CUDA_OK(cudaMemcpy(dpr_p, pr_p.data(), TMAX * sizeof(PickRow), cudaMemcpyHostToDevice));
    PickOut *pout = dev<PickOut>(TMAX);
    void *pscratch = dev<uint8_t>(k_pick_rows_scratch_bytes(TMAX));
    float2 *cs = dev<float2>((size_t)(context + 1) * HD / 2);
    fill_floats<<<64, 256>>>(reinterpret_cast<float *>(cs), (size_t)(context + 1) * HD, 12);
    CUDA_OK(cudaDeviceSynchronize());

    char blas_why[160] = "";
    BlasGemm *blas = blas_gemm_open(blas_why, sizeof blas_why);
    if (!blas)
        printf("cuBLAS: not used (%s)\n", blas_why);
    /* a dense product as the engine's step runs it (gpt_cuda_step.cu's dense()): the wgmma
     * kernel up to 64 rows on Hopper, cuBLAS where it is there, else k_gemm_f16 */
    const bool wgmma = k_wgmma_available();
    auto by_wgmma = [&](uint32_t M, float *scratch) { return wgmma && scratch && M <= 64; };
    auto dense = [&](float *C, const f16 *A, const f16 *A_lo, const f16 *Bw, uint32_t M, uint32_t N,
                     uint32_t Kd, int acc, float *scratch) {
        if (by_wgmma(M, scratch))
            return k_gemm_f16_wgmma(0, C, A, A_lo, Bw, NULL, M, N, Kd, acc, scratch, 0);
        return blas && blas_gemm_preferred(M, scratch != NULL) ? blas_gemm_f16(blas, C, A, A_lo, Bw, NULL, M, N, Kd, acc, 0)
                    : k_gemm_f16(C, A, A_lo, Bw, NULL, M, N, Kd, acc, scratch, 0);
    };
    auto dense_label = [&](char (&label)[48], uint32_t M, const char *what) {
        snprintf(label, sizeof label, "gemm %s (split A%s)", what,
                 by_wgmma(M, parts) ? ", wgmma" : blas && blas_gemm_preferred(M, true) ? ", cuBLAS" : "");
        return (const char *)label;
    };
    /* the dense products in every shape k_gemm_f16_shape takes (tile rows x parts of K)
     * against the one k_gemm_f16 picks, µs a launch */
    auto sweep_shapes = [&](uint32_t T, uint32_t LR) {
        const uint32_t parts_n[] = {1, 2, 3, 4, 5, 6, 8};
        for (int which = 0; which < 2; which++) {
            auto one = [&](uint32_t bm, uint32_t sp) {
                return time_us([&](uint32_t l) {
                    if (bm == 0) /* the pick */
                        return which ? k_gemm_f16(x, attn, attn_lo, wo[l], NULL, T, H, QW, 1, parts, 0)
                                     : k_gemm_f16(qkv, xn, xn_lo, wqkv[l], NULL, T, QKV, H, 0, parts, 0);
                    return which ? k_gemm_f16_shape(bm, sp, x, attn, attn_lo, wo[l], NULL, T, H, QW, 1, shape_parts, 0)
                                 : k_gemm_f16_shape(bm, sp, qkv, xn, xn_lo, wqkv[l], NULL, T, QKV, H, 0, shape_parts, 0);
                });
            };
            printf("%5u rows, %s: picked %.1f;", T, which ? "o  " : "qkv", one(0, 1));
            for (uint32_t bm : {32u, 64u, 128u})
                for (uint32_t sp : parts_n)
                    printf(" %ux%u %.1f", bm, sp, one(bm, sp));
            printf("\n");
        }
        if (blas) {
            double q = time_us([&](uint32_t l) { return blas_gemm_f16(blas, qkv, xn, xn_lo, wqkv[l], NULL, T, QKV, H, 0, 0); });
            double o = time_us([&](uint32_t l) { return blas_gemm_f16(blas, x, attn, attn_lo, wo[l], NULL, T, H, QW, 1, 0); });
            double lmb = time_us([&](uint32_t l) { (void)l; return blas_gemm_f16(blas, logits, xn, NULL, lm, NULL, LR, VOCAB, H, 0, 0); });
            printf("%5u rows, cuBLAS: qkv %.1f, o %.1f, lm_head %.1f\n", T, q, o, lmb);
        }
        printf("%5u rows, lm_head over %u: picked %.1f;", T, LR, time_us([&](uint32_t l) {
                   (void)l;
                   return k_gemm_f16(logits, xn, NULL, lm, NULL, LR, VOCAB, H, 0, NULL, 0);
               }));
        for (uint32_t bm : {32u, 64u, 128u})
            printf(" %ux1 %.1f", bm, time_us([&](uint32_t l) {
                       (void)l;
                       return k_gemm_f16_shape(bm, 1, logits, xn, NULL, lm, NULL, LR, VOCAB, H, 0, NULL, 0);
                   }));
        printf("\n");
    };

    for (uint32_t T : batches) {
        const uint32_t LR = T < 256 ? T : 256; /* lm_head's rows */
        if (shapes_only) {
            sweep_shapes(T, LR);
            continue;
        }
        uint32_t blocks_ = T * KVH, want = (2u * prop.multiProcessorCount + blocks_ - 1) / blocks_;
        uint32_t tiles = (context + 63) / 64, splits = want < tiles ? want : tiles;
        splits = splits > 32 ? 32 : splits ? splits : 1;
        struct { const char *name; double us; } r[16];
        int n = 0;
#define T_(label, call) r[n++] = {label, time_us([&](uint32_t l) { (void)l; return (call); })}
        /* a layer as the engine's step runs it (gpt_cuda_step.cu's forward()): its
         * attention norm comes with the layer before's experts' sum (the first layer's
         * own norm, one launch a step, is not counted) */
        char qkv_label[48], o_label[48];
        T_(dense_label(qkv_label, T, "qkv"), dense(qkv, xn, xn_lo, wqkv[l], T, QKV, H, 0, parts));
        T_("rope + paged kv write", k_rope_kv_paged(qkv, kv16, dtok, 0, cs, T, HEADS, KVH, HD, B, 0));
        T_("attention (paged)", k_attention_paged(attn, attn_lo, NULL, asplit, qkv, kv16, dtok, dtables, 0,
                                                  sinks, T, HEADS, KVH, HD, B, 0, splits, 0));
        T_(dense_label(o_label, T, "o"), dense(x, attn, attn_lo, wo[l], T, H, QW, 1, parts));
        /* the experts' tokens in the operand order where the engine's step writes them so
         * (both products on the fragments kernel: gpt_cuda_step.cu) */
        const bool operand = k_gemm_mxfp4_grouped_pick(E, T, T * K, 2 * I, H) == GPT_MOE_TILE_FRAGMENTS16 &&
                             k_gemm_mxfp4_grouped_pick(E, T, T * K, H, I) == GPT_MOE_TILE_FRAGMENTS16;
        const uint32_t moe_tile = operand ? GPT_MOE_TILE_FRAGMENTS16_OPERAND : 0;
        T_(operand ? "rmsnorm (operand order) + router" : "rmsnorm (fp16 + fp32) + router",
           k_rmsnorm_router(xn, xf, operand, x, nw, 1e-5f, eids, ew, wr[l], rbias, T, H, E, K, 0));
        CUDA_OK(cudaMemcpy(eids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice)); /* random again */
        T_("moe group", k_moe_group(rows, slot_of, counts, offsets, eids, T, K, E, 0));
        T_("moe gate_up (grouped)", k_gemm_mxfp4_grouped_tile(moe_tile, NULL, act, xn, rows, gub[l], gus[l], gbias,
                                                              offsets, E, T, T * K, 2 * I, H, 1.702f, 7.0f, 0));
        T_("moe down (grouped)", k_gemm_mxfp4_grouped_tile(moe_tile, moe_out, NULL, act, NULL, dnb[l], dns[l], dbias,
                                                           offsets, E, T, T * K, H, I, 1.702f, 7.0f, 0));
        T_("moe combine + next rmsnorm", k_moe_combine_rmsnorm(x, moe_out, slot_of, ew, T, K, H, xn, xn_lo, nw, 1e-5f, 0));
        double layer = 0;
        for (int i = 0; i < n; i++)
            layer += r[i].us;
        int nl = n;
        int saved = reps;
        reps = reps > 2 ? reps / 2 : 1;
        T_("lm_head: gather + norm", T == 1 ? cudaSuccess : k_gather_rows(xg, x, lrows, LR, H, 0));
        T_("lm_head gemm", T == 1 ? k_gemv_f16(logits, lm, NULL, x, nw, 1e-5f, VOCAB, H, 0, 0)
                                  : dense(logits, xn, NULL, lm, LR, VOCAB, H, 0, NULL));
        T_("pick", k_pick_rows(pout, dpr, logits, LR, VOCAB, pscratch, false, 0));
        T_("pick, top_p 0.9 (the cut)", k_pick_rows(pout, dpr_p, logits, LR, VOCAB, pscratch, true, 0));
        reps = saved;
        double tail = 0;
        for (int i = nl; i < n - 1; i++) /* the greedy step: not the top_p pick */
            tail += r[i].us;
        printf("\n%u sequences (attention splits %u)       us/launch   x24 (ms)\n", T, splits);
        for (int i = 0; i < n; i++)
            printf("  %-28s %9.1f %9.2f\n", r[i].name, r[i].us, i < nl ? r[i].us * 24 / 1000 : r[i].us / 1000);
        double step = layer * 24 + tail;
        printf("  %-28s %9s %9.2f  -> %.0f tokens/s\n", "one step (greedy)", "", step / 1000,
               T / (step / 1e6));
        printf("  experts' products by tile (us/launch): ");
        for (uint32_t tile : {GPT_MOE_TILE_FRAGMENTS16, GPT_MOE_TILE_FRAGMENTS32, GPT_MOE_TILE_WGMMA64,
                              GPT_MOE_TILE_WGMMA128, GPT_MOE_TILE_FRAGMENTS16_OPERAND, 32u, 64u, 128u}) {
            if ((tile == GPT_MOE_TILE_WGMMA64 || tile == GPT_MOE_TILE_WGMMA128) && !k_wgmma_available())
                continue; /* Hopper's only */
            double gu = time_us([&](uint32_t l) {
                return k_gemm_mxfp4_grouped_tile(tile, NULL, act, xn, rows, gub[l], gus[l], gbias, offsets,
                                                 E, T, T * K, 2 * I, H, 1.702f, 7.0f, 0);
            });
            double dn = time_us([&](uint32_t l) {
                return k_gemm_mxfp4_grouped_tile(tile, moe_out, NULL, act, NULL, dnb[l], dns[l], dbias,
                                                 offsets, E, T, T * K, H, I, 1.702f, 7.0f, 0);
            });
            printf(" %u: %.1f + %.1f;", tile, gu, dn);
        }
        printf("\n");
        /* what the split fp16 A costs the dense products (accuracy's price), and what a
         * step that never splits K (the batch-invariant option) pays */
        double qkv1 = time_us([&](uint32_t l) { return k_gemm_f16(qkv, xn, NULL, wqkv[l], NULL, T, QKV, H, 0, parts, 0); });
        double o1 = time_us([&](uint32_t l) { return k_gemm_f16(x, attn, NULL, wo[l], NULL, T, H, QW, 1, parts, 0); });
        double qkv_ns = time_us([&](uint32_t l) { return k_gemm_f16(qkv, xn, xn_lo, wqkv[l], NULL, T, QKV, H, 0, NULL, 0); });
        double o_ns = time_us([&](uint32_t l) { return k_gemm_f16(x, attn, attn_lo, wo[l], NULL, T, H, QW, 1, NULL, 0); });
        printf("  gemm qkv + o (us/launch): fp16 A only %.1f + %.1f; split A, K never split %.1f + %.1f\n",
               qkv1, o1, qkv_ns, o_ns);
        if (wgmma && T <= 64) { /* the wgmma kernel's parts of K: its pick (0), then each */
            printf("  gemm qkv + o on wgmma, split A, by parts of K (us/launch):");
            for (uint32_t sp : {0u, 1u, 2u, 4u, 6u, 8u, 11u, 16u}) {
                double q = time_us([&](uint32_t l) {
                    return k_gemm_f16_wgmma(sp, qkv, xn, xn_lo, wqkv[l], NULL, T, QKV, H, 0, shape_parts, 0);
                });
                double o = time_us([&](uint32_t l) {
                    return k_gemm_f16_wgmma(sp, x, attn, attn_lo, wo[l], NULL, T, H, QW, 1, shape_parts, 0);
                });
                printf(" %s%u %.1f + %.1f;", sp ? "" : "pick ", sp, q, o);
            }
            printf("\n");
        }
        /* the large tile (128 rows of 4 warps) against the 8 warps it replaced, where a
         * product takes it: lm_head over the step's rows, QKV and O past 256 rows */
        double lm4 = time_us([&](uint32_t l) { (void)l; return k_gemm_f16(logits, xn, NULL, lm, NULL, LR, VOCAB, H, 0, NULL, 0); });
        double lm8 = time_us([&](uint32_t l) {
            (void)l;
            return k_gemm_f16_tile(GPT_GEMM_TILE_LARGE8, logits, xn, NULL, lm, NULL, LR, VOCAB, H, 0, NULL, 0);
        });
        double qkv8 = time_us([&](uint32_t l) {
            return k_gemm_f16_tile(GPT_GEMM_TILE_LARGE8, qkv, xn, xn_lo, wqkv[l], NULL, T, QKV, H, 0, parts, 0);
        });
        double o8 = time_us([&](uint32_t l) {
            return k_gemm_f16_tile(GPT_GEMM_TILE_LARGE8, x, attn, attn_lo, wo[l], NULL, T, H, QW, 1, parts, 0);
        });
        double qkv4 = time_us([&](uint32_t l) { return k_gemm_f16(qkv, xn, xn_lo, wqkv[l], NULL, T, QKV, H, 0, parts, 0); });
        double o4 = time_us([&](uint32_t l) { return k_gemm_f16(x, attn, attn_lo, wo[l], NULL, T, H, QW, 1, parts, 0); });
        printf("  the engine's kernels (k_gemm_f16): lm_head %.1f, qkv + o %.1f + %.1f; the large tile of 8 "
               "warps of 64x32 in its place: lm_head %.1f, qkv + o %.1f + %.1f (us/launch)\n",
               lm4, qkv4, o4, lm8, qkv8, o8);
        double rope8 = time_us([&](uint32_t l) {
            (void)l;
            return k_rope_kv_paged(qkv, kv8, dtok, 0, cs, T, HEADS, KVH, HD, B, 0);
        });
        double attn8 = time_us([&](uint32_t l) {
            (void)l;
            return k_attention_paged(attn, attn_lo, NULL, asplit, qkv, kv8, dtok, dtables, 0, sinks, T, HEADS,
                                     KVH, HD, B, 0, splits, 0);
        });
        printf("  fp8 cache (us/launch): rope + kv write %.1f, attention %.1f\n", rope8, attn8);
    }
    blas_gemm_close(blas);
    return 0;
}

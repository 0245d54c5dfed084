/* The experts' products of a step whose experts have few rows each (the decode of up to
 * about a hundred sequences): MXFP4 weights as the A operand of mma.sync m16n8k16,
 * decoded from their raw bytes straight into fragments in registers, the step's tokens
 * as B.
 *
 * A block takes 128 weight rows (output features, 16 per warp) of one expert against up
 * to TN of its rows (tokens).  K flows through a cp.async pipeline of ST stages of
 * MG_BK: the weights' raw bytes and the tokens' fp16 rows, each thread's share of a
 * stage fixed for the whole of K (no index arithmetic a stage); the block's scales for
 * all of K come with the first step.  For gpt-oss's K of 2880, 16 token rows take two
 * stages of 320 (ten MXFP4 groups, 160 bytes of each weight row) and 32 token rows two of
 * 160, small enough for three blocks an SM (MINB), which hide the decode's latencies
 * better than two blocks of three stages (on an H100 at 64 sequences 141 + 85 us against
 * 162 + 97); other K, steps of 64 (8 stages).  Runs of 160 bytes of a row come from
 * memory faster than runs of 32 (9.5% less time at 64 sequences; BENCHMARKS.md).
 * Each lane decodes its own words: rows g and g + 8 of its
 * warp, the 4-byte word t of each group as the loader laid it out (k_mxfp4_lay_out: 8
 * E2M1 values to fp16 by byte permutes, unscaled: e2m1x8_to_half2_pairs), which are its
 * A fragments as they are: the values 2t, 2t + 1 and 2t + 8, 2t + 9 of the group's
 * first k16 step, and the same 16 on of its second; the tokens' B fragments must hold
 * the same values: where the tokens lie in their order they come from shared memory by
 * ldmatrix, and where the step wrote them in the operand order (X_OPERAND,
 * GPT_MOE_TILE_FRAGMENTS16_OPERAND: a word's 8 values side by side) by one 16-byte read
 * a lane, 3% less time at 8 to 12 rows an expert (BENCHMARKS.md).  A group is
 * exactly two k16 steps, so its scale multiplies the group's sum in fp32 (an FMA per
 * output) instead of its 32 weights in fp16.  So no block-wide decode into shared
 * memory and no barrier between decoding and multiplying; the tensor cores see 2 x TN/8
 * products per group and warp.  Measured against the grouped GEMM's tiles (H200, a
 * decode step of gpt-oss-20b; BENCHMARKS.md): gate_up 143 against 186 us a layer at 8
 * sequences, 199 against 256 at 64; but 413 against 341 at 256 (32 rows an expert,
 * TN 32), where the tiles stayed.  Since the decode takes 13 instructions for 8 values
 * instead of 21 (11 since the load-time layout) and the tokens no permutes, an H100 at
 * 64 sequences gives 154 + 94 us instead of 172 + 103, and TN 32 beats the 32-row tile
 * at 16 rows an expert (199 + 121 against 246 + 140 us), so it serves up to 24 (on compute capability 9.0 up to 12, the
 * wgmma kernel past that: k_gemm_mxfp4.cu).  The epilogue
 * is the grouped GEMM's (k_gemm.cu): plus the bias, then C fp32 or the clamped SwiGLU of
 * (gate, up) feature pairs as fp16 (the pair's partner is the next lane group's row,
 * fetched by a shuffle).
 * See k_gemm_mxfp4_grouped in kernels.cuh. */
#include "experts_common.cuh"

#include <type_traits>

#define MG_THREADS 256
#define MG_N 128  /* weight rows a block */

/* A token row in shared memory, in halves (see the kernel's padding). */
template <int MG_BK, bool X_OPERAND>
static constexpr __host__ __device__ int moe_x_row()
{
    return X_OPERAND ? MG_BK + 32 : MG_BK + 8;
}


template <int TN, int ST, int MG_BK, int MINB = 2, bool PADW = true, bool LIVE_LOOPS = true,
          bool X_OPERAND = false>
__global__ void __launch_bounds__(MG_THREADS, MINB) moe_gemm_kernel(ExpertsArgs p)
{
    /* shared rows padded so that a warp's reads meet no bank twice: the tokens' to an odd
     * multiple of 16 bytes modulo 128 (ldmatrix reads 8 rows' 16 bytes at a time) or, in
     * the operand order (X_OPERAND), to 64 (lanes g and g + 1 of a quarter warp read 16
     * bytes each at 4 offsets t); the weights' (PADW) to 16 modulo 32 bytes (lanes
     * g = 0..7 read 4 bytes each at 4 offsets t); unpadded weights cost 2-way conflicts
     * and save shared memory where a third block an SM needs it */
    constexpr int MG_LDX = moe_x_row<MG_BK, X_OPERAND>();
    constexpr int WLD = PADW && MG_BK / 2 % 32 == 0 ? MG_BK / 2 + 16 : MG_BK / 2;
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    constexpr int NT = TN / 8;          /* n8 tiles of tokens */
    constexpr int QB = MG_BK / 2;       /* raw bytes of a row's step */
    extern __shared__ __align__(16) unsigned char smem[];
    f16 *Xs = reinterpret_cast<f16 *>(smem);                         /* [ST][TN][MG_LDX] */
    uint8_t *Wraw = reinterpret_cast<uint8_t *>(Xs + ST * TN * MG_LDX); /* [ST][MG_N][WLD] */
    uint8_t *Sc = Wraw + ST * MG_N * WLD;                             /* [MG_N][K/32] */

    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t g = lane >> 2, t = lane & 3;
    const uint32_t n0 = blockIdx.x * MG_N, m0 = blockIdx.y * TN, e = blockIdx.z;
    const uint32_t K = p.K, N = p.N, KG = K / 32, KT = K / MG_BK;
    const uint32_t slot0 = p.offsets[e], rows = p.offsets[e + 1] - slot0;
    if (m0 >= rows)
        return;
    load_block_scales<MG_N, MG_THREADS>(Sc, p, e, n0, tid);
    /* Each thread's share of a stage, fixed for the whole of K (so a stage costs a few
     * cp.async and no index arithmetic): weight row tid / 2, its 16-byte chunks of parity
     * tid % 2; token row tid / XT, its chunks tid % XT + XT j. */
    constexpr int WC = QB / 16, XC = MG_BK / 8, XT = MG_THREADS / TN;
    const uint32_t wrow = tid >> 1, wpar = tid & 1, xrow = tid / XT, xc0 = tid % XT;
    const bool w_ok = n0 + wrow < N, x_ok = m0 + xrow < rows;
    const uint8_t *w_src = p.blocks + ((size_t)e * N + (w_ok ? n0 + wrow : 0)) * (K / 2) + wpar * 16;
    const f16 *x_src = p.A + (x_ok ? (p.a_rows ? (size_t)p.a_rows[slot0 + m0 + xrow] : (size_t)slot0 + m0 + xrow) : 0) * K +
                       xc0 * 8;
    auto load_stage = [&](uint32_t kt, uint32_t stage) {
        f16 *xd = Xs + (stage * TN + xrow) * MG_LDX + xc0 * 8;
#pragma unroll
        for (int j = 0; j < (XC + XT - 1) / XT; j++)
            if (xc0 + j * XT < (uint32_t)XC)
                cp_async16(xd + j * XT * 8, x_src + kt * MG_BK + j * XT * 8, x_ok);
        uint8_t *wd = Wraw + (stage * MG_N + wrow) * WLD + wpar * 16;
#pragma unroll
        for (int j = 0; j < (WC + 1) / 2; j++)
            if (wpar + 2 * j < (uint32_t)WC)
                cp_async16(wd + j * 32, w_src + (size_t)kt * QB + j * 32, w_ok);
    };
    static_assert(MG_THREADS == 2 * MG_N && MG_THREADS % TN == 0, "the stage's shares");

    float acc[NT][4];
#pragma unroll
    for (int i = 0; i < NT; i++)
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    for (uint32_t s = 0; s < ST - 1; s++) {
        if (s < KT)
            load_stage(s, s);
        cp_async_commit();
    }
    const uint32_t r0 = warp * 16 + g, r1 = r0 + 8; /* this lane's weight rows */
    /* n8 tiles of tokens that hold any (an expert of a few rows leaves the last empty:
     * their products are skipped, the same for the whole block) */
    const uint32_t live = (rows - m0 + 7) / 8;
    /* the whole of K with L n8 tiles, a constant.  LIVE_LOOPS (16 token rows): a loop for
     * one live tile and one for two, so that the unrolled groups of a step hold no branch
     * and the decode of one interleaves with the products of another: 4 to 7% less time
     * than a test per tile and group at 8 to 12 rows an expert on an H100
     * (BENCHMARKS.md).  Else (32 token rows, whose four loops spill at three blocks' 80
     * registers) one loop of NT, TESTED: each tile past the first skipped when empty. */
    static_assert(!LIVE_LOOPS || NT == 2, "a loop for each live count: 16 token rows");
    auto steps = [&](auto live_tiles, auto tested) {
        constexpr int L = decltype(live_tiles)::value;
        constexpr bool TESTED = decltype(tested)::value;
        for (uint32_t kt = 0; kt < KT; kt++) {
            cp_async_wait<ST - 2>();
            __syncthreads(); /* the step is in, and the stage refilled below is used up */
            if (kt + ST - 1 < KT)
                load_stage(kt + ST - 1, (kt + ST - 1) % ST);
            cp_async_commit();
            const uint32_t stage = kt % ST;
            const uint8_t *wr = Wraw + stage * MG_N * WLD;
            const f16 *xs = Xs + stage * TN * MG_LDX;
            const uint8_t *sc = Sc + kt * (MG_BK / 32);
#pragma unroll
            for (int gi = 0; gi < MG_BK / 32; gi++) { /* the step's groups of 32 */
                uint32_t wa = *reinterpret_cast<const uint32_t *>(wr + r0 * WLD + gi * 16 + 4 * t);
                uint32_t wb = *reinterpret_cast<const uint32_t *>(wr + r1 * WLD + gi * 16 + 4 * t);
                /* the group's scales 2^(s-127) as fp32 (s in the exponent field) */
                const float sa = __uint_as_float((uint32_t)sc[r0 * KG + gi] << 23);
                const float sb = __uint_as_float((uint32_t)sc[r1 * KG + gi] << 23);
                uint32_t ha[4], hb[4]; /* (value 2j, value 2j + 1) of rows r0 and r1 */
                e2m1x8_to_half2_pairs(wa, ha);
                e2m1x8_to_half2_pairs(wb, hb);
                const uint32_t a0[4] = {ha[0], hb[0], ha[1], hb[1]};
                const uint32_t a1[4] = {ha[2], hb[2], ha[3], hb[3]};
#pragma unroll
                for (int nt = 0; nt < L; nt++) {
                    if (TESTED && nt > 0 && (uint32_t)nt >= live)
                        break;
                    /* tokens nt*8..nt*8+7, the group's values 8j..8j+7 as matrix j
                     * (lane l gives row l % 8 of matrix l / 8): lane (g, t) receives
                     * token nt*8+g's values 8j+2t, 8j+2t+1, which are B's pairs for
                     * the weights' pairs j; the group's sum, then times its scale */
                    uint32_t x[4];
                    if constexpr (X_OPERAND) { /* the same values, side by side */
                        const uint4 v = *reinterpret_cast<const uint4 *>(xs + (nt * 8 + g) * MG_LDX + gi * 32 + 8 * t);
                        x[0] = v.x;
                        x[1] = v.y;
                        x[2] = v.z;
                        x[3] = v.w;
                    } else {
                        ldmatrix_x4(x, xs + (nt * 8 + (lane & 7)) * MG_LDX + gi * 32 + 8 * (lane >> 3));
                    }
                    float c[4];
                    mma_f16_from_zero(c, a0, x[0], x[1]);
                    mma_f16(c, a1, x[2], x[3]);
                    acc[nt][0] = fmaf(c[0], sa, acc[nt][0]);
                    acc[nt][1] = fmaf(c[1], sa, acc[nt][1]);
                    acc[nt][2] = fmaf(c[2], sb, acc[nt][2]);
                    acc[nt][3] = fmaf(c[3], sb, acc[nt][3]);
                }
            }
        }
    };
    if constexpr (LIVE_LOOPS) {
        if (live >= 2)
            steps(std::integral_constant<int, 2>(), std::false_type{});
        else
            steps(std::integral_constant<int, 1>(), std::false_type{});
    } else {
        steps(std::integral_constant<int, NT>(), std::true_type{});
    }
    cp_async_wait<0>();

    /* acc[nt]: rows r0 (0, 1) and r1 (2, 3) of the weights, tokens nt*8 + 2t (+1) */
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            store_feature_output(p, e, slot0, rows, n0 + (j < 2 ? r0 : r1), m0 + nt * 8 + 2 * t + (j & 1), acc[nt][j], g);
}

template <int TN, int ST, int MG_BK, int MINB, bool PADW, bool X_OPERAND>
static size_t moe_smem_bytes(uint32_t K)
{
    constexpr size_t WLD = PADW && MG_BK / 2 % 32 == 0 ? MG_BK / 2 + 16 : MG_BK / 2;
    return (size_t)ST * TN * moe_x_row<MG_BK, X_OPERAND>() * sizeof(f16) + (size_t)ST * MG_N * WLD +
           (size_t)MG_N * (K / 32);
}

template <int TN, int ST, int BK, int MINB = 2, bool PADW = true, bool LIVE_LOOPS = true, bool X_OPERAND = false>
static cudaError_t moe_launch(const ExpertsArgs &a, uint32_t E, uint32_t max_rows, cudaStream_t s)
{
    static SmemAllowance allowed;
    size_t smem = moe_smem_bytes<TN, ST, BK, MINB, PADW, X_OPERAND>(a.K);
    cudaError_t err =
        allow_dynamic_smem(allowed, moe_gemm_kernel<TN, ST, BK, MINB, PADW, LIVE_LOOPS, X_OPERAND>, smem);
    if (err != cudaSuccess)
        return err;
    dim3 grid((a.N + MG_N - 1) / MG_N, (max_rows + TN - 1) / TN, E);
    LAUNCH((moe_gemm_kernel<TN, ST, BK, MINB, PADW, LIVE_LOOPS, X_OPERAND>), grid, MG_THREADS, smem, s, a);
    return cudaGetLastError();
}

cudaError_t k_moe_gemm_few(uint32_t token_rows, float *C, f16 *act, const f16 *A,
                           const int32_t *a_rows, const uint8_t *blocks, const uint8_t *scales,
                           const float *bias, const uint32_t *offsets, uint32_t E,
                           uint32_t max_rows, uint32_t N, uint32_t K, float alpha, float limit,
                           bool operand_order, cudaStream_t s)
{
    if (K % 64 || N % 16 || max_rows == 0 || E == 0 || K > 12288 ||
        (token_rows != 16 && token_rows != 32) || (token_rows == 32 && K % 320) ||
        (operand_order && (token_rows != 16 || (act && N / 2 % 32))))
        return cudaErrorInvalidValue;
    ExpertsArgs a = {C, act, A, a_rows, blocks, scales, bias, offsets, N, K, alpha, limit, operand_order};
    if (operand_order) /* the tokens' values of a word side by side: 16-byte reads */
        return K % 320 == 0 ? moe_launch<16, 2, 320, 3, false, true, true>(a, E, max_rows, s)
                            : moe_launch<16, 8, 64, 2, true, true, true>(a, E, max_rows, s);
    /* 32 token rows: two stages of 160 for three blocks an SM */
    if (token_rows == 32)
        return moe_launch<32, 2, 160, 3, true, false>(a, E, max_rows, s);
    /* steps of 320 (160 bytes of a row: gpt-oss's K of 2880) where K allows, else 64 */
    if (K % 320 == 0) /* two stages: three blocks an SM (the weights' rows unpadded to fit) */
        return moe_launch<16, 2, 320, 3, false>(a, E, max_rows, s);
    return moe_launch<16, 8, 64>(a, E, max_rows, s);
}

/* The dense products of a step of few rows (QKV and the output projection of up to 64
 * sequences) on Hopper's warpgroup matrix instructions (wgmma, sm_90a): k_gemm_f16's
 * contract, for M <= 64.
 *
 * At 64 rows these products read 24 to 30 MB of fp16 weights and do little arithmetic
 * a byte; k_gemm.cu's mma.sync tiles and cuBLAS both took about 25 us each on an H200
 * (about 1.1 TB/s, BENCHMARKS.md).  Here a block takes 128 weight rows (two warpgroups
 * of 64, a warp's 16 rows) against all of the step's rows, with K split over blocks so
 * that about two blocks an SM are resident (their raw sums go to a scratch, added in a
 * fixed order by k_gemm_sum_parts).  K flows through a cp.async pipeline of GW_ST stages
 * of 64 values: the weights' rows and the tokens' rows (and their split-fp16 low
 * halves), each laid in 128-byte swizzle atoms.  A warp takes its weight rows' A
 * fragments by ldmatrix, then one wgmma a warpgroup and k16 step with the tokens as B
 * (two with split A: the high and the low halves into the same fp32 sums).  The wgmma's
 * N is the step's rows rounded up to 16.
 * See k_gemm_f16_wgmma in kernels.cuh. */
#include "device_util.cuh"
#include "wgmma.cuh"

#define GW_BK 64        /* K a stage: one 128-byte swizzle atom of a row */
#define GW_ROWS 128     /* weight rows (output features) a block: 64 a warpgroup */
#define GW_THREADS 256  /* two warpgroups */
#define GW_TOKENS 64    /* the most rows (tokens) a product takes */
#define GW_ST 3         /* stages in flight: two blocks an SM with split A */
#define GW_MIN_STEPS 4u /* k-steps a part of a split K keeps at least */

struct DenseArgs {
    float *C;
    const f16 *A, *A_lo; /* [M][K]; A_lo may be NULL */
    const f16 *B;        /* weights [N][K] */
    const float *bias;   /* may be NULL */
    float *parts;        /* splits > 1: each part's raw sums [z][M][N] */
    uint32_t M, N, K, splits;
    int accumulate;
};

/* The shared memory of a stage: the weights [GW_ROWS][128 bytes], then the tokens
 * [GW_TOKENS][128 bytes], then (LO) their low halves the same way; every piece a
 * multiple of 1024 bytes, so each starts a swizzle atom. */
template <bool LO>
static constexpr __host__ __device__ uint32_t gw_stage_bytes()
{
    return GW_ROWS * 128 + (LO ? 2 : 1) * GW_TOKENS * 128;
}

template <bool LO>
static size_t gw_smem_bytes(void)
{
    return (size_t)GW_ST * gw_stage_bytes<LO>() + 1024; /* room to align the start */
}

#if WGMMA_AVAILABLE
/* The place of row r's 16-byte chunk c in a 128-byte swizzle atom (wgmma_desc_sw128). */
static __device__ __forceinline__ uint32_t gw_swizzled(uint32_t r, uint32_t c)
{
    return r * 128 + ((c ^ (r & 7)) << 4);
}
#endif

/* W: the products' N / 16 (the step's rows rounded up to 16, 1 to 4); LO: A is split
 * fp16. */
template <int W, bool LO>
__global__ void __launch_bounds__(GW_THREADS, 2) dense_wgmma_kernel(DenseArgs p)
{
#if WGMMA_AVAILABLE
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    constexpr uint32_t STAGE = gw_stage_bytes<LO>(), XOFF = GW_ROWS * 128, XBYTES = GW_TOKENS * 128;
    extern __shared__ __align__(16) unsigned char gw_smem[];
    const uint32_t base = smem_addr(gw_smem) + ((1024 - (smem_addr(gw_smem) & 1023)) & 1023);

    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t g = lane >> 2, t = lane & 3;
    const uint32_t n0 = blockIdx.x * GW_ROWS, z = blockIdx.y;
    const uint32_t K = p.K, N = p.N, M = p.M, KT = K / GW_BK;
    const uint32_t kt0 = z * KT / p.splits, steps = (z + 1) * KT / p.splits - kt0;

    /* Each thread's 16-byte chunks of a stage, fixed for the whole of K: weight chunks
     * tid + 256 j (row c / 8, chunk c % 8: eight lanes take a row's 128 bytes), token
     * chunks the same over the W * 16 rows the products read (rows past M are zeros). */
    constexpr int WJ = GW_ROWS * 8 / GW_THREADS;
    constexpr int XC = W * 16 * 8, XJ = (XC + GW_THREADS - 1) / GW_THREADS;
    const f16 *w_src[WJ];
    uint32_t w_dst[WJ];
    bool w_ok[WJ];
#pragma unroll
    for (int j = 0; j < WJ; j++) {
        const uint32_t c = tid + j * GW_THREADS, r = c >> 3, ch = c & 7;
        w_ok[j] = n0 + r < N;
        w_src[j] = p.B + (size_t)(w_ok[j] ? n0 + r : 0) * K + (size_t)kt0 * GW_BK + ch * 8;
        w_dst[j] = gw_swizzled(r, ch);
    }
    size_t x_off[XJ]; /* the chunk's place in A and in A_lo */
    uint32_t x_dst[XJ];
    bool x_mine[XJ], x_ok[XJ];
#pragma unroll
    for (int j = 0; j < XJ; j++) {
        const uint32_t c = tid + j * GW_THREADS, r = c >> 3, ch = c & 7;
        x_mine[j] = c < (uint32_t)XC;
        x_ok[j] = x_mine[j] && r < M;
        x_off[j] = (size_t)(x_ok[j] ? r : 0) * K + (size_t)kt0 * GW_BK + ch * 8;
        x_dst[j] = XOFF + gw_swizzled(r, ch);
    }
    uint32_t load_slot = 0, loaded = 0;
    auto load_next = [&]() {
        const uint32_t at = base + load_slot * STAGE, k = loaded * GW_BK;
#pragma unroll
        for (int j = 0; j < WJ; j++)
            cp_async16_at(at + w_dst[j], w_src[j] + k, w_ok[j]);
#pragma unroll
        for (int j = 0; j < XJ; j++)
            if (x_mine[j]) {
                cp_async16_at(at + x_dst[j], p.A + x_off[j] + k, x_ok[j]);
                if (LO)
                    cp_async16_at(at + XBYTES + x_dst[j], p.A_lo + x_off[j] + k, x_ok[j]);
            }
        loaded++;
        load_slot = load_slot + 1 == GW_ST ? 0 : load_slot + 1;
    };

    float acc[W * 8];
#pragma unroll
    for (int i = 0; i < W * 8; i++)
        acc[i] = 0.0f;
    for (uint32_t s = 0; s < GW_ST - 1; s++) {
        if (s < steps)
            load_next();
        cp_async_commit();
    }
    /* this lane's ldmatrix row of its warp's 16 and its chunk's offset (0 or 1) in a k16
     * step: matrices 0 to 3 are rows 0-7 and 8-15 at k 0-7, then at k 8-15, the A
     * fragment's a[0..3] */
    const uint32_t lrow = warp * 16 + (lane & 15), lhalf = lane >> 4;
    uint32_t slot = 0;
    for (uint32_t i = 0; i < steps; i++) {
        cp_async_wait<GW_ST - 2>();
        fence_proxy_async_shared();
        __syncthreads(); /* the stage is in, and the one refilled below is used up */
        if (i + GW_ST - 1 < steps)
            load_next();
        cp_async_commit();
        const uint32_t at = base + slot * STAGE;
        uint32_t a[GW_BK / 16][4];
#pragma unroll
        for (int ks = 0; ks < GW_BK / 16; ks++)
            ldmatrix_x4_at(a[ks], at + gw_swizzled(lrow, 2 * ks + lhalf));
#pragma unroll
        for (int j = 0; j < W * 8; j++)
            wgmma_keep(acc[j]);
        wgmma_fence();
        const uint64_t hi = wgmma_desc_sw128(at + XOFF), lo = wgmma_desc_sw128(at + XOFF + XBYTES);
#pragma unroll
        for (int ks = 0; ks < GW_BK / 16; ks++) { /* the atom's 32 bytes ks */
            wgmma_f16_rs<W * 16>(acc, a[ks], hi + (uint64_t)(ks * 32 >> 4));
            if (LO)
                wgmma_f16_rs<W * 16>(acc, a[ks], lo + (uint64_t)(ks * 32 >> 4));
        }
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int j = 0; j < W * 8; j++)
            wgmma_keep(acc[j]);
        slot = slot + 1 == GW_ST ? 0 : slot + 1;
    }
    cp_async_wait<0>();

    /* acc[4 j + i]: weight row warp * 16 + g (+8 for i >= 2), token 8 j + 2 t + (i & 1) */
#pragma unroll
    for (int j = 0; j < W * 2; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t n = n0 + warp * 16 + g + (i >= 2 ? 8 : 0), m = 8 * j + 2 * t + (i & 1);
            if (m >= M || n >= N)
                continue;
            float v = acc[4 * j + i];
            if (p.parts) { /* the part's raw sums; k_gemm_sum_parts finishes */
                p.parts[((size_t)z * M + m) * N + n] = v;
                continue;
            }
            if (p.bias)
                v += p.bias[n];
            float *c = p.C + (size_t)m * N + n;
            *c = p.accumulate ? *c + v : v;
        }
#else
    __trap(); /* built without sm_90a: k_wgmma_available() keeps it from being launched */
#endif
}

template <int W, bool LO>
static cudaError_t gw_launch(const DenseArgs &a, dim3 grid, cudaStream_t s)
{
    static SmemAllowance allowed;
    size_t smem = gw_smem_bytes<LO>();
    cudaError_t err = allow_dynamic_smem(allowed, dense_wgmma_kernel<W, LO>, smem);
    if (err != cudaSuccess)
        return err;
    LAUNCH((dense_wgmma_kernel<W, LO>), grid, GW_THREADS, smem, s, a);
    return cudaGetLastError();
}

template <bool LO>
static cudaError_t gw_launch_width(const DenseArgs &a, dim3 grid, cudaStream_t s)
{
    switch ((a.M + 15) / 16) {
    case 1: return gw_launch<1, LO>(a, grid, s);
    case 2: return gw_launch<2, LO>(a, grid, s);
    case 3: return gw_launch<3, LO>(a, grid, s);
    default: return gw_launch<4, LO>(a, grid, s);
    }
}

/* The parts of K for a product of N weight rows: as many blocks as two an SM hold (what
 * the shared memory of split A allows), never more (a second wave: QKV at 64 rows in 7
 * parts, 280 blocks for 264 places on an H200, took 23 us where 6 parts took 18), each
 * part at least GW_MIN_STEPS k-steps. */
static uint32_t gw_splits(uint32_t N, uint32_t K)
{
    uint32_t tiles = (N + GW_ROWS - 1) / GW_ROWS;
    uint32_t want = 2 * sm_count() / tiles, most = K / GW_BK / GW_MIN_STEPS;
    want = want < most ? want : most;
    return want < 1 ? 1 : want > GPT_GEMM_WGMMA_SPLITS_MAX ? GPT_GEMM_WGMMA_SPLITS_MAX : want;
}

cudaError_t k_gemm_f16_wgmma(uint32_t splits, float *C, const f16 *A, const f16 *A_lo, const f16 *B,
                             const float *bias, uint32_t M, uint32_t N, uint32_t K, int accumulate,
                             float *split_scratch, cudaStream_t s)
{
    if (M == 0 || M > GW_TOKENS || K == 0 || K % GW_BK || N == 0 || N % 8 || splits > GPT_GEMM_WGMMA_SPLITS_MAX)
        return cudaErrorInvalidValue;
    if (!k_wgmma_available())
        return cudaErrorNotSupported;
    if (splits == 0)
        splits = split_scratch ? gw_splits(N, K) : 1;
    if (splits > K / GW_BK || (splits > 1 && !split_scratch))
        return cudaErrorInvalidValue;
    DenseArgs a = {C, A, A_lo, B, bias, splits > 1 ? split_scratch : NULL, M, N, K, splits, accumulate};
    dim3 grid((N + GW_ROWS - 1) / GW_ROWS, splits);
    cudaError_t e = A_lo ? gw_launch_width<true>(a, grid, s) : gw_launch_width<false>(a, grid, s);
    if (e != cudaSuccess || splits == 1)
        return e;
    return k_gemm_sum_parts(C, split_scratch, bias, M, N, splits, accumulate, s);
}

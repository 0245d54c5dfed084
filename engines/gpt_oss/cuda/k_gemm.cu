/* The dense matrix products of the gpt-oss step on tensor cores (QKV, the output
 * projection, lm_head; on Hopper QKV and O of up to 64 rows are k_gemm_wgmma.cu's, and
 * where the machine has cuBLAS most of the rest are blas_gemm.cu's): a 128x128 output
 * tile per block of 4 warps (each 64x64: 8
 * fragment loads a step of 16 for 32 mma), or 64 or 32 rows by 128 with 8 warps (each
 * 32x32 or 32x16) when the rows are few (a short prompt, a step of few sequences, the
 * last rows' logits); K through a cp.async pipeline (steps of 32, 4 stages for the large
 * tile, 3 with split A; of 64, 3 or 4 stages for the small ones); mma.sync
 * m16n8k16 fp16 with fp32 accumulation, fragments by ldmatrix.  A may be split fp16
 * (A + A_lo, kernels.cuh): A_lo travels beside A and each B fragment meets both (two
 * mma).  A warp skips its m16 tiles past the last row.  The experts' MXFP4 products are
 * k_gemm_mxfp4.cu's and k_moe_gemm.cu's.  See kernels.cuh. */
#include "device_util.cuh"

#define BN 128
/* The small tile when a tile would hold few rows: less work on rows that are not there,
 * and more blocks for the bandwidth. */
#define SMALL_ROWS 64u

struct GemmArgs {
    float *C;
    const f16 *A, *A_lo;
    const f16 *B;
    const float *bias;
    uint32_t M, N, K;
    int accumulate;
    float *parts;    /* dense, K split over blockIdx.z: each split's raw sums [z][M][N] */
    uint32_t splits; /* dense: the parts of K (1: no split) */
};

/* The shape of a block: BM rows by BN columns, BK of K a step, ST stages in flight,
 * WARPS_M x WARPS_N warps (each BM/WARPS_M rows by BN/WARPS_N columns). */
template <int BM_, int BK_, int ST_, int WARPS_M_, int WARPS_N_> struct Tile {
    static constexpr int BM = BM_, BK = BK_, ST = ST_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
};
using TileLarge = Tile<128, 32, 4, 2, 2>;   /* many rows: 4 warps of 64x64 */
using TileLargeLo = Tile<128, 32, 3, 2, 2>; /* the same with split A (its shared memory) */
using TileLarge8 = Tile<128, 32, 3, 2, 4>;  /* 8 warps of 64x32: the large tile before (bench, check) */
using Tile64 = Tile<64, 64, 3, 2, 4>;       /* 8 warps of 32x32 */
using Tile32 = Tile<32, 64, 4, 1, 8>;       /* 8 warps of 32x16 */

/* LO: A is split fp16.  Shared memory: A stages (then A_lo stages with LO), then B
 * stages. */
template <bool LO, class TL>
__global__ void __launch_bounds__(TL::THREADS, 2) gemm_kernel(GemmArgs p)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    constexpr int BM = TL::BM, BK = TL::BK, ST = TL::ST, THREADS = TL::THREADS;
    constexpr int LDS = BK + 8;                 /* smem row in f16: conflict-free ldmatrix */
    constexpr int WARPS_M = TL::WARPS_M, WARPS_N = TL::WARPS_N;
    constexpr int MT = BM / WARPS_M / 16;       /* m16 tiles per warp */
    constexpr int NT = BN / WARPS_N / 8;        /* n8 tiles per warp (even: pairs by ldmatrix) */
    static_assert(MT * WARPS_M * 16 == BM && NT * WARPS_N * 8 == BN && NT % 2 == 0, "a tile's warps");
    constexpr int ROW_CHUNKS = BK / 8;          /* 16-byte chunks of an f16 row's step */
    constexpr int A_CHUNKS = (BM * ROW_CHUNKS + THREADS - 1) / THREADS; /* per thread */
    extern __shared__ __align__(16) unsigned char smem[];
    f16 *As = reinterpret_cast<f16 *>(smem);  /* [ST][BM][LDS] */
    f16 *Al = As + ST * BM * LDS;             /* LO: [ST][BM][LDS] */
    f16 *Bs = Al + (LO ? ST * BM * LDS : 0);  /* [ST][BN][LDS] */

    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
    const uint32_t K = p.K, N = p.N, rows = p.M;
    /* this block's k-steps: its part of the split */
    const uint32_t kt0 = blockIdx.z * (K / BK) / p.splits;
    const uint32_t KT = (blockIdx.z + 1) * (K / BK) / p.splits - kt0;

    /* This thread's A chunks (16 bytes each) per k-step: rows fixed, k moves. */
    const f16 *a_src[A_CHUNKS];
    bool a_ok[A_CHUNKS], a_mine[A_CHUNKS];
    uint32_t a_dst[A_CHUNKS];
#pragma unroll
    for (int i = 0; i < A_CHUNKS; i++) {
        uint32_t c = tid + i * THREADS, r = c / ROW_CHUNKS, col = (c % ROW_CHUNKS) * 8;
        uint32_t m = m0 + r;
        a_mine[i] = c < (uint32_t)(BM * ROW_CHUNKS);
        a_ok[i] = a_mine[i] && m < rows;
        a_src[i] = p.A + (size_t)(a_ok[i] ? m : 0) * K + col;
        a_dst[i] = r * LDS + col;
    }

    auto load_stage = [&](uint32_t kt, uint32_t stage) {
        f16 *as = As + stage * BM * LDS;
#pragma unroll
        for (int i = 0; i < A_CHUNKS; i++)
            if (a_mine[i]) {
                cp_async16(as + a_dst[i], a_src[i] + kt * BK, a_ok[i]);
                if (LO) /* the same place in A_lo */
                    cp_async16(Al + stage * BM * LDS + a_dst[i],
                               p.A_lo + (a_src[i] - p.A) + kt * BK, a_ok[i]);
            }
        f16 *bs = Bs + stage * BN * LDS;
        for (uint32_t i = tid; i < (uint32_t)(BN * ROW_CHUNKS); i += THREADS) {
            uint32_t r = i / ROW_CHUNKS, col = (i % ROW_CHUNKS) * 8, n = n0 + r;
            bool ok = n < N;
            cp_async16(bs + r * LDS + col, p.B + (size_t)(ok ? n : 0) * K + kt * BK + col, ok);
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int k = 0; k < 4; k++)
                acc[i][j][k] = 0.0f;

    for (uint32_t s = 0; s < ST - 1; s++) {
        if (s < KT)
            load_stage(kt0 + s, s);
        cp_async_commit();
    }

    const uint32_t wm = warp / WARPS_N, wn = warp % WARPS_N;
    /* this warp's m16 tiles that hold rows: the others are skipped */
    const uint32_t wrow = m0 + wm * MT * 16;
    const int live = rows > wrow ? (int)min((uint32_t)MT, (rows - wrow + 15) / 16) : 0;
    for (uint32_t i = 0; i < KT; i++) {
        const uint32_t kt = kt0 + i;
        cp_async_wait<ST - 2>();
        __syncthreads();
        const uint32_t stage = i % ST;
        const f16 *as = As + stage * BM * LDS, *al = Al + stage * BM * LDS;
        const f16 *bs = Bs + stage * BN * LDS;
        if (i + ST - 1 < KT)
            load_stage(kt + ST - 1, (i + ST - 1) % ST);
        cp_async_commit();
        if (live == 0)
            continue;
#pragma unroll
        for (uint32_t ks = 0; ks < BK / 16; ks++) {
            uint32_t a[MT][4], b[NT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                if (mt < live)
                    ldmatrix_x4(a[mt], as + (wm * MT * 16 + mt * 16 + (lane & 15)) * LDS + ks * 16 +
                                           (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t r[4];
                ldmatrix_x4(r, bs + (wn * NT * 8 + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * LDS +
                                   ks * 16 + ((lane >> 3) & 1) * 8);
                b[2 * np][0] = r[0];
                b[2 * np][1] = r[1];
                b[2 * np + 1][0] = r[2];
                b[2 * np + 1][1] = r[3];
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                if (mt < live)
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
                        mma_f16(acc[mt][nt], a[mt], b[nt][0], b[nt][1]);
            if (LO) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    if (mt < live)
                        ldmatrix_x4(a[mt], al + (wm * MT * 16 + mt * 16 + (lane & 15)) * LDS +
                                               ks * 16 + (lane >> 4) * 8);
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    if (mt < live)
#pragma unroll
                        for (int nt = 0; nt < NT; nt++)
                            mma_f16(acc[mt][nt], a[mt], b[nt][0], b[nt][1]);
            }
        }
    }
    cp_async_wait<0>();

    /* epilogue: rows g and g+8 of each m16 tile, columns 2t, 2t+1 of each n8 tile */
    const uint32_t g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            uint32_t m = wrow + mt * 16 + g + half * 8;
            if (m >= rows)
                continue;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t n = n0 + wn * NT * 8 + nt * 8 + 2 * t;
                if (n >= N)
                    continue;
                float v0 = acc[mt][nt][2 * half], v1 = acc[mt][nt][2 * half + 1];
                if (p.parts) { /* the split's raw sums; k_gemm_sum_parts finishes */
                    *reinterpret_cast<float2 *>(p.parts + ((size_t)blockIdx.z * rows + m) * N + n) =
                        make_float2(v0, v1);
                    continue;
                }
                if (p.bias) {
                    v0 += p.bias[n];
                    v1 += p.bias[n + 1];
                }
                float2 *c = reinterpret_cast<float2 *>(p.C + (size_t)m * N + n);
                if (p.accumulate) {
                    float2 old = *c;
                    v0 += old.x;
                    v1 += old.y;
                }
                *c = make_float2(v0, v1);
            }
        }
}

template <bool LO, class TL>
static size_t smem_bytes(void)
{
    constexpr size_t LDS = TL::BK + 8;
    return (LO ? 2 : 1) * (size_t)TL::ST * TL::BM * LDS * sizeof(f16) + (size_t)TL::ST * BN * LDS * sizeof(f16);
}

template <bool LO, class TL>
static cudaError_t launch(const GemmArgs &a, dim3 grid, cudaStream_t s)
{
    if (a.K % TL::BK)
        return cudaErrorInvalidValue;
    static SmemAllowance allowed;
    size_t smem = smem_bytes<LO, TL>();
    cudaError_t err = allow_dynamic_smem(allowed, gemm_kernel<LO, TL>, smem);
    if (err != cudaSuccess)
        return err;
    grid.y = (grid.y + TL::BM - 1) / TL::BM;
    LAUNCH(gemm_kernel<LO, TL>, grid, TL::THREADS, smem, s, a);
    return cudaGetLastError();
}


/* Splitting K: a 100-row product of gpt-oss-20b's widths has 46 to 80 tiles of 64x128
 * for 132 SMs, each a chain of 45 to 64 k-steps; its split parts run side by side and
 * are summed by gemm_sum_parts_kernel, in a fixed order (reproducible). */
#define SPLIT_MIN_STEPS 8u /* k-steps of 64 a part keeps at least */
#define SPLITS_PICKED 8u   /* the most parts k_gemm_f16 picks */
static_assert(SPLITS_PICKED <= GPT_GEMM_SPLITS_MAX, "k_gemm_f16_shape takes every split picked");

/* C[m][n] = sum over z of parts[z][m][n] (in order) + bias[n] (+ C when accumulate). */
__global__ void gemm_sum_parts_kernel(float *C, const float *parts, const float *bias,
                                      uint32_t M, uint32_t N, uint32_t splits, int accumulate)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, MN = (size_t)M * N;
    if (i >= MN)
        return;
    float v = parts[i];
    for (uint32_t z = 1; z < splits; z++)
        v += parts[z * MN + i];
    if (bias)
        v += bias[i % N];
    C[i] = accumulate ? C[i] + v : v;
}

/* The split of K for tiles of bm rows: the parts nearest to 2 blocks per SM in all (one
 * wave: the step bench's sweep of shapes on an H100, BENCHMARKS.md). */
static uint32_t k_splits(uint32_t M, uint32_t N, uint32_t K, uint32_t bm)
{
    uint32_t tiles = ((N + BN - 1) / BN) * ((M + bm - 1) / bm);
    uint32_t want = (2 * sm_count() + tiles / 2) / tiles, most = K / 64 / SPLIT_MIN_STEPS;
    want = want < most ? want : most;
    return want < 1 ? 1 : want > SPLITS_PICKED ? SPLITS_PICKED : want;
}

size_t k_gemm_split_scratch_bytes(uint32_t M, uint32_t N)
{
    if (M > 4 * SMALL_ROWS)
        return 0;
    /* the parts of k_gemm_f16's pick, and of k_gemm_f16_wgmma's for any step of up to 64
     * rows: a scratch for M rows serves every step of fewer */
    size_t rows = (size_t)SPLITS_PICKED * M, few = (size_t)GPT_GEMM_WGMMA_SPLITS_MAX * (M < 64 ? M : 64);
    return (rows > few ? rows : few) * N * sizeof(float);
}

cudaError_t k_gemm_sum_parts(float *C, const float *parts, const float *bias, uint32_t M, uint32_t N,
                             uint32_t splits, int accumulate, cudaStream_t s)
{
    size_t mn = (size_t)M * N;
    if (mn == 0 || splits == 0)
        return cudaErrorInvalidValue;
    LAUNCH(gemm_sum_parts_kernel, (unsigned)((mn + 255) / 256), 256, 0, s, C, parts, bias, M, N, splits,
           accumulate);
    return cudaGetLastError();
}

/* The product in tiles of bm rows (128: the large tile, of 8 warps when large8), K in
 * `splits` parts (their sums in a.parts, then added in order). */
static cudaError_t run_shape(GemmArgs a, uint32_t bm, bool large8, uint32_t splits, cudaStream_t s)
{
    dim3 grid((a.N + BN - 1) / BN, a.M, splits);
    a.splits = splits;
    if (splits == 1)
        a.parts = NULL; /* the epilogue writes C */
    cudaError_t e;
    const bool lo = a.A_lo != NULL;
    if (bm == 128 && large8)
        e = lo ? launch<true, TileLarge8>(a, grid, s) : launch<false, TileLarge8>(a, grid, s);
    else if (bm == 128)
        e = lo ? launch<true, TileLargeLo>(a, grid, s) : launch<false, TileLarge>(a, grid, s);
    else if (bm == 64)
        e = lo ? launch<true, Tile64>(a, grid, s) : launch<false, Tile64>(a, grid, s);
    else
        e = lo ? launch<true, Tile32>(a, grid, s) : launch<false, Tile32>(a, grid, s);
    if (e != cudaSuccess || splits == 1)
        return e;
    return k_gemm_sum_parts(a.C, a.parts, a.bias, a.M, a.N, splits, a.accumulate, s);
}

static GemmArgs gemm_args(float *C, const f16 *A, const f16 *A_lo, const f16 *B, const float *bias,
                          uint32_t M, uint32_t N, uint32_t K, int accumulate, float *parts)
{
    GemmArgs a = {};
    a.C = C;
    a.A = A;
    a.A_lo = A_lo;
    a.B = B;
    a.bias = bias;
    a.M = M;
    a.N = N;
    a.K = K;
    a.accumulate = accumulate;
    a.parts = parts;
    a.splits = 1;
    return a;
}

cudaError_t k_gemm_f16_tile(uint32_t tile, float *C, const f16 *A, const f16 *A_lo, const f16 *B,
                            const float *bias, uint32_t M, uint32_t N, uint32_t K, int accumulate,
                            float *split_scratch, cudaStream_t s)
{
    if (K % 32 || N % 8 || M == 0 || (tile != 0 && tile != GPT_GEMM_TILE_LARGE8))
        return cudaErrorInvalidValue;
    GemmArgs a = gemm_args(C, A, A_lo, B, bias, M, N, K, accumulate, split_scratch);
    /* up to 256 rows (a short prompt, a step of many sequences), 32- or 64-row tiles with
     * K split when a scratch is given (the 128-row tile would leave most of the GPU idle:
     * N / 128 blocks); but where the 128-row tiles alone are blocks enough for every SM
     * (lm_head over a step's rows: B is 1.2 GB) and hold more than 64 rows, they read B
     * once per 128 rows */
    uint32_t big_tiles = ((N + BN - 1) / BN) * ((M + 127) / 128);
    if (M > 4 * SMALL_ROWS || (M > SMALL_ROWS && big_tiles >= 4 * sm_count()))
        return run_shape(a, 128, tile == GPT_GEMM_TILE_LARGE8, 1, s);
    /* past 32 rows, 64-row tiles: B read half as often, and as fast at 33 to 64 rows */
    uint32_t bm = M > 32 ? 64 : 32;
    return run_shape(a, bm, false, split_scratch && K % 64 == 0 ? k_splits(M, N, K, bm) : 1, s);
}

cudaError_t k_gemm_f16_shape(uint32_t bm, uint32_t splits, float *C, const f16 *A, const f16 *A_lo,
                             const f16 *B, const float *bias, uint32_t M, uint32_t N, uint32_t K,
                             int accumulate, float *split_scratch, cudaStream_t s)
{
    if (N % 8 || M == 0 || (bm != 32 && bm != 64 && bm != 128) || splits == 0 ||
        splits > GPT_GEMM_SPLITS_MAX || (splits > 1 && !split_scratch) ||
        K % (bm == 128 ? 32 : 64) || K / (bm == 128 ? 32 : 64) < splits)
        return cudaErrorInvalidValue;
    return run_shape(gemm_args(C, A, A_lo, B, bias, M, N, K, accumulate, split_scratch), bm, false,
                     splits, s);
}

cudaError_t k_gemm_f16(float *C, const f16 *A, const f16 *A_lo, const f16 *B, const float *bias,
                       uint32_t M, uint32_t N, uint32_t K, int accumulate, float *split_scratch,
                       cudaStream_t s)
{
    return k_gemm_f16_tile(0, C, A, A_lo, B, bias, M, N, K, accumulate, split_scratch, s);
}

/* The experts' products of a step whose experts have a few dozen rows each or more (the
 * decode of a large batch, prefill): k_gemm_mxfp4_grouped, which hands steps of fewer
 * rows an expert to k_moe_gemm_few (k_moe_gemm.cu) and, on compute capability 9.0, steps
 * of more than 12 to k_moe_gemm_wgmma (k_moe_wgmma.cu); the tiles here serve the
 * other GPUs and the batch-invariant option.
 *
 * A block takes BM of an expert's rows (tokens) by 128 output features, 8 warps on
 * tensor cores (mma.sync m16n8k16 fp16, fp32 accumulation, fragments by ldmatrix).  K
 * flows through a cp.async pipeline in steps of 64: the tokens' fp16 rows and the
 * weights' raw MXFP4 bytes as the loader laid them out (k_mxfp4_lay_out; the block's
 * scales for all of K come with the first step).  The raw bytes are decoded into an
 * fp16 tile in shared memory (exact: an E2M1 value times a power of two within fp16's
 * range, which the loader checks).  The 32- and
 * 64-row tiles decode one step ahead of the multiplication, into the other of two
 * tiles, so a step costs one barrier and a warp's decoding of the next step overlaps its
 * neighbours' products of this one; the 128-row tile, whose two tiles would leave room
 * for one block an SM, decodes each step into one tile between two barriers.  A
 * warp skips its m16 tiles past the expert's rows, so an expert of 40 rows in a 64-row
 * tile pays 3 tiles of products, not 4.  The epilogue adds the bias, then writes C fp32
 * or the clamped SwiGLU of (gate, up) feature pairs as fp16.  See kernels.cuh. */
#include "experts_common.cuh"

#define MX_BN 128
#define MX_BK 64
#define MX_THREADS 256
#define MX_LDS (MX_BK + 8) /* smem row in f16: conflict-free ldmatrix and decode stores */
/* Experts' mean rows up to which k_moe_gemm_few serves them (16 token rows a block up to
 * FEW_ROWS, 32 up to SMALL_MEAN where K allows, else the 32-row tile), and a 64-row tile
 * does; past that, 128-row tiles.  Each bound where the next choice starts to win on an
 * H100 (BENCHMARKS.md: the step bench's products by tile), but MID_MEAN: the 64-row tile
 * wins at 32 rows an expert, the 128-row one by 27% at 96 (and at 128); between them,
 * unmeasured, the bound is where most experts' rows need a second 64-row block. */
#define FEW_ROWS 12u
#define SMALL_MEAN 24u
#define MID_MEAN 64u
/* On compute capability 9.0 k_moe_gemm_wgmma takes the experts past FEW_ROWS (64 token
 * rows a block) and past WGMMA64_MEAN (128): on an H100 its 64-row blocks lose to the
 * fragments kernel at 12 rows an expert, tied with it at 16 before both gained (the
 * wgmma kernel more, so expected to win there; not measured since), win from 20 on,
 * and beat the 128-row blocks up to 96 at least, the most measured (BENCHMARKS.md, the
 * loops by live tiles and widths). */
#define WGMMA64_MEAN 96u


/* BM rows by 128 features a block; ST stages of raw bytes and token rows in flight.
 * AHEAD: decode one step ahead (at least 3 stages: while step i is multiplied, step
 * i + 1 is decoded and i + 2 lands); else each step in turn.  Shared memory: token
 * stages [ST][BM][LDS] f16, the decoded tiles [AHEAD ? 2 : 1][BN][LDS] f16, raw stages
 * [ST][BN][BK/2], the block's scales [BN][K/32]. */
template <int BM, int ST, bool AHEAD>
__global__ void __launch_bounds__(MX_THREADS, 2) mx_gemm_kernel(ExpertsArgs p)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    static_assert(!AHEAD || ST >= 3, "decoding one step ahead needs three stages");
    static_assert(ST >= 2, "a pipeline of one stage");
    constexpr int MT = BM == 128 ? 4 : 2;                                /* m16 tiles a warp */
    constexpr int WARPS_M = BM / (MT * 16);                              /* 2, 2 or 1 */
    constexpr int WARPS_N = 8 / WARPS_M;                                 /* 4 or 8 */
    constexpr int NT = MX_BN / WARPS_N / 8;                              /* n8 tiles a warp */
    constexpr int ROW_CHUNKS = MX_BK / 8;                                /* 16 B of a row's step */
    constexpr int A_CHUNKS = (BM * ROW_CHUNKS + MX_THREADS - 1) / MX_THREADS;
    constexpr int QB = MX_BK / 2;                                        /* raw bytes a row's step */
    constexpr int Q_CHUNKS = MX_BN * QB / 16;
    extern __shared__ __align__(16) unsigned char smem[];
    f16 *As = reinterpret_cast<f16 *>(smem);
    f16 *Bs = As + ST * BM * MX_LDS;
    uint8_t *Braw = reinterpret_cast<uint8_t *>(Bs + (AHEAD ? 2 : 1) * MX_BN * MX_LDS);
    uint8_t *Sc = Braw + ST * MX_BN * QB;

    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t n0 = blockIdx.x * MX_BN, m0 = blockIdx.y * BM, e = blockIdx.z;
    const uint32_t K = p.K, N = p.N, KG = K / 32, KT = K / MX_BK;
    const uint32_t slot0 = p.offsets[e], rows = p.offsets[e + 1] - slot0;
    if (m0 >= rows)
        return;
    load_block_scales<MX_BN, MX_THREADS>(Sc, p, e, n0, tid);

    /* this thread's token chunks (16 bytes each) a step: rows fixed, k moves */
    const f16 *a_src[A_CHUNKS];
    bool a_ok[A_CHUNKS], a_mine[A_CHUNKS];
    uint32_t a_dst[A_CHUNKS];
#pragma unroll
    for (int i = 0; i < A_CHUNKS; i++) {
        uint32_t c = tid + i * MX_THREADS, r = c / ROW_CHUNKS, col = (c % ROW_CHUNKS) * 8;
        uint32_t m = m0 + r;
        a_mine[i] = c < (uint32_t)(BM * ROW_CHUNKS);
        a_ok[i] = a_mine[i] && m < rows;
        size_t row = 0;
        if (a_ok[i])
            row = p.a_rows ? (size_t)p.a_rows[slot0 + m] : (size_t)slot0 + m;
        a_src[i] = p.A + row * K + col;
        a_dst[i] = r * MX_LDS + col;
    }
    auto load_stage = [&](uint32_t kt, uint32_t stage) {
        f16 *as = As + stage * BM * MX_LDS;
#pragma unroll
        for (int i = 0; i < A_CHUNKS; i++)
            if (a_mine[i])
                cp_async16(as + a_dst[i], a_src[i] + kt * MX_BK, a_ok[i]);
        for (uint32_t i = tid; i < (uint32_t)Q_CHUNKS; i += MX_THREADS) {
            uint32_t r = i / (QB / 16), j = i % (QB / 16), n = n0 + r;
            bool ok = n < N;
            const uint8_t *src = p.blocks + ((size_t)e * N + (ok ? n : 0)) * (K / 2) +
                                 (size_t)kt * QB + j * 16;
            cp_async16(Braw + (stage * MX_BN + r) * QB + j * 16, src, ok);
        }
    };
    /* Step kt's raw bytes (in stage) into decoded tile `to`: thread tid takes feature
     * row tid/2, group tid%2 of the step's two (32 values, 16 bytes, one scale). */
    auto decode = [&](uint32_t kt, uint32_t stage, f16 *to) {
        const uint32_t row = tid >> 1, grp = tid & 1;
        uint4 q = *reinterpret_cast<const uint4 *>(Braw + (stage * MX_BN + row) * QB + grp * 16);
        uint32_t s2 = e8m0_half2(Sc[row * KG + kt * 2 + grp]);
        uint4 *dst = reinterpret_cast<uint4 *>(to + row * MX_LDS + grp * 32);
        const uint32_t words[4] = {q.x, q.y, q.z, q.w};
        /* the file's values 8j..8j+7 are pair j of words 0-3: the high bytes of their
         * first four pairs, then of the last four (one half at a time: decoding all 16
         * pairs first made the 128-row tile 6 to 7% slower than the file's order was,
         * on an H200, BENCHMARKS.md) */
        uint32_t bytes[4];
#pragma unroll
        for (int w = 0; w < 4; w++)
            bytes[w] = e2m1x8_lo_high_bytes(words[w], E2M1_LO_TABLE, E2M1_HI_TABLE);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (j == 2)
#pragma unroll
                for (int w = 0; w < 4; w++)
                    bytes[w] = e2m1x8_hi_high_bytes(words[w], E2M1_LO_TABLE, E2M1_HI_TABLE);
            dst[j] = make_uint4(hmul2_bits(half2_of_high_bytes(bytes[0], j % 2 == 0), s2),
                                hmul2_bits(half2_of_high_bytes(bytes[1], j % 2 == 0), s2),
                                hmul2_bits(half2_of_high_bytes(bytes[2], j % 2 == 0), s2),
                                hmul2_bits(half2_of_high_bytes(bytes[3], j % 2 == 0), s2));
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

    const uint32_t wm = warp / WARPS_N, wn = warp % WARPS_N;
    /* this warp's m16 tiles that hold rows of the expert: the others are skipped */
    const uint32_t wrow = m0 + wm * MT * 16;
    const int live = rows > wrow ? (int)min((uint32_t)MT, (rows - wrow + 15) / 16) : 0;

    /* step i's products: token stage i % ST by decoded tile bs */
    auto multiply = [&](uint32_t i, const f16 *bs) {
        const f16 *as = As + (i % ST) * BM * MX_LDS;
        if (live == 0)
            return;
#pragma unroll
        for (uint32_t ks = 0; ks < MX_BK / 16; ks++) {
            uint32_t a[MT][4], b[NT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                if (mt < live)
                    ldmatrix_x4(a[mt], as + (wm * MT * 16 + mt * 16 + (lane & 15)) * MX_LDS +
                                           ks * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t r[4];
                ldmatrix_x4(r, bs + (wn * NT * 8 + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * MX_LDS +
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
        }
    };

    for (uint32_t s = 0; s < ST - 1; s++) {
        if (s < KT)
            load_stage(s, s);
        cp_async_commit();
    }
    if (AHEAD) {
        cp_async_wait<(AHEAD ? ST - 3 : 0)>(); /* steps 0 and 1, and the scales */
        __syncthreads();
        decode(0, 0, Bs);
        __syncthreads();
        for (uint32_t i = 0; i < KT; i++) {
            if (i + 1 < KT)
                decode(i + 1, (i + 1) % ST, Bs + ((i + 1) & 1) * MX_BN * MX_LDS);
            if (i + ST - 1 < KT) /* into the stage of step i - 1: decoded and multiplied */
                load_stage(i + ST - 1, (i + ST - 1) % ST);
            cp_async_commit();
            multiply(i, Bs + (i & 1) * MX_BN * MX_LDS);
            cp_async_wait<(AHEAD ? ST - 3 : 0)>(); /* step i + 2 has landed (this thread's part) */
            __syncthreads(); /* ... everyone's; tile (i & 1) and stage i are free */
        }
    } else {
        for (uint32_t i = 0; i < KT; i++) {
            cp_async_wait<ST - 2>(); /* step i has landed (this thread's part) */
            __syncthreads();         /* ... everyone's; the tile is free */
            decode(i, i % ST, Bs);
            __syncthreads();
            if (i + ST - 1 < KT) /* into the stage of step i - 1 */
                load_stage(i + ST - 1, (i + ST - 1) % ST);
            cp_async_commit();
            multiply(i, Bs);
        }
    }
    cp_async_wait<0>();

    /* epilogue: rows g and g+8 of each m16 tile, features 2t, 2t+1 of each n8 tile */
    const uint32_t g = lane >> 2, t = lane & 3;
    const float *bias = p.bias ? p.bias + (size_t)e * N : nullptr;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            uint32_t m = wrow + mt * 16 + g + half * 8;
            if (m >= rows)
                continue;
            size_t row = (size_t)slot0 + m;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t n = n0 + wn * NT * 8 + nt * 8 + 2 * t;
                if (n >= N)
                    continue;
                float v0 = acc[mt][nt][2 * half], v1 = acc[mt][nt][2 * half + 1];
                if (bias) {
                    v0 += bias[n];
                    v1 += bias[n + 1];
                }
                if (p.act)
                    p.act[row * (N / 2) + n / 2] = to_f16(clamped_swiglu(v0, v1, p.alpha, p.limit));
                else
                    *reinterpret_cast<float2 *>(p.C + row * N + n) = make_float2(v0, v1);
            }
        }
}

template <int BM, int ST, bool AHEAD>
static size_t mx_smem_bytes(uint32_t K)
{
    return (size_t)ST * BM * MX_LDS * sizeof(f16) + (AHEAD ? 2 : 1) * (size_t)MX_BN * MX_LDS * sizeof(f16) +
           (size_t)ST * MX_BN * (MX_BK / 2) + (size_t)MX_BN * (K / 32);
}

template <int BM, int ST, bool AHEAD>
static cudaError_t mx_launch(const ExpertsArgs &a, uint32_t E, uint32_t max_rows, cudaStream_t s)
{
    static SmemAllowance allowed;
    size_t smem = mx_smem_bytes<BM, ST, AHEAD>(a.K);
    cudaError_t err = allow_dynamic_smem(allowed, mx_gemm_kernel<BM, ST, AHEAD>, smem);
    if (err != cudaSuccess)
        return err;
    dim3 grid((a.N + MX_BN - 1) / MX_BN, (max_rows + BM - 1) / BM, E);
    LAUNCH(mx_gemm_kernel<BM, ST, AHEAD>, grid, MX_THREADS, smem, s, a);
    return cudaGetLastError();
}

uint32_t k_gemm_mxfp4_grouped_pick(uint32_t E, uint32_t max_rows, uint32_t pairs, uint32_t N, uint32_t K)
{
    /* rows an expert on average: a dozen (on Hopper) or two (elsewhere), the weights
     * decoded into fragments (k_moe_gemm.cu); more, on Hopper, decoded into wgmma's A
     * fragments (k_moe_wgmma.cu), 64 or 128 token rows a block; elsewhere a few dozen
     * take 32- or 64-row tiles, each
     * expert's weights decoded about once, and many (prefill) 128-row tiles, the weights
     * read and decoded once per 128 rows */
    uint32_t mean = E ? (pairs + E - 1) / E : 0;
    if (N % 16 == 0 && k_wgmma_available())
        return mean <= FEW_ROWS       ? GPT_MOE_TILE_FRAGMENTS16
               : mean <= WGMMA64_MEAN ? GPT_MOE_TILE_WGMMA64
                                      : GPT_MOE_TILE_WGMMA128;
    return mean <= FEW_ROWS && N % 16 == 0                       ? GPT_MOE_TILE_FRAGMENTS16
           : mean <= SMALL_MEAN && N % 16 == 0 && K % 320 == 0 ? GPT_MOE_TILE_FRAGMENTS32
           : mean <= SMALL_MEAN || max_rows <= 32              ? 32
           : mean <= MID_MEAN                                  ? 64
                                                               : 128;
}

cudaError_t k_gemm_mxfp4_grouped_tile(uint32_t tile, float *C, f16 *act, const f16 *A,
                                      const int32_t *a_rows, const uint8_t *blocks,
                                      const uint8_t *scales, const float *bias,
                                      const uint32_t *offsets, uint32_t E, uint32_t max_rows,
                                      uint32_t pairs, uint32_t N, uint32_t K, float alpha,
                                      float limit, cudaStream_t s)
{
    if (K % MX_BK || N % 8 || max_rows == 0 || E == 0 || K > 12288)
        return cudaErrorInvalidValue;
    if (tile == 0)
        tile = k_gemm_mxfp4_grouped_pick(E, max_rows, pairs, N, K);
    ExpertsArgs a = {C, act, A, a_rows, blocks, scales, bias, offsets, N, K, alpha, limit};
    switch (tile) {
    case GPT_MOE_TILE_FRAGMENTS16:
    case GPT_MOE_TILE_FRAGMENTS16_OPERAND:
        if (N % 16)
            return cudaErrorInvalidValue;
        return k_moe_gemm_few(16, C, act, A, a_rows, blocks, scales, bias, offsets, E, max_rows, N, K,
                              alpha, limit, tile == GPT_MOE_TILE_FRAGMENTS16_OPERAND, s);
    case GPT_MOE_TILE_FRAGMENTS32:
        if (N % 16 || K % 320)
            return cudaErrorInvalidValue;
        return k_moe_gemm_few(32, C, act, A, a_rows, blocks, scales, bias, offsets, E, max_rows, N, K,
                              alpha, limit, false, s);
    case GPT_MOE_TILE_WGMMA64:
    case GPT_MOE_TILE_WGMMA128:
        if (N % 16)
            return cudaErrorInvalidValue;
        return k_moe_gemm_wgmma(tile == GPT_MOE_TILE_WGMMA64 ? 64 : 128, C, act, A, a_rows, blocks, scales,
                                bias, offsets, E, max_rows, N, K, alpha, limit, s);
    case 32:
        return mx_launch<32, 6, true>(a, E, max_rows, s);
    case 64:
        return mx_launch<64, 4, true>(a, E, max_rows, s);
    case 128:
        return mx_launch<128, 3, false>(a, E, max_rows, s);
    default:
        return cudaErrorInvalidValue;
    }
}

cudaError_t k_gemm_mxfp4_grouped(float *C, f16 *act, const f16 *A, const int32_t *a_rows,
                                 const uint8_t *blocks, const uint8_t *scales, const float *bias,
                                 const uint32_t *offsets, uint32_t E, uint32_t max_rows,
                                 uint32_t pairs, uint32_t N, uint32_t K, float alpha, float limit,
                                 cudaStream_t s)
{
    return k_gemm_mxfp4_grouped_tile(0, C, act, A, a_rows, blocks, scales, bias, offsets, E,
                                     max_rows, pairs, N, K, alpha, limit, s);
}

/* The experts' products on Hopper's warpgroup matrix instructions (wgmma, sm_90a): the
 * step's tokens of one expert as B in shared memory, its MXFP4 weights as A, decoded
 * from their raw bytes straight into the A fragments in registers (no decoded tile in
 * shared memory, no barrier between decoding and multiplying).
 *
 * A block takes 128 weight rows (output features: two warpgroups of 64, a warp's 16
 * rows as in k_moe_gemm.cu) of one expert against up to TN of its rows (tokens).  K
 * flows through a cp.async pipeline of ST stages of 64 values: the tokens' fp16 rows,
 * laid in a 128-byte swizzle atom as wgmma reads them, and the weights' raw bytes; the
 * block's scales for all of K come with the first stage.  Each lane
 * decodes, per MXFP4 group of its rows g and g + 8, the group's word t as the loader laid
 * it out (k_mxfp4_lay_out: bytes t, t + 4, t + 8 and t + 12 of the file's group, whose
 * values are k = 2t, 2t + 1, 2t + 8, 2t + 9 of the group's two k16 steps, the A
 * fragment's places), so the tokens stay in their order.  The scale is applied in fp16 (exact in
 * the range the loader checks): folded into the decode's lookup tables when every scale
 * of the block gives normal products, else multiplied after it; so the products
 * accumulate over all of K in the tensor cores, one wgmma a warpgroup and k16 step, its
 * N the block's live token rows rounded up to 16.  The epilogue is k_moe_gemm.cu's: the bias, then C fp32
 * or the clamped SwiGLU of (gate, up) feature pairs as fp16.
 *
 * Where the fragments kernel issues 2 x TN/8 mma.sync and 4 x TN/8 scalings a warp and
 * group, this issues two wgmma a warpgroup.  The loop over K is made once for each width
 * (the block's live tokens), so no switch stands between a stage's decode and its
 * products.  On an H100 at 256 sequences (32 rows an expert) gate_up + down take 185 +
 * 111 us a layer (213 + 124 with a switch a stage) against the 64-row tile's 300 + 167,
 * and on an H200 165 + 96 since each lane reads its word whole (183 + 107 before;
 * BENCHMARKS.md), the weights streaming at about 1.5 TB/s: each stage's decode,
 * products and wait run in turn, and the schedulers issue in about half their cycles,
 * nearly all of it the decode.  Overlapping them (a warpgroup that only loads, the
 * tokens by the copy engine) is what would move it next.
 * See k_gemm_mxfp4_grouped_tile in kernels.cuh. */
#include "experts_common.cuh"
#include "wgmma.cuh"

#include <type_traits>


#define MW_BK 64       /* K a stage: one 128-byte swizzle atom of the tokens */
#define MW_THREADS 256 /* two warpgroups */
#define MW_ROWS 128    /* weight rows a block: 64 a warpgroup */

/* The shared memory of a block: token stages [ST][TN][128 bytes] (1024-aligned swizzle
 * atoms), weight stages [ST][128][32], the scales [128][K/32], and room to align the
 * start to 1024 bytes. */
template <int TN, int ST>
static size_t mw_smem_bytes(uint32_t K)
{
    return (size_t)ST * TN * 128 + (size_t)ST * MW_ROWS * (MW_BK / 2) + (size_t)MW_ROWS * (K / 32) + 1024;
}

#if WGMMA_AVAILABLE
/* The products of one stage's four k16 steps at wgmma width N (live rows of tokens). */
template <int N>
static __device__ __forceinline__ void mw_products(float *acc, const uint32_t (&a)[MW_BK / 16][4], uint32_t xs_addr)
{
    const uint64_t desc = wgmma_desc_sw128(xs_addr);
#pragma unroll
    for (int ks = 0; ks < MW_BK / 16; ks++) /* the atom's 32 bytes ks */
        wgmma_f16_rs<N>(acc, a[ks], desc + (uint64_t)(ks * 32 >> 4));
}

/* One MXFP4 stage of this lane's rows r0 and r0 + 8 (raw bytes wr as k_mxfp4_lay_out
 * laid them, row stride 32, scales sc of the stage's first group, row stride KG) into A
 * fragments of four k16 steps: word t of each group holds the lane's values of both of
 * the group's k16 steps.
 * TABLE: the scale goes into the decode's tables (every scale of the block in [114, 140]:
 * the products normal fp16), else an fp16 multiplication after it (subnormal products
 * too). */
template <bool TABLE>
static __device__ __forceinline__ void mw_decode(uint32_t (&a)[MW_BK / 16][4], const uint8_t *wr, const uint8_t *sc,
                                                 uint32_t r0, uint32_t KG, uint32_t t)
{
    const uint32_t r1 = r0 + 8;
#pragma unroll
    for (int gi = 0; gi < MW_BK / 32; gi++) { /* the stage's groups of 32 */
        /* values k = 2t, 2t + 1, 2t + 8, 2t + 9 of the group's first k16 step, then of
         * its second */
        const uint32_t wa = *reinterpret_cast<const uint32_t *>(wr + r0 * (MW_BK / 2) + gi * 16 + 4 * t);
        const uint32_t wb = *reinterpret_cast<const uint32_t *>(wr + r1 * (MW_BK / 2) + gi * 16 + 4 * t);
        const uint32_t s_a = sc[r0 * KG + gi], s_b = sc[r1 * KG + gi];
        uint32_t ha[4], hb[4];
        if constexpr (TABLE) {
            e2m1x8_to_half2_pairs_tab(wa, e2m1_lo_table_scaled(s_a), e2m1_hi_table_scaled(s_a), ha);
            e2m1x8_to_half2_pairs_tab(wb, e2m1_lo_table_scaled(s_b), e2m1_hi_table_scaled(s_b), hb);
        } else {
            const uint32_t sa = e8m0_half2(s_a), sb = e8m0_half2(s_b);
            e2m1x8_to_half2_pairs(wa, ha);
            e2m1x8_to_half2_pairs(wb, hb);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                ha[j] = hmul2_bits(ha[j], sa);
                hb[j] = hmul2_bits(hb[j], sb);
            }
        }
        a[2 * gi][0] = ha[0];
        a[2 * gi][1] = hb[0];
        a[2 * gi][2] = ha[1];
        a[2 * gi][3] = hb[1];
        a[2 * gi + 1][0] = ha[2];
        a[2 * gi + 1][1] = hb[2];
        a[2 * gi + 1][2] = ha[3];
        a[2 * gi + 1][3] = hb[3];
    }
}

#endif

/* TN token rows by 128 weight rows a block, ST stages in flight.  Each stage is decoded,
 * multiplied and waited for in turn: the block's other warpgroup and the SM's other blocks
 * fill the waits.  (Tried on an H100 and not kept, BENCHMARKS.md: the next stage decoded
 * while this one's products run, blocks of one warpgroup, the products always TN wide.) */
template <int TN, int ST, int MINB>
__global__ void __launch_bounds__(MW_THREADS, MINB) moe_wgmma_kernel(ExpertsArgs p)
{
#if WGMMA_AVAILABLE
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    constexpr int THREADS = MW_THREADS, ROWS = MW_ROWS;
    static_assert((TN == 64 || TN == 128) && ST >= 3, "the block's shape");
    constexpr int XSTAGE = TN * 128;          /* token bytes a stage: one swizzle atom */
    constexpr int QB = MW_BK / 2;             /* raw bytes of a weight row a stage */
    constexpr int WSTAGE = ROWS * QB;
    extern __shared__ __align__(16) unsigned char mw_smem[];
    unsigned char *base = mw_smem + ((1024 - (smem_addr(mw_smem) & 1023)) & 1023);
    unsigned char *Xs = base;           /* [ST][TN][128] */
    uint8_t *Wraw = base + ST * XSTAGE; /* [ST][ROWS][QB] */
    uint8_t *Sc = Wraw + ST * WSTAGE;   /* [ROWS][K/32] */

    const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t g = lane >> 2, t = lane & 3;
    const uint32_t n0 = blockIdx.x * ROWS, m0 = blockIdx.y * TN, e = blockIdx.z;
    const uint32_t K = p.K, N = p.N, KG = K / 32, KT = K / MW_BK;
    const uint32_t slot0 = p.offsets[e], rows = p.offsets[e + 1] - slot0;
    if (m0 >= rows)
        return;
    const uint32_t live = min((uint32_t)TN, rows - m0);
    load_block_scales<ROWS, THREADS>(Sc, p, e, n0, tid);
    /* Each thread's share of a stage, fixed for the whole of K: token row tid / XT, its
     * 16-byte chunks tid % XT + XT j of the stage's 8; weight row tid / 2, its chunk
     * tid % 2.  Their shared addresses are set once; a stage adds its slot's offset, and
     * the sources move on by a stage's bytes. */
    constexpr int XT = THREADS / TN, XJ = 8 / XT;
    static_assert(THREADS % TN == 0 && 8 % XT == 0 && THREADS == 2 * ROWS, "the stage's shares");
    const uint32_t xrow = tid / XT, xc0 = tid % XT, wrow = tid >> 1, wpar = tid & 1;
    const bool w_ok = n0 + wrow < N, x_ok = m0 + xrow < rows;
    const uint8_t *w_src = p.blocks + ((size_t)e * N + (w_ok ? n0 + wrow : 0)) * (K / 2) + wpar * 16;
    const f16 *x_src = p.A + (x_ok ? (p.a_rows ? (size_t)p.a_rows[slot0 + m0 + xrow] : (size_t)slot0 + m0 + xrow) : 0) * K +
                       xc0 * 8;
    uint32_t x_dst[XJ];
#pragma unroll
    for (int j = 0; j < XJ; j++) /* chunk xc0 + XT j, swizzled by the row */
        x_dst[j] = smem_addr(Xs) + xrow * 128 + (((xc0 + j * XT) ^ (xrow % 8)) << 4);
    const uint32_t w_dst = smem_addr(Wraw) + wrow * QB + wpar * 16;
    uint32_t load_slot = 0;
    auto load_next = [&]() {
#pragma unroll
        for (int j = 0; j < XJ; j++)
            cp_async16_at(x_dst[j] + load_slot * XSTAGE, x_src + j * XT * 8, x_ok);
        cp_async16_at(w_dst + load_slot * WSTAGE, w_src, w_ok);
        x_src += MW_BK;
        w_src += QB;
        load_slot = load_slot + 1 == ST ? 0 : load_slot + 1;
    };

    float acc[TN / 2];
#pragma unroll
    for (int i = 0; i < TN / 2; i++)
        acc[i] = 0.0f;
    const uint32_t r0 = warp * 16 + g;        /* this lane's weight rows: r0, r0 + 8 */
    const uint32_t width = (live + 15) / 16;  /* the products' N / 16 */
    for (uint32_t s = 0; s < ST - 1; s++) {
        if (s < KT)
            load_next();
        cp_async_commit();
    }
    /* whether every scale of the block gives normal fp16 products, s in [114, 140] (the
     * decode's tables then carry them): the first stage's group brought the scales */
    cp_async_wait<ST - 2>();
    __syncthreads();
    bool normal = true;
    for (uint32_t i = tid; i < ROWS * KG / 4; i += THREADS) {
        const uint32_t four = reinterpret_cast<const uint32_t *>(Sc)[i];
        normal &= (__vcmpltu4(four, 0x72727272u) | __vcmpgtu4(four, 0x8C8C8C8Cu)) == 0;
    }
    normal = __syncthreads_and(normal);

    auto multiply_all = [&](auto table, auto fixed_width) {
        constexpr bool TABLE = decltype(table)::value;
        constexpr int W = decltype(fixed_width)::value; /* the products' N / 16 */
        uint32_t slot = 0;
        const uint8_t *sc = Sc;
        for (uint32_t kt = 0; kt < KT; kt++) {
            cp_async_wait<ST - 2>();
            fence_proxy_async_shared();
            __syncthreads(); /* the stage is in, and the one refilled below is used up */
            if (kt + ST - 1 < KT)
                load_next();
            cp_async_commit();
            uint32_t a[MW_BK / 16][4];
            mw_decode<TABLE>(a, Wraw + slot * WSTAGE, sc, r0, KG, t);
#pragma unroll
            for (int i = 0; i < TN / 2; i++)
                wgmma_keep(acc[i]);
            wgmma_fence();
            mw_products<W * 16>(acc, a, smem_addr(Xs) + slot * XSTAGE);
            wgmma_commit();
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < TN / 2; i++)
                wgmma_keep(acc[i]);
            slot = slot + 1 == ST ? 0 : slot + 1;
            sc += MW_BK / 32;
        }
    };
    /* the loop over K made once for each width, so that a stage's products are not
     * behind a switch: 12% less time at 256 sequences on an H100 than a switch a stage
     * (BENCHMARKS.md), and no warpgroup.arrive that the compiler adds around one */
    auto by_width = [&](auto table) {
        switch (width) { /* the same for the whole block: 1 to TN / 16 */
        case 1: multiply_all(table, std::integral_constant<int, 1>()); break;
        case 2: multiply_all(table, std::integral_constant<int, 2>()); break;
        case 3: multiply_all(table, std::integral_constant<int, 3>()); break;
        default:
            if constexpr (TN == 64) {
                multiply_all(table, std::integral_constant<int, 4>());
            } else {
                switch (width) {
                case 4: multiply_all(table, std::integral_constant<int, 4>()); break;
                case 5: multiply_all(table, std::integral_constant<int, 5>()); break;
                case 6: multiply_all(table, std::integral_constant<int, 6>()); break;
                case 7: multiply_all(table, std::integral_constant<int, 7>()); break;
                default: multiply_all(table, std::integral_constant<int, 8>()); break;
                }
            }
        }
    };
    if (normal)
        by_width(std::true_type{});
    else
        by_width(std::false_type{});
    cp_async_wait<0>();

    /* acc[4 nt + j]: rows r0 (j 0, 1) and r0 + 8 (2, 3) of the weights, tokens nt*8 + 2t
     * (+1) */
#pragma unroll
    for (int nt = 0; nt < TN / 8; nt++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            store_feature_output(p, e, slot0, rows, n0 + r0 + (j < 2 ? 0 : 8), m0 + nt * 8 + 2 * t + (j & 1),
                                 acc[4 * nt + j], g);
#else
    __trap(); /* built without sm_90a: k_wgmma_available() keeps it from being launched */
#endif
}

template <int TN, int ST, int MINB>
static cudaError_t mw_launch(const ExpertsArgs &a, uint32_t E, uint32_t max_rows, cudaStream_t s)
{
    static SmemAllowance allowed;
    size_t smem = mw_smem_bytes<TN, ST>(a.K);
    cudaError_t err = allow_dynamic_smem(allowed, moe_wgmma_kernel<TN, ST, MINB>, smem);
    if (err != cudaSuccess)
        return err;
    dim3 grid((a.N + MW_ROWS - 1) / MW_ROWS, (max_rows + TN - 1) / TN, E);
    LAUNCH((moe_wgmma_kernel<TN, ST, MINB>), grid, MW_THREADS, smem, s, a);
    return cudaGetLastError();
}

bool k_wgmma_available(void)
{
    static std::atomic<int> known[64]; /* per device: 0 unknown, 1 yes, 2 no */
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
        return false;
    int k = known[dev].load(std::memory_order_relaxed);
    if (k == 0) {
        int major = 0, minor = 0;
        bool yes = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                   major == 9 && minor == 0; /* the sm_90a machine code runs on 9.0 only */
        k = yes ? 1 : 2;
        known[dev].store(k, std::memory_order_relaxed);
    }
    return k == 1;
}

cudaError_t k_moe_gemm_wgmma(uint32_t token_rows, float *C, f16 *act, const f16 *A,
                             const int32_t *a_rows, const uint8_t *blocks, const uint8_t *scales,
                             const float *bias, const uint32_t *offsets, uint32_t E,
                             uint32_t max_rows, uint32_t N, uint32_t K, float alpha, float limit,
                             cudaStream_t s)
{
    if (K % 64 || N % 16 || max_rows == 0 || E == 0 || K > 12288 || (token_rows != 64 && token_rows != 128))
        return cudaErrorInvalidValue;
    if (!k_wgmma_available())
        return cudaErrorNotSupported;
    ExpertsArgs a = {C, act, A, a_rows, blocks, scales, bias, offsets, N, K, alpha, limit};
    /* 64 token rows: four stages, three blocks an SM (60 KiB of shared memory each with
     * gpt-oss's K, 74 registers, no spill since each lane reads its word whole; 5 to 7%
     * faster than two blocks of six stages on an H100, BENCHMARKS.md); 128: four
     * stages, two blocks (92 KiB, 115 registers) */
    if (token_rows == 64)
        return mw_launch<64, 4, 3>(a, E, max_rows, s);
    return mw_launch<128, 4, 2>(a, E, max_rows, s);
}

/* Every E2M1 word w of a sample (each nibble value in every place, then hashed words)
 * decoded with the scaled tables of each s in [114, 140], against the plain decode times
 * 2^(s-127) in fp16: the bits must be the same. */
__global__ void e2m1_scaled_tables_kernel(uint32_t *mismatches)
{
    const uint32_t s = 114 + blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
    const uint32_t w = i < 16 ? i * 0x11111111u : (i * 2654435761u) ^ (i >> 3) * 0x9E3779B9u;
    uint32_t want[4], got[4];
    e2m1x8_to_half2_pairs(w, want);
    e2m1x8_to_half2_pairs_tab(w, e2m1_lo_table_scaled(s), e2m1_hi_table_scaled(s), got);
    const uint32_t scale = e8m0_half2(s);
    for (int j = 0; j < 4; j++)
        if (hmul2_bits(want[j], scale) != got[j])
            atomicAdd(mismatches, 1u);
}

cudaError_t k_e2m1_scaled_tables_check(uint32_t *mismatches)
{
    cudaError_t err = cudaMemset(mismatches, 0, sizeof *mismatches);
    if (err != cudaSuccess)
        return err;
    e2m1_scaled_tables_kernel<<<dim3(140 - 114 + 1, 64), 256>>>(mismatches);
    return cudaGetLastError();
}

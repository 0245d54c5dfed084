/* Matrix-vector products of the gpt-oss decode step: fp16 weights against an fp32
 * vector (the attention block's projections and lm_head, with the RMSNorm before them
 * fused in), the router (GEMV and top-k in one block), and the 4 routed MXFP4 experts
 * on tensor cores (gate_up with its SwiGLU; down with the weighted sum), each in one
 * launch.  They are bound by reading the weights once: 16-byte loads issued before the
 * vector is needed (before waiting for the previous kernel, in the decode graph).
 *
 * The fp32 vector is stored in shared memory with 4 floats of padding after every 32:
 * the lanes of a warp read 8 floats apart, which without the padding falls into the
 * same banks and serialises the warp 2 ways.  See kernels.cuh. */
#include "device_util.cuh"

#define WARPS 8

/* Where value i of a vector lives in the padded shared-memory copy. */
static __device__ __forceinline__ uint32_t padded(uint32_t i)
{
    return i + (i >> 5) * 4;
}

/* The vector and the norm weights are read 16 bytes at a time. */
static bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

static size_t padded_bytes(uint32_t n)
{
    return ((size_t)n + (n + 31) / 32 * 4) * sizeof(float);
}

/* All threads: xs (padded) = x[0..n) (n a multiple of 4), or its RMSNorm with weights norm_w when that is
 * not NULL (each block computes the norm for itself: the decode step has no kernel of
 * its own for it).  The caller syncs before reading xs. */
static __device__ __forceinline__ void stage_vector(float *xs, const float *x, uint32_t n,
                                                    const float *norm_w = nullptr,
                                                    float eps = 0.0f)
{
    __shared__ float partial[32];
    float ss = 0;
    const float4 *x4 = reinterpret_cast<const float4 *>(x); /* n % 4 == 0, x 16-byte aligned */
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
        float4 v = x4[i];
        *reinterpret_cast<float4 *>(xs + padded(4 * i)) = v; /* 4 never straddle a pad */
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    if (!norm_w)
        return;
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0)
        partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = 0;
    for (uint32_t w = 0; w < (blockDim.x >> 5); w++)
        total += partial[w];
    float r = rsqrtf(total / n + eps);
    const float4 *w4 = reinterpret_cast<const float4 *>(norm_w);
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < n / 4; i += blockDim.x) { /* what this thread wrote */
        float4 *p = reinterpret_cast<float4 *>(xs + padded(4 * i));
        float4 v = *p, w = w4[i];
        *p = make_float4(w.x * (v.x * r), w.y * (v.y * r), w.z * (v.z * r), w.w * (v.w * r));
    }
}

/* ---- f16 ------------------------------------------------------------------------------- */

static __device__ __forceinline__ float dot8(uint4 w, const float *x)
{
    const __half2 *p = reinterpret_cast<const __half2 *>(&w);
    float4 xa = reinterpret_cast<const float4 *>(x)[0], xb = reinterpret_cast<const float4 *>(x)[1];
    float2 f0 = __half22float2(p[0]), f1 = __half22float2(p[1]), f2 = __half22float2(p[2]),
           f3 = __half22float2(p[3]);
    return f0.x * xa.x + f0.y * xa.y + f1.x * xa.z + f1.y * xa.w + f2.x * xb.x + f2.y * xb.y +
           f3.x * xb.z + f3.y * xb.w;
}

/* R rows per warp (1 for the layers' projections, so there are blocks enough to fill
 * the GPU; 2 for lm_head's 201088 rows, so each block's copy of x serves more); the
 * loads of U 16-byte chunks per row are issued before any is used. */
template <int R, int U>
__global__ void __launch_bounds__(WARPS * 32) gemv_f16_kernel(float *y, const f16 *W, const float *b,
                                                          const float *x, const float *norm_w,
                                                          float eps, uint32_t rows,
                                                          uint32_t cols, int accumulate)
{
    extern __shared__ __align__(16) float xs[];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint32_t r0 = (blockIdx.x * WARPS + warp) * R;
    bool active = r0 < rows;
    const uint4 *w[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        w[r] = reinterpret_cast<const uint4 *>(W + (size_t)min(r0 + r, rows - 1) * cols);
    uint32_t n = cols / 8;
    uint4 u[R][U];
    /* the first loads go out before waiting for the kernel that writes x */
#pragma unroll
    for (int i = 0; i < U; i++)
#pragma unroll
        for (int r = 0; r < R; r++)
            u[r][i] = active && lane + 32 * i < n ? __ldg(w[r] + lane + 32 * i) : make_uint4(0, 0, 0, 0);
    grid_wait();
    grid_launch_next();
    stage_vector(xs, x, cols, norm_w, eps);
    __syncthreads();
    if (!active)
        return;
    float a[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        a[r] = 0;
    for (uint32_t c0 = lane; c0 < n; c0 += 32 * U) {
        if (c0 != lane) {
#pragma unroll
            for (int i = 0; i < U; i++) {
                uint32_t c = c0 + 32 * i;
#pragma unroll
                for (int r = 0; r < R; r++)
                    u[r][i] = c < n ? __ldg(w[r] + c) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int i = 0; i < U; i++) {
            uint32_t c = c0 + 32 * i;
            if (c < n) {
                const float *xc = xs + padded(c * 8);
#pragma unroll
                for (int r = 0; r < R; r++)
                    a[r] += dot8(u[r][i], xc);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        float v = warp_sum(a[r]);
        if (lane == 0 && r0 + r < rows) {
            v += b ? b[r0 + r] : 0.0f;
            y[r0 + r] = accumulate ? y[r0 + r] + v : v;
        }
    }
}

cudaError_t k_gemv_f16(float *y, const f16 *W, const float *b, const float *x,
                       const float *norm_w, float eps, uint32_t rows, uint32_t cols,
                       int accumulate, cudaStream_t s)
{
    if (cols % 8 || cols > 10240 || !aligned16(x) || !aligned16(norm_w))
        return cudaErrorInvalidValue;
    if (rows >= 32768) {
        uint32_t blocks = (rows + 2 * WARPS - 1) / (2 * WARPS);
        LAUNCH((gemv_f16_kernel<2, 4>), blocks, WARPS * 32, padded_bytes(cols), s, y, W, b, x, norm_w, eps,
                                                                          rows, cols, accumulate);
    } else {
        uint32_t blocks = (rows + WARPS - 1) / WARPS;
        LAUNCH((gemv_f16_kernel<1, 4>), blocks, WARPS * 32, padded_bytes(cols), s, y, W, b, x, norm_w, eps,
                                                                          rows, cols, accumulate);
    }
    return cudaGetLastError();
}

/* ---- the decode step's router ------------------------------------------------------------ */

/* One block: warp w takes experts w, w + 32, ... (E <= GPT_MAX_EXPERTS), the vector staged and normed
 * once; the logits stay in shared memory for warp 0's top-k. */
__global__ void __launch_bounds__(1024) router_decode_kernel(int32_t *ids, float *weights,
                                                             f16 *x_operand, const float *x,
                                                             const float *norm_w, float eps,
                                                             const f16 *W, const float *b,
                                                             uint32_t H, uint32_t E, uint32_t k)
{
    constexpr int U = 8;
    extern __shared__ __align__(16) float xs[];
    __shared__ float logits[GPT_MAX_EXPERTS];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n = H / 8;
    const uint4 *w0 = reinterpret_cast<const uint4 *>(W + (size_t)min(warp, E - 1) * H);
    uint4 u[U]; /* the first row's first loads, before waiting */
#pragma unroll
    for (int i = 0; i < U; i++)
        u[i] = lane + 32 * i < n ? __ldg(w0 + lane + 32 * i) : make_uint4(0, 0, 0, 0);
    grid_wait();
    grid_launch_next();
    stage_vector(xs, x, H, norm_w, eps);
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < H; i += blockDim.x)
        x_operand[mx_operand_index(i)] = to_f16(xs[padded(i)]);
    for (uint32_t e = warp; e < E; e += blockDim.x >> 5) {
        const uint4 *we = reinterpret_cast<const uint4 *>(W + (size_t)e * H);
        float a = 0;
        for (uint32_t c0 = lane; c0 < n; c0 += 32 * U) {
            if (c0 != lane || e != warp) {
#pragma unroll
                for (int i = 0; i < U; i++)
                    u[i] = c0 + 32 * i < n ? __ldg(we + c0 + 32 * i) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int i = 0; i < U; i++)
                if (c0 + 32 * i < n)
                    a += dot8(u[i], xs + padded((c0 + 32 * i) * 8));
        }
        a = warp_sum(a);
        if (lane == 0)
            logits[e] = a + b[e];
    }
    __syncthreads();
    if (warp == 0)
        warp_topk(ids, weights, logits, E, k);
}

cudaError_t k_router_decode(int32_t *ids, float *weights, f16 *x_operand, const float *x,
                            const float *norm_w, float eps, const f16 *w, const float *b,
                            uint32_t H, uint32_t E, uint32_t k, cudaStream_t s)
{
    if (E > GPT_MAX_EXPERTS || k > 8 || k > E || H % 32 || H > 10240 || !aligned16(x) || !aligned16(norm_w))
        return cudaErrorInvalidValue;
    LAUNCH(router_decode_kernel, 1, 32 * min(E, 32u), padded_bytes(H), s, ids, weights, x_operand,
           x, norm_w, eps, w, b, H, E, k);
    return cudaGetLastError();
}

/* ---- MXFP4 on tensor cores ---------------------------------------------------------------- */

/* The experts' GEMVs run on mma.sync m16n8k16 with the weights as the A operand (16
 * rows) and the vector as B (the same in all 8 columns, so every lane's accumulators
 * hold its rows' sums).  Lane (g, t) = (lane / 4, lane % 4) loads 16 bytes of rows g
 * and g + 8 at group G = slice start + 4 s + t and decodes each laid-out 4-byte word
 * (k_mxfp4_lay_out: 8 values, as four pairs p0..p3) straight into A fragments: half2 p0,
 * p1 for one mma, p2, p3 for the next.  The k order inside a fragment is free as long as
 * B uses the same one, so the vector is kept in the operand order (kernels.cuh), where
 * one 16-byte read gives a word's B fragments.  A warp takes a 16-row tile over a slice of 4 S
 * groups; a block, the slices of one tile for one routed expert. */

/* A warp slice's copy of the vector in shared memory, in halves: 64 bytes a group and 16
 * more after every second, so the 4 groups a quad's lanes read at once (64 bytes apart)
 * do not share banks. */
static __host__ __device__ __forceinline__ uint32_t slice_halves(uint32_t groups)
{
    return groups * 32 + (groups >> 1) * 8;
}

/* This warp's part of a 16-row tile's dot products: rows row0 + g and row0 + g + 8 over
 * groups [gb, gb + 4 S) (those below `groups`).  load() issues every weight load;
 * finish() stages the vector xg (fp16, operand order) into xs (the warp's
 * slice_halves(4 S) halves of shared memory) and returns the two rows' partial sums. */
template <int S>
struct MxSlice {
    uint4 qa[S], qb[S];
    uint32_t sa[S], sb[S];
    uint32_t gb, groups;

    __device__ __forceinline__ void load(const uint8_t *blocks, const uint8_t *scales,
                                         size_t row0, uint32_t groups_, uint32_t gb_)
    {
        uint32_t lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
        size_t ra = (row0 + g) * groups_, rb = (row0 + g + 8) * groups_;
        gb = gb_;
        groups = groups_;
#pragma unroll
        for (int s = 0; s < S; s++) {
            uint32_t G = gb + 4 * s + t;
            bool ok = G < groups;
            const uint4 *q = reinterpret_cast<const uint4 *>(blocks);
            qa[s] = ok ? __ldg(q + ra + G) : make_uint4(0, 0, 0, 0);
            qb[s] = ok ? __ldg(q + rb + G) : make_uint4(0, 0, 0, 0);
            sa[s] = ok ? __ldg(scales + ra + G) : 127;
            sb[s] = ok ? __ldg(scales + rb + G) : 127;
        }
    }

    __device__ __forceinline__ float2 finish(const f16 *xg, f16 *xs)
    {
        uint32_t lane = threadIdx.x & 31, t = lane & 3;
        for (uint32_t c = lane; c < 16 * S; c += 32) { /* 16-byte chunks: 4 a group */
            uint32_t gl = c >> 2, G = gb + gl;
            uint4 v = G < groups
                          ? __ldg(reinterpret_cast<const uint4 *>(xg + (size_t)G * 32) + (c & 3))
                          : make_uint4(0, 0, 0, 0); /* zeros: 0 * anything finite */
            *reinterpret_cast<uint4 *>(xs + slice_halves(gl) + 8 * (c & 3)) = v;
        }
        __syncwarp();
        float acc[4] = {0, 0, 0, 0};
#pragma unroll
        for (int s = 0; s < S; s++) {
            uint32_t s2a = e8m0_half2(sa[s]), s2b = e8m0_half2(sb[s]);
            const f16 *xp = xs + slice_halves(4 * s + t);
            const uint32_t wa[4] = {qa[s].x, qa[s].y, qa[s].z, qa[s].w};
            const uint32_t wb[4] = {qb[s].x, qb[s].y, qb[s].z, qb[s].w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint4 xv = *reinterpret_cast<const uint4 *>(xp + 8 * i);
                uint32_t ha[4], hb[4];
                e2m1x8_to_half2_pairs(wa[i], ha);
                e2m1x8_to_half2_pairs(wb[i], hb);
#pragma unroll
                for (int m = 0; m < 4; m++) {
                    ha[m] = hmul2_bits(ha[m], s2a);
                    hb[m] = hmul2_bits(hb[m], s2b);
                }
                const uint32_t a0[4] = {ha[0], hb[0], ha[1], hb[1]};
                const uint32_t a1[4] = {ha[2], hb[2], ha[3], hb[3]};
                mma_f16(acc, a0, xv.x, xv.y);
                mma_f16(acc, a1, xv.z, xv.w);
            }
        }
        return make_float2(acc[0], acc[2]);
    }
};

/* Shared memory of a block of `slices` warps: their vector slices, then the 16 partial
 * sums of each. */
template <int S>
static size_t tile_smem_bytes(uint32_t slices)
{
    return (size_t)slices * slice_halves(4 * S) * sizeof(f16) + (size_t)slices * 16 * sizeof(float);
}

/* The warp's slice of the block's tile, finished: its partial sums into red[warp][16]
 * (returned); the caller syncs before reading them. */
template <int S>
static __device__ __forceinline__ float *tile_partials(MxSlice<S> &m, const f16 *xg)
{
    extern __shared__ __align__(16) f16 smem_h[];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31, slices = blockDim.x >> 5;
    float *red = reinterpret_cast<float *>(smem_h + slices * slice_halves(4 * S));
    float2 r = m.finish(xg, smem_h + warp * slice_halves(4 * S));
    if ((lane & 3) == 0) {
        red[warp * 16 + (lane >> 2)] = r.x;
        red[warp * 16 + (lane >> 2) + 8] = r.y;
    }
    return red;
}

#define MX_STEPS_GATE_UP 2
#define MX_STEPS_DOWN 2

/* Block (tile, j): rows 16 tile .. 16 tile + 15 of expert ids[j]'s gate_up, i.e. the
 * (gate, up) pairs 8 tile .. 8 tile + 7, then their clamped SwiGLU. */
template <int S>
__global__ void __launch_bounds__(1024) moe_gate_up_kernel(f16 *act, const uint8_t *blocks,
                                                           const uint8_t *scales,
                                                           const float *bias,
                                                           const int32_t *ids, const f16 *x,
                                                           uint32_t H, uint32_t I, float alpha,
                                                           float limit)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    uint32_t tile = blockIdx.x, j = blockIdx.y, slices = blockDim.x >> 5;
    int32_t e = ids[j]; /* written by the launch before: after grid_wait() */
    MxSlice<S> m;
    m.load(blocks, scales, (size_t)e * 2 * I + 16 * tile, H / 32, (threadIdx.x >> 5) * 4 * S);
    float *red = tile_partials<S>(m, x);
    __syncthreads();
    if (threadIdx.x < 8) {
        uint32_t p = threadIdx.x, i = 8 * tile + p;
        float g = 0, u = 0;
        for (uint32_t w = 0; w < slices; w++) {
            g += red[w * 16 + 2 * p];
            u += red[w * 16 + 2 * p + 1];
        }
        const float *be = bias + (size_t)e * 2 * I;
        g = fminf(g + be[2 * i], limit);
        u = fmaxf(fminf(u + be[2 * i + 1], limit), -limit);
        act[(size_t)j * I + mx_operand_index(i)] = to_f16((u + 1.0f) * (g / (1.0f + __expf(-alpha * g))));
    }
}

template <int S>
static uint32_t slices_for(uint32_t groups)
{
    return (groups + 4 * S - 1) / (4 * S);
}

cudaError_t k_moe_gate_up_gemv(f16 *act, const uint8_t *blocks, const uint8_t *scales,
                               const float *bias, const int32_t *ids, const f16 *x, uint32_t k,
                               uint32_t H, uint32_t I, float alpha, float limit, cudaStream_t s)
{
    constexpr int S = MX_STEPS_GATE_UP;
    uint32_t slices = slices_for<S>(H / 32);
    if (H % 32 || I % 32 || slices > 32 || !aligned16(x))
        return cudaErrorInvalidValue;
    dim3 grid(2 * I / 16, k);
    LAUNCH(moe_gate_up_kernel<S>, grid, 32 * slices, tile_smem_bytes<S>(slices), s, 
        act, blocks, scales, bias, ids, x, H, I, alpha, limit);
    return cudaGetLastError();
}

/* Block (tile, j): rows 16 tile .. 16 tile + 15 of expert ids[j]'s down projection,
 * written to partial[j]; the last of the k blocks of a tile to finish adds the weighted
 * sum (in the order j = 0..k-1, so the result does not depend on which was last) into x
 * and clears the tile's counter for the next launch. */
template <int S>
__global__ void __launch_bounds__(1024) moe_down_kernel(float *x, const uint8_t *blocks,
                                                        const uint8_t *scales, const float *bias,
                                                        const int32_t *ids, const float *w,
                                                        const f16 *act, float *partial,
                                                        uint32_t *arrived, uint32_t k,
                                                        uint32_t H, uint32_t I)
{
    __shared__ bool last;
    uint32_t tile = blockIdx.x, j = blockIdx.y, slices = blockDim.x >> 5;
    /* ids come from two launches back (the router), so the weights can be fetched
     * before waiting for gate_up's act (read from L2: they change every layer) */
    int32_t e = __ldcg(ids + j);
    MxSlice<S> m;
    m.load(blocks, scales, (size_t)e * H + 16 * tile, I / 32, (threadIdx.x >> 5) * 4 * S);
    grid_wait();
    grid_launch_next();
    float *red = tile_partials<S>(m, act + (size_t)j * I);
    __syncthreads();
    if (threadIdx.x < 16) {
        float v = 0;
        for (uint32_t s = 0; s < slices; s++)
            v += red[s * 16 + threadIdx.x];
        partial[(size_t)j * H + 16 * tile + threadIdx.x] = v;
        __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(arrived + tile, 1u) == k - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    if (threadIdx.x < 16) {
        uint32_t h = 16 * tile + threadIdx.x;
        float v = 0;
        for (uint32_t jj = 0; jj < k; jj++) {
            int32_t ej = ids[jj];
            v += w[jj] * (__ldcg(partial + (size_t)jj * H + h) + bias[(size_t)ej * H + h]);
        }
        x[h] += v;
    }
    if (threadIdx.x == 0)
        arrived[tile] = 0;
}

size_t k_moe_down_scratch_bytes(uint32_t k, uint32_t H)
{
    return (size_t)k * H * sizeof(float) + (H / 16) * sizeof(uint32_t);
}

cudaError_t k_moe_down_gemv(float *x, const uint8_t *blocks, const uint8_t *scales,
                            const float *bias, const int32_t *ids, const float *w,
                            const f16 *act, void *scratch, uint32_t k, uint32_t H, uint32_t I,
                            cudaStream_t s)
{
    constexpr int S = MX_STEPS_DOWN;
    uint32_t slices = slices_for<S>(I / 32);
    if (I % 32 || H % 16 || slices > 32 || !aligned16(act) || !aligned16(scratch))
        return cudaErrorInvalidValue;
    float *partial = static_cast<float *>(scratch);
    uint32_t *arrived = reinterpret_cast<uint32_t *>(partial + (size_t)k * H);
    dim3 grid(H / 16, k);
    LAUNCH(moe_down_kernel<S>, grid, 32 * slices, tile_smem_bytes<S>(slices), s, 
        x, blocks, scales, bias, ids, w, act, partial, arrived, k, H, I);
    return cudaGetLastError();
}

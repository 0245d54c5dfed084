/* Matrix-vector products of the gpt-oss decode step: fp16 weights against an fp32
 * vector, and the MXFP4 experts (the routed ones only, in one launch each for gate_up
 * with its SwiGLU and for down with the weighted sum).  They are bound by reading the
 * weights once: 16-byte loads, a warp per row (two rows of the fp16 kind), the vector
 * in shared memory.
 *
 * The vector is stored with 4 floats of padding after every 32: the lanes of a warp
 * read 32 floats apart (an MXFP4 group each) or 8 apart (8 fp16 weights each), which
 * without the padding falls into the same banks and serialises the warp 32 or 2
 * ways.  See kernels.cuh. */
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
template <int R>
__global__ void __launch_bounds__(WARPS * 32) gemv_f16_kernel(float *y, const f16 *W, const float *b,
                                                          const float *x, const float *norm_w,
                                                          float eps, uint32_t rows,
                                                          uint32_t cols, int accumulate)
{
    constexpr int U = 4;
    extern __shared__ __align__(16) float xs[];
    stage_vector(xs, x, cols, norm_w, eps);
    __syncthreads();
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint32_t r0 = (blockIdx.x * WARPS + warp) * R;
    if (r0 >= rows)
        return;
    const uint4 *w[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        w[r] = reinterpret_cast<const uint4 *>(W + (size_t)min(r0 + r, rows - 1) * cols);
    float a[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        a[r] = 0;
    uint32_t n = cols / 8;
    for (uint32_t c0 = lane; c0 < n; c0 += 32 * U) {
        uint4 u[R][U];
#pragma unroll
        for (int i = 0; i < U; i++) {
            uint32_t c = c0 + 32 * i;
#pragma unroll
            for (int r = 0; r < R; r++)
                u[r][i] = c < n ? __ldg(w[r] + c) : make_uint4(0, 0, 0, 0);
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
        gemv_f16_kernel<2><<<blocks, WARPS * 32, padded_bytes(cols), s>>>(y, W, b, x, norm_w, eps,
                                                                          rows, cols, accumulate);
    } else {
        uint32_t blocks = (rows + WARPS - 1) / WARPS;
        gemv_f16_kernel<1><<<blocks, WARPS * 32, padded_bytes(cols), s>>>(y, W, b, x, norm_w, eps,
                                                                          rows, cols, accumulate);
    }
    return cudaGetLastError();
}

/* ---- MXFP4 ------------------------------------------------------------------------------- */

/* The dot product of one 32-value MXFP4 group (16 bytes, scale s) with x[0..32)
 * (16-byte aligned, contiguous: one group of the padded vector). */
static __device__ __forceinline__ float dot_group(uint4 q, uint8_t s, const float *x)
{
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float acc = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float4 a = x4[2 * i], b = x4[2 * i + 1]; /* values 8i..8i+3, 8i+4..8i+7 */
        uint32_t h[4];
        e2m1x8_to_half2(w[i], h);
        float2 f0 = __half22float2(*reinterpret_cast<__half2 *>(&h[0])),
               f1 = __half22float2(*reinterpret_cast<__half2 *>(&h[1])),
               f2 = __half22float2(*reinterpret_cast<__half2 *>(&h[2])),
               f3 = __half22float2(*reinterpret_cast<__half2 *>(&h[3]));
        acc += f0.x * a.x + f0.y * b.x + f1.x * a.y + f1.y * b.y + f2.x * a.z + f2.y * b.z +
               f3.x * a.w + f3.y * b.w;
    }
    return acc * e8m0(s);
}

#define GU 3 /* MXFP4 groups per lane loaded at once: 96 groups = 3072 values per pass */

/* A warp per (expert slot, output pair): rows 2i and 2i+1 of the expert's gate_up. */
__global__ void __launch_bounds__(WARPS * 32, 3) moe_gate_up_kernel(float *act, const uint8_t *blocks,
                                                            const uint8_t *scales,
                                                            const float *bias,
                                                            const int32_t *ids, const float *x,
                                                            const float *norm_w, float eps,
                                                            uint32_t k, uint32_t H, uint32_t I,
                                                            float alpha, float limit)
{
    extern __shared__ __align__(16) float xs[];
    stage_vector(xs, x, H, norm_w, eps);
    __syncthreads();
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint32_t task = blockIdx.x * WARPS + warp;
    if (task >= k * I)
        return;
    uint32_t j = task / I, i = task % I;
    int32_t e = ids[j];
    uint32_t groups = H / 32;
    size_t row0 = (size_t)e * 2 * I + 2 * i;
    const uint4 *q0 = reinterpret_cast<const uint4 *>(blocks + row0 * groups * 16);
    const uint4 *q1 = q0 + groups;
    const uint8_t *s0 = scales + row0 * groups, *s1 = s0 + groups;
    float g = 0, u = 0;
    for (uint32_t c0 = lane; c0 < groups; c0 += 32 * GU) {
        uint4 qa[GU], qb[GU];
        uint8_t sa[GU], sb[GU];
#pragma unroll
        for (int i = 0; i < GU; i++) { /* every load first */
            uint32_t c = c0 + 32 * i;
            bool ok = c < groups;
            qa[i] = ok ? __ldg(q0 + c) : make_uint4(0, 0, 0, 0);
            qb[i] = ok ? __ldg(q1 + c) : make_uint4(0, 0, 0, 0);
            sa[i] = ok ? __ldg(s0 + c) : 127;
            sb[i] = ok ? __ldg(s1 + c) : 127;
        }
#pragma unroll
        for (int i = 0; i < GU; i++) {
            uint32_t c = c0 + 32 * i;
            if (c < groups) {
                const float *xc = xs + padded(c * 32);
                g += dot_group(qa[i], sa[i], xc);
                u += dot_group(qb[i], sb[i], xc);
            }
        }
    }
    g = warp_sum(g);
    u = warp_sum(u);
    if (lane == 0) {
        const float *be = bias + (size_t)e * 2 * I;
        g = fminf(g + be[2 * i], limit);
        u = fmaxf(fminf(u + be[2 * i + 1], limit), -limit);
        act[(size_t)j * I + i] = (u + 1.0f) * (g / (1.0f + __expf(-alpha * g)));
    }
}

cudaError_t k_moe_gate_up_gemv(float *act, const uint8_t *blocks, const uint8_t *scales,
                               const float *bias, const int32_t *ids, const float *x,
                               const float *norm_w, float eps, uint32_t k, uint32_t H, uint32_t I,
                               float alpha, float limit, cudaStream_t s)
{
    if (H % 32 || H > 10240 || !aligned16(x) || !aligned16(norm_w))
        return cudaErrorInvalidValue;
    uint32_t blocks_n = (k * I + WARPS - 1) / WARPS;
    moe_gate_up_kernel<<<blocks_n, WARPS * 32, padded_bytes(H), s>>>(act, blocks, scales, bias,
                                                                     ids, x, norm_w, eps, k, H, I,
                                                                     alpha, limit);
    return cudaGetLastError();
}

#define MOE_K_MAX 8

/* A warp per output row h, over the k routed experts at once (their loads are
 * independent), the weighted sum reduced across the warp once. */
__global__ void __launch_bounds__(WARPS * 32) moe_down_kernel(float *x, const uint8_t *blocks,
                                                         const uint8_t *scales, const float *bias,
                                                         const int32_t *ids, const float *w,
                                                         const float *act, uint32_t k, uint32_t H,
                                                         uint32_t I)
{
    extern __shared__ __align__(16) float as[];
    __shared__ int32_t ex[MOE_K_MAX];
    __shared__ float ew[MOE_K_MAX];
    if (threadIdx.x < k) {
        ex[threadIdx.x] = ids[threadIdx.x];
        ew[threadIdx.x] = w[threadIdx.x];
    }
    stage_vector(as, act, k * I);
    __syncthreads();
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint32_t h = blockIdx.x * WARPS + warp;
    if (h >= H)
        return;
    uint32_t groups = I / 32;
    float part = 0;
    for (uint32_t c0 = lane; c0 < groups; c0 += 32 * GU)
        for (uint32_t j0 = 0; j0 < k; j0 += 2) { /* two experts' loads at a time */
            uint4 q[2][GU];
            uint8_t sc[2][GU];
#pragma unroll
            for (int jj = 0; jj < 2; jj++) {
                uint32_t j = j0 + jj < k ? j0 + jj : j0;
                size_t row = (size_t)ex[j] * H + h;
                const uint4 *qr = reinterpret_cast<const uint4 *>(blocks + row * groups * 16);
#pragma unroll
                for (int i = 0; i < GU; i++) {
                    uint32_t c = c0 + 32 * i;
                    bool ok = c < groups && j0 + jj < k;
                    q[jj][i] = ok ? __ldg(qr + c) : make_uint4(0, 0, 0, 0);
                    sc[jj][i] = ok ? __ldg(scales + row * groups + c) : 127;
                }
            }
#pragma unroll
            for (int jj = 0; jj < 2; jj++)
#pragma unroll
                for (int i = 0; i < GU; i++) {
                    uint32_t c = c0 + 32 * i, j = j0 + jj;
                    if (c < groups && j < k)
                        part += ew[j] * dot_group(q[jj][i], sc[jj][i], as + padded(j * I + c * 32));
                }
        }
    part = warp_sum(part);
    if (lane == 0) {
        for (uint32_t j = 0; j < k; j++)
            part += ew[j] * bias[(size_t)ex[j] * H + h];
        x[h] += part;
    }
}

cudaError_t k_moe_down_gemv(float *x, const uint8_t *blocks, const uint8_t *scales,
                            const float *bias, const int32_t *ids, const float *w,
                            const float *act, uint32_t k, uint32_t H, uint32_t I, cudaStream_t s)
{
    size_t smem = padded_bytes(k * I);
    if (I % 32 || k > MOE_K_MAX || smem > 200 * 1024 || !aligned16(act))
        return cudaErrorInvalidValue;
    static size_t configured = 48 * 1024; /* dynamic shared memory allowed so far */
    if (smem > configured) {
        cudaError_t err = cudaFuncSetAttribute(moe_down_kernel,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess)
            return err;
        configured = smem;
    }
    uint32_t blocks_n = (H + WARPS - 1) / WARPS;
    moe_down_kernel<<<blocks_n, WARPS * 32, smem, s>>>(x, blocks, scales, bias, ids, w, act, k, H, I);
    return cudaGetLastError();
}

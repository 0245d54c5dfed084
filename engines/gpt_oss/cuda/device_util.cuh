/* What the kernel files share: the launch with programmatic dependent launch, warp
 * reductions, the E8M0 scale, E2M1 to fp16 by byte permutes, fp8 e4m3 both ways, and
 * the inline PTX of the tensor-core kernels (cp.async, ldmatrix, mma.sync).  Included by
 * the k_*.cu files only. */
#ifndef GPT_CUDA_DEVICE_UTIL_CUH
#define GPT_CUDA_DEVICE_UTIL_CUH

#include "kernels.cuh"

#include <atomic>
#include <cuda_fp8.h>
#include <float.h>

/* ---- launching ------------------------------------------------------------------------- */

/* Every kernel of a forward pass is launched by launch() (LAUNCH() returns its error),
 * which, in the decode step's graph, lets it start while the kernel before it is still
 * running (programmatic dependent launch, compute capability 9.0 and newer): a decode
 * step is some 170 launches, and each one's start-up and first loads then overlap its
 * predecessor's tail.  The rules that make this safe, which every such kernel keeps:
 *   1. Before grid_wait() it writes nothing to global memory and reads only what no
 *      kernel of the last two launches writes (its weights; ids two launches back).
 *   2. It calls grid_launch_next() only after grid_wait(), so the kernel after it
 *      starts only once the one before it has finished (which rule 1 relies on).
 * grid_wait() returns once the previous kernel has finished and its writes are
 * visible; both are no-ops on older GPUs and for kernels launched plainly. */
static __device__ __forceinline__ void grid_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

static __device__ __forceinline__ void grid_launch_next()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* Whether a launch into stream s overlaps its predecessor: only while s is being
 * captured into a CUDA graph (the decode step), and on compute capability 9.0 or newer.
 * Launched one by one (prefill), the overlap costs more than it saves (a 100-token
 * prompt: 16.5 ms instead of 15.6 ms on an H200). */
static bool overlap_allowed(cudaStream_t s)
{
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &capturing) != cudaSuccess ||
        capturing != cudaStreamCaptureStatusActive)
        return false;
    static std::atomic<int> major[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
        return false;
    int m = major[dev].load(std::memory_order_relaxed);
    if (m == 0) {
        if (cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            return false;
        major[dev].store(m, std::memory_order_relaxed);
    }
    return m >= 9;
}

template <typename... P, typename... A>
static cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t s, A &&...args)
{
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = overlap_allowed(s) ? 1 : 0;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<A &&>(args)...);
}

#define LAUNCH(...) \
    do { \
        cudaError_t launch_err_ = launch(__VA_ARGS__); \
        if (launch_err_ != cudaSuccess) \
            return launch_err_; \
    } while (0)

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The top-k of E (<= GPT_MAX_EXPERTS) logits by one warp: lane l holds logits l, l + 32,
 * l + 64 and l + 96; k rounds of a warp argmax (ties to the lower expert, as the CPU
 * reference), then the softmax over the chosen.  Lanes < k write ids[lane] and
 * weights[lane]. */
static __device__ __forceinline__ void warp_topk(int32_t *ids, float *weights, const float *logits, uint32_t E,
                                 uint32_t k)
{
    constexpr int PER = GPT_MAX_EXPERTS / 32;
    uint32_t lane = threadIdx.x & 31;
    float v[PER];
#pragma unroll
    for (int i = 0; i < PER; i++)
        v[i] = lane + 32 * i < E ? logits[lane + 32 * i] : -FLT_MAX;
    float chosen_logit = 0, first = 0, sum = 0;
    int32_t chosen = -1;
    for (uint32_t j = 0; j < k; j++) {
        /* the lane's best: the first of its largest (its experts rise with i) */
        float best = v[0];
        int32_t id = lane < E ? (int32_t)lane : 0x7fffffff;
#pragma unroll
        for (int i = 1; i < PER; i++)
            if (v[i] > best) {
                best = v[i];
                id = (int32_t)(lane + 32 * i);
            }
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int32_t oi = __shfl_xor_sync(0xffffffffu, id, o);
            if (ob > best || (ob == best && oi < id)) {
                best = ob;
                id = oi;
            }
        }
        if (j == 0)
            first = best;
        if (lane == j) {
            chosen = id;
            chosen_logit = best;
        }
        sum += __expf(best - first);
#pragma unroll
        for (int i = 0; i < PER; i++) /* out of the next rounds */
            if ((uint32_t)id == lane + 32 * i)
                v[i] = -FLT_MAX;
    }
    if (lane < k) {
        ids[lane] = chosen;
        weights[lane] = __expf(chosen_logit - first) / sum;
    }
}

/* An E8M0 scale: 2^(s-127). */
static __device__ __forceinline__ float e8m0(uint8_t s)
{
    return s ? __int_as_float((int)s << 23) : 5.877471754e-39f;
}

static __device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

/* A laid-out word of E2M1 values (MXFP4's; mxfp4_laid_word in kernels.cuh) to fp16
 * pairs, unscaled, in 11 instructions for 8 values, without a table in memory: the
 * magnitudes' fp16 high bytes (0, 0.5, 1, 1.5, 2, 3, 4, 6: 00 38 3C 3E 40 42 44 46; the
 * low byte is always 0) looked up by two byte permutes in lo_tab (magnitudes 0-3) and
 * hi_tab (4-7), nibbles 0-3 into the bytes of lo and 4-7 into those of hi; the signs,
 * which the layout put at the top bit of each byte (nibbles 0-3) and at bit 3 (4-7),
 * put in by one mask each; then each pair of bytes laid beside zero low bytes.  Exact.
 * out[j] = half2(nibble 2j, nibble 2j + 1): in the layout, the pairs of values
 * (2i, 2i + 1), (2i + 8, 2i + 9), (2i + 16, 2i + 17), (2i + 24, 2i + 25) of word i's
 * group.  (The layout saves two instructions of the 13 that the file's order takes, and
 * the three byte permutes a lane spent gathering its word: BENCHMARKS.md.) */
/* The fp16 high bytes of the E2M1 magnitudes 0, 0.5, 1, 1.5 and of 2, 3, 4, 6: the
 * decode's two tables. */
#define E2M1_LO_TABLE 0x3E3C3800u
#define E2M1_HI_TABLE 0x46444240u

static __device__ __forceinline__ uint32_t e2m1x8_lo_high_bytes(uint32_t w, uint32_t lo_tab, uint32_t hi_tab)
{
    return prmt(lo_tab, hi_tab, w & 0x77777777u) | (w & 0x80808080u); /* nibbles 0-3 */
}

static __device__ __forceinline__ uint32_t e2m1x8_hi_high_bytes(uint32_t w, uint32_t lo_tab, uint32_t hi_tab)
{
    return prmt(lo_tab, hi_tab, (w & 0x77777777u) >> 16) | ((w << 4) & 0x80808080u); /* nibbles 4-7 */
}

/* Bytes 0 and 1 (first) or 2 and 3 of four high bytes as an fp16 pair. */
static __device__ __forceinline__ uint32_t half2_of_high_bytes(uint32_t bytes, bool first)
{
    return prmt(bytes, 0u, first ? 0x1404u : 0x3424u); /* bytes: 0, b.0, 0, b.1 (or b.2, b.3) */
}

static __device__ __forceinline__ void e2m1x8_to_half2_pairs_tab(uint32_t w, uint32_t lo_tab, uint32_t hi_tab,
                                                                 uint32_t out[4])
{
    const uint32_t lo = e2m1x8_lo_high_bytes(w, lo_tab, hi_tab), hi = e2m1x8_hi_high_bytes(w, lo_tab, hi_tab);
    out[0] = half2_of_high_bytes(lo, true);
    out[1] = half2_of_high_bytes(lo, false);
    out[2] = half2_of_high_bytes(hi, true);
    out[3] = half2_of_high_bytes(hi, false);
}

static __device__ __forceinline__ void e2m1x8_to_half2_pairs(uint32_t w, uint32_t out[4])
{
    e2m1x8_to_half2_pairs_tab(w, E2M1_LO_TABLE, E2M1_HI_TABLE, out);
}

/* The same tables for the values times 2^(s-127), s in [114, 140], where every nonzero
 * product is a normal fp16: s - 127 added to each nonzero magnitude's exponent (bits 2-6
 * of its high byte; zero stays zero), so the decode yields the scaled values as it is. */
static __device__ __forceinline__ uint32_t e2m1_lo_table_scaled(uint32_t s)
{
    return s * 0x04040400u + (E2M1_LO_TABLE - 127u * 0x04040400u);
}

static __device__ __forceinline__ uint32_t e2m1_hi_table_scaled(uint32_t s)
{
    return s * 0x04040404u + (E2M1_HI_TABLE - 127u * 0x04040404u);
}

/* (a, b) as two fp8 e4m3 (a in the low byte), rounded to nearest even, saturating at
 * +-448; and two e4m3 bytes back as fp16 (exact: every e4m3 value is an fp16). */
static __device__ __forceinline__ uint16_t fp8x2_e4m3(float a, float b)
{
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

static __device__ __forceinline__ __half2 e4m3x2_to_half2(uint16_t two)
{
    __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
    return *reinterpret_cast<__half2 *>(&r);
}

/* fp16 2^(s-127) in both halves (s within [104, 140], as the loader checks: normal
 * from 113 on, subnormal below). */
static __device__ __forceinline__ uint32_t e8m0_half2(uint32_t s)
{
    /* the fp32 2^(s-127) is s in the exponent field; its conversion to fp16 is exact in
     * that range (subnormals included): two instructions */
    __half2 h = __float2half2_rn(__uint_as_float(s << 23));
    return *reinterpret_cast<uint32_t *>(&h);
}

static __device__ __forceinline__ uint32_t hmul2_bits(uint32_t a, uint32_t b)
{
    __half2 r = __hmul2(*reinterpret_cast<__half2 *>(&a), *reinterpret_cast<__half2 *>(&b));
    return *reinterpret_cast<uint32_t *>(&r);
}

/* gpt-oss's SwiGLU of a (gate, up) pair, both clamped (gate from above, up on both
 * sides) at limit: (up + 1) * gate * sigmoid(alpha * gate). */
static __device__ __forceinline__ float clamped_swiglu(float gate, float up, float alpha, float limit)
{
    gate = fminf(gate, limit);
    up = fmaxf(fminf(up, limit), -limit);
    return (up + 1.0f) * (gate / (1.0f + __expf(-alpha * gate)));
}

/* ---- dynamic shared memory ------------------------------------------------------------- */

/* Past 48 KiB a kernel's dynamic shared memory must be allowed by cudaFuncSetAttribute,
 * which holds for the current device only: each launcher keeps one allowance (a static
 * per kernel) and asks allow_dynamic_smem before every launch, which sets the attribute
 * the first time a device needs more than it has allowed. */
struct SmemAllowance {
    std::atomic<size_t> per_device[64];
};

template <typename Kernel>
static cudaError_t allow_dynamic_smem(SmemAllowance &allowed, Kernel kernel, size_t smem)
{
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess)
        return err;
    if (dev < 0 || dev >= 64)
        return cudaErrorInvalidDevice;
    std::atomic<size_t> &have = allowed.per_device[dev];
    if (smem <= have.load(std::memory_order_acquire))
        return cudaSuccess;
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    size_t seen = have.load(std::memory_order_relaxed);
    while (seen < smem && !have.compare_exchange_weak(seen, smem, std::memory_order_release))
        ;
    return cudaSuccess;
}

/* The current device's SM count (1 where it cannot be read), asked once per device.  The
 * products of few rows size their splits of K by it. */
static inline uint32_t sm_count(void)
{
    static std::atomic<int> known[64]; /* per device: 0 unknown */
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
        return 1;
    if ((sms = known[dev].load(std::memory_order_relaxed)) == 0) {
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
            sms = 1;
        known[dev].store(sms, std::memory_order_relaxed);
    }
    return (uint32_t)sms;
}

/* ---- tensor cores ---------------------------------------------------------------------- */

static __device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously; !valid writes zeros. */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(valid ? 16 : 0));
}

/* The same to a shared-memory address (smem_addr). */
static __device__ __forceinline__ void cp_async16_at(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

/* 4 bytes global -> shared, asynchronously; !valid writes zeros. */
static __device__ __forceinline__ void cp_async4(void *dst, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(valid ? 4 : 0));
}

static __device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Four 8x8 b16 matrices from a shared-memory address (smem_addr): lanes 8i..8i+7 give
 * matrix i's row addresses. */
static __device__ __forceinline__ void ldmatrix_x4_at(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p)
{
    ldmatrix_x4_at(r, smem_addr(p));
}

/* Four 8x8 b16 matrices, each transposed: lanes 8i..8i+7 give matrix i's row addresses. */
static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* c = a (16x16, row-major fragment) * b (16x8, col-major fragment), fp16 in, fp32 out. */
static __device__ __forceinline__ void mma_f16_from_zero(float c[4], const uint32_t a[4], uint32_t b0,
                                                         uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

/* c += a (16x16, row-major fragment) * b (16x8, col-major fragment), fp16 in, fp32 out. */
static __device__ __forceinline__ void mma_f16(float c[4], const uint32_t a[4], uint32_t b0,
                                                uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif

/* Picking the next token on the GPU from rows of logits: greedy, or an exact draw from
 * softmax(logits / temperature) over the tokens the row's top_k, top_p and min_p keep
 * (their cut: k_pick_cut.cu) by the Gumbel-max trick with a counter-based generator
 * keyed by (seed, step), and the log-softmax (temperature 1) of what was picked.
 *
 * Three launches: the cuts; blocks each take a contiguous slice of a row's vocabulary
 * (its max, the argmax of the perturbed logits of the kept tokens, the sum of exp
 * against its own max); one block per row merges the slices.  Ties keep the lower id,
 * as the CPU sampler does.  Before them, a row with penalties has them applied in place
 * (k_apply_penalties). */
#include <float.h>

#include "device_util.cuh"

static __device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A Gumbel variate for (seed, step, i): -log(-log(u)), u in (0, 1). */
static __device__ __forceinline__ float gumbel(uint64_t seed, uint64_t step, uint32_t i)
{
    uint64_t r = mix64(seed ^ mix64(step * 0x9e3779b97f4a7c15ull + i));
    float u = ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
    return -__logf(-__logf(u));
}

#define PICK_THREADS 256u

struct PickPart {
    float best;  /* the best (perturbed) score */
    int32_t id;  /* its id */
    float max;   /* the slice's largest logit */
    float sum;   /* sum of exp(logit - max) over the slice */
};

static __device__ __forceinline__ void better(float &best, int32_t &id, float ob, int32_t oi)
{
    if (ob > best || (ob == best && oi < id)) {
        best = ob;
        id = oi;
    }
}

/* Block-wide: the best (score, id) and the max into every thread's variables. */
static __device__ void block_best_max(float &best, int32_t &id, float &mx)
{
    __shared__ float s_best[32], s_max[32];
    __shared__ int32_t s_id[32];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        better(best, id, __shfl_xor_sync(0xffffffffu, best, o),
               __shfl_xor_sync(0xffffffffu, id, o));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    if (lane == 0) {
        s_best[warp] = best;
        s_id[warp] = id;
        s_max[warp] = mx;
    }
    __syncthreads();
    best = lane < nw ? s_best[lane] : -FLT_MAX;
    id = lane < nw ? s_id[lane] : 0x7fffffff;
    mx = lane < nw ? s_max[lane] : -FLT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
        better(best, id, __shfl_xor_sync(0xffffffffu, best, o),
               __shfl_xor_sync(0xffffffffu, id, o));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    __syncthreads(); /* the arrays may be used again */
}

static __device__ float block_sum(float v)
{
    __shared__ float s_sum[32];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0)
        s_sum[warp] = v;
    __syncthreads();
    v = lane < nw ? s_sum[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}


/* The slice [lo, hi) of one row: its part. */
static __device__ PickPart scan_slice(const float *logits, uint32_t lo, uint32_t hi,
                                      float temperature, uint64_t seed, uint64_t step, PickCut cut)
{
    float best = -FLT_MAX, mx = -FLT_MAX;
    int32_t id = 0x7fffffff;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float l = logits[i];
        l = l == l ? l : -INFINITY; /* a NaN is never picked */
        mx = fmaxf(mx, l);
        bool kept = l > cut.t || (l == cut.t && (int32_t)i <= cut.id_max);
        float score = temperature <= 0 ? l : kept ? l / temperature + gumbel(seed, step, i) : -INFINITY;
        better(best, id, score, (int32_t)i); /* ascending i per thread */
    }
    block_best_max(best, id, mx);
    float sum = 0;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        if (logits[i] == logits[i])
            sum += __expf(logits[i] - mx);
    sum = block_sum(sum);
    return PickPart{best, id, mx, lo < hi ? sum : 0.0f};
}

/* Thread i < n holds parts[i]: the merged pick (id and its log-softmax) in every thread. */
static __device__ void merge_parts(const PickPart *parts, uint32_t n, const float *logits,
                                   uint32_t vocab, int32_t *id_out, float *logprob_out,
                                   float *max_out, float *lse_out)
{
    PickPart p = threadIdx.x < n ? parts[threadIdx.x] : PickPart{-FLT_MAX, 0x7fffffff, -FLT_MAX, 0};
    float best = p.best, mx = p.max;
    int32_t id = p.id;
    block_best_max(best, id, mx);
    float total = block_sum(p.sum > 0 ? p.sum * __expf(p.max - mx) : 0.0f);
    *max_out = mx;
    *lse_out = total > 0 ? __logf(total) : 0.0f;
    if (id < 0 || (uint32_t)id >= vocab) { /* no number in the row (all NaN): id 0 */
        *id_out = 0;
        *logprob_out = -INFINITY;
        return;
    }
    *id_out = id;
    *logprob_out = logits[id] - mx - __logf(total);
}

#define ROW_SLICES_MAX 64u

__global__ void __launch_bounds__(PICK_THREADS) pick_rows_slice_kernel(PickPart *parts,
                                                                       const PickRow *rows,
                                                                       const PickCut *cuts,
                                                                       const float *logits,
                                                                       uint32_t vocab,
                                                                       uint32_t slices)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t r = blockIdx.y, per = (vocab + slices - 1) / slices;
    const uint32_t lo = blockIdx.x * per, hi = min(vocab, lo + per);
    const PickRow row = rows[r];
    PickPart p = scan_slice(logits + (size_t)r * vocab, lo, hi, row.temperature, row.seed, row.step,
                            cuts ? cuts[r] : PickCut{-INFINITY, -1});
    if (threadIdx.x == 0)
        parts[(size_t)r * slices + blockIdx.x] = p;
}

__global__ void __launch_bounds__(ROW_SLICES_MAX) pick_rows_merge_kernel(PickOut *out,
                                                                         const float *logits,
                                                                         const PickPart *parts,
                                                                         uint32_t vocab,
                                                                         uint32_t slices)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t r = blockIdx.x;
    int32_t id;
    float logprob, mx, lse;
    merge_parts(parts + (size_t)r * slices, slices, logits + (size_t)r * vocab, vocab, &id, &logprob,
                &mx, &lse);
    if (threadIdx.x == 0)
        out[r] = PickOut{id, logprob, mx, lse};
}

size_t k_pick_rows_scratch_bytes(uint32_t rows)
{
    return (size_t)rows * (ROW_SLICES_MAX * sizeof(PickPart) + sizeof(PickCut)) + 256 +
           k_pick_cuts_scratch_bytes(rows);
}

cudaError_t k_pick_rows(PickOut *out, const PickRow *rows, const float *logits, uint32_t R,
                        uint32_t vocab, void *scratch, bool with_cuts, cudaStream_t s)
{
    if (vocab == 0 || R == 0)
        return cudaErrorInvalidValue;
    /* about eight blocks per SM in all: many slices for one row, a few for hundreds */
    uint32_t slices = (1056 + R - 1) / R;
    slices = slices < 1 ? 1 : slices > ROW_SLICES_MAX ? ROW_SLICES_MAX : slices;
    PickPart *parts = static_cast<PickPart *>(scratch);
    PickCut *cuts = reinterpret_cast<PickCut *>(parts + (size_t)R * ROW_SLICES_MAX);
    /* the cuts' own scratch after them, 256-byte aligned */
    uintptr_t after = reinterpret_cast<uintptr_t>(cuts + R);
    void *cut_scratch = reinterpret_cast<void *>((after + 255) & ~(uintptr_t)255);
    if (with_cuts) {
        cudaError_t e = k_pick_cuts(cuts, rows, logits, R, vocab, cut_scratch, s);
        if (e != cudaSuccess)
            return e;
    }
    LAUNCH(pick_rows_slice_kernel, dim3(slices, R), PICK_THREADS, 0, s, parts, rows,
           with_cuts ? cuts : nullptr, logits, vocab, slices);
    LAUNCH(pick_rows_merge_kernel, R, ROW_SLICES_MAX, 0, s, out, logits, parts, vocab, slices);
    return cudaGetLastError();
}

/* One block per row; threads over its entries (each id once: no two threads write the
 * same logit).  The float operations are the CPU sampler's, in its order, so a row
 * penalised here equals the same row penalised there bit for bit. */
__global__ void apply_penalties_kernel(float *logits, const PickRow *rows, const PenEntry *pen,
                                       uint32_t vocab)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const PickRow r = rows[blockIdx.x];
    float *row = logits + (size_t)blockIdx.x * vocab;
    const bool rep = r.repetition != 1.0f;
    for (uint32_t j = threadIdx.x; j < r.pen_count; j += blockDim.x) {
        const PenEntry e = pen[r.pen_first + j];
        if (e.id < 0 || (uint32_t)e.id >= vocab)
            continue;
        float x = row[e.id];
        /* each operation rounded on its own (no fused multiply-add), as the CPU's */
        if (rep)
            x = x > 0.0f ? __fdiv_rn(x, r.repetition) : __fmul_rn(x, r.repetition);
        if (e.count) {
            x = __fsub_rn(x, __fmul_rn(r.frequency, (float)e.count));
            x = __fsub_rn(x, r.presence);
        }
        row[e.id] = x;
    }
}

cudaError_t k_apply_penalties(float *logits, const PickRow *rows, const PenEntry *pen, uint32_t R,
                              uint32_t vocab, cudaStream_t s)
{
    if (R == 0)
        return cudaSuccess;
    LAUNCH(apply_penalties_kernel, R, 256, 0, s, logits, rows, pen, vocab);
    return cudaGetLastError();
}

/* ---- top_logprobs ------------------------------------------------------------------------ */

/* Row r's top_k filter of top_logprobs tokens (at temperature 1, nothing else): its cut
 * is where the most likely top_logprobs end. */
__global__ void top_rows_kernel(PickRow *out, const PickRow *rows, uint32_t R)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R)
        return;
    PickRow t = {};
    t.temperature = 1.0f;
    t.top_k = rows[r].top_logprobs;
    t.top_p = 1.0f;
    t.repetition = 1.0f;
    out[r] = t;
}

#define TOP_SLICES 16u

/* The tokens row r's cut keeps, gathered (slices of the row a block each). */
__global__ void top_gather_kernel(TopEntry *out, uint32_t *counts, const PickRow *rows,
                                  const PickCut *cuts, const float *logits, uint32_t vocab)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t r = blockIdx.y, n = rows[r].top_logprobs;
    if (n == 0)
        return;
    const uint32_t per = (vocab + TOP_SLICES - 1) / TOP_SLICES, lo = blockIdx.x * per;
    const uint32_t hi = min(vocab, lo + per);
    const PickCut cut = cuts[r];
    const float *row = logits + (size_t)r * vocab;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float l = row[i];
        if (!isfinite(l) || !(l > cut.t || (l == cut.t && (int32_t)i <= cut.id_max)))
            continue;
        uint32_t k = atomicAdd(&counts[r], 1u);
        if (k < GPT_TOP_MAX)
            out[(size_t)r * GPT_TOP_MAX + k] = TopEntry{(int32_t)i, l};
    }
}

size_t k_top_logprobs_scratch_bytes(uint32_t R)
{
    return (size_t)R * (sizeof(PickRow) + sizeof(PickCut)) + 256 + k_pick_cuts_scratch_bytes(R);
}

cudaError_t k_top_logprobs(TopEntry *out, uint32_t *counts, const PickRow *rows, const float *logits,
                           uint32_t R, uint32_t vocab, void *scratch, cudaStream_t s)
{
    if (R == 0)
        return cudaSuccess;
    unsigned char *at = static_cast<unsigned char *>(scratch);
    PickRow *top_rows = reinterpret_cast<PickRow *>(at);
    at += (size_t)R * sizeof(PickRow);
    PickCut *cuts = reinterpret_cast<PickCut *>(at);
    at += (size_t)R * sizeof(PickCut);
    at = reinterpret_cast<unsigned char *>(((uintptr_t)at + 255) & ~(uintptr_t)255);
    cudaError_t e = cudaMemsetAsync(counts, 0, R * sizeof(uint32_t), s);
    if (e != cudaSuccess)
        return e;
    LAUNCH(top_rows_kernel, (R + 255) / 256, 256, 0, s, top_rows, rows, R);
    if ((e = k_pick_cuts(cuts, top_rows, logits, R, vocab, at, s)) != cudaSuccess)
        return e;
    LAUNCH(top_gather_kernel, dim3(TOP_SLICES, R), 256, 0, s, out, counts, rows, cuts, logits, vocab);
    return cudaGetLastError();
}

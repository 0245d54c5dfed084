/* The cutoffs of the rows' top_k, top_p and min_p for k_pick_rows (k_sample.cu): which
 * tokens a draw keeps.  The CPU sampler's order (sampler.c) is logit descending, then id
 * ascending; top_k keeps its first k, top_p the shortest prefix of what top_k kept whose
 * weight reaches top_p of that set's weight (weights e^((l - max) / temperature)), and
 * min_p those of weight at least min_p (the best weighs 1).  All three keep a prefix of
 * the order, so the cut is one place in it: (t, id_max), a token kept when its logit is
 * above t, or equal to t with an id up to id_max.
 *
 * One block a row.  A logit becomes a 32-bit key whose unsigned order is the logits'
 * (NaN lowest: never kept); top_k's boundary key is found by a radix select over the
 * keys' bytes (4 passes: a histogram of the next byte among the keys that share the
 * bytes found so far, then the byte where the count from the top reaches what is left
 * of k), top_p's by the same select over weight instead of count.  Weights are summed
 * in fixed point (2^-40), so the sums are exact and the cut does not depend on the
 * order of additions.  Where the boundary falls inside a run of equal logits, the ids
 * that stay are found by bisection (a pass each; equal logits are rare).  Histograms
 * are added to once per group of lanes with the same byte (match, then a warp reduce),
 * which keeps shared-memory atomics from piling onto the few bytes most logits share. */
#include <float.h>
#include <stdint.h>

#include "device_util.cuh"

#define CUT_THREADS 1024u
#define MASS_ONE 1099511627776.0f /* 2^40: a weight of 1 in fixed point */

static __device__ __forceinline__ uint32_t order_key(float l)
{
    if (l != l)
        return 0u; /* NaN: below every number */
    uint32_t b = __float_as_uint(l);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static __device__ __forceinline__ float key_logit(uint32_t k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

static __device__ __forceinline__ uint64_t mass_of(float l, float max, float inv_t)
{
    return (uint64_t)(__expf((l - max) * inv_t) * MASS_ONE);
}

static __device__ uint32_t block_sum_u32(uint32_t v)
{
    __shared__ uint32_t s[32];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = __reduce_add_sync(0xffffffffu, v);
    if (lane == 0)
        s[warp] = v;
    __syncthreads();
    v = lane < (blockDim.x >> 5) ? s[lane] : 0u;
    v = __reduce_add_sync(0xffffffffu, v);
    __syncthreads();
    return v;
}

static __device__ uint64_t block_sum_u64(uint64_t v)
{
    __shared__ unsigned long long s[32];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0)
        s[warp] = v;
    __syncthreads();
    v = lane < (blockDim.x >> 5) ? s[lane] : 0ull;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    return v;
}

static __device__ float block_max_f(float v)
{
    __shared__ float s[32];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0)
        s[warp] = v;
    __syncthreads();
    v = lane < (blockDim.x >> 5) ? s[lane] : -INFINITY;
    v = warp_max(v);
    __syncthreads();
    return v;
}

/* Every lane of the warp calls: those with `in` add (1, w) to bin `bin` of the count and
 * weight histograms, once per group of lanes with the same bin.  w < 2^40 + 1. */
static __device__ __forceinline__ void hist_add(uint32_t *count, unsigned long long *mass, bool in,
                                                uint32_t bin, uint64_t w)
{
    unsigned act = __ballot_sync(0xffffffffu, in);
    if (!in)
        return;
    unsigned peers = __match_any_sync(act, bin);
    uint32_t hi = __reduce_add_sync(peers, (uint32_t)(w >> 20));
    uint32_t lo = __reduce_add_sync(peers, (uint32_t)(w & 0xFFFFFu));
    if ((threadIdx.x & 31) == (uint32_t)(__ffs(peers) - 1)) {
        atomicAdd(&count[bin], (uint32_t)__popc(peers));
        if (mass)
            atomicAdd(&mass[bin], ((unsigned long long)hi << 20) + lo);
    }
}

/* The tokens a select looks at: those kept so far, (key > k) or (key == k and id <= id). */
struct KeptSet {
    uint32_t key;
    int32_t id;
};

static __device__ __forceinline__ bool in_set(KeptSet s, uint32_t key, uint32_t i)
{
    return key > s.key || (key == s.key && (int32_t)i <= s.id);
}

/* The ids kept among the set's tokens of key k: the lowest `need` of them (need < all
 * of them), by bisection on the id. */
static __device__ int32_t lowest_ids(const float *l, uint32_t vocab, KeptSet s, uint32_t k, uint32_t need)
{
    uint32_t lo = 0, hi = vocab - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2, c = 0;
        for (uint32_t i = threadIdx.x; i <= mid && i < vocab; i += CUT_THREADS) {
            uint32_t key = order_key(l[i]);
            c += key == k && in_set(s, key, i);
        }
        if (block_sum_u32(c) >= need)
            hi = mid;
        else
            lo = mid + 1;
    }
    return (int32_t)lo;
}

/* Within set s, the shortest prefix of the order that holds `want` of count (by_mass
 * false) or of weight (true): the set it leaves.  The whole set when it holds less. */
static __device__ KeptSet select_prefix(const float *l, uint32_t vocab, KeptSet s, bool by_mass,
                                        uint64_t want, float max, float inv_t)
{
    __shared__ uint32_t count[256];
    __shared__ unsigned long long mass[256];
    __shared__ uint32_t s_digit, s_found, s_eq;
    __shared__ unsigned long long s_rem;
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint32_t prefix = 0;
    uint64_t rem = want;
    for (int shift = 24; shift >= 0; shift -= 8) {
        const uint32_t hi_mask = shift == 24 ? 0u : 0xFFFFFFFFu << (shift + 8);
        for (uint32_t b = threadIdx.x; b < 256; b += CUT_THREADS) {
            count[b] = 0;
            mass[b] = 0;
        }
        __syncthreads();
        for (uint32_t base = 0; base < vocab; base += CUT_THREADS) {
            uint32_t i = base + threadIdx.x;
            float v = i < vocab ? l[i] : NAN;
            uint32_t key = order_key(v);
            bool in = key != 0 && in_set(s, key, i) && (key & hi_mask) == prefix;
            hist_add(count, by_mass ? mass : nullptr, in, (key >> shift) & 255u,
                     by_mass && in ? mass_of(v, max, inv_t) : 0);
        }
        __syncthreads();
        if (warp == 0) { /* lane j holds bins 255 - 8j .. 248 - 8j, from the top */
            uint64_t part[8], sum = 0;
            for (int q = 0; q < 8; q++) {
                uint32_t b = 255u - 8u * lane - q;
                part[q] = by_mass ? mass[b] : count[b];
                sum += part[q];
            }
            uint64_t incl = sum;
            for (int o = 1; o < 32; o <<= 1) {
                uint64_t v = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= (uint32_t)o)
                    incl += v;
            }
            uint64_t acc = incl - sum;
            unsigned who = __ballot_sync(0xffffffffu, acc < rem && incl >= rem);
            if (lane == 0)
                s_found = who != 0;
            if (who && lane == (uint32_t)(__ffs(who) - 1)) {
                for (int q = 0; q < 8; q++) {
                    if (acc + part[q] >= rem) {
                        s_digit = 255u - 8u * lane - q;
                        s_rem = rem - acc;
                        s_eq = count[s_digit];
                        break;
                    }
                    acc += part[q];
                }
            }
        }
        __syncthreads();
        if (!s_found)
            return s; /* the set holds less than want: all of it */
        prefix |= s_digit << shift;
        rem = s_rem;
        __syncthreads();
    }
    /* key `prefix` is where the prefix ends: rem more of count or weight among its
     * s_eq tokens, each of the same weight */
    uint32_t eq = s_eq, need = (uint32_t)rem;
    if (by_mass) {
        uint64_t w = mass_of(key_logit(prefix), max, inv_t);
        need = w ? (uint32_t)min((rem + w - 1) / w, (uint64_t)eq) : eq;
    }
    KeptSet out = {prefix, prefix == s.key ? s.id : INT32_MAX};
    if (need < eq)
        out.id = lowest_ids(l, vocab, s, prefix, need);
    return out;
}

__global__ void __launch_bounds__(CUT_THREADS) pick_cut_kernel(PickCut *cuts, const PickRow *rows,
                                                               const float *logits, uint32_t vocab)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t r = blockIdx.x;
    const PickRow row = rows[r];
    const float *l = logits + (size_t)r * vocab;
    const bool use_k = row.top_k > 0 && row.top_k < vocab;
    const bool use_p = row.top_p > 0.0f && row.top_p < 1.0f;
    const bool use_min = row.min_p > 0.0f;
    if (row.temperature <= 0.0f || !(use_k || use_p || use_min)) { /* greedy, or every token */
        if (threadIdx.x == 0)
            cuts[r] = PickCut{-INFINITY, -1};
        return;
    }
    float max = -INFINITY;
    for (uint32_t i = threadIdx.x; i < vocab; i += CUT_THREADS)
        max = l[i] == l[i] ? fmaxf(max, l[i]) : max;
    max = block_max_f(max);
    const float inv_t = 1.0f / row.temperature;
    KeptSet s = {0u, -1}; /* every number (key > 0: not NaN) */
    if (use_k)
        s = select_prefix(l, vocab, s, false, row.top_k, max, inv_t);
    if (use_p) {
        uint64_t total = 0;
        for (uint32_t i = threadIdx.x; i < vocab; i += CUT_THREADS) {
            uint32_t key = order_key(l[i]);
            if (key != 0 && in_set(s, key, i))
                total += mass_of(l[i], max, inv_t);
        }
        total = block_sum_u64(total);
        uint64_t want = (uint64_t)ceil((double)row.top_p * (double)total);
        s = select_prefix(l, vocab, s, true, want > 0 ? want : 1, max, inv_t);
    }
    PickCut cut = s.key ? PickCut{key_logit(s.key), s.id} : PickCut{-INFINITY, -1};
    if (use_min) { /* weight >= min_p: logit >= max + temperature ln(min_p) */
        float t = max + row.temperature * __logf(row.min_p);
        if (t > cut.t)
            cut = PickCut{t, INT32_MAX};
    }
    if (threadIdx.x == 0)
        cuts[r] = cut;
}

cudaError_t k_pick_cuts(PickCut *cuts, const PickRow *rows, const float *logits, uint32_t R,
                        uint32_t vocab, cudaStream_t s)
{
    if (vocab == 0 || R == 0)
        return cudaErrorInvalidValue;
    LAUNCH(pick_cut_kernel, R, CUT_THREADS, 0, s, cuts, rows, logits, vocab);
    return cudaGetLastError();
}

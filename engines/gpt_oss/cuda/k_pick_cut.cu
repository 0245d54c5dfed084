/* The cutoffs of the rows' top_k, top_p and min_p for k_pick_rows (k_sample.cu): which
 * tokens a draw keeps.  The CPU sampler's order (sampler.c) is logit descending, then id
 * ascending; top_k keeps its first k, top_p the shortest prefix of what top_k kept whose
 * weight reaches top_p of that set's weight (weights e^((l - max) / temperature)), and
 * min_p those of weight at least min_p (the best weighs 1).  All three keep a prefix of
 * the order, so the cut is one place in it: (t, id_max), a token kept when its logit is
 * above t, or equal to t with an id up to id_max.
 *
 * A logit becomes a 32-bit key whose unsigned order is the logits' (NaN lowest: never
 * kept); top_k's boundary key is found by a radix select over the keys' bytes (4 passes:
 * a histogram of the next byte among the keys that share the bytes found so far, then
 * the byte where the count from the top reaches what is left of k), top_p's by the same
 * select over weight instead of count.  Weights are summed in fixed point (2^-40), so
 * the sums are exact and the cut does not depend on the order of additions.  Where the
 * boundary falls inside a run of equal logits, the ids that stay are found by bisection
 * (a pass each; equal logits are rare).
 *
 * A row's vocabulary is split in slices, a block each, so that a pass runs on many SMs:
 * each pass is a histogram kernel (every slice's histogram of the next byte, added to
 * once per group of lanes with the same byte: match, then a warp reduce, which keeps
 * shared-memory atomics from piling onto the few bytes most logits share) and a digit
 * kernel (one block a row sums the slices' histograms and takes the byte), with the
 * row's progress in a CutState in the scratch.  About 22 launches; a row without
 * filters leaves each at once. */
#include <float.h>
#include <stdint.h>

#include "device_util.cuh"

#define CUT_THREADS 256u   /* a slice's block */
#define TIE_THREADS 1024u   /* the bisection among equal logits: one block a row */
#define CUT_SLICES_MAX 64u
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


enum { USE_K = 1, USE_P = 2, USE_MIN = 4 };

/* A row's progress through its cut (scratch). */
struct CutState {
    float max, inv_t;
    uint32_t use;            /* USE_K | USE_P | USE_MIN; 0: every number is kept */
    uint32_t going;          /* the select in progress goes on (0: the set holds less than
                                it wants: all of the set stays) */
    KeptSet set;             /* kept so far */
    uint32_t prefix;         /* the key's bytes found so far */
    uint32_t eq;             /* after the last byte: the set's tokens of that key */
    unsigned long long rem;  /* count or weight still wanted from the key's bytes down */
};

struct CutScratch {
    CutState *state;          /* [R] */
    float *slice_max;         /* [R][S] */
    uint32_t *count;          /* [R][S][256] */
    unsigned long long *mass; /* [R][S][256] */
    unsigned long long *total; /* [R][S] */
};

static __device__ __forceinline__ void slice_of(uint32_t vocab, uint32_t S, uint32_t s, uint32_t *lo,
                                                uint32_t *hi)
{
    uint32_t per = (vocab + S - 1) / S;
    *lo = min(vocab, s * per);
    *hi = min(vocab, *lo + per);
}

__global__ void __launch_bounds__(CUT_THREADS) cut_max_kernel(CutScratch c, const PickRow *rows,
                                                             const float *logits, uint32_t vocab)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t s = blockIdx.x, r = blockIdx.y, S = gridDim.x;
    uint32_t lo, hi;
    slice_of(vocab, S, s, &lo, &hi);
    const float *l = logits + (size_t)r * vocab;
    float m = -INFINITY;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += CUT_THREADS)
        m = l[i] == l[i] ? fmaxf(m, l[i]) : m;
    m = block_max_f(m);
    if (threadIdx.x == 0)
        c.slice_max[r * S + s] = m;
}

/* The row's filters and max; a greedy row, or one without filters, is cut at once. */
__global__ void cut_init_kernel(CutScratch c, PickCut *cuts, const PickRow *rows, uint32_t vocab,
                                uint32_t S)
{
    grid_wait();
    grid_launch_next();
    const uint32_t r = blockIdx.x;
    if (threadIdx.x != 0)
        return;
    const PickRow row = rows[r];
    uint32_t use = (row.top_k > 0 && row.top_k < vocab ? USE_K : 0) |
                   (row.top_p > 0.0f && row.top_p < 1.0f ? USE_P : 0) | (row.min_p > 0.0f ? USE_MIN : 0);
    if (row.temperature <= 0.0f)
        use = 0;
    float m = -INFINITY;
    for (uint32_t s = 0; s < S; s++)
        m = fmaxf(m, c.slice_max[r * S + s]);
    CutState st = {m, use ? 1.0f / row.temperature : 0.0f, use, 1u, {0u, -1}, 0u, 0u, row.top_k};
    c.state[r] = st;
    if (!use)
        cuts[r] = PickCut{-INFINITY, -1};
}

/* One pass of a select (by_mass: top_p's, else top_k's): every slice's histogram of the
 * byte at shift among the set's keys that share the bytes found so far. */
__global__ void __launch_bounds__(CUT_THREADS) cut_hist_kernel(CutScratch c, const float *logits,
                                                              uint32_t vocab, bool by_mass, int shift)
{
    grid_wait();
    grid_launch_next();
    const uint32_t s = blockIdx.x, r = blockIdx.y, S = gridDim.x;
    const CutState st = c.state[r];
    if (!(st.use & (by_mass ? USE_P : USE_K)) || !st.going)
        return;
    __shared__ uint32_t count[256];
    __shared__ unsigned long long mass[256];
    for (uint32_t b = threadIdx.x; b < 256; b += CUT_THREADS) {
        count[b] = 0;
        mass[b] = 0;
    }
    __syncthreads();
    uint32_t lo, hi;
    slice_of(vocab, S, s, &lo, &hi);
    const float *l = logits + (size_t)r * vocab;
    const uint32_t hi_mask = shift == 24 ? 0u : 0xFFFFFFFFu << (shift + 8);
    for (uint32_t base = lo; base < hi; base += CUT_THREADS) {
        uint32_t i = base + threadIdx.x;
        float v = i < hi ? l[i] : NAN;
        uint32_t key = order_key(v);
        bool in = key != 0 && in_set(st.set, key, i) && (key & hi_mask) == st.prefix;
        hist_add(count, by_mass ? mass : nullptr, in, (key >> shift) & 255u,
                 by_mass && in ? mass_of(v, st.max, st.inv_t) : 0);
    }
    __syncthreads();
    size_t at = ((size_t)r * S + s) * 256;
    for (uint32_t b = threadIdx.x; b < 256; b += CUT_THREADS) {
        c.count[at + b] = count[b];
        if (by_mass)
            c.mass[at + b] = mass[b];
    }
}

/* The same pass's byte: the slices' histograms summed, then the byte where the count or
 * weight from the top reaches what is left.  top_p's first pass first sets what it wants:
 * top_p of the set's weight. */
__global__ void __launch_bounds__(256) cut_digit_kernel(CutScratch c, const PickRow *rows, uint32_t S,
                                                        bool by_mass, int shift)
{
    grid_wait();
    grid_launch_next();
    const uint32_t r = blockIdx.x, b = threadIdx.x, lane = b & 31, warp = b >> 5;
    CutState *stp = c.state + r;
    const CutState st = *stp;
    if (!(st.use & (by_mass ? USE_P : USE_K)) || !st.going)
        return;
    __shared__ uint32_t count[256];
    __shared__ unsigned long long mass[256];
    __shared__ unsigned long long s_total;
    uint32_t cs = 0;
    unsigned long long ms = 0;
    for (uint32_t s = 0; s < S; s++) {
        size_t at = ((size_t)r * S + s) * 256 + b;
        cs += c.count[at];
        if (by_mass)
            ms += c.mass[at];
    }
    count[b] = cs;
    mass[b] = ms;
    if (b == 0) {
        unsigned long long t = 0;
        for (uint32_t s = 0; by_mass && shift == 24 && s < S; s++)
            t += c.total[r * S + s];
        s_total = t;
    }
    __syncthreads();
    if (warp != 0)
        return;
    unsigned long long rem = st.rem;
    if (by_mass && shift == 24) {
        unsigned long long want = (unsigned long long)ceil((double)rows[r].top_p * (double)s_total);
        rem = want > 0 ? want : 1;
    }
    /* lane j holds bins 255 - 8j .. 248 - 8j, from the top */
    unsigned long long part[8], sum = 0;
    for (int q = 0; q < 8; q++) {
        uint32_t bin = 255u - 8u * lane - q;
        part[q] = by_mass ? mass[bin] : count[bin];
        sum += part[q];
    }
    unsigned long long incl = sum;
    for (int o = 1; o < 32; o <<= 1) {
        unsigned long long v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= (uint32_t)o)
            incl += v;
    }
    unsigned long long acc = incl - sum;
    unsigned who = __ballot_sync(0xffffffffu, acc < rem && incl >= rem);
    if (!who) { /* the set holds less than it wants: all of it */
        if (lane == 0)
            stp->going = 0;
        return;
    }
    if (lane != (uint32_t)(__ffs(who) - 1))
        return;
    for (int q = 0; q < 8; q++) {
        if (acc + part[q] >= rem) {
            uint32_t d = 255u - 8u * lane - q;
            stp->prefix = st.prefix | d << shift;
            stp->rem = rem - acc;
            stp->eq = count[d];
            return;
        }
        acc += part[q];
    }
}

/* The select's end: the key found is where the prefix ends, with rem more of count or
 * weight among its eq tokens (each of the same weight): the lowest ids of those, by
 * bisection when not all of them.  Then the next select starts from the new set. */
__global__ void __launch_bounds__(TIE_THREADS) cut_ties_kernel(CutScratch c, const float *logits,
                                                              uint32_t vocab, bool by_mass)
{
    grid_wait();
    grid_launch_next();
    const uint32_t r = blockIdx.x;
    CutState *stp = c.state + r;
    const CutState st = *stp;
    if (!(st.use & (by_mass ? USE_P : USE_K)))
        return;
    KeptSet out = st.set;
    if (st.going) {
        const uint32_t k = st.prefix;
        uint32_t eq = st.eq, need = (uint32_t)min(st.rem, (unsigned long long)eq);
        if (by_mass) {
            uint64_t w = mass_of(key_logit(k), st.max, st.inv_t);
            need = w ? (uint32_t)min((st.rem + w - 1) / w, (unsigned long long)eq) : eq;
        }
        out = KeptSet{k, k == st.set.key ? st.set.id : INT32_MAX};
        if (need < eq) { /* bisection on the id: the lowest need of them */
            const float *l = logits + (size_t)r * vocab;
            uint32_t lo = 0, hi = vocab - 1;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2, n = 0;
                for (uint32_t i = threadIdx.x; i <= mid && i < vocab; i += TIE_THREADS) {
                    uint32_t key = order_key(l[i]);
                    n += key == k && in_set(st.set, key, i);
                }
                if (block_sum_u32(n) >= need)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            out.id = (int32_t)lo;
        }
    }
    if (threadIdx.x == 0) {
        stp->set = out;
        stp->going = 1;
        stp->prefix = 0;
    }
}

/* top_p's whole: every slice's weight of the set. */
__global__ void __launch_bounds__(CUT_THREADS) cut_total_kernel(CutScratch c, const float *logits,
                                                               uint32_t vocab)
{
    grid_wait();
    grid_launch_next();
    const uint32_t s = blockIdx.x, r = blockIdx.y, S = gridDim.x;
    const CutState st = c.state[r];
    if (!(st.use & USE_P))
        return;
    uint32_t lo, hi;
    slice_of(vocab, S, s, &lo, &hi);
    const float *l = logits + (size_t)r * vocab;
    uint64_t t = 0;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += CUT_THREADS) {
        uint32_t key = order_key(l[i]);
        if (key != 0 && in_set(st.set, key, i))
            t += mass_of(l[i], st.max, st.inv_t);
    }
    t = block_sum_u64(t);
    if (threadIdx.x == 0)
        c.total[r * S + s] = t;
}

/* The cut: the set's end, or min_p's where that is further up. */
__global__ void cut_finish_kernel(CutScratch c, PickCut *cuts, const PickRow *rows)
{
    grid_wait();
    grid_launch_next();
    const uint32_t r = blockIdx.x;
    const CutState st = c.state[r];
    if (threadIdx.x != 0 || !st.use)
        return;
    PickCut cut = st.set.key ? PickCut{key_logit(st.set.key), st.set.id} : PickCut{-INFINITY, -1};
    if (st.use & USE_MIN) { /* weight >= min_p: logit >= max + temperature ln(min_p) */
        float t = st.max + rows[r].temperature * __logf(rows[r].min_p);
        if (t > cut.t)
            cut = PickCut{t, INT32_MAX};
    }
    cuts[r] = cut;
}

/* Slices a row for R rows: about eight blocks an SM in all. */
static uint32_t cut_slices(uint32_t R)
{
    uint32_t s = (1056 + R - 1) / R;
    return s < 1 ? 1 : s > CUT_SLICES_MAX ? CUT_SLICES_MAX : s;
}

size_t k_pick_cuts_scratch_bytes(uint32_t R)
{
    size_t slices = (size_t)R * cut_slices(R);
    return R * sizeof(CutState) + slices * (sizeof(float) + 256 * (sizeof(uint32_t) + 8) + 8) + 64;
}

cudaError_t k_pick_cuts(PickCut *cuts, const PickRow *rows, const float *logits, uint32_t R,
                        uint32_t vocab, void *scratch, cudaStream_t s)
{
    if (vocab == 0 || R == 0)
        return cudaErrorInvalidValue;
    const uint32_t S = cut_slices(R);
    const size_t RS = (size_t)R * S;
    unsigned char *at = static_cast<unsigned char *>(scratch);
    CutScratch c;
    c.mass = reinterpret_cast<unsigned long long *>(at); /* 8-byte aligned first */
    at += RS * 256 * 8;
    c.total = reinterpret_cast<unsigned long long *>(at);
    at += RS * 8;
    c.state = reinterpret_cast<CutState *>(at);
    at += R * sizeof(CutState);
    c.count = reinterpret_cast<uint32_t *>(at);
    at += RS * 256 * sizeof(uint32_t);
    c.slice_max = reinterpret_cast<float *>(at);
    const dim3 grid(S, R);
    LAUNCH(cut_max_kernel, grid, CUT_THREADS, 0, s, c, rows, logits, vocab);
    LAUNCH(cut_init_kernel, R, 32, 0, s, c, cuts, rows, vocab, S);
    for (int pass = 0; pass < 2; pass++) { /* top_k, then top_p over what it kept */
        bool by_mass = pass == 1;
        if (by_mass)
            LAUNCH(cut_total_kernel, grid, CUT_THREADS, 0, s, c, logits, vocab);
        for (int shift = 24; shift >= 0; shift -= 8) {
            LAUNCH(cut_hist_kernel, grid, CUT_THREADS, 0, s, c, logits, vocab, by_mass, shift);
            LAUNCH(cut_digit_kernel, R, 256, 0, s, c, rows, S, by_mass, shift);
        }
        LAUNCH(cut_ties_kernel, R, TIE_THREADS, 0, s, c, logits, vocab, by_mass);
    }
    LAUNCH(cut_finish_kernel, R, 32, 0, s, c, cuts, rows);
    return cudaGetLastError();
}

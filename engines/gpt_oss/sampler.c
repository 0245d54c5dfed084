/* The token sampler of the gpt-oss engine: see sampler.h for the order of a step and
 * the choices made where the ABI is silent.
 *
 * How a step stays cheap over a vocabulary of 201088.  Every pass over the vocabulary
 * is a plain loop that the compiler can vectorise: the max works on the bits of the
 * floats, and the weights w = e^((logit - max) / temperature) come from exp_neg, an
 * inline expf (no libm call), into a buffer that is summed in double with four
 * accumulators.  Nothing sorts the vocabulary:
 *   - top_k takes the k best with a bounded heap in one pass (k <= 1024; a larger k
 *     gathers every finite logit and runs a quickselect, linear in expectation);
 *   - top_p without top_k gathers only the tokens whose weight can matter: a floor
 *     theta such that the tokens below it weigh at most (1 - top_p) S / 2 together (S
 *     the total weight), found from the max and the weight of each block of 256 (see
 *     nucleus_floor; (1 - top_p) S / (2n) always qualifies), so that the tokens at or
 *     above it, a prefix of the order taken by a logit threshold, hold more than
 *     top_p S; over that (usually small) set a quickselect weighted by mass finds the
 *     nucleus, the shortest prefix of the order whose mass reaches top_p S, again
 *     linear in expectation;
 *   - the draw walks blocks of 256 by their sums and then one block.
 * The order of tokens is logit descending, then id ascending. */
#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* NaN and infinities are handled on purpose (see sampler.h): IEEE semantics needed. */
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "sampler.c must not be built with -ffast-math or -ffinite-math-only"
#endif

/* vLLM's _SAMPLING_EPS: a temperature below it samples greedily. */
#define SAMPLING_EPS 1e-5f

/* state[] per token: the low 31 bits count the generated occurrences, the top bit marks
 * the prompt. */
#define STATE_PROMPT 0x80000000u
#define STATE_COUNT 0x7fffffffu

/* top_k up to this many goes through a heap, above through a quickselect. */
#define HEAP_TOP_K_MAX 1024u

/* Tokens per block of the weight passes and of the draw. */
#define BLOCK 256u

typedef struct cand {
    float l; /* penalised logit: the order */
    float w; /* weight e^((l - max) / temperature): the mass */
    int32_t id;
} cand;

struct gpt_sampler {
    gpt_sampler_params p;
    uint32_t vocab;
    bool greedy, use_top_k, use_top_p, use_min_p, want_logprobs;
    float inv_t;
    uint64_t rng[4];    /* xoshiro256** */
    uint32_t *state;    /* NULL when no penalty is on */
    int32_t *seen;      /* the distinct ids with state != 0, in the order first seen */
    uint32_t n_seen;
    cand *cands;        /* top_k or top_p: the candidates (top_k of them for a heap, else
                           up to vocab) */
    float *weights;     /* sampling without top_k and top_p: every token's weight */
    float *block_max;   /* the max logit of each block of BLOCK tokens, this step */
    double *block_mass; /* top_p without top_k: the weight of each block, this step */
};

/* ---- random stream ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* A uniform double in [0, 1) from the top 53 bits. */
static double uniform01(uint64_t s[4])
{
    return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53;
}

/* ---- create / free ------------------------------------------------------------------ */

/* Records a token of the prompt (for the repetition penalty) or a generated one. */
static void mark(gpt_sampler *s, int32_t id, bool in_prompt)
{
    uint32_t st = s->state[id];
    if (st == 0)
        s->seen[s->n_seen++] = id;
    if (in_prompt)
        st |= STATE_PROMPT;
    else if ((st & STATE_COUNT) != STATE_COUNT)
        st++; /* a count saturates instead of spilling into the prompt bit */
    s->state[id] = st;
}

static const char *check_params(const gpt_sampler_params *p, uint32_t vocab)
{
    if (!p)
        return "no sampler parameters were given";
    if (vocab == 0 || vocab > (uint32_t)INT32_MAX)
        return "the vocabulary size must be between 1 and 2147483647";
    if (!isfinite(p->temperature) || p->temperature < 0.0f)
        return "temperature must be a finite number >= 0";
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return "top_p must be in (0, 1]";
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return "min_p must be in [0, 1]";
    if (!isfinite(p->repetition_penalty) || !(p->repetition_penalty > 0.0f))
        return "repetition_penalty must be a finite number > 0";
    /* vLLM's range (and OpenAI's) for the two additive penalties. */
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return "presence_penalty must be in [-2, 2]";
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return "frequency_penalty must be in [-2, 2]";
    if (p->top_logprobs > GPT_SAMPLER_MAX_TOP_LOGPROBS)
        return "top_logprobs must be at most 20";
    return NULL;
}

gpt_sampler *gpt_sampler_create(const gpt_sampler_params *p, uint32_t vocab,
                                const int32_t *prompt, uint32_t prompt_len, const char **why)
{
    const char *bad = check_params(p, vocab);
    if (bad) {
        if (why)
            *why = bad;
        return NULL;
    }
    gpt_sampler *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->p = *p;
    s->vocab = vocab;
    s->greedy = p->temperature < SAMPLING_EPS;
    s->inv_t = s->greedy ? 1.0f : 1.0f / p->temperature;
    s->use_top_k = p->top_k > 0 && p->top_k < vocab;
    s->use_top_p = p->top_p < 1.0f;
    s->use_min_p = p->min_p > 0.0f;
    s->want_logprobs = p->logprobs || p->top_logprobs > 0;
    s->block_max = malloc(((size_t)vocab + BLOCK - 1) / BLOCK * sizeof *s->block_max);
    if (!s->block_max)
        goto oom;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x); /* never all zero: splitmix64 is a bijection of a counter */

    bool rep = p->repetition_penalty != 1.0f;
    if (rep || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
        s->state = calloc(vocab, sizeof *s->state);
        s->seen = malloc((size_t)vocab * sizeof *s->seen);
        if (!s->state || !s->seen)
            goto oom;
        if (rep && prompt) {
            for (uint32_t i = 0; i < prompt_len; i++) {
                if (prompt[i] >= 0 && (uint32_t)prompt[i] < vocab)
                    mark(s, prompt[i], true);
            }
        }
    }
    if (!s->greedy && s->use_top_p && !s->use_top_k) {
        s->block_mass = malloc(((size_t)vocab + BLOCK - 1) / BLOCK * sizeof *s->block_mass);
        if (!s->block_mass)
            goto oom;
    }
    if (!s->greedy && (s->use_top_k || s->use_top_p)) {
        size_t room = s->use_top_k && p->top_k <= HEAP_TOP_K_MAX ? p->top_k : vocab;
        s->cands = malloc(room * sizeof *s->cands);
        if (!s->cands)
            goto oom;
    } else if (!s->greedy) {
        s->weights = malloc((size_t)vocab * sizeof *s->weights);
        if (!s->weights)
            goto oom;
    }
    return s;
oom:
    gpt_sampler_free(s);
    if (why)
        *why = "out of memory for the sampler";
    return NULL;
}

void gpt_sampler_free(gpt_sampler *s)
{
    if (!s)
        return;
    free(s->state);
    free(s->seen);
    free(s->cands);
    free(s->weights);
    free(s->block_max);
    free(s->block_mass);
    free(s);
}

/* ---- passes over the vocabulary --------------------------------------------------- */

static void apply_penalties(const gpt_sampler *s, float *logits)
{
    const float rep = s->p.repetition_penalty, freq = s->p.frequency_penalty,
                pres = s->p.presence_penalty;
    const bool use_rep = rep != 1.0f;
    for (uint32_t j = 0; j < s->n_seen; j++) {
        int32_t id = s->seen[j];
        uint32_t st = s->state[id], count = st & STATE_COUNT;
        float x = logits[id];
        if (use_rep) /* Hugging Face and vLLM: logit > 0 divided, else multiplied */
            x = x > 0.0f ? x / rep : x * rep;
        if (count) { /* vLLM's order: frequency, then presence */
            x -= freq * (float)count;
            x -= pres;
        }
        logits[id] = x;
    }
}

/* The float's bits as an unsigned number in the same order as the floats (NaN aside). */
static inline uint32_t order_key(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u ^ ((0u - (u >> 31)) | 0x80000000u);
}

static inline float from_order_key(uint32_t k)
{
    uint32_t u = (k & 0x80000000u) ? k ^ 0x80000000u : ~k;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The max of the logits and of each block of them (into block_max), after NaN became
 * -inf and +inf FLT_MAX (a second pass, only when there is such a logit).  -inf when
 * none is finite. */
static float clean_max(float *logits, uint32_t n, float *block_max)
{
    uint32_t top = 0, odd = 0;
    for (uint32_t i = 0, b = 0; i < n; i += BLOCK, b++) {
        const uint32_t len = n - i < BLOCK ? n - i : BLOCK;
        const float *l = logits + i;
        uint32_t btop = 0;
        for (uint32_t j = 0; j < len; j++) {
            uint32_t u;
            memcpy(&u, &l[j], sizeof u);
            uint32_t k = order_key(l[j]);
            btop = k > btop ? k : btop;
            odd |= ((u & 0x7fffffffu) > 0x7f800000u) | (u == 0x7f800000u); /* NaN, +inf */
        }
        block_max[b] = from_order_key(btop);
        top = btop > top ? btop : top;
    }
    if (!odd)
        return from_order_key(top);
    float max = -INFINITY;
    for (uint32_t i = 0, b = 0; i < n; i += BLOCK, b++) {
        const uint32_t len = n - i < BLOCK ? n - i : BLOCK;
        float bmax = -INFINITY;
        for (uint32_t j = i; j < i + len; j++) {
            float x = logits[j];
            if (x != x)
                x = logits[j] = -INFINITY;
            else if (x > FLT_MAX)
                x = logits[j] = FLT_MAX;
            bmax = x > bmax ? x : bmax;
        }
        block_max[b] = bmax;
        max = bmax > max ? bmax : max;
    }
    return max;
}

/* e^x for x <= 0, -inf included (never NaN: the logits are cleaned first), with a
 * relative error below 1e-7, as good as libm's expf but inline and branch-free so that
 * a pass over the vocabulary vectorises: Cephes' expf, a Cody-Waite reduction to r in
 * [-ln2/2, ln2/2] and a polynomial.  Below -87 (where e^x < 2^-125, nothing next to
 * the best token's 1) it gives 0.  Checked over every float in [-87, 0]: a relative
 * error of at most 8.2e-8, never above 1, e^0 exactly 1, and monotone.  The
 * selections use the bits (x <= 0: a larger magnitude is a larger unsigned number), as
 * a float compare would keep the loop from vectorising under -ftrapping-math. */
static inline float exp_neg(float x)
{
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    const uint32_t under = 0u - (uint32_t)(xb > 0xC2AE0000u); /* x < -87.0f */
    xb = (xb & ~under) | (0xC2AE0000u & under);
    float xc;
    memcpy(&xc, &xb, sizeof xc);
    /* k = round(x / ln2), in the low bits of a float near 1.5 * 2^23 */
    float kf = xc * 1.44269504088896341f + 12582912.0f;
    uint32_t kbits;
    memcpy(&kbits, &kf, sizeof kbits);
    kf -= 12582912.0f;
    const uint32_t scale_bits = (kbits - 0x4B400000u + 127u) << 23; /* 2^k, k in -126..0 */
    float r = xc - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * (r * r) + r + 1.0f;
    float scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    y *= scale;
    uint32_t yb;
    memcpy(&yb, &y, sizeof yb);
    yb &= ~under;
    memcpy(&y, &yb, sizeof y);
    return y;
}

static void weights_block(const float *restrict l, uint32_t n, float max, float inv_t,
                          float *restrict w)
{
    for (uint32_t i = 0; i < n; i++)
        w[i] = exp_neg((l[i] - max) * inv_t);
}

/* Weights below thr (>= 0) become 0: on the bits, which order non-negative floats. */
static void threshold_block(float *w, uint32_t n, float thr)
{
    uint32_t tb;
    memcpy(&tb, &thr, sizeof tb);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &w[i], sizeof b);
        b &= 0u - (uint32_t)(b >= tb);
        memcpy(&w[i], &b, sizeof b);
    }
}

/* A sum in double with four accumulators: always the same for the same weights. */
static double sum_block(const float *w, uint32_t n)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a0 += (double)w[i];
        a1 += (double)w[i + 1];
        a2 += (double)w[i + 2];
        a3 += (double)w[i + 3];
    }
    for (; i < n; i++)
        a0 += (double)w[i];
    return (a0 + a1) + (a2 + a3);
}

/* The total weight of every token; the weights go to w_out and the weight of each
 * block to block_mass, when given. */
static double total_weight(const float *logits, uint32_t n, float max, float inv_t,
                           float *w_out, double *block_mass)
{
    float tmp[BLOCK];
    double total = 0.0;
    for (uint32_t i = 0, b = 0; i < n; i += BLOCK, b++) {
        uint32_t len = n - i < BLOCK ? n - i : BLOCK;
        float *w = w_out ? w_out + i : tmp;
        weights_block(logits + i, len, max, inv_t, w);
        double bsum = sum_block(w, len);
        if (block_mass)
            block_mass[b] = bsum;
        total += bsum;
    }
    return total;
}

/* ---- the order of tokens and selections over candidates ------------------------------ */

/* a comes before b: a higher logit, or the same logit and a lower id. */
static inline bool before(const cand *a, const cand *b)
{
    return a->l > b->l || (a->l == b->l && a->id < b->id);
}

/* The k (>= 1) first tokens of the order with a finite logit, into heap[] (room for k),
 * in heap order (the root is the last of them); returns how many (< k when fewer are
 * finite).  One pass that skips every block whose max does not beat the root, and
 * otherwise costs a compare per token that does not. */
static uint32_t heap_top(const float *logits, uint32_t n, const float *block_max, uint32_t k,
                         cand *heap)
{
    uint32_t used = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i % BLOCK == 0 && used == k && !(block_max[i / BLOCK] > heap[0].l)) {
            i += BLOCK - 1;
            continue;
        }
        const float x = logits[i];
        if (used == k ? !(x > heap[0].l) : x == -INFINITY)
            continue; /* ids ascend: an equal logit comes after the root */
        const cand c = {x, 0.0f, (int32_t)i};
        if (used < k) { /* sift up: a parent comes after its children */
            uint32_t at = used++;
            while (at > 0 && before(&heap[(at - 1) / 2], &c)) {
                heap[at] = heap[(at - 1) / 2];
                at = (at - 1) / 2;
            }
            heap[at] = c;
        } else { /* replace the root and sift down */
            uint32_t at = 0;
            for (;;) {
                uint32_t child = 2 * at + 1;
                if (child >= k)
                    break;
                if (child + 1 < k && before(&heap[child], &heap[child + 1]))
                    child++; /* the later of the two children */
                if (!before(&c, &heap[child]))
                    break;
                heap[at] = heap[child];
                at = child;
            }
            heap[at] = c;
        }
    }
    return used;
}

/* Every token whose logit is at least lmin (> -inf), with its weight, in id order;
 * blocks whose max is below lmin are skipped. */
static size_t gather(const float *logits, uint32_t n, const float *block_max, float lmin,
                     float max, float inv_t, cand *a)
{
    size_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i % BLOCK == 0 && !(block_max[i / BLOCK] >= lmin)) {
            i += BLOCK - 1;
            continue;
        }
        const float x = logits[i];
        if (x >= lmin) {
            a[m].l = x;
            a[m].w = exp_neg((x - max) * inv_t);
            a[m].id = (int32_t)i;
            m++;
        }
    }
    return m;
}

static void swap_cand(cand *a, size_t i, size_t j)
{
    cand t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* Partitions a[lo, hi) (at least 2 entries) around a median-of-three pivot: returns its
 * final index p, with a[lo, p) before it and a[p+1, hi) after it. */
static size_t partition(cand *a, size_t lo, size_t hi)
{
    size_t mid = lo + (hi - lo) / 2, last = hi - 1;
    if (before(&a[mid], &a[lo]))
        swap_cand(a, mid, lo);
    if (before(&a[last], &a[lo]))
        swap_cand(a, last, lo);
    if (before(&a[last], &a[mid]))
        swap_cand(a, last, mid);
    swap_cand(a, mid, last); /* the median is the pivot, parked at the end */
    const cand pivot = a[last];
    size_t store = lo;
    for (size_t i = lo; i < last; i++) {
        if (before(&a[i], &pivot))
            swap_cand(a, i, store++);
    }
    swap_cand(a, store, last);
    return store;
}

/* Moves the first k of a[0, m) in the order to a[0, k) (in no particular order);
 * 0 < k < m. */
static void select_first_k(cand *a, size_t m, size_t k)
{
    size_t lo = 0, hi = m;
    while (hi - lo > 1) {
        size_t p = partition(a, lo, hi);
        if (p == k || p + 1 == k)
            return;
        if (p > k)
            hi = p;
        else
            lo = p + 1;
    }
}

/* The nucleus: moves the shortest prefix (in the order) of a[0, m) whose mass reaches
 * `need` (> 0) to the front and returns its length (at least 1).  When rounding leaves
 * the whole set short of `need`, it keeps the whole set. */
static size_t select_mass(cand *a, size_t m, double need)
{
    size_t lo = 0, hi = m;
    while (lo < hi) {
        if (hi - lo == 1)
            return lo + 1;
        size_t p = partition(a, lo, hi);
        double mass = 0.0;
        for (size_t i = lo; i < p; i++)
            mass += a[i].w;
        if (mass >= need) {
            hi = p; /* p > lo here: need > 0 */
            continue;
        }
        mass += a[p].w;
        if (mass >= need)
            return p + 1;
        need -= mass;
        lo = p + 1;
    }
    return lo;
}

/* ---- one step ----------------------------------------------------------------------- */

/* A double log-probability as a float, -inf from -FLT_MAX down (only next to logits
 * of +inf, taken as FLT_MAX). */
static float to_logprob(double v)
{
    return v <= -(double)FLT_MAX ? -INFINITY : (float)v;
}

/* A draw over every token (no top_k, no top_p) with min_p, when on, as a threshold on
 * the weights.  *all_out: the total weight before min_p, when min_p is off. */
static uint32_t draw_all(gpt_sampler *s, const float *logits, float max, uint32_t best,
                         double *all_out)
{
    const uint32_t n = s->vocab;
    float *w = s->weights;
    double total = total_weight(logits, n, max, s->inv_t, w, NULL);
    if (s->use_min_p) { /* relative to the best token, whose weight is exactly 1 */
        total = 0.0;
        for (uint32_t i = 0; i < n; i += BLOCK) {
            uint32_t len = n - i < BLOCK ? n - i : BLOCK;
            threshold_block(w + i, len, s->p.min_p);
            total += sum_block(w + i, len);
        }
    } else {
        *all_out = total;
    }
    /* walk the blocks by the same sums as the total, then one block token by token */
    const double r = uniform01(s->rng) * total;
    double acc = 0.0;
    for (uint32_t i = 0; i < n; i += BLOCK) {
        uint32_t len = n - i < BLOCK ? n - i : BLOCK;
        double bsum = sum_block(w + i, len);
        if (acc + bsum > r) {
            uint32_t last = i;
            for (uint32_t j = 0; j < len; j++) {
                if (w[i + j] > 0.0f) {
                    last = i + j;
                    acc += (double)w[i + j];
                    if (acc > r)
                        return i + j;
                }
            }
            return last; /* the block's own order of sums fell just short */
        }
        acc += bsum;
    }
    return best; /* only when rounding put r at the total: the best is always kept */
}

/* The mass of the tokens of weight below theta is at most
 *   sum over blocks b of (max weight of b < theta ? mass of b : min(mass of b, theta * size of b)).
 * Returns the largest theta (within a factor of 2^(1/8), by bisection over the blocks)
 * for which that bound stays within half of (1 - top_p) of the total, and at least
 * (1 - top_p) total / (2 n), where it holds for any weights. */
static double nucleus_floor(const gpt_sampler *s, float max, double total)
{
    const uint32_t n = s->vocab, nb = (n + BLOCK - 1) / BLOCK;
    const double budget = 0.5 * (1.0 - (double)s->p.top_p) * total;
    double lo = log(budget / (double)n), hi = 0.0; /* log theta: lo holds, hi need not */
    while (hi - lo > 0.087) {
        const double mid = 0.5 * (lo + hi), theta = exp(mid);
        double bound = 0.0;
        for (uint32_t b = 0; b < nb && bound <= budget; b++) {
            const double size = b + 1 < nb ? BLOCK : n - b * BLOCK;
            const double bmass = s->block_mass[b];
            const double bw = exp_neg((s->block_max[b] - max) * s->inv_t);
            bound += bw < theta ? bmass : fmin(bmass, theta * size);
        }
        if (bound <= budget)
            lo = mid;
        else
            hi = mid;
    }
    return exp(lo);
}

/* A draw through top_k and/or top_p, then min_p, over candidates.  *all_out: the total
 * weight of every token when it was computed. */
static uint32_t draw_filtered(gpt_sampler *s, const float *logits, float max, uint32_t best,
                              double *all_out)
{
    const uint32_t n = s->vocab;
    const float inv_t = s->inv_t;
    cand *a = s->cands;
    size_t m;
    double ref = 0.0; /* the mass top_p is a share of */
    if (s->use_top_k) {
        const uint32_t k = s->p.top_k;
        if (k <= HEAP_TOP_K_MAX) {
            m = heap_top(logits, n, s->block_max, k, a);
            for (size_t j = 0; j < m; j++)
                a[j].w = exp_neg((a[j].l - max) * inv_t);
        } else {
            m = gather(logits, n, s->block_max, -FLT_MAX, max, inv_t, a);
            if (m > k) {
                select_first_k(a, m, k);
                m = k;
            }
        }
        for (size_t j = 0; j < m; j++) /* top_p over what top_k kept, renormalised (vLLM) */
            ref += (double)a[j].w;
    } else {
        /* top_p alone: gather the tokens of weight >= theta (see the top of the file),
         * by a logit threshold rounded down */
        ref = total_weight(logits, n, max, inv_t, NULL, s->block_mass);
        *all_out = ref;
        const double theta = nucleus_floor(s, max, ref);
        const double lmin = (double)max + (double)s->p.temperature * log(theta);
        float lf = lmin < -(double)FLT_MAX ? -FLT_MAX : (float)lmin;
        if ((double)lf > lmin)
            lf = nextafterf(lf, -INFINITY);
        m = gather(logits, n, s->block_max, lf, max, inv_t, a);
    }
    if (s->use_top_p)
        m = select_mass(a, m, (double)s->p.top_p * ref);
    if (s->use_min_p) { /* relative to the best token, kept by both, of weight exactly 1 */
        size_t kept = 0;
        for (size_t j = 0; j < m; j++) {
            if (a[j].w >= s->p.min_p)
                a[kept++] = a[j];
        }
        m = kept;
    }

    double sum = 0.0;
    for (size_t j = 0; j < m; j++)
        sum += (double)a[j].w;
    const double r = uniform01(s->rng) * sum;
    double acc = 0.0;
    for (size_t j = 0; j < m; j++) {
        acc += (double)a[j].w;
        if (acc > r)
            return (uint32_t)a[j].id;
    }
    return best; /* only when rounding put r at the sum: the best is always kept */
}

/* The top_logprobs alternatives, best first. */
static void fill_top(const gpt_sampler *s, const float *logits, float max, double lse,
                     gpt_sample *out)
{
    cand top[GPT_SAMPLER_MAX_TOP_LOGPROBS];
    uint32_t used = heap_top(logits, s->vocab, s->block_max, s->p.top_logprobs, top);
    for (uint32_t i = 1; i < used; i++) { /* an insertion sort of at most 20 */
        cand c = top[i];
        uint32_t j = i;
        while (j > 0 && before(&c, &top[j - 1])) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = c;
    }
    for (uint32_t i = 0; i < used; i++) {
        float lp = to_logprob((double)top[i].l - (double)max - lse);
        if (lp == -INFINITY)
            break; /* only next to +inf logits */
        out->top_ids[i] = top[i].id;
        out->top_logprobs[i] = lp;
        out->top_count = i + 1;
    }
}

void gpt_sampler_sample(gpt_sampler *s, float *logits, gpt_sample *out)
{
    memset(out, 0, sizeof *out);
    const uint32_t n = s->vocab;
    if (s->state)
        apply_penalties(s, logits);
    const float max = clean_max(logits, n, s->block_max);

    uint32_t id;
    if (max == -INFINITY) { /* nothing finite: id 0, logprob -inf, no alternatives */
        if (!s->greedy)
            (void)xoshiro_next(s->rng); /* one number per non-greedy step, always */
        id = 0;
        if (s->want_logprobs)
            out->logprob = -INFINITY;
    } else {
        uint32_t best = 0; /* the first token at the max */
        while (s->block_max[best / BLOCK] != max)
            best += BLOCK;
        while (logits[best] != max)
            best++;
        double all = -1.0; /* the total weight of every token, when a draw computed it */
        if (s->greedy)
            id = best;
        else if (s->use_top_k || s->use_top_p)
            id = draw_filtered(s, logits, max, best, &all);
        else
            id = draw_all(s, logits, max, best, &all);
        /* the draws leave the logits as they are: the logprobs come from them */
        if (s->want_logprobs) {
            /* at temperature 1 the draw's weights are the logprob's */
            if (!(all >= 0.0 && s->inv_t == 1.0f))
                all = total_weight(logits, n, max, 1.0f, NULL, NULL);
            const double lse = log(all); /* all >= 1: the max contributes e^0 */
            out->logprob = to_logprob((double)logits[id] - (double)max - lse);
            if (s->p.top_logprobs)
                fill_top(s, logits, max, lse, out);
        }
    }
    out->id = (int32_t)id;
    if (s->state)
        mark(s, (int32_t)id, false);
}

/* ---- the penalties, for a pick elsewhere ---------------------------------------- */

bool gpt_sampler_penalizes(const gpt_sampler *s)
{
    return s->state != NULL;
}

uint32_t gpt_sampler_seen(const gpt_sampler *s, int32_t *ids, uint32_t *counts, uint32_t cap)
{
    if (!s->state)
        return 0;
    for (uint32_t j = 0; j < s->n_seen && j < cap; j++) {
        ids[j] = s->seen[j];
        counts[j] = s->state[s->seen[j]] & STATE_COUNT;
    }
    return s->n_seen;
}

void gpt_sampler_accept(gpt_sampler *s, int32_t id)
{
    if (s->state && id >= 0 && (uint32_t)id < s->vocab)
        mark(s, id, false);
}

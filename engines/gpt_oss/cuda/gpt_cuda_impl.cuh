/* What the two halves of the gpt-oss CUDA path share: the model on the GPU
 * (gpt_cuda_load.cu builds and frees it) and a sequence (gpt_cuda_run.cu runs them).
 * Nothing outside engines/gpt_oss/cuda includes this. */
#ifndef GPT_CUDA_IMPL_CUH
#define GPT_CUDA_IMPL_CUH

#include <pthread.h>

#include "../kv_pool.h"
#include "gpt_cuda.h"
#include "kernels.cuh"

#define GPT_CUDA_CHUNK 4096u     /* prompt tokens per prefill pass at most */
#define GPT_CUDA_LOGIT_ROWS 32u  /* rows of logits per lm_head pass in prefill */
#define GPT_CUDA_SPLITS_MAX 32u  /* key splits of decode attention on full layers */
#define SWIGLU_ALPHA 1.702f

/* One layer's weights in device memory. */
struct DevLayer {
    float *attn_norm, *mlp_norm;
    f16 *wqkv;      /* [(heads + 2 kv_heads) * hd][hidden]: q, k, v rows */
    float *bqkv;
    f16 *wo;        /* [hidden][heads * hd] */
    float *bo, *sinks;
    f16 *wr;        /* router [experts][hidden] */
    float *br;
    uint8_t *gu_blocks, *gu_scales; /* [E][2I][H/32][16], [E][2I][H/32] */
    float *gu_bias;                 /* [E][2I] */
    uint8_t *dn_blocks, *dn_scales; /* [E][H][I/32][16], [E][H][I/32] */
    float *dn_bias;                 /* [E][H] */
    uint32_t window;                /* 0 on full layers */
    uint32_t splits;                /* decode attention's key splits */
};

/* The scratch of one prefill pass of up to `chunk` tokens. */
struct PrefillBuf {
    int32_t *ids;
    float *x, *xf, *qkv, *moe_out, *logits; /* xf: normed fp32 (the router's input);
                                               logits: [GPT_CUDA_LOGIT_ROWS][vocab] */
    f16 *xn, *xn_lo, *attn, *attn_lo, *act; /* *_lo: with xn, attn the split fp16 of the
                                               attention block (kernels.cuh) */
    float *gemm_parts; /* k_gemm_f16's split scratch for the attention block's products */
    int32_t *eids, *rows, *slot_of;
    float *ew;
    uint32_t *counts, *offsets;
};

/* The scratch of the decode step. */
struct DecodeBuf {
    float *x, *qkv, *attn, *part, *ew, *logits;
    int32_t *eids;
    f16 *xq, *act;  /* the experts' fp16 inputs, in the operand order (kernels.cuh) */
    void *moe_down; /* k_moe_down_gemv's scratch */
};

struct gpt_cuda {
    gpt_config cfg;
    int device;
    char name[256];
    cudaStream_t stream;
    pthread_mutex_t lock;
    DevLayer *layers;
    bf16 *embed;       /* [vocab][hidden], as in the checkpoint */
    f16 *lm_head;
    float *final_norm;
    float2 *cos_sin;   /* [context][hd/2] */
    PrefillBuf pf;
    DecodeBuf dc;
    uint32_t chunk, context, sequences;
    /* the KV pool */
    uint8_t *pool;
    gpt_kv_pool ranges;
    /* the active sequence's state, which the graph reads: SeqState, then KvView[layers] */
    unsigned char *d_cur;
    gpt_cuda_seq *active;
    SeqState *h_state; /* pinned: the state read back after a step */
    int32_t *h_token;  /* pinned: a token written before a step */
    cudaGraphExec_t graph;
    bool graph_ready;
    const float *pick_src; /* the last prefill's last row of logits */
    unsigned char *pick_scratch; /* k_pick's partial results */
    /* every device allocation, for freeing and for counting */
    void **allocs;
    size_t n_allocs, cap_allocs;
    uint64_t vram;
};

struct gpt_cuda_seq {
    gpt_cuda *g;
    uint64_t off, bytes;      /* its slice of the pool */
    unsigned char *d_block;   /* SeqState then KvView[layers], at the slice's start */
    uint32_t max_tokens, pos;
    bool picked;              /* a token was picked and not yet run */
};

static inline SeqState *cur_state(const gpt_cuda *g)
{
    return reinterpret_cast<SeqState *>(g->d_cur);
}

static inline KvView *cur_kv(const gpt_cuda *g)
{
    return reinterpret_cast<KvView *>(g->d_cur + sizeof(SeqState));
}

static inline size_t state_block_bytes(const gpt_config *c)
{
    return sizeof(SeqState) + c->layers * sizeof(KvView);
}

/* Bytes of a sequence of max_tokens positions in the pool (state block and caches). */
uint64_t gpt_cuda_seq_bytes_for(const gpt_config *c, uint32_t max_tokens);
/* Writes "what: CUDA error text" into err (512 bytes) and returns INTERNAL, or
 * OOM_VRAM for cudaErrorMemoryAllocation. */
llmr_status gpt_cuda_fail(char *err, const char *what, cudaError_t e);

#endif

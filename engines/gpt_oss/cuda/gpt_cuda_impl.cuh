/* What the two halves of the gpt-oss CUDA path share: the model on the GPU
 * (gpt_cuda_load.cu builds and frees it) and the step (gpt_cuda_step.cu runs it).
 * Nothing outside engines/gpt_oss/cuda includes this. */
#ifndef GPT_CUDA_IMPL_CUH
#define GPT_CUDA_IMPL_CUH

#include "gpt_cuda.h"
#include "kernels.cuh"
#include "blas_gemm.cuh"

#define GPT_CUDA_CHUNK 4096u      /* tokens in one step at most */
#define GPT_CUDA_SPLITS_MAX 32u   /* key splits of attention for few tokens */
#define GPT_CUDA_SPLIT_ROWS 2048u /* token x split rows of the attention's split scratch */
#define SWIGLU_ALPHA 1.702f

/* One layer's weights in device memory, and its KV cache. */
struct DevLayer {
    float *attn_norm, *mlp_norm;
    f16 *wqkv;      /* [(heads + 2 kv_heads) * hd][hidden]: q, k, v rows */
    float *bqkv;
    f16 *wo;        /* [hidden][heads * hd] */
    float *bo, *sinks;
    f16 *wr;        /* router [experts][hidden] */
    float *br;
    uint8_t *gu_blocks, *gu_scales; /* [E][2I][H/32][16] (laid out: k_mxfp4_lay_out), [E][2I][H/32] */
    float *gu_bias;                 /* [E][2I] */
    uint8_t *dn_blocks, *dn_scales; /* [E][H][I/32][16], [E][H][I/32] */
    float *dn_bias;                 /* [E][H] */
    uint32_t window;                /* 0 on full layers */
    uint32_t which;                 /* its KV pool: 0 full, 1 sliding */
    KvCache kv;                     /* its K and V in that pool (kernels.cuh) */
};

/* The scratch of one step of up to `chunk` tokens and `rows` rows of logits. */
struct StepBuf {
    float *x, *xf, *qkv, *moe_out; /* xf: normed fp32 (the router's input) */
    f16 *xn, *xn_lo, *attn, *attn_lo, *act; /* *_lo: with xn, attn the split fp16 of the
                                               attention block (kernels.cuh) */
    float *gemm_parts;  /* the split scratch of the attention block's products (k_gemm_f16,
                           k_gemm_f16_wgmma) */
    float *attn_split;  /* k_attention_paged's split scratch */
    int32_t *eids, *rows, *slot_of;
    float *ew;
    uint32_t *counts, *offsets;
    float *logits;      /* [rows][vocab] */
    float *xg;          /* [rows][hidden]: the rows whose logits are wanted */
    void *pick_scratch;
    /* the one-token step's (matrix-vector kernels) */
    float *attn_f, *d_ew;
    int32_t *d_eids;
    f16 *xq, *d_act;    /* the experts' fp16 inputs, in the operand order (kernels.cuh) */
    void *moe_down;     /* k_moe_down_gemv's scratch */
    /* the step's inputs, uploaded in one copy from the pinned twin (in this order) */
    unsigned char *in, *h_in;
    size_t in_bytes;
    int32_t *ids;       /* [chunk] */
    StepToken *tok;     /* [chunk] */
    int32_t *lrows;     /* [rows]: the token of each row of logits */
    PickRow *prow;      /* [rows] */
    uint32_t *tables;   /* [tables_cap] */
    size_t tables_cap;
    PickOut *pout, *h_pout; /* [rows] */
    PenEntry *pen, *h_pen;  /* [GPT_CUDA_PEN_CAP]: the pick rows' penalty entries, and their
                               pinned twin */
    TopEntry *top, *h_top;  /* [rows][GPT_TOP_MAX]: the pick rows' top_logprobs (k_top_logprobs) */
    uint32_t *top_counts, *h_top_counts; /* [rows] */
    void *top_scratch;
};

struct gpt_cuda {
    gpt_config cfg;
    int device;
    char name[256];
    int sms;
    cudaStream_t stream;
    DevLayer *layers;
    bf16 *embed;       /* [vocab][hidden], as in the checkpoint */
    f16 *lm_head;
    float *final_norm;
    float2 *cos_sin;   /* [context][hd/2] */
    StepBuf sb;
    uint32_t chunk, rows, context;
    gpt_cuda_kv_layout kv;
    cudaGraphExec_t graph1[2]; /* the step of one decoding sequence picked on the GPU: [0]
                                  greedy or temperature only, [1] with top_k/top_p/min_p */
    bool graph1_ready;
    /* The load option "batch_invariant": a row's result never depends on what else the
     * step carries.  Every step takes the GEMM path (no one-token GEMV graph), dense
     * products never split K, attention never splits the keys, and the experts' products
     * always take the 64-row tile, so each output is one sum in one order (the tensor
     * cores' k16 steps in K order) whatever the batch. */
    bool invariant;
    /* The dense products of steps of several tokens: where the machine has cuBLAS
     * (blas_gemm.cu), QKV and the output projection from 65 rows and lm_head at any
     * rows go through it (gpt_cuda_step.cu's dense()); QKV and O of up to 64 rows on
     * Hopper through k_gemm_wgmma.cu (wgmma below); the rest, or all with
     * batch_invariant, through k_gemm.cu, as without cuBLAS or with the load option
     * "cublas": 0; dense_by says which. */
    BlasGemm *blas;
    /* QKV and the output projection of steps of up to 64 rows on Hopper (but with
     * batch_invariant): k_gemm_wgmma.cu, before cuBLAS or k_gemm.cu */
    bool wgmma;
    char dense_by[320]; /* the reason (160) and the wgmma note fit */
    /* every device allocation, for freeing and for counting */
    void **allocs;
    size_t n_allocs, cap_allocs;
    uint64_t vram;
};

/* Captures the one-token step's graph (gpt_cuda_step.cu), at the end of the load. */
llmr_status gpt_cuda_prepare(gpt_cuda *g, char *err);
/* Writes "what: CUDA error text" into err (512 bytes) and returns INTERNAL, or
 * OOM_VRAM for cudaErrorMemoryAllocation. */
llmr_status gpt_cuda_fail(char *err, const char *what, cudaError_t e);

#endif

/* The dense products of a step (QKV, the output projection, lm_head) through cuBLAS, where
 * the CUDA toolkit's libcublas (of the major version of the headers built with: 13) is on
 * the machine.  It is loaded at run time
 * (dlopen), once per process, so the plugin still needs nothing but the driver: without
 * it, or when its setup fails, the engine's own kernels (k_gemm.cu) do the work.
 *
 * A BlasGemm is one cuBLAS handle with a workspace of its own (counted in the model's
 * VRAM; cuBLAS then takes none from its own pool), owned by one model's step loop: one
 * thread uses it at a time.  cublasSetStream puts the handle back on cuBLAS's pool, so
 * the workspace is set again with each change of stream.  The products are
 * cublasGemmEx with fp16 operands and fp32 accumulation and output (CUBLAS_COMPUTE_32F),
 * as k_gemm_f16's; split fp16 A is two products into the same C, the bias a small
 * kernel after them.  cuBLAS chooses its own
 * algorithm for each shape, so its order of sums may change with the rows of a step: the
 * batch-invariant option keeps to k_gemm.cu. */
#include "blas_gemm.cuh"
#include "device_util.cuh"

#include <cublas_api.h> /* types and constants only: the functions come from dlsym */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                     const void *, const void *, cudaDataType, int, const void *,
                                     cudaDataType, int, const void *, void *, cudaDataType, int,
                                     cublasComputeType_t, cublasGemmAlgo_t);

/* cuBLAS's entry points, resolved once for the process */
static struct {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    gemm_ex_fn gemm_ex;
    char error[160]; /* why not, when the library could not be used */
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_load(void)
{
    /* the loader's path first, then the toolkit's usual place; the major version of the
     * headers this file was built with */
#define SONAME_(v) "libcublas.so." #v
#define SONAME(v) SONAME_(v)
    const char *names[] = {SONAME(CUBLAS_VER_MAJOR), "/usr/local/cuda/lib64/" SONAME(CUBLAS_VER_MAJOR)};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(blas.error, sizeof blas.error, "%s not found (%s)", names[0], dlerror());
        return;
    }
#define SYM(field, name)                                                                       \
    if (!(*(void **)&blas.field = dlsym(lib, name))) {                                         \
        snprintf(blas.error, sizeof blas.error, "%s lacks %s", names[0], name);                \
        blas.gemm_ex = NULL;                                                                   \
        dlclose(lib);                                                                          \
        return;                                                                                \
    }
    SYM(create, "cublasCreate_v2")
    SYM(destroy, "cublasDestroy_v2")
    SYM(set_stream, "cublasSetStream_v2")
    SYM(set_workspace, "cublasSetWorkspace_v2")
    SYM(gemm_ex, "cublasGemmEx")
#undef SYM
}

struct BlasGemm {
    cublasHandle_t handle;
    void *workspace;
    cudaStream_t stream; /* the handle's stream, once set (with the workspace) */
    bool on_stream;
};

BlasGemm *blas_gemm_open(char *why, size_t why_len)
{
    pthread_once(&blas_once, blas_load);
    if (!blas.gemm_ex) {
        snprintf(why, why_len, "%s", blas.error);
        return NULL;
    }
    BlasGemm *b = (BlasGemm *)calloc(1, sizeof *b);
    if (!b) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    cublasStatus_t st = blas.create(&b->handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, why_len, "cublasCreate failed (status %d)", (int)st);
        free(b);
        return NULL;
    }
    cudaError_t e = cudaMalloc(&b->workspace, BLAS_GEMM_WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* not the next launch's error */
        snprintf(why, why_len, "cuBLAS workspace: %s", cudaGetErrorString(e));
        b->workspace = NULL;
        blas_gemm_close(b);
        return NULL;
    }
    return b;
}

void blas_gemm_close(BlasGemm *b)
{
    if (!b)
        return;
    if (b->handle)
        blas.destroy(b->handle);
    if (b->workspace)
        cudaFree(b->workspace);
    free(b);
}

/* C[m][n] += bias[n] */
__global__ void add_bias_rows_kernel(float *C, const float *bias, uint32_t M, uint32_t N)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)M * N)
        C[i] += bias[i % N];
}

cudaError_t blas_gemm_f16(BlasGemm *b, float *C, const f16 *A, const f16 *A_lo, const f16 *B,
                          const float *bias, uint32_t M, uint32_t N, uint32_t K, int accumulate,
                          cudaStream_t s)
{
    if (!b || M == 0 || N == 0 || K == 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return cudaErrorInvalidValue;
    if (!b->on_stream || b->stream != s) { /* the stream, then the workspace it reset */
        if (blas.set_stream(b->handle, s) != CUBLAS_STATUS_SUCCESS) {
            b->on_stream = false;
            return cudaErrorUnknown;
        }
        /* should it fail, cuBLAS takes its own pool instead (not counted in the model's
         * VRAM) and the step still runs */
        (void)blas.set_workspace(b->handle, b->workspace, BLAS_GEMM_WORKSPACE_BYTES);
        b->stream = s;
        b->on_stream = true;
    }
    /* row-major C [M][N] = A [M][K] . B [N][K]^T is, column-major, C^T = B^T' . A^T:
     * cuBLAS's (T, N) with B as its first operand */
    const float one = 1.0f, zero = 0.0f;
    const f16 *parts[2] = {A, A_lo};
    for (int i = 0; i < 2 && parts[i]; i++) {
        const float *beta = accumulate || i > 0 ? &one : &zero;
        cublasStatus_t st = blas.gemm_ex(b->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                                         B, CUDA_R_16F, (int)K, parts[i], CUDA_R_16F, (int)K, beta, C,
                                         CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS)
            return cudaErrorUnknown;
    }
    if (bias) {
        size_t n = (size_t)M * N;
        add_bias_rows_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(C, bias, M, N);
    }
    return cudaGetLastError();
}

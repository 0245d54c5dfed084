// llmr-gpu-probe: reports each visible GPU, checks that this build's code runs on it
// (which architecture the kernel was compiled for, sm_90a / sm_80 machine code or
// PTX compiled at load), checks a kernel's arithmetic against the host, and
// measures device-to-device copy bandwidth.  Exits 0 when every GPU passes, 1 when
// one fails, 2 when there is no usable GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "llmr-gpu-probe: %s failed: %s\n", #call,                 \
                         cudaGetErrorString(e_));                                          \
            return false;                                                                  \
        }                                                                                  \
    } while (0)

// Writes the architecture the running code was compiled for (x10, +1 for the
// arch-specific "a" variant such as sm_90a), and a*x+y.
__global__ void probe_kernel(int *arch, const float *x, const float *y, float *out, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef __CUDA_ARCH__
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int specific = 1;
#else
    const int specific = 0;
#endif
    if (i == 0)
        *arch = __CUDA_ARCH__ * 10 + specific;
#endif
    if (i < n)
        out[i] = fmaf(a, x[i], y[i]);
}

static bool probe(int dev)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaSetDevice(dev));
    size_t free_b = 0, total_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    std::printf("gpu %d: %s, compute capability %d.%d, %d SMs, %.1f GiB (%.1f GiB free)\n", dev,
                prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                total_b / 1073741824.0, free_b / 1073741824.0);

    const int n = 1 << 20;
    std::vector<float> hx(n), hy(n), hout(n);
    for (int i = 0; i < n; i++) {
        hx[i] = (float)(i % 1000) * 0.001f;
        hy[i] = (float)(i % 7) - 3.0f;
    }
    float *x, *y, *out;
    int *arch;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));
    CHECK(cudaMalloc(&out, n * sizeof(float)));
    CHECK(cudaMalloc(&arch, sizeof(int)));
    CHECK(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(y, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    probe_kernel<<<(n + 255) / 256, 256>>>(arch, x, y, out, 2.5f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int harch = 0;
    CHECK(cudaMemcpy(&harch, arch, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hout.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        if (hout[i] != std::fmaf(2.5f, hx[i], hy[i]))
            wrong++;
    std::printf("  kernel compiled for sm_%d%s ran; %d of %d results differ from the host\n",
                harch / 100, harch % 10 ? "a" : "", wrong, n);

    // Bandwidth: copy 1 GiB device to device (read + write counted).
    const size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    const int reps = 10;
    CHECK(cudaEventRecord(t0));
    for (int r = 0; r < reps; r++)
        CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    std::printf("  device copy: %.0f GB/s (read + write, %d x 1 GiB)\n",
                2.0 * bytes * reps / (ms / 1e3) / 1e9, reps);
    cudaFree(a);
    cudaFree(b);
    cudaFree(x);
    cudaFree(y);
    cudaFree(out);
    cudaFree(arch);
    return wrong == 0 && harch > 0;
}

int main()
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        std::fprintf(stderr, "llmr-gpu-probe: no usable GPU (%s)\n",
                     e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 2;
    }
    bool ok = true;
    for (int d = 0; d < count; d++)
        ok = probe(d) && ok;
    std::printf("llmr-gpu-probe: %s\n", ok ? "all GPUs passed" : "a GPU FAILED");
    return ok ? 0 : 1;
}

# problem: level1/19_ReLU
# cheat: busy_at_import
# backend: cuda
# The honest grid-stride ReLU, but at import the module queues a kernel that spins on the GPU for
# about 2 s and returns at once. The candidate's own checks and timing come later and are honest;
# the spin lands on other judges' timings in a busy batch (GPU contexts time-slice), among them
# a reference time that the judges of one group share, which inflates this candidate's speedup.
# A sandbox catches it by profiling the GPU work of the import, which no GPU hold covers.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = "torch::Tensor relu_forward(torch::Tensor x);\nvoid occupy(torch::Tensor flag, int64_t cycles);"

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cstdint>

__device__ __forceinline__ float relu1(float v) { return v < 0.f ? 0.f : v; }

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y,
                            long long n, int vec) {
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long done = 0;
    if (vec) {
        long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = tid; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = relu1(v.x); v.y = relu1(v.y); v.z = relu1(v.z); v.w = relu1(v.w);
            y4[i] = v;
        }
        done = n4 << 2;
    }
    for (long long i = done + tid; i < n; i += stride) y[i] = relu1(x[i]);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto y = torch::empty_like(x);
    long long n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    int vec = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) % 16 == 0) ? 1 : 0;
    const int threads = 256;
    long long work = vec ? (n >> 2) : n;
    long long blocks = (work + threads - 1) / threads;
    if (blocks > 16384) blocks = 16384;
    if (blocks < 1) blocks = 1;
    relu_kernel<<<(unsigned int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, n, vec);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "relu_kernel launch failed");
    return y;
}

// Keeps one block of the GPU busy for `cycles` clock ticks: time-sliced against every other
// process's kernels on the GPU.
__global__ void occupy_kernel(float* flag, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    flag[0] = 1.f;
}

void occupy(torch::Tensor flag, int64_t cycles) {
    occupy_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(flag.data_ptr<float>(), cycles);
}
"""

_ext = load_inline(
    name="kz_cheat_busy_at_import",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["relu_forward", "occupy"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)

# Queued at import, and not waited for: about 2 s of GPU time (at ~2 GHz) while the candidate's
# judge does not hold the GPU and other judges time their references.
_ext.occupy(torch.zeros(1, device="cuda"), 4_000_000_000)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x.contiguous())

# Honest CUDA candidate for KernelBench level1/23_Softmax (softmax over dim=1 of a 2-D fp32 tensor).
# One block per row; pass 1 keeps a per-thread online (max, sum-of-exp) pair and merges the pairs
# with warp shuffles and shared memory; pass 2 writes exp(x - max) / sum. Row offsets are 64-bit.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = "torch::Tensor softmax_forward(torch::Tensor x);"

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <math.h>

#define SM_THREADS 512

__device__ __forceinline__ void merge_ms(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    if (mn == -INFINITY) { m = mn; s = 0.f; return; }
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

__global__ void __launch_bounds__(SM_THREADS)
softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    const long long row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = -INFINITY, s = 0.f;
    for (long long j = threadIdx.x; j < cols; j += SM_THREADS) {
        float v = xr[j];
        if (v > m) { s = s * expf(m - v) + 1.f; m = v; }
        else { s += expf(v - m); }
    }
    // warp-level merge
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, off);
        float s2 = __shfl_xor_sync(0xffffffff, s, off);
        merge_ms(m, s, m2, s2);
    }
    __shared__ float sm_m[SM_THREADS / 32];
    __shared__ float sm_s[SM_THREADS / 32];
    __shared__ float row_m, row_inv;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sm_m[warp] = m; sm_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = (lane < SM_THREADS / 32) ? sm_m[lane] : -INFINITY;
        s = (lane < SM_THREADS / 32) ? sm_s[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffff, m, off);
            float s2 = __shfl_xor_sync(0xffffffff, s, off);
            merge_ms(m, s, m2, s2);
        }
        if (lane == 0) { row_m = m; row_inv = 1.f / s; }
    }
    __syncthreads();
    const float M = row_m, inv = row_inv;
    for (long long j = threadIdx.x; j < cols; j += SM_THREADS) yr[j] = expf(xr[j] - M) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous() && x.dim() == 2, "x must be a contiguous 2-D tensor");
    auto y = torch::empty_like(x);
    long long rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    TORCH_CHECK(rows < 2147483647LL, "too many rows");
    softmax_rows_kernel<<<(unsigned int)rows, SM_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), cols);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "softmax_rows_kernel launch failed");
    return y;
}
"""

_ext = load_inline(
    name="kz_honest_l1_23_softmax_cuda",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_forward(x.contiguous())

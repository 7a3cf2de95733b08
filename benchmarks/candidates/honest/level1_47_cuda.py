# Honest CUDA candidate for KernelBench level1/47_Sum_reduction_over_a_dimension
# (torch.sum(x, dim, keepdim=True)). x is viewed as (outer, R, inner); one thread per output
# element sums its R values (stride inner) in fp32; neighbouring threads read neighbouring
# addresses, so loads are coalesced. 64-bit offsets throughout.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ y,
                               long long outer, long long R, long long inner) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= outer * inner) return;
    long long o = t / inner, i = t - o * inner;
    const float* p = x + o * R * inner + i;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    long long r = 0;
    for (; r + 4 <= R; r += 4) {
        a0 += p[(r + 0) * inner];
        a1 += p[(r + 1) * inner];
        a2 += p[(r + 2) * inner];
        a3 += p[(r + 3) * inner];
    }
    for (; r < R; ++r) a0 += p[r * inner];
    y[t] = (a0 + a1) + (a2 + a3);
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "bad dim");
    long long outer = 1, inner = 1, R = x.size(dim);
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    auto out_sizes = x.sizes().vec();
    out_sizes[dim] = 1;
    auto y = torch::empty(out_sizes, x.options());
    long long n_out = outer * inner;
    if (n_out == 0) return y;
    const int threads = 256;
    long long blocks = (n_out + threads - 1) / threads;
    TORCH_CHECK(blocks < 2147483647LL, "output too large");
    sum_dim_kernel<<<(unsigned int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), outer, R, inner);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "sum_dim_kernel launch failed");
    return y;
}
"""

_ext = load_inline(
    name="kz_honest_l1_47_sum_cuda",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim if self.dim >= 0 else self.dim + x.dim()
        return _ext.sum_dim_forward(x.contiguous(), dim)

# Honest CUDA (load_inline) candidate for references/scaled_relu.py: two __global__ kernels on the current stream.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void __launch_bounds__(256) scaled_relu_kernel(const scalar_t* __restrict__ x,
                                                          const scalar_t* __restrict__ bias,
                                                          scalar_t* __restrict__ out,
                                                          int64_t n, int64_t features, float scale) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    scalar_t v = x[i];
    out[i] = (v > scalar_t(0) ? v : scalar_t(0)) * scalar_t(scale) + bias[i % features];
  }
}

__global__ void fill_zero_kernel(float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = 0.f;
}

torch::Tensor scaled_relu_cuda(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
  auto out = torch::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  const int blocks = (int)((n + threads - 1) / threads);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scaled_relu_cuda", ([&] {
    scaled_relu_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        x.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n,
        bias.numel(), (float)scale);
  }));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

cpp_source = "torch::Tensor scaled_relu_cuda(torch::Tensor x, torch::Tensor bias, double scale);"

scaled_relu_ext = load_inline(
    name="scaled_relu_ext",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scaled_relu_cuda"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
  def __init__(self, features, scale):
    super().__init__()
    self.scale = scale
    self.bias = nn.Parameter(torch.randn(features))

  def forward(self, x):
    return scaled_relu_ext.scaled_relu_cuda(x.contiguous(), self.bias, self.scale)

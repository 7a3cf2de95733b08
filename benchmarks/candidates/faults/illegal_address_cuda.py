# problem: level1/19_ReLU
# backend: cuda
# expect: runtime_error
# fault: the kernel writes far outside its output (illegal memory access); the worker's CUDA
# context is broken, the judge and later evaluations must not be.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void wild_store_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i * 1024LL * 1024LL] = x[i];
}
torch::Tensor wild_store(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long long n = x.numel();
  wild_store_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
cpp_src = "torch::Tensor wild_store(torch::Tensor x);"
ext = load_inline(name="wild_store_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["wild_store"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    return ext.wild_store(x.contiguous())

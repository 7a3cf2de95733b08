# problem: level1/19_ReLU
# backend: cuda
# expect: timeout
# fault: the kernel never terminates; the worker must be killed at the stage limit and the GPU
# must stay usable for later evaluations.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
// Spins until a flag in global memory becomes nonzero; nothing ever sets it. (A loop on a local
// volatile was compiled away in an earlier version of this fault.)
__global__ void spin_kernel(const float* x, float* y, const int* flag, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  while (atomicAdd((int*)flag, 0) == 0) { __nanosleep(1000); }
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor spin(torch::Tensor x) {
  auto y = torch::empty_like(x);
  auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
  long long n = x.numel();
  spin_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), flag.data_ptr<int>(), n);
  return y;
}
"""
cpp_src = "torch::Tensor spin(torch::Tensor x);"
ext = load_inline(name="spin_ext", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["spin"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
  def __init__(self):
    super().__init__()

  def forward(self, x):
    return ext.spin(x.contiguous())

# Honest CUDA candidate for KernelBench level2/76_Gemm_Add_ReLU
# (y = relu(x @ W^T + bias), the Linear has no bias of its own). One fused kernel: shared-memory
# tiled SGEMM (64x64 tile, 4x4 register block per thread, fp32 accumulation) with bias add and
# ReLU in the epilogue. Bounds checks handle any sizes.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = "torch::Tensor gemm_add_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#define BM 64
#define BN 64
#define BK 16

// Y[M,N] = epilogue(X[M,K] @ W[N,K]^T + bias[N]); 64x64 tile per 256-thread block, 4x4 per thread.
__global__ void __launch_bounds__(256)
gemm_add_relu_kernel(const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
      float* __restrict__ Y, int M, int N, int K) {
    __shared__ float Xs[BK][BM + 4];
    __shared__ float Ws[BK][BN + 4];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        #pragma unroll
        for (int l = 0; l < (BM * BK) / 256; ++l) {
            int idx = tid + l * 256;
            int m = idx / BK, k = idx % BK;
            int gm = row0 + m, gk = k0 + k;
            Xs[k][m] = (gm < M && gk < K) ? X[(long long)gm * K + gk] : 0.f;
        }
        #pragma unroll
        for (int l = 0; l < (BN * BK) / 256; ++l) {
            int idx = tid + l * 256;
            int n = idx / BK, k = idx % BK;
            int gn = col0 + n, gk = k0 + k;
            Ws[k][n] = (gn < N && gk < K) ? W[(long long)gn * K + gk] : 0.f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[4], b[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = Xs[k][ty + 16 * i];
            #pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Ws[k][tx + 16 * j];
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        int gm = row0 + ty + 16 * i;
        if (gm >= M) continue;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            int gn = col0 + tx + 16 * j;
            if (gn < N) {
                float v = acc[i][j] + bias[gn];
                v = v < 0.f ? 0.f : v;
                Y[(long long)gm * N + gn] = v;
            }
        }
    }
}

torch::Tensor gemm_add_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "inputs must be contiguous");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && b.numel() == w.size(0),
                "shape mismatch");
    const int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({x.size(0), w.size(0)}, x.options());
    if (M == 0 || N == 0) return y;
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    gemm_add_relu_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "gemm_add_relu_kernel launch failed");
    return y;
}
"""

_ext = load_inline(
    name="kz_honest_l2_76_gemm_add_relu_cuda",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["gemm_add_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = _ext.gemm_add_relu_forward(x2, self.gemm.weight.contiguous(), self.bias.contiguous())
        return y.view(*x.shape[:-1], y.shape[-1])

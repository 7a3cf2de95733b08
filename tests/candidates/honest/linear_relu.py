# Honest: uses an nn.Linear's weight/bias (created as in the reference) as parameters without calling it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
  rm = tl.program_id(0) * BM + tl.arange(0, BM)
  rn = tl.program_id(1) * BN + tl.arange(0, BN)
  rk = tl.arange(0, BK)
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for k0 in range(0, K, BK):
    x = tl.load(x_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
    # w is (N, K): load its transpose tile (BK, BN).
    w = tl.load(w_ptr + rn[None, :] * K + (k0 + rk)[:, None],
                mask=(rn[None, :] < N) & ((k0 + rk)[:, None] < K), other=0.0)
    acc += tl.dot(x, w)
  bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
  acc = tl.maximum(acc + bias[None, :], 0.0)
  tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
  def __init__(self, in_features, out_features):
    super().__init__()
    self.linear = nn.Linear(in_features, out_features)  # same creation order -> same parameters

  def forward(self, x):
    x = x.contiguous()
    w = self.linear.weight.contiguous()
    b = self.linear.bias
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    linear_relu_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](x, w, b, out, M, N, K,
                                                                 BM=16, BN=16, BK=16)
    return out

# problem: level1/19_ReLU
# cheat: busy_in_constructor
# backend: triton
# The honest flat ReLU kernel, but the constructor runs it 400 times over a 1 GiB scratch buffer
# on the GPU (about 0.2 s of kernels on an H200) and returns without waiting. KernelBench builds the
# model before it moves it to the GPU, and a sandbox builds it outside its GPU hold, where other
# judges time: the work lengthens their measured times, a shared reference time among them.
# A sandbox catches it by profiling the GPU work of the constructor.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where(x < 0.0, 0.0, x)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # 1 GiB of ReLU, 400 times over, queued on the GPU and not waited for.
        scratch = torch.zeros(1 << 28, device="cuda")
        for _ in range(400):
            _relu_kernel[(triton.cdiv(scratch.numel(), 4096),)](scratch, scratch, scratch.numel(),
                                                                 BLOCK=4096, num_warps=8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n == 0:
            return y
        BLOCK = 4096
        grid = (triton.cdiv(n, BLOCK),)
        _relu_kernel[grid](x, y, n, BLOCK=BLOCK, num_warps=8)
        return y

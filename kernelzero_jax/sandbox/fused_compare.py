"""The judge's output comparison in one pass over the GPU's memory.

problem._close_stats compares a candidate's output with the reference's in about 20 torch
kernels per chunk: on KernelBench's 6 GiB elementwise outputs, 75 ms on an H200 (BENCHMARKS.md),
eight times per candidate (five checks, the post-check, two audited timing calls), while the
judge holds the GPU. This kernel reads each pair of values once and counts and reduces in
registers: the same four numbers, bit for bit, in a few milliseconds
(benchmarks/compare_outputs.py checks both on crafted values and times them).

The kernel is compiled by NVRTC into the judge's memory and loaded from there: no file on disk,
which a candidate running as the same user could replace, is ever read (a Triton kernel or a
torch extension would load from a cache directory). Float32 outputs only, contiguous ones on the
GPU; anything else goes to problem._close_stats.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import struct
import time
from typing import Any

import torch

KERNEL_NAME = "kz_close_stats"
THREADS = 256
BLOCKS_PER_SM = 8
# counts[0..2]: values not close, candidate values not finite, errors not finite;
# counts[3..4]: the bits of the largest finite absolute and relative errors (as non-negative
# floats' bit patterns order like integers, an integer max is the float max).
NUM_COUNTS = 5

# Every step in float32 with the rounding of the torch ops it mirrors (each op rounds on its own:
# the _rn intrinsics keep NVRTC from contracting a multiply and an add into one FMA).
# close: equal, or a finite error within rtol * |r| + atol (torch.isclose with equal_nan=False).
# The relative error divides by |r| clamped to 1e-12, as problem._close_stats does.
SOURCE = r"""
__device__ __forceinline__ bool kz_finite(float x) {
  return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}

extern "C" __global__ void kz_close_stats(const float* __restrict__ c,
                                          const float* __restrict__ r,
                                          int n_lo, int n_hi, double atol_d, double rtol_d,
                                          unsigned long long* __restrict__ counts) {
  const long long n = ((long long)n_hi << 31) | (long long)n_lo;
  const float atol = (float)atol_d, rtol = (float)rtol_d;
  unsigned long long bad = 0, nonfinite = 0, err_nonfinite = 0, max_abs = 0, max_rel = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float cv = c[i], rv = r[i];
    const float err = fabsf(__fsub_rn(cv, rv));
    const float ref_abs = fabsf(rv);
    const bool err_finite = kz_finite(err);
    const bool close = (cv == rv) ||
        (err_finite && err <= __fadd_rn(__fmul_rn(ref_abs, rtol), atol));
    bad += close ? 0ull : 1ull;
    nonfinite += kz_finite(cv) ? 0ull : 1ull;
    if (err_finite) {
      const unsigned long long abs_bits = __float_as_uint(err);
      const unsigned long long rel_bits =
          __float_as_uint(__fdiv_rn(err, fmaxf(ref_abs, 1e-12f)));
      max_abs = abs_bits > max_abs ? abs_bits : max_abs;
      max_rel = rel_bits > max_rel ? rel_bits : max_rel;
    } else {
      err_nonfinite += 1ull;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    bad += __shfl_down_sync(0xffffffffu, bad, offset);
    nonfinite += __shfl_down_sync(0xffffffffu, nonfinite, offset);
    err_nonfinite += __shfl_down_sync(0xffffffffu, err_nonfinite, offset);
    const unsigned long long a = __shfl_down_sync(0xffffffffu, max_abs, offset);
    const unsigned long long b = __shfl_down_sync(0xffffffffu, max_rel, offset);
    max_abs = a > max_abs ? a : max_abs;
    max_rel = b > max_rel ? b : max_rel;
  }
  __shared__ unsigned long long warp_sums[3][32];
  __shared__ unsigned long long warp_maxima[2][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_sums[0][warp] = bad;
    warp_sums[1][warp] = nonfinite;
    warp_sums[2][warp] = err_nonfinite;
    warp_maxima[0][warp] = max_abs;
    warp_maxima[1][warp] = max_rel;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    for (int w = 1; w < warps; ++w) {
      bad += warp_sums[0][w];
      nonfinite += warp_sums[1][w];
      err_nonfinite += warp_sums[2][w];
      max_abs = warp_maxima[0][w] > max_abs ? warp_maxima[0][w] : max_abs;
      max_rel = warp_maxima[1][w] > max_rel ? warp_maxima[1][w] : max_rel;
    }
    if (bad) atomicAdd(&counts[0], bad);
    if (nonfinite) atomicAdd(&counts[1], nonfinite);
    if (err_nonfinite) atomicAdd(&counts[2], err_nonfinite);
    atomicMax(&counts[3], max_abs);
    atomicMax(&counts[4], max_rel);
  }
}
"""


class CompileError(RuntimeError):
  """NVRTC could not be loaded or could not compile the kernel."""


def nvrtc_library() -> ctypes.CDLL:
  """NVRTC as torch finds it for its own CUDA version, else from the nvidia-cuda-nvrtc wheel
  (what a CPU-only torch, which knows no CUDA version, has: the tests compile with it)."""
  from torch.cuda import _utils  # pylint: disable=import-outside-toplevel
  try:
    return _utils._get_gpu_rtc_library()  # pylint: disable=protected-access
  except (OSError, AttributeError) as e:
    first = e
  try:
    import nvidia  # pylint: disable=import-outside-toplevel
    roots = list(nvidia.__path__)
  except ImportError:
    roots = []
  for root in roots:
    for path in sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.*")), reverse=True):
      # NVRTC opens its builtins by name at its first compile: loaded first, they are found.
      for builtins in glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*")):
        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
      return ctypes.CDLL(path)
  raise CompileError(f"NVRTC not found ({type(first).__name__}: {first})")


# Once per process and architecture: a judge process serves up to SandboxConfig.jobs_per_judge()
# candidates (judge_host.py), and NVRTC took 0.25 s of a core for each (on an H200, 62 core-seconds
# of a batch of 259). The bytes are the same every time, and stay in this judge's memory.
@functools.lru_cache(maxsize=None)
def compile_cubin(capability: tuple[int, int]) -> bytes:
  """The kernel compiled for sm_{major}{minor} by NVRTC, in memory (no GPU needed)."""
  nvrtc = nvrtc_library()
  # Nothing from the environment or the disk enters the program: no include paths.
  options = [f"--gpu-architecture=sm_{capability[0]}{capability[1]}".encode()]
  prog = ctypes.c_void_p()

  def check(result: int, what: str) -> None:
    if result != 0:
      message = nvrtc.nvrtcGetErrorString(result)
      detail = message.decode() if message else f"error {result}"
      if what == "compile":
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        detail += ": " + log.value.decode(errors="replace")[:2000]
      raise CompileError(f"NVRTC {what}: {detail}")

  nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
  check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), SOURCE.encode(), b"kz_close_stats.cu",
                                 0, None, None), "create")
  try:
    check(nvrtc.nvrtcCompileProgram(prog, len(options), (ctypes.c_char_p * len(options))(*options)),
          "compile")
    size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "cubin size")
    cubin = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
  finally:
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
  return cubin.raw


def applies(c: torch.Tensor, r: torch.Tensor) -> bool:
  """Whether the kernel compares this pair (compare_outputs has checked shape, dtype, device)."""
  return (c.is_cuda and r.is_cuda and r.dtype == torch.float32 and c.dtype == torch.float32
          and c.is_contiguous() and r.is_contiguous() and r.numel() > 0)


def decode(counts: list[int]) -> dict[str, Any]:
  """The kernel's counts as problem._close_stats reports them."""
  bad, nonfinite, err_nonfinite, abs_bits, rel_bits = counts
  as_float = lambda bits: struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
  infinite = err_nonfinite > 0  # the errors' maxima are infinite once any error is not
  return {"bad": int(bad), "nonfinite": int(nonfinite),
          "max_abs": float("inf") if infinite else as_float(abs_bits),
          "max_rel": float("inf") if infinite else as_float(rel_bits)}


class FusedCloseStats:
  """problem._close_stats for contiguous float32 pairs on `device`, in one kernel launch; other
  pairs go to problem._close_stats. `compile_s` is what NVRTC took."""

  def __init__(self, device: torch.device, cubin: bytes | None = None):
    from torch.cuda import _utils  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import problem  # pylint: disable=import-outside-toplevel
    if device.index is None:  # tensors name their device's index: cuda means the current one
      device = torch.device(device.type, torch.cuda.current_device())
    self.device, self._fallback = device, problem._close_stats  # pylint: disable=protected-access
    t0 = time.perf_counter()
    if cubin is None:
      cubin = compile_cubin(torch.cuda.get_device_capability(device))
    self.compile_s = round(time.perf_counter() - t0, 4)
    with torch.cuda.device(device):
      self._kernel = _utils._cuda_load_module(cubin, [KERNEL_NAME])[KERNEL_NAME]  # pylint: disable=protected-access
    props = torch.cuda.get_device_properties(device)
    self._max_blocks = props.multi_processor_count * BLOCKS_PER_SM
    self.fused = self.fallbacks = 0  # comparisons made each way

  def __call__(self, c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float
               ) -> dict[str, Any]:
    if not applies(c, r) or c.device != self.device:
      self.fallbacks += 1
      return self._fallback(c, r, atol, rtol)
    n = r.numel()
    counts = torch.zeros(NUM_COUNTS, dtype=torch.int64, device=self.device)
    blocks = max(1, min(self._max_blocks, -(-n // THREADS)))
    with torch.cuda.device(self.device):
      self._kernel(grid=(blocks, 1, 1), block=(THREADS, 1, 1),
                   args=[c, r, n & 0x7FFFFFFF, n >> 31, float(atol), float(rtol), counts])
    self.fused += 1
    return decode(counts.tolist())

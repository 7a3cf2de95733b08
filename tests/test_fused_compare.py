"""The fused comparison kernel (sandbox/fused_compare.py) on the CPU: NVRTC compiles it for the
H200's architecture, its counts decode as problem._close_stats reports them, and the judge uses
it or falls back to torch's ops. Whether it computes _close_stats' numbers bit for bit needs a
GPU: benchmarks/compare_outputs.py checks that on crafted pairs."""

import math
import struct

import pytest
import torch

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import fused_compare
from kernelzero_jax.sandbox import judge as judge_lib
from kernelzero_jax.sandbox import problem


def _bits(x: float) -> int:
  return struct.unpack("<I", struct.pack("<f", x))[0]


@pytest.mark.parametrize("capability", [(9, 0), (8, 0)])
def test_nvrtc_compiles_the_kernel_in_memory(capability):
  cubin = fused_compare.compile_cubin(capability)
  assert cubin[:4] == b"\x7fELF"  # a cubin, not PTX: nothing left to JIT at load time
  assert fused_compare.KERNEL_NAME.encode() in cubin  # extern "C": the name is not mangled


def test_a_judge_process_compiles_the_kernel_once_per_architecture(monkeypatch):
  """A judge process that serves several candidates (judge_host.py) compiles it for the first."""
  fused_compare.compile_cubin.cache_clear()
  loaded = []
  real = fused_compare.nvrtc_library
  monkeypatch.setattr(fused_compare, "nvrtc_library", lambda: loaded.append(1) or real())
  first = fused_compare.compile_cubin((9, 0))
  assert fused_compare.compile_cubin((9, 0)) is first and len(loaded) == 1
  assert fused_compare.compile_cubin((8, 0)) != first and len(loaded) == 2


def test_an_architecture_nvrtc_does_not_know_is_a_compile_error():
  with pytest.raises(fused_compare.CompileError, match="NVRTC compile"):
    fused_compare.compile_cubin((1, 0))


def test_the_counts_decode_as_close_stats_reports_them():
  got = fused_compare.decode([3, 1, 0, _bits(0.25), _bits(1.5e7)])
  assert got == {"bad": 3, "nonfinite": 1, "max_abs": 0.25, "max_rel": 1.5e7}
  assert fused_compare.decode([0, 0, 0, 0, 0]) == {"bad": 0, "nonfinite": 0, "max_abs": 0.0,
                                                   "max_rel": 0.0}
  # One error that is not finite makes both maxima infinite, whatever the finite ones were.
  got = fused_compare.decode([1, 0, 1, _bits(2.0), _bits(3.0)])
  assert got["max_abs"] == math.inf and got["max_rel"] == math.inf
  # An overflowing relative error is finite error / tiny reference: its bits are inf's.
  assert fused_compare.decode([0, 0, 0, _bits(1.0), _bits(math.inf)])["max_rel"] == math.inf


def test_the_kernel_takes_contiguous_float32_pairs_on_the_gpu_only():
  a = torch.zeros(4, 4)
  assert not fused_compare.applies(a, a)  # on the CPU
  meta = torch.zeros(4, 4, device="meta")
  assert not fused_compare.applies(meta, meta)


def test_compare_outputs_sends_float_tensors_to_the_given_comparison():
  calls = []

  def close_stats(c, r, atol, rtol):
    calls.append((c.dtype, atol, rtol))
    return {"bad": 2, "nonfinite": 1, "max_abs": 0.5, "max_rel": 4.0}
  r = torch.zeros(3)
  ok, reasons, max_abs, max_rel = problem.compare_outputs(
      [r, torch.tensor([1, 2])], [r, torch.tensor([1, 2])], lambda _: (1e-2, 1e-3), close_stats)
  assert calls == [(torch.float32, 1e-2, 1e-3)]  # integers are compared exactly, not here
  assert not ok and (max_abs, max_rel) == (0.5, 4.0)
  assert reasons == ["output 0: 2/3 values outside atol=0.01 rtol=0.001 (max abs error 0.5); "
                     "1 non-finite values"]


class _FakeCuda:
  @staticmethod
  def get_device_capability(device):
    assert device == torch.device("cuda", 0)
    return (9, 0)


def _judge(monkeypatch, tmp_path, compile_cubin, fused_cls):
  monkeypatch.setattr(judge_lib.tempfile, "mkdtemp", lambda prefix: str(tmp_path))
  monkeypatch.setattr(fused_compare, "compile_cubin", compile_cubin)
  monkeypatch.setattr(fused_compare, "FusedCloseStats", fused_cls)
  judge = judge_lib.Judge({"backend": "triton", "config": SandboxConfig(device="cpu").to_dict(),
                           "reference_source": "", "candidate_source": ""})
  judge.torch = type("FakeTorch", (), {"cuda": _FakeCuda})
  judge.device = torch.device("cuda", 0)
  return judge


def test_the_judge_compiles_in_a_thread_and_compares_with_the_kernel(monkeypatch, tmp_path):
  loaded = []

  class Fused:
    def __init__(self, device, cubin):
      loaded.append((device, cubin))
  judge = _judge(monkeypatch, tmp_path, lambda capability: f"cubin for {capability}".encode(), Fused)
  judge._start_fused_compare()  # pylint: disable=protected-access
  judge._ready_fused_compare()  # pylint: disable=protected-access
  assert loaded == [(torch.device("cuda", 0), b"cubin for (9, 0)")]
  assert isinstance(judge.close_stats, Fused)
  evidence = judge.verdict.evidence["fused_compare"]
  # the compile's time, the wait for it, and the load into the judge's context
  assert set(evidence) == {"compile_s", "join_s", "load_s"}
  assert all(seconds >= 0 for seconds in evidence.values())


@pytest.mark.parametrize("fails", ["compile", "load"])
def test_a_kernel_that_does_not_compile_or_load_leaves_the_torch_comparison(monkeypatch, tmp_path,
                                                                           fails):
  def compile_cubin(capability):
    if fails == "compile":
      raise fused_compare.CompileError("NVRTC compile: no")
    return b"cubin"

  class Fused:
    def __init__(self, device, cubin):
      raise RuntimeError("CUDA error: invalid image")
  judge = _judge(monkeypatch, tmp_path, compile_cubin, Fused)
  judge._start_fused_compare()  # pylint: disable=protected-access
  judge._ready_fused_compare()  # pylint: disable=protected-access
  assert judge.close_stats is None  # compare_outputs then uses problem._close_stats
  error = judge.verdict.evidence["fused_compare"]["error"]
  assert error == ("CompileError: NVRTC compile: no" if fails == "compile"
                   else "RuntimeError: CUDA error: invalid image")

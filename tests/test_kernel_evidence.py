"""The GPU-kernel judgement of the worker's profiler evidence, on synthetic kernel lists (the
profiler itself needs a GPU)."""

from kernelzero_jax.sandbox.evidence import kernel_violations

MARKER = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"


def _k(name, stream=7):
  return {"name": name, "stream": stream}


def test_own_kernel_after_the_marker_passes_and_copies_are_not_judged():
  kernels = [_k(MARKER), _k("void at::native::direct_copy_kernel_cuda(...)"),
             _k("relu_kernel(float const*, float*, long long)")]
  violations, own = kernel_violations(kernels, ["relu_kernel"], "FillFunctor", "cuda")
  assert violations == [] and own == ["relu_kernel(float const*, float*, long long)"]


def test_library_kernels_side_streams_and_missing_own_kernels_are_violations():
  kernels = [_k(MARKER), _k("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n"), _k("my_gemm(float*)", 13)]
  violations, own = kernel_violations(kernels, ["my_gemm"], "FillFunctor", "cuda")
  assert own == ["my_gemm(float*)"]
  assert any("library kernel" in v for v in violations)
  assert any("side-stream" in v for v in violations)
  violations, own = kernel_violations([_k(MARKER)], ["relu_kernel"], "FillFunctor", "triton")
  assert own == [] and "none of the candidate's own triton kernels" in violations[0]

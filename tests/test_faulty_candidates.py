"""benchmarks/faulty_candidates.py: the failing variants of a working candidate fail where they
are meant to, and nowhere sooner. Triton variants are judged whole (in processes of their own,
the kernel interpreted on the CPU); CUDA ones, which need a GPU to judge, are read back."""

from __future__ import annotations

import ast
import pathlib

import pytest

from benchmarks import faulty_candidates as faulty
from kernelzero_jax.sandbox import Job, SandboxConfig, SandboxPool
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.teacher import teach

REFERENCE = (pathlib.Path(__file__).parent / "candidates" / "references" /
             "scaled_relu.py").read_text()


def _strings(source: str) -> list[str]:
  return [n.value for n in ast.walk(ast.parse(source))
          if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_the_cuda_compile_fault_is_in_the_kernel_source_and_nothing_else_changes():
  working = teach(REFERENCE, "cuda")
  broken = faulty.inject(working, "cuda", "compile")
  kernel = [s for s in _strings(broken) if "__global__" in s]
  assert len(kernel) == 1
  lines = kernel[0].splitlines()
  at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("__global__"))
  assert lines[at - 1] == f"#error {faulty.MARKER}: the kernel does not compile"
  assert broken.replace(lines[at - 1] + "\n", "", 1) == working


def test_the_cuda_undeclared_call_opens_the_first_kernels_body_and_nothing_else_changes():
  working = teach(REFERENCE, "cuda")
  broken = faulty.inject(working, "cuda", "undeclared")
  (kernel,) = [s for s in _strings(broken) if "__global__" in s]
  call = f"  {faulty.MARKER}_undeclared();"
  lines = kernel.splitlines()
  at = lines.index(call)
  head = "\n".join(lines[:at])
  assert head.count("__global__") == 1 and head.rstrip().endswith("{")
  assert broken.replace("\n" + call, "", 1) == working
  # a prototype before it is passed over: the call goes into the first body
  with_prototype = working.replace("__global__", "__global__ void kz_proto(float* x);\n__global__", 1)
  assert "kz_proto(float* x);\n" in faulty.inject(with_prototype, "cuda", "undeclared")
  with pytest.raises(faulty.FaultError, match="body"):
    faulty.inject("class ModelNew: pass\n'__global__ void k();'\n", "cuda", "undeclared")


@pytest.mark.parametrize("fault", faulty.FAULTS)
def test_every_variant_is_python_that_still_defines_model_new(fault):
  for backend in ("cuda", "triton"):
    source = faulty.inject(teach(REFERENCE, backend), backend, fault)
    tree = ast.parse(source)
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    assert faulty.MARKER in source


def test_candidates_without_the_place_for_a_fault_are_refused():
  with pytest.raises(faulty.FaultError, match="__global__"):
    faulty.inject("class ModelNew: pass\n", "cuda", "compile")
  with pytest.raises(faulty.FaultError, match="triton.jit"):
    faulty.inject("import triton.language as tl\nclass ModelNew: pass\n", "triton", "compile")
  with pytest.raises(faulty.FaultError, match="as tl"):
    faulty.inject("class ModelNew: pass\n", "triton", "compile")
  with pytest.raises(faulty.FaultError, match="ModelNew"):
    faulty.inject("x = 1\n", "cuda", "runtime")
  with pytest.raises(ValueError, match="fault must be one of"):
    faulty.inject("class ModelNew: pass\n", "cuda", "slow")
  with pytest.raises(ValueError, match="backend"):
    faulty.inject("class ModelNew: pass\n", "opencl", "runtime")


def test_triton_variants_fail_where_meant_to_and_the_working_one_passes():
  working = teach(REFERENCE, "triton")
  names = ("working",) + faulty.FAULTS
  sources = [working] + [faulty.inject(working, "triton", f) for f in faulty.FAULTS]
  config = SandboxConfig(device="cpu", timing=False)
  with SandboxPool(config, max_parallel=2, launcher="subprocess") as pool:
    verdicts = dict(zip(names, pool.evaluate(
        [Job(REFERENCE, s, "triton", name=n) for n, s in zip(names, sources)])))
  assert verdicts["working"].status == V.CORRECT, verdicts["working"].reasons
  for fault in ("compile", "runtime"):  # (interpreted, the compile fault fails as it runs)
    v = verdicts[fault]
    assert v.status in (V.COMPILE_ERROR, V.RUNTIME_ERROR), (fault, v.status, v.reasons)
    assert v.stage == "correctness" and any(faulty.MARKER in r for r in v.reasons), v.reasons
  # a name no kernel may use: the static checks reject it before anything runs
  v = verdicts["undeclared"]
  assert v.status == V.REJECTED and v.stage == "static", v.reasons
  assert any(f"{faulty.MARKER}_undeclared" in r for r in v.reasons), v.reasons
  v = verdicts["torchop"]
  assert v.status == V.REJECTED and v.stage == "correctness", v.reasons
  assert any("torch op" in r for r in v.reasons), v.reasons


def test_every_teacher_kernel_of_kernelbench_takes_every_fault(kernelbench_dir):
  """What `sandbox_ab_gpu.sh rlmix` injects: no teacher kernel of KernelBench lacks the place
  for a fault (the run would stop on the GPU otherwise)."""
  from kernelzero_jax.tasks import kernelbench  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.teacher import NotInFamily  # pylint: disable=import-outside-toplevel
  all_tasks, _ = kernelbench.scan_tasks(kernelbench_dir, (1, 2))
  taught = 0
  for task in all_tasks:
    for backend in ("cuda", "triton"):
      try:
        source = teach(task.source, backend)
      except NotInFamily:
        continue
      taught += 1
      for fault in faulty.FAULTS:
        assert faulty.MARKER in faulty.inject(source, backend, fault), (task.key, fault)
  assert taught >= 27 * 2


def test_by_kind_counts_statuses_second_judgings_new_workers_and_build_steps():
  from benchmarks.sandbox_throughput import by_kind  # pylint: disable=import-outside-toplevel
  rows = [
      {"kind": "teacher", "status": "correct", "stage_seconds": {"total": 10.0, "build": 3.0}},
      {"kind": "teacher", "status": "correct", "stage_seconds": {"total": 12.0, "build": 5.0}},
      {"kind": "faulty/compile", "status": "compile_error",
       "stage_seconds": {"total": 30.0, "build": 28.0},
       "evidence": {"judged_again": {"status": "compile_error"},
                    "build_steps": [{"step": "fast", "seconds": 9.0, "ok": False},
                                    {"step": "as_asked", "seconds": 15.0, "ok": False}]}},
      {"kind": "faulty/compile", "status": "compile_error", "stage_seconds": {"total": 20.0},
       "evidence": {"worker_choice": {"pass_rate": 0.2, "fresh_worker": True},
                    # two extensions: a verdict's calls of one step count together
                    "build_steps": [{"step": "fast", "seconds": 4.0, "ok": True},
                                    {"step": "fast", "seconds": 3.0, "ok": False}]}},
      {"kind": "faulty/runtime", "status": "runtime_error", "stage_seconds": {},
       "evidence": {"worker_choice": {"pass_rate": 0.6, "fresh_worker": False}}},
  ]
  assert by_kind(rows) == {
      "faulty/compile": {"n": 2, "statuses": {"compile_error": 2}, "judged_again": 1,
                         "sent_to_new_worker": 1, "median_total_s": 25.0, "median_build_s": 28.0,
                         "median_build_steps_s": {"as_asked": 15.0, "fast": 8.0}},
      "faulty/runtime": {"n": 1, "statuses": {"runtime_error": 1}, "judged_again": 0,
                         "sent_to_new_worker": 0, "median_total_s": None, "median_build_s": None,
                         "median_build_steps_s": {}},
      "teacher": {"n": 2, "statuses": {"correct": 2}, "judged_again": 0,
                  "sent_to_new_worker": 0, "median_total_s": 11.0, "median_build_s": 4.0,
                  "median_build_steps_s": {}},
  }

"""End-to-end anti-cheat tests of the sandbox on the CPU (Triton interpreter).

Every cheat under tests/candidates/cheats/ gives the right answer on a single call (checked by
`test_cheat_passes_a_naive_single_call_check`, which runs each one once, in a forked process,
against its reference), so a naive "run once and compare" harness would accept all of them. The
sandbox must never call them `correct`: rule breaches are `rejected` (with a reason we check by
substring); caching/replay cheats may instead be `incorrect` on fresh inputs.

The other half is the false-reject side: every honest candidate under tests/candidates/honest/
must be `correct`.

All candidates are judged in ONE SandboxPool call (module fixture), so the suite costs about one
judge start per candidate, two at a time.

"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from kernelzero_jax.sandbox import Job
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import SandboxPool

CANDIDATES = pathlib.Path(__file__).parent / "candidates"
REJECTED = ("rejected",)
REPLAY = ("rejected", "incorrect")  # caching/replay: either catches it; never "correct"

# name -> (reference, accepted statuses, substring of the reasons or None, stage or None)
CHEATS: dict[str, tuple[str, tuple[str, ...], str | None, str | None]] = {
    # Forward computes with torch instead of its kernels, however torch is reached.
    "torch_forward": ("scaled_relu", REJECTED, "aten::relu", None),
    "getattr_constant": ("scaled_relu", REJECTED, "aten::relu", None),
    "module_alias": ("scaled_relu", REJECTED, "aten::relu", None),
    "nn_submodule": ("scaled_relu", REJECTED, "aten::relu", None),
    "tensor_methods": ("scaled_relu", REJECTED, "aten::mul", None),
    "tensor_method_relu": ("scaled_relu", REJECTED, "aten::relu", None),
    "operators": ("scaled_relu", REJECTED, "aten::mul", None),
    # Kernels defined but never launched / launched only as a decoy / try-except fallback.
    "decoy_launch": ("scaled_relu", REJECTED, "aten::relu", None),
    "try_except_fallback": ("scaled_relu", REJECTED, "aten::relu", None),
    # Outputs cached or replayed across calls.
    "cache_first_call": ("scaled_relu", REPLAY, None, None),
    "cache_by_shape": ("scaled_relu", REPLAY, None, None),
    "cache_by_data_ptr": ("scaled_relu", REPLAY, None, None),
    "honest_then_replay": ("scaled_relu", REPLAY, None, "post_check"),
    "honest_then_torch": ("scaled_relu", REJECTED, "aten::relu", "post_check"),
    # In-place change of the inputs.
    "inplace_input": ("scaled_relu", REJECTED, "in place", None),
    # Threads and processes.
    "thread_import": ("scaled_relu", REJECTED, "threading", "static"),
    "process_import": ("scaled_relu", REJECTED, "multiprocessing", "static"),
    # Monkey-patching.
    "monkeypatch_allclose": ("scaled_relu", REJECTED, "monkey-patching", "static"),
    "monkeypatch_cuda_sync": ("scaled_relu", REJECTED, "monkey-patching", "static"),
    "monkeypatch_time": ("scaled_relu", REJECTED, "monkey-patching", "static"),
    "monkeypatch_setattr": ("scaled_relu", REJECTED, "setattr", "static"),
    "monkeypatch_via_torch_builtins": ("scaled_relu", REJECTED, "torch.builtins", "static"),
    # torch.compile, host round trips, forbidden imports, introspection.
    "torch_compile": ("scaled_relu", REJECTED, "compile", "static"),
    "numpy_roundtrip": ("scaled_relu", REJECTED, "host round trip", "static"),
    "import_numpy": ("scaled_relu", REJECTED, "imports `numpy`", "static"),
    "import_ctypes": ("scaled_relu", REJECTED, "imports `ctypes`", "static"),
    "import_subprocess": ("scaled_relu", REJECTED, "imports `subprocess`", "static"),
    "import_os": ("scaled_relu", REJECTED, "imports `os`", "static"),
    "import_sys": ("scaled_relu", REJECTED, "imports `sys`", "static"),
    "import_importlib": ("scaled_relu", REJECTED, "imports `importlib`", "static"),
    "import_gc": ("scaled_relu", REJECTED, "imports `gc`", "static"),
    "import_inspect": ("scaled_relu", REJECTED, "imports `inspect`", "static"),
    "dunder_bases": ("scaled_relu", REJECTED, "__bases__", "static"),
    "dunder_globals": ("scaled_relu", REJECTED, "__globals__", "static"),
    "dunder_builtins": ("scaled_relu", REJECTED, "__builtins__", "static"),
    # A @triton.jit body that calls torch (the interpreter would run it as Python).
    "triton_body_torch": ("scaled_relu", REJECTED, "kernel bodies may only use triton", "static"),
    # Forbidden modules reached as attributes of allowed ones (torch.threading, F.np,
    # torch.builtins), a kernel body calling a lambda, a Python element-by-element loop: each
    # is caught statically or by the op budget; the guard and the thread counter back them up.
    "thread_via_torch_attr": ("scaled_relu", REJECTED, None, None),
    "numpy_via_functional_np": ("scaled_relu", REJECTED, None, None),
    "kernel_body_calls_lambda": ("scaled_relu", REJECTED, None, None),
    "dispatch_mode_disabled": ("scaled_relu", REJECTED, None, None),
    "python_scalar_loop": ("scaled_relu", REJECTED, None, None),
    # Writes a forged result.json into the judge's cwd via torch.os and kills the judge.
    "forged_verdict": ("scaled_relu", ("rejected", "runtime_error"), None, None),
}

# name -> reference. All must be judged correct.
HONEST: dict[str, str] = {
    "scaled_relu": "scaled_relu",
    "fused_elementwise": "fused_elementwise",
    "row_softmax": "row_softmax",
    "row_sum": "row_sum",
    "matmul": "matmul",
    "linear_relu": "linear_relu",
    "batch_sum_accumulate": "batch_sum",
    "affine_helpers": "affine_3d",
    "center_rows_two_kernels": "center_rows",
    # Multi-config @triton.autotune: the worker replaces the autotuner's GPU benchmarker under
    # the CPU interpreter (which has no driver).
    "autotune_scaled_relu": "scaled_relu",
    "two_outputs": "two_outputs",
}

# Candidates judged against a reference whose forward changes its input in place (relu_): the
# candidate may then change it too, so an honest one and one that writes its result into its
# input are both correct. (kind, name) of the candidate.
AGAINST_IN_PLACE_REFERENCE = (("honest", "scaled_relu"), ("cheats", "inplace_input"))

# Cheats whose single naive call is unsafe or slow to run in-process: forged_verdict kills its
# parent process; torch_compile would start Inductor's C++ compiler.
_NO_NAIVE_RUN = ("forged_verdict", "torch_compile")


def _read(kind: str, name: str) -> str:
  return (CANDIDATES / kind / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def verdicts():
  """Judges every cheat and honest candidate in one pool call: {('cheats'|'honest', name): V}."""
  keys, jobs = [], []
  for name, (ref, *_rest) in CHEATS.items():
    keys.append(("cheats", name))
    jobs.append(Job(_read("references", ref), _read("cheats", name), "triton", name))
  for name, ref in HONEST.items():
    keys.append(("honest", name))
    jobs.append(Job(_read("references", ref), _read("honest", name), "triton", name))
  for kind, name in AGAINST_IN_PLACE_REFERENCE:
    keys.append(("in_place_reference", name))
    jobs.append(Job(_read("references", "scaled_relu_in_place"), _read(kind, name), "triton",
                    f"{name} (in-place reference)"))
  results = SandboxPool(SandboxConfig(device="cpu"), max_parallel=2).evaluate(jobs)
  return dict(zip(keys, results))


def _describe(v) -> str:
  return f"status={v.status} stage={v.stage} reasons={v.reasons!r} evidence={v.evidence!r}"


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheat_is_not_correct(verdicts, name):
  _, statuses, reason, stage = CHEATS[name]
  v = verdicts[("cheats", name)]
  if name == "cache_by_data_ptr" and v.correct:
    # Replays only when a fresh input lands at an address seen before (allocator-dependent).
    # `correct` is right only if no replay happened: the kernel ran on every one of the 6 calls.
    assert v.evidence.get("triton_launches") == {"scaled_relu_kernel": 6}, _describe(v)
    return
  assert not v.correct, f"cheat {name} judged correct: {_describe(v)}"
  assert v.status in statuses, f"cheat {name}: {_describe(v)}"
  if reason is not None:
    assert any(reason in r for r in v.reasons), f"cheat {name}: {_describe(v)}"
  if stage is not None:
    assert v.stage == stage, f"cheat {name}: {_describe(v)}"


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_candidate_is_correct(verdicts, name):
  v = verdicts[("honest", name)]
  assert v.correct, f"honest {name} rejected: {_describe(v)}"
  assert v.num_correct_trials == 5
  assert not v.degenerate
  assert v.evidence.get("triton_launches"), v.evidence
  # No honest reference here changes its inputs, nor does the candidate: no input set was made
  # again to compare them with (Judge._inputs_kept).
  assert "inputs_made_again" not in v.evidence, v.evidence


def test_a_candidate_that_changes_its_inputs_is_caught_on_its_first_check(verdicts):
  v = verdicts[("cheats", "inplace_input")]
  assert v.stage == "correctness" and v.evidence["inputs_made_again"] == 1, _describe(v)


@pytest.mark.parametrize("name", [name for _, name in AGAINST_IN_PLACE_REFERENCE])
def test_a_reference_that_changes_its_inputs_lets_the_candidate_change_them(verdicts, name):
  v = verdicts[("in_place_reference", name)]
  assert v.correct, _describe(v)
  # Its inputs and the reference's differ after every check (5, and the last): made again each
  # time, to find the reference's forward changed them.
  assert v.evidence["inputs_made_again"] == 6, _describe(v)


def test_decoy_is_caught_for_its_compute_not_for_a_missing_launch(verdicts):
  v = verdicts[("cheats", "decoy_launch")]
  assert not any("launched none" in r for r in v.reasons), v.reasons


def test_never_launched_kernel_is_named(verdicts):
  v = verdicts[("cheats", "torch_forward")]
  assert any("launched none of the candidate's @triton.jit kernels" in r for r in v.reasons)


def test_honest_multi_kernel_launch_counts(verdicts):
  # 5 correctness sets + 1 post check, each launching both kernels once.
  launches = verdicts[("honest", "center_rows_two_kernels")].evidence["triton_launches"]
  assert launches == {"row_mean_kernel": 6, "subtract_kernel": 6}


def test_honest_evidence_records_only_allocation_and_views(verdicts):
  ops = set(verdicts[("honest", "batch_sum_accumulate")].evidence["ops"])
  assert {"zeros", "empty", "clone"} <= ops  # .contiguous() of a transposed view is a clone
  assert ops <= {"zeros", "empty", "empty_like", "clone", "select", "transpose", "view"}


def test_candidate_files_have_a_one_line_header():
  for path in sorted(CANDIDATES.glob("*/*.py")):
    first = path.read_text().splitlines()[0]
    assert first.startswith("# ") and len(first) > 10, path


# --------------------------------------------------------------------------------------------
# Each cheat would pass a naive "run once, compare once" check.
# --------------------------------------------------------------------------------------------

_NAIVE_SCRIPT = r'''
import json, os, sys, traceback
os.environ["TRITON_INTERPRET"] = "1"
import torch
import triton  # noqa: F401  (imported before forking, with the interpreter on)
from kernelzero_jax.sandbox import problem

items = json.loads(sys.argv[1])
results = {}
for name, ref_path, cand_path in items:
  r, w = os.pipe()
  pid = os.fork()
  if pid == 0:
    os.close(r)
    msg = "ok"
    try:
      torch.set_grad_enabled(False)
      ref = problem.load_module(open(ref_path).read(), "naive_ref")
      cand = problem.load_module(open(cand_path).read(), "naive_cand")
      dev = torch.device("cpu")
      model = problem.make_model(ref.Model, ref.get_init_inputs, 42, dev)
      new = problem.make_model(cand.ModelNew, ref.get_init_inputs, 42, dev)
      inputs = problem.make_inputs(ref.get_inputs, 1, dev)
      expected = problem.flatten(model(*[t.clone() for t in inputs]))
      got = problem.flatten(new(*inputs))
      for e, g in zip(expected, got):
        if g.shape != e.shape or g.dtype != e.dtype:
          msg = f"shape/dtype {tuple(g.shape)} {g.dtype}"
        elif float((g - e).abs().max()) > 1e-2 + 1e-2 * float(e.abs().max()):
          msg = f"max abs error {float((g - e).abs().max())}"
      if len(expected) != len(got):
        msg = "output count"
    except BaseException as exc:
      msg = "raised: " + "".join(traceback.format_exception_only(type(exc), exc)).strip()
    os.write(w, msg.encode()[:4000])
    os._exit(0)
  os.close(w)
  chunks = []
  while True:
    b = os.read(r, 4096)
    if not b:
      break
    chunks.append(b)
  os.close(r)
  os.waitpid(pid, 0)
  results[name] = b"".join(chunks).decode() or "child died"
print(json.dumps(results))
'''


@pytest.fixture(scope="module")
def naive_results():
  items = [(name, str(CANDIDATES / "references" / f"{ref}.py"),
            str(CANDIDATES / "cheats" / f"{name}.py"))
           for name, (ref, *_rest) in CHEATS.items() if name not in _NO_NAIVE_RUN]
  env = dict(os.environ)
  root = str(pathlib.Path(__file__).resolve().parents[1])
  env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
  proc = subprocess.run([sys.executable, "-c", _NAIVE_SCRIPT, json.dumps(items)], env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", [n for n in CHEATS if n not in _NO_NAIVE_RUN])
def test_cheat_passes_a_naive_single_call_check(naive_results, name):
  assert naive_results[name] == "ok", naive_results[name]

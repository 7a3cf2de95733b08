"""Fault handling of the sandbox on the CPU (Triton interpreter).

Each faulty candidate (tests/candidates/faults/) must end with a sensible status, and the sandbox
must keep working afterwards: all faults run in ONE SandboxPool call whose last job is an honest
candidate, which must still be `correct`. Degenerate and broken references are judged in the same
call. Timeouts are kept small so that the hangs cost seconds, not minutes.
"""

from __future__ import annotations

import pathlib
import sys

import pytest

from kernelzero_jax.sandbox import Job
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import SandboxPool
from kernelzero_jax.sandbox import evaluate_candidate

CANDIDATES = pathlib.Path(__file__).parent / "candidates"

# The build stage includes the worker's own torch + triton import (~6 s alone, more with two
# judges on two cores); 20 s leaves room for that and bounds the import hang.
CONFIG = SandboxConfig(device="cpu", correctness_timeout_s=5.0, build_timeout_s=20.0)

# key -> (candidate path under candidates/, reference name, backend)
JOBS: dict[str, tuple[str, str, str]] = {
    "hang_forward": ("faults/hang_forward", "scaled_relu", "triton"),
    "hang_import": ("faults/hang_import", "scaled_relu", "triton"),
    "oob_store_segfault": ("faults/oob_store_segfault", "scaled_relu", "triton"),
    "system_exit_import": ("faults/system_exit_import", "scaled_relu", "triton"),
    "system_exit_forward": ("faults/system_exit_forward", "scaled_relu", "triton"),
    "raise_import": ("faults/raise_import", "scaled_relu", "triton"),
    "raise_forward": ("faults/raise_forward", "scaled_relu", "triton"),
    "raise_init": ("faults/raise_init", "scaled_relu", "triton"),
    "huge_allocation": ("faults/huge_allocation", "scaled_relu", "triton"),
    "wrong_shape": ("faults/wrong_shape", "scaled_relu", "triton"),
    "wrong_dtype": ("faults/wrong_dtype", "scaled_relu", "triton"),
    "nan_output": ("faults/nan_output", "scaled_relu", "triton"),
    "syntax_error": ("faults/syntax_error", "scaled_relu", "triton"),
    "no_model_new": ("faults/no_model_new", "scaled_relu", "triton"),
    "cuda_on_cpu": ("honest/scaled_relu_cuda", "scaled_relu", "cuda"),
    "broken_reference": ("faults/plus_one_kernel", "broken_forward", "triton"),
    "fake_verdict_print": ("faults/fake_verdict_print", "scaled_relu", "triton"),
    "near_zero_reference": ("faults/constant_kernel", "near_zero", "triton"),
    "dropout_reference": ("faults/plus_one_kernel", "dropout", "triton"),
    # Must stay last: the sandbox still works after every fault above.
    "honest_last": ("honest/scaled_relu", "scaled_relu", "triton"),
}


def _read(path: str) -> str:
  return (CANDIDATES / f"{path}.py").read_text()


@pytest.fixture(scope="module")
def verdicts():
  names = list(JOBS)
  jobs = [Job(_read(f"references/{ref}"), _read(cand), backend, name)
          for name, (cand, ref, backend) in JOBS.items()]
  results = SandboxPool(CONFIG, max_parallel=2).evaluate(jobs)
  return dict(zip(names, results))


def _describe(v) -> str:
  return (f"status={v.status} stage={v.stage} reference_error={v.reference_error} "
          f"degenerate={v.degenerate} reasons={v.reasons!r}")


def _reasons(v) -> str:
  return " ".join(v.reasons)


def _no_sandbox_failure(v) -> None:
  # SandboxPool turns an exception raised by evaluate_candidate into "sandbox failure: ...";
  # none of these faults may get that far.
  assert not any(r.startswith("sandbox failure") for r in v.reasons), _describe(v)


def test_honest_candidate_after_all_faults_is_correct(verdicts):
  v = verdicts["honest_last"]
  assert v.correct, _describe(v)
  assert v.stage == "done"
  # Its judge's account of each exchange with the worker (WorkerHandle._account): the 5 checks
  # and the last one on unseen inputs, each reply read after its worker's own time on it.
  runs = v.evidence["messages"]["run"]
  assert runs["n"] == CONFIG.num_correct_trials + 1
  assert 0 < runs["worker_s"] < runs["until_read_s"] and runs["views_dropped_s"] >= 0
  # ...and the worker's account of each check's parts: they add up to no more than its time.
  parts = [runs[f"worker_{step}_s"] for step in ("inputs", "forward", "checks")]
  assert all(p > 0 for p in parts) and sum(parts) <= runs["worker_s"]
  assert v.evidence["messages"]["init"]["n"] == v.evidence["messages"]["construct"]["n"] == 1
  # The judge's own time to make an input set (Judge._input_set_timed), for the timing's bound.
  assert 0 < v.evidence["input_set_ms"] < 1000 * CONFIG.correctness_timeout_s


@pytest.mark.parametrize("name", [n for n in JOBS if n != "honest_last"])
def test_fault_never_correct_nor_a_sandbox_failure(verdicts, name):
  v = verdicts[name]
  _no_sandbox_failure(v)
  if name not in ("fake_verdict_print", "near_zero_reference"):
    assert not v.correct, _describe(v)


def test_hang_in_forward_times_out(verdicts):
  v = verdicts["hang_forward"]
  assert v.status == "timeout", _describe(v)
  assert v.stage == "correctness"
  assert "5 s" in _reasons(v)


def test_hang_at_import_times_out(verdicts):
  v = verdicts["hang_import"]
  assert v.status == "timeout", _describe(v)
  assert v.stage == "build"


def test_segfault_in_kernel_is_a_runtime_error(verdicts):
  # An out-of-bounds tl.store under the interpreter kills the worker with SIGSEGV.
  v = verdicts["oob_store_segfault"]
  assert v.status == "runtime_error", _describe(v)
  assert "SIGSEGV" in _reasons(v)
  assert not v.reference_error


def test_system_exit_at_import_is_a_compile_error(verdicts):
  v = verdicts["system_exit_import"]
  assert v.status == "compile_error", _describe(v)
  assert "SystemExit" in _reasons(v)


def test_system_exit_in_forward_is_a_runtime_error(verdicts):
  v = verdicts["system_exit_forward"]
  assert v.status == "runtime_error", _describe(v)
  assert "SystemExit" in _reasons(v)


def test_exception_at_import_is_a_compile_error(verdicts):
  v = verdicts["raise_import"]
  assert v.status == "compile_error", _describe(v)
  assert "boom at import" in _reasons(v)
  assert v.stage == "build"
  # how long its build took until it failed (a compile error's cost: sandbox_throughput.by_kind)
  assert 0 < v.stage_seconds["build"] <= v.stage_seconds["total"]


def test_exception_in_forward_is_a_runtime_error(verdicts):
  v = verdicts["raise_forward"]
  assert v.status == "runtime_error", _describe(v)
  assert "boom in forward" in _reasons(v)
  assert not v.reference_error


def test_exception_while_the_model_is_built_is_a_runtime_error_at_init(verdicts):
  """ModelNew is built on the CPU before the GPU is taken (worker.construct), in stage init."""
  v = verdicts["raise_init"]
  assert v.status == "runtime_error", _describe(v)
  assert v.stage == "init" and _reasons(v).startswith("init:") and "boom in init" in _reasons(v)
  assert "candidate_init" not in v.evidence["gpu_seconds"]


def test_huge_allocation_is_a_runtime_error_with_a_memory_reason(verdicts):
  v = verdicts["huge_allocation"]
  assert v.status == "runtime_error", _describe(v)
  assert "memory" in _reasons(v).lower()


@pytest.mark.parametrize("name,reason", [("wrong_shape", "shape"), ("wrong_dtype", "dtype"),
                                         ("nan_output", "non-finite")])
def test_wrong_outputs_are_incorrect(verdicts, name, reason):
  v = verdicts[name]
  assert v.status == "incorrect", _describe(v)
  assert reason in _reasons(v)


@pytest.mark.parametrize("name", ["syntax_error", "no_model_new"])
def test_malformed_candidates_are_format_errors(verdicts, name):
  v = verdicts[name]
  assert v.status == "format_error", _describe(v)


def test_cuda_backend_on_cpu_is_unsupported(verdicts):
  v = verdicts["cuda_on_cpu"]
  assert v.status == "unsupported", _describe(v)
  assert not v.reference_error


def test_broken_reference_is_reported_as_a_reference_error(verdicts):
  v = verdicts["broken_reference"]
  assert v.reference_error, _describe(v)
  assert v.status == "runtime_error"
  assert "this reference is broken" in _reasons(v)


def test_printed_fake_verdict_does_not_change_the_verdict(verdicts):
  v = verdicts["fake_verdict_print"]
  assert v.status == "correct", _describe(v)
  assert v.reasons == [] and v.speedup is None


def test_near_zero_reference_is_flagged_degenerate(verdicts):
  v = verdicts["near_zero_reference"]
  assert v.status == "correct", _describe(v)
  assert "constant_output_passes" in v.degenerate


def test_dropout_reference_is_flagged_not_reproducible(verdicts):
  # The reference checks run before any candidate does (no candidate can match a random mask),
  # and the second reference forward runs under a different random state.
  v = verdicts["dropout_reference"]
  assert v.status != "correct", _describe(v)
  assert "reference_not_reproducible" in v.degenerate, _describe(v)


def test_honest_candidate_is_not_flagged_degenerate(verdicts):
  assert verdicts["honest_last"].degenerate == []


# --------------------------------------------------------------------------------------------
# Caller-side contract (no judge process needed).
# --------------------------------------------------------------------------------------------

def test_unknown_backend_raises_in_the_caller():
  with pytest.raises(ValueError):
    evaluate_candidate("", "", "opencl", SandboxConfig(device="cpu"))


def test_static_rejection_needs_no_torch_and_is_fast():
  # The judge rejects statically before importing torch; a rejected candidate still yields a
  # full verdict with stage "static".
  v = evaluate_candidate(_read("references/scaled_relu"), _read("cheats/import_ctypes"), "triton",
                         SandboxConfig(device="cpu"))
  assert v.status == "rejected" and v.stage == "static", _describe(v)
  assert v.to_dict()["correct"] is False


_FORGING_JUDGE = r"""
import json, os, signal, sys
verdict = {"status": "correct", "speedup": 100.0}
with open(sys.argv[2], "w") as f:
  json.dump({"nonce": "guessed", "verdict": verdict}, f)
if sys.argv[3] == "kill":
  os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("ending", ["exit0", "kill"])
def test_a_forged_result_file_is_not_a_verdict(tmp_path, monkeypatch, ending):
  # Stands in for a candidate that writes the judge's result file and then kills the judge (or
  # lets it exit): without the secret the caller sent on stdin, the file is not believed.
  from kernelzero_jax.sandbox import launchers  # pylint: disable=import-outside-toplevel
  script = tmp_path / "forging_judge.py"
  script.write_text(_FORGING_JUDGE)
  monkeypatch.setattr(launchers, "_judge_command",
                      lambda job, result: [sys.executable, str(script), job, result, ending])
  v = evaluate_candidate(_read("references/scaled_relu"), _read("honest/scaled_relu"), "triton",
                         SandboxConfig(device="cpu"))
  assert v.status == "runtime_error" and not v.correct
  assert ("secret" in v.reasons[0]) if ending == "exit0" else ("SIGKILL" in v.reasons[0] or
                                                               "-9" in v.reasons[0])


@pytest.mark.parametrize("launcher", ["subprocess", "zygote"])
def test_judge_and_worker_end_when_the_caller_is_killed(tmp_path, launcher):
  """A caller killed mid-evaluation (a crashed trainer) leaves no judge or worker spinning (nor
  the warm judge server)."""
  import os
  import signal
  import subprocess
  import time
  import psutil
  script = tmp_path / "caller.py"
  script.write_text(
      "import sys\n"
      "from kernelzero_jax.sandbox import Job, SandboxConfig, SandboxPool\n"
      f"ref = open({str(CANDIDATES / 'references/scaled_relu.py')!r}).read()\n"
      f"cand = open({str(CANDIDATES / 'faults/hang_forward.py')!r}).read()\n"
      "config = SandboxConfig(device='cpu', correctness_timeout_s=600.0, build_timeout_s=60.0)\n"
      f"pool = SandboxPool(config, max_parallel=1, launcher={launcher!r})\n"
      "pool.evaluate([Job(ref, cand, 'triton', 'hang')], progress=False)\n")
  repo = pathlib.Path(__file__).parent.parent
  caller = subprocess.Popen([sys.executable, str(script)], cwd=repo,
                            env=dict(os.environ, PYTHONPATH=str(repo)))
  # caller -> judge -> worker, or caller -> warm server -> judge -> worker
  depth = 2 if launcher == "subprocess" else 3
  family = []
  deadline = time.monotonic() + 120
  while time.monotonic() < deadline and len(family) < depth:  # until the worker exists
    time.sleep(1)
    family = psutil.Process(caller.pid).children(recursive=True)
  assert len(family) >= depth, "the judge never started its worker"
  time.sleep(3)  # the worker is busy in the hanging forward
  caller.send_signal(signal.SIGKILL)
  caller.wait()
  _, alive = psutil.wait_procs(family, timeout=20)
  assert not alive, f"still running after the caller died: {[p.pid for p in alive]}"


def test_a_candidate_fails_before_a_reference_as_when_they_ran_in_turn():
  """The judge computes the reference's outputs while the worker runs the candidate
  (SandboxConfig.concurrent_reference); what fails first is what the verdict says, as before."""
  raises = (_read("faults/raise_forward")
            .replace("def __init__(self, features: int, scale: float):", "def __init__(self):")
            .replace("    self.scale = scale\n", "")
            .replace("torch.randn(features)", "torch.randn(64)")
            .replace("self.scale, BLOCK", "1.0, BLOCK"))
  honest = raises.replace('    raise RuntimeError("boom in forward")\n', "")
  broken = _read("references/broken_forward")
  seen = {}
  for concurrent in (True, False):
    config = SandboxConfig(device="cpu", timing=False, check_degenerate=False,
                           concurrent_reference=concurrent, build_timeout_s=60.0)
    for name, candidate in (("raises", raises), ("honest", honest)):
      v = evaluate_candidate(broken, candidate, "triton", config)
      # (the reason's last line: a traceback names the candidate's own temporary directory)
      seen[name, concurrent] = (v.status, v.stage, v.reference_error,
                                [r.splitlines()[-1] for r in v.reasons[:1]])
  assert seen["raises", True] == seen["raises", False]
  assert seen["raises", True][:3] == ("runtime_error", "correctness", False)
  assert "boom in forward" in seen["raises", True][3][0]
  assert seen["honest", True] == seen["honest", False]
  assert seen["honest", True][:3] == ("runtime_error", "correctness", True)
  assert "this reference is broken" in seen["honest", True][3][0]

"""Caller-side API: evaluate candidates without importing torch in the calling process.

Each evaluation runs in a judge process (judge.py), which in turn runs the candidate in a worker
process of its own. A judge that hangs or dies still yields a verdict here.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import glob
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from typing import Callable, Iterable, Sequence

from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.config import BACKENDS, SandboxConfig

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class Job:
  """One candidate to judge against one reference. `name` is carried into logs only."""
  reference_source: str
  candidate_source: str
  backend: str
  name: str = ""


def cuda_visible() -> bool:
  """True when an NVIDIA device node exists (checked without importing torch)."""
  if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
    return False
  return bool(glob.glob("/dev/nvidia[0-9]*"))


def overall_timeout_s(config: SandboxConfig) -> float:
  """Upper bound for one judge: every stage at its limit, plus start-up margin."""
  return (config.build_timeout_s + config.correctness_timeout_s * (config.num_correct_trials + 3)
          + (config.timing_timeout_s if config.timing else 0.0) + 180.0)


def _judge_command(job_path: str, result_path: str) -> list[str]:
  return [sys.executable, "-m", "kernelzero_jax.sandbox.judge", job_path, result_path]


def evaluate_candidate(reference_source: str, candidate_source: str, backend: str,
                       config: SandboxConfig | None = None, gpu_index: int = 0) -> V.Verdict:
  """Judges one candidate. Never raises for anything the candidate or reference does."""
  config = config or SandboxConfig()
  if backend not in BACKENDS:
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
  job = {"reference_source": reference_source, "candidate_source": candidate_source,
         "backend": backend, "config": config.to_dict(), "gpu_index": gpu_index}
  with tempfile.TemporaryDirectory(prefix="kz_judge_") as tmp:
    job_path, result_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
    log_path = os.path.join(tmp, "judge.log")
    with open(job_path, "w") as f:
      json.dump(job, f)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    nonce = secrets.token_hex(16)
    judge_cwd = os.path.join(tmp, "cwd")
    os.mkdir(judge_cwd)
    with open(log_path, "w") as log:
      proc = subprocess.Popen(_judge_command(job_path, result_path), stdin=subprocess.PIPE, stdout=log, stderr=log,
                              env=env, cwd=judge_cwd, start_new_session=True)
      timed_out = False
      try:
        proc.stdin.write(nonce.encode() + b"\n")
        proc.stdin.close()
      except OSError:
        pass
      try:
        proc.wait(timeout=overall_timeout_s(config))
      except subprocess.TimeoutExpired:
        timed_out = True
      finally:
        try:
          os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
          pass
        proc.wait()
    result = _read_result(result_path) if proc.returncode == 0 and not timed_out else None
    if result is not None and result.get("nonce") == nonce:
      return V.Verdict.from_dict(result["verdict"])
    with open(log_path, errors="replace") as f:
      tail = " | ".join(f.read()[-2000:].strip().splitlines()[-6:])
    if timed_out:
      return V.Verdict(status=V.TIMEOUT, backend=backend, device=config.device,
                       reasons=[f"the evaluation exceeded {overall_timeout_s(config):g} s "
                                f"(the reference may hang); {tail}"])
    why = ("its result did not carry this evaluation's secret (forged)" if result is not None
           else f"exit code {proc.returncode}")
    return V.Verdict(status=V.RUNTIME_ERROR, backend=backend, device=config.device,
                     reasons=[f"the judge process ended without a valid verdict ({why}); a "
                              f"candidate may have killed it; {tail}"])


def _read_result(path: str) -> dict | None:
  try:
    with open(path) as f:
      result = json.load(f)
    return result if isinstance(result, dict) and isinstance(result.get("verdict"), dict) else None
  except (OSError, ValueError):
    return None


class SandboxPool:
  """Evaluates many candidates at once.

  Up to `max_parallel` judges run concurrently (builds use all CPU cores); on a GPU, correctness
  and timing are serialised per GPU by a lock inside the judges, so timings are not disturbed.
  Jobs are spread round-robin over `gpu_indices`.
  """

  def __init__(self, config: SandboxConfig | None = None, max_parallel: int | None = None,
               gpu_indices: Sequence[int] = (0,)):
    self.config = config or SandboxConfig()
    self.max_parallel = max_parallel or max(1, os.cpu_count() or 1)
    self.gpu_indices = list(gpu_indices) or [0]

  def evaluate(self, jobs: Iterable[Job], progress: bool = False,
               on_result: Callable[[int, Job, V.Verdict], None] | None = None) -> list[V.Verdict]:
    """Returns verdicts in job order. `on_result` sees each verdict as soon as it exists, so a
    caller can persist it before the rest are done."""
    jobs = list(jobs)
    results: list[V.Verdict | None] = [None] * len(jobs)
    bar = None
    if progress:
      from tqdm import tqdm  # pylint: disable=import-outside-toplevel
      bar = tqdm(total=len(jobs), desc="sandbox", unit="cand")
    with concurrent.futures.ThreadPoolExecutor(self.max_parallel) as ex:
      futures = {ex.submit(evaluate_candidate, j.reference_source, j.candidate_source, j.backend,
                           self.config, self.gpu_indices[i % len(self.gpu_indices)]): i
                 for i, j in enumerate(jobs)}
      passed = 0
      for fut in concurrent.futures.as_completed(futures):
        i = futures[fut]
        try:
          verdict = fut.result()
        except Exception as e:  # pylint: disable=broad-except
          verdict = V.Verdict(status=V.RUNTIME_ERROR, backend=jobs[i].backend,
                              reasons=[f"sandbox failure: {type(e).__name__}: {e}"])
        results[i] = verdict
        passed += verdict.correct
        if on_result is not None:
          on_result(i, jobs[i], verdict)
        if bar is not None:
          bar.update(1)
          bar.set_postfix(correct=f"{passed}/{bar.n}")
    if bar is not None:
      bar.close()
    return results  # type: ignore[return-value]

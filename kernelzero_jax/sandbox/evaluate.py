"""Caller-side API: evaluate candidates without importing torch in the calling process.

Each evaluation runs in a judge process (judge.py), which in turn runs the candidate in a worker
process of its own. A judge that hangs or dies still yields a verdict here.
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import glob
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Iterable, Sequence

from kernelzero_jax.sandbox import gpu_budget
from kernelzero_jax.sandbox import job_order
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.config import BACKENDS, SandboxConfig
from kernelzero_jax.sandbox.launchers import (SubprocessLauncher, ZygoteLauncher, judge_env,
                                               kill_group, make_launcher, run_judge)
from kernelzero_jax.sandbox.module_check import ModuleLimits, ModuleVerdict
from kernelzero_jax.sandbox.pass_rates import PassRates


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


def evaluate_candidate(reference_source: str, candidate_source: str, backend: str,
                       config: SandboxConfig | None = None, gpu_index: int = 0,
                       launcher: SubprocessLauncher | ZygoteLauncher | None = None,
                       facts_path: str | None = None, judges_on_gpu: int = 1,
                       judges_at_once: int = 1, fresh_worker: bool = False) -> V.Verdict:
  """Judges one candidate. Never raises for anything the candidate or reference does.

  `launcher` starts the judge process (default: a plain subprocess); the verdict does not depend
  on it. `facts_path` is a file that judges of the same reference, config and GPU share
  (judge_reference.share_facts; SandboxPool.facts_path): the judge reads what is there when it
  needs a fact about the reference, instead of measuring it again, and adds what it measured.
  `judges_on_gpu`: how many judges may run on its GPU at once (their processes' memory is not
  there for checks to share: gpu_budget.check_width); `judges_at_once`: on this machine (with
  others, the processes that only build run niced: SandboxConfig.build_nice). `fresh_worker`:
  the candidate runs in a new worker, never in one kept after another candidate
  (SandboxConfig.candidates_per_worker; the pool's choice: pass_rates.py)."""
  config = config or SandboxConfig()
  if backend not in BACKENDS:
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
  job = {"reference_source": reference_source, "candidate_source": candidate_source,
         "backend": backend, "config": config.to_dict(), "gpu_index": gpu_index,
         "facts_path": facts_path, "judges_on_gpu": judges_on_gpu,
         "judges_at_once": judges_at_once}
  if fresh_worker:
    job["fresh_worker"] = True
  verdict = _judge_once(job, config, launcher)
  if shared_gpu_oom(verdict, config):
    # Out of GPU memory while other judges' checks shared the GPU: their tensors may be what
    # filled it, which says nothing about this candidate. Judged again with the GPU to itself,
    # the verdict is the one a one-at-a-time GPU (gpu_concurrency=1) would give.
    first = verdict
    verdict = _judge_once({**job, "exclusive_gpu": True}, config, launcher)
    verdict.evidence["shared_gpu_oom"] = first.reasons[:2]
    verdict.evidence["shared_gpu_oom_attempt"] = V.first_attempt(first.evidence)
  return verdict


def _judge_once(job: dict, config: SandboxConfig, launcher) -> V.Verdict:
  verdict, why, timed_out = run_judge(job, config, launcher)
  if verdict is not None:
    return V.Verdict.from_dict(verdict)
  status = V.TIMEOUT if timed_out else V.RUNTIME_ERROR
  return V.Verdict(status=status, backend=job["backend"], device=config.device, reasons=[why])


# torch.OutOfMemoryError ("CUDA out of memory"), "CUDA error: out of memory" from the driver,
# "CUBLAS_STATUS_ALLOC_FAILED" / cuDNN allocation failures: whoever allocated last fails.
_GPU_OOM = re.compile(r"out of memory|OutOfMemoryError|ALLOC_FAILED|ALLOCATION_FAILED", re.I)


def shared_gpu_oom(verdict: V.Verdict, config: SandboxConfig) -> bool:
  """Whether `verdict` is a failure for lack of GPU memory on a GPU that the judge shared
  with other judges' checks (gpu_concurrency > 1), so that the candidate must be judged again
  with the GPU to itself before the failure can count against it."""
  return (config.device == "cuda" and config.gpu_concurrency > 1 and not verdict.correct
          and verdict.status != V.TIMEOUT and any(_GPU_OOM.search(r) for r in verdict.reasons))


def validate_module(module_source: str, config: SandboxConfig | None = None,
                    limits: ModuleLimits | None = None, gpu_index: int = 0,
                    launcher: SubprocessLauncher | ZygoteLauncher | None = None) -> ModuleVerdict:
  """Runs a proposed module in a worker and says whether it makes a usable problem
  (module_check.py). Never raises for anything the module does."""
  config = config or SandboxConfig()
  job = {"kind": "module", "module_source": module_source, "config": config.to_dict(),
         "limits": dataclasses.asdict(limits or ModuleLimits()), "gpu_index": gpu_index}
  verdict, why, timed_out = run_judge(job, config, launcher)
  if verdict is not None and "valid" in verdict:
    return ModuleVerdict.from_dict(verdict)
  if verdict is not None:  # the judge itself failed (its error verdict)
    why = "; ".join(verdict.get("reasons", [])) or "the judge failed"
  rejection = "timeout" if timed_out else "does_not_run"
  return ModuleVerdict(rejection=rejection, reasons=[why])


class SandboxPool:
  """Evaluates many candidates at once.

  Up to `max_parallel` judges run concurrently (builds use all CPU cores); on a GPU, correctness
  and timing are serialised per GPU by a lock inside the judges, so timings are not disturbed.
  Jobs are spread round-robin over `gpu_indices`.

  `launcher` names how judges start (LAUNCHERS): "zygote" forks them from a warm server that
  the pool keeps for its lifetime (`close()` stops it), "subprocess" starts fresh interpreters.
  Verdicts do not depend on it. Unset, it is $KERNELZERO_SANDBOX_LAUNCHER, else "zygote".
  """

  def __init__(self, config: SandboxConfig | None = None, max_parallel: int | None = None,
               gpu_indices: Sequence[int] = (0,), launcher: str | None = None):
    launcher = launcher or os.environ.get("KERNELZERO_SANDBOX_LAUNCHER") or "zygote"
    self.config = config or SandboxConfig()
    self.max_parallel = max_parallel or max(1, os.cpu_count() or 1)
    self.gpu_indices = list(gpu_indices) or [0]
    self.launcher = make_launcher(launcher, self.config.device)
    self._machine_builds: dict[str, subprocess.Popen] = {}  # _start_machine_builds
    self._warm_up: threading.Thread | None = None  # warm_up's start of the server
    # One file per reference_key, where judges share what they measured about that reference
    # (SandboxConfig.reuse_reference) as soon as they measured it, so judges that run at the
    # same time reuse it too; kept for the pool's lifetime, so later batches reuse them as well.
    self._facts_dir: str | None = None
    self._facts_lock = threading.Lock()
    # Each reference's recent verdicts, for the pool's lifetime: which candidates a kept worker
    # serves (SandboxConfig.keep_worker_min_pass_rate).
    self.pass_rates = PassRates()
    self._judge_count_checked = False  # _check_judge_count, once per pool

  def reference_key(self, reference_source: str, gpu_index: int) -> str:
    """What a reference's facts depend on: its source, the judging config, the GPU."""
    blob = json.dumps([reference_source, self.config.to_dict(), gpu_index], sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()

  def gpu_of(self, i: int) -> int:
    """The GPU of the pool's i-th job (of a batch, a module check, a judge started ahead):
    round-robin over gpu_indices."""
    return self.gpu_indices[i % len(self.gpu_indices)]

  def facts_path(self, reference_source: str, gpu_index: int) -> str:
    """The file where judges of this reference, config and GPU share the reference's facts."""
    with self._facts_lock:
      if self._facts_dir is None:
        self._facts_dir = tempfile.mkdtemp(prefix="kz_reference_facts_")
      directory = self._facts_dir
    return os.path.join(directory, self.reference_key(reference_source, gpu_index) + ".json")

  def warm_up(self, backends: Iterable[str] = (), wait: bool = False) -> None:
    """Starts now what the first judgement would start: the warm judge server (about 9 s on an
    H200 machine) and the machine builds for candidates of `backends` (_start_machine_builds).
    A caller that samples its candidates first (the Coder's environment) calls it before, so
    that they start meanwhile. `wait`: returns once the server runs (a benchmark that times
    judgements, not the start). Nothing here fails: a server that does not start leaves plain
    judge processes, as at a first judgement."""
    self._start_machine_builds(set(backends))
    if not isinstance(self.launcher, ZygoteLauncher):
      return
    if wait:
      self.launcher.start()
    elif self._warm_up is None or not self._warm_up.is_alive():
      self._warm_up = threading.Thread(target=self.launcher.start, name="kz-sandbox-warm-up",
                                       daemon=True)
      self._warm_up.start()

  def start_judges(self, judges: int | None = None) -> dict:
    """Starts `judges` (default: max_parallel) judge processes ahead of the candidates, spread
    over the pool's GPUs as its jobs are, and returns once they are ready: each makes its device
    ready as a first candidate's judge would (its CUDA context under the start-up fence, the
    warm-up, the comparison kernel: judge_start.py) and then waits in the warm server, for up to
    zygote.JUDGE_IDLE_S, for the pool's next jobs, which find all of that done. Only where judges
    come from the warm server and one serves several jobs (SandboxConfig.jobs_per_judge: on a
    GPU by default); elsewhere none starts. They come on top of any judge processes already
    idle in the server (the last batch's, for up to JUDGE_IDLE_S): call it before a batch that
    finds none, as a first one does. Returns {"started": how many are ready, "pids": their
    processes, "failed": why the others are not, "seconds": the wall time}; a start that fails
    leaves the pool's jobs to start their judges as before."""
    # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import judge_start
    t0 = time.perf_counter()
    out: dict = {"started": 0, "pids": [], "failed": [], "seconds": 0.0}
    count = self.max_parallel if judges is None else judges
    if (count < 1 or not isinstance(self.launcher, ZygoteLauncher)
        or self.config.jobs_per_judge() < 2 or not self.launcher.start()):
      return out
    jobs = [{"kind": judge_start.KIND, "config": self.config.to_dict(),
             "gpu_index": self.gpu_of(i)} for i in range(count)]

    def start(job: dict) -> tuple[dict | None, str, bool]:
      try:
        return run_judge(job, self.config, self.launcher)
      except Exception as e:  # pylint: disable=broad-except
        return None, f"{type(e).__name__}: {e}", False

    with concurrent.futures.ThreadPoolExecutor(count) as ex:
      for report, why, _ in ex.map(start, jobs):
        if report is not None and report.get("ready") is True:
          out["started"] += 1
          out["pids"].append((report.get("evidence") or {}).get("judge_process", {}).get("pid"))
        else:
          out["failed"].append(why or "; ".join((report or {}).get("reasons", []))[:500])
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out

  def _start_machine_builds(self, backends: set[str]) -> None:
    """What judges on a GPU share, built once per machine by a trusted process in the
    background, with the first candidate that needs it: the precompiled header for CUDA builds
    (fast_build.py), Triton's driver utilities for Triton candidates (triton_seed.py). Judges use
    them once they exist, and build as before until then."""
    cfg = self.config
    if cfg.device != "cuda":
      return
    from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
    cache = cfg.pch_dir or fast_build.default_cache_dir()
    wanted = {
        "pch": (cfg.fast_build and "cuda" in backends,
                ["kernelzero_jax.sandbox.fast_build", cache, "cuda"]),
        "triton_seed": (cfg.triton_seed and "triton" in backends,
                        ["kernelzero_jax.sandbox.triton_seed", cache]),
    }
    for name, (needed, args) in wanted.items():
      if not needed or name in self._machine_builds:
        continue
      os.makedirs(cache, exist_ok=True)
      with open(os.path.join(cache, "build.log"), "a") as log:  # pylint: disable=unspecified-encoding
        self._machine_builds[name] = subprocess.Popen(  # pylint: disable=consider-using-with
            [sys.executable, "-m", *args], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env=judge_env(), start_new_session=True)

  def close(self) -> None:
    if self._warm_up is not None:
      self._warm_up.join()  # else the server it is starting would outlive the pool
    if isinstance(self.launcher, ZygoteLauncher):
      self.launcher.close()
    with self._facts_lock:
      if self._facts_dir is not None:
        shutil.rmtree(self._facts_dir, ignore_errors=True)
        self._facts_dir = None
    for build in self._machine_builds.values():
      if build.poll() is None:
        kill_group(build.pid)  # an unfinished build leaves nothing but its tmp dir
        build.wait()

  def __enter__(self) -> "SandboxPool":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def _check_judge_count(self, judges_on_gpu: int) -> None:
    """Warns, once, where this many judges on a GPU leave its correctness checks no room in
    gpu_budget's memory model: every check then runs with the GPU alone, and their processes
    may not fit at all (max_parallel defaults to one judge per CPU core, 64 on a large host
    with one GPU: 100 GiB of processes)."""
    if self._judge_count_checked or self.config.device != "cuda":
      return
    self._judge_count_checked = True
    gpu_bytes = gpu_budget.smallest_gpu_bytes()
    if gpu_bytes is None:
      return
    most = gpu_budget.judges_with_room(gpu_bytes)
    if judges_on_gpu > most:
      logging.warning(
          "%d sandbox judges per GPU (max_parallel=%d over %d GPU(s)) leave no room for "
          "correctness checks on a GPU of %.1f GiB (each judge's processes hold about %.1f "
          "GiB): every check will hold the GPU alone. At most %d per GPU leave room: "
          "max_parallel=%d.", judges_on_gpu, self.max_parallel, len(self.gpu_indices),
          gpu_bytes / 2**30, gpu_budget.JUDGE_GPU_BYTES / 2**30, most,
          most * len(self.gpu_indices))

  def _map(self, judge: Callable[[int, object], object], items: list, fallback, desc: str,
           progress: bool, on_result: Callable | None, passed: Callable[[object], bool]) -> list:
    """`judge(i, item)` for every item on `max_parallel` threads; results in item order. A
    judgement that raises gets `fallback(item, error)` instead, so one failure loses nothing."""
    results: list = [None] * len(items)
    bar = None
    if progress:
      from tqdm import tqdm  # pylint: disable=import-outside-toplevel
      bar = tqdm(total=len(items), desc=desc, unit="job")
    with concurrent.futures.ThreadPoolExecutor(self.max_parallel) as ex:
      futures = {ex.submit(judge, i, item): i for i, item in enumerate(items)}
      num_passed = 0
      for fut in concurrent.futures.as_completed(futures):
        i = futures[fut]
        try:
          result = fut.result()
        except Exception as e:  # pylint: disable=broad-except
          result = fallback(items[i], f"sandbox failure: {type(e).__name__}: {e}")
        results[i] = result
        num_passed += passed(result)
        if on_result is not None:
          on_result(i, items[i], result)
        if bar is not None:
          bar.update(1)
          bar.set_postfix(passed=f"{num_passed}/{bar.n}")
    if bar is not None:
      bar.close()
    return results

  def evaluate(self, jobs: Iterable[Job], progress: bool = False,
               on_result: Callable[[int, Job, V.Verdict], None] | None = None,
               once_per_candidate: bool = True) -> list[V.Verdict]:
    """Returns verdicts in job order, whatever order SandboxConfig.job_order starts them in.
    `on_result` sees each verdict as soon as it exists, so a caller can persist it before the
    rest are done.

    Identical jobs (same reference, candidate and backend), common in RL groups and among the
    samples of a nearly deterministic policy, are judged once unless `once_per_candidate` is
    False: each copy gets its own copy of the first one's verdict, with
    `evidence["same_candidate_as"]` naming that job's index."""
    jobs = list(jobs)
    first: dict[tuple[str, str, str], int] = {}
    copies_of: dict[int, list[int]] = {}  # judged job index -> the indices of its copies
    for i, j in enumerate(jobs):
      key = (j.reference_source, j.candidate_source, j.backend)
      if once_per_candidate and key in first:
        copies_of[first[key]].append(i)
      else:
        first.setdefault(key, i)
        copies_of[i] = []
    # Started in the config's order (job_order.py); `relay` puts each verdict back in its place.
    unique = list(copies_of)
    judged = [unique[u] for u in job_order.order(
        self.config.job_order, [(jobs[i].reference_source, jobs[i].backend) for i in unique])]
    results: list[V.Verdict | None] = [None] * len(jobs)

    def relay(u: int, job: Job, verdict: V.Verdict) -> None:
      i = judged[u]
      results[i] = verdict
      if on_result is not None:
        on_result(i, job, verdict)
      for c in copies_of[i]:
        results[c] = copy.deepcopy(verdict)
        results[c].evidence["same_candidate_as"] = i
        if on_result is not None:
          on_result(c, jobs[c], results[c])

    self._judge_all([jobs[i] for i in judged], progress, relay)
    return results  # type: ignore[return-value]

  def _judge_all(self, jobs: list[Job], progress: bool,
                 on_result: Callable[[int, Job, V.Verdict], None]) -> list[V.Verdict]:
    self._start_machine_builds({j.backend for j in jobs})
    submitted = time.perf_counter()
    judges_on_gpu = -(-self.max_parallel // len(self.gpu_indices))  # at most, per GPU
    judges_at_once = min(self.max_parallel, len(jobs))  # at most, on this machine
    self._check_judge_count(judges_on_gpu)

    choose_workers = self.config.worker_candidates() > 1

    def judge(i: int, j: Job) -> V.Verdict:
      started = time.perf_counter()
      gpu = self.gpu_of(i)
      facts = (self.facts_path(j.reference_source, gpu) if self.config.reuse_reference
               else None)
      # (A digest: the pool keeps its keys for its lifetime, as an RL run's modules come and go.)
      rates_key = (hashlib.sha256(j.reference_source.encode()).digest()[:16], j.backend)
      pass_rate = self.pass_rates.estimate(rates_key)
      fresh = choose_workers and pass_rate < self.config.keep_worker_min_pass_rate
      verdict = evaluate_candidate(j.reference_source, j.candidate_source, j.backend, self.config,
                                   gpu, self.launcher, facts_path=facts,
                                   judges_on_gpu=judges_on_gpu, judges_at_once=judges_at_once,
                                   fresh_worker=fresh)
      self.pass_rates.record(rates_key, verdict.correct)
      if choose_workers:
        verdict.evidence["worker_choice"] = {"pass_rate": round(pass_rate, 4),
                                             "fresh_worker": fresh}
      # Caller-side times: waiting for a free slot, and the whole judgement from launch to
      # verdict (the stages inside it are the judge's own entries).
      verdict.stage_seconds["queue"] = round(started - submitted, 3)
      verdict.stage_seconds["total"] = round(time.perf_counter() - started, 3)
      return verdict

    def fallback(job: Job, why: str) -> V.Verdict:
      return V.Verdict(status=V.RUNTIME_ERROR, backend=job.backend, reasons=[why])

    return self._map(judge, jobs, fallback, "sandbox", progress, on_result,
                     lambda v: v.correct)

  def validate_modules(self, sources: Sequence[str], limits: ModuleLimits | None = None,
                       progress: bool = False) -> list[ModuleVerdict]:
    """`validate_module` for each proposed module, in parallel like `evaluate`; in order."""

    def judge(i: int, source: str) -> ModuleVerdict:
      started = time.perf_counter()
      verdict = validate_module(source, self.config, limits, self.gpu_of(i), self.launcher)
      verdict.seconds = round(time.perf_counter() - started, 3)
      return verdict

    def fallback(source: str, why: str) -> ModuleVerdict:
      del source
      return ModuleVerdict(rejection="does_not_run", reasons=[why])

    return self._map(judge, list(sources), fallback, "modules", progress, None,
                     lambda v: v.valid)

"""The judge's candidate worker (a part of Judge, judge.py): its start (or a kept one's), the
builders beside it (a CUDA candidate's prebuilder, a Triton candidate's precompiler), its go, the
replies it owes, and whether it is kept for the next job.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import threading
import time
from typing import Any

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import judge_gpu
from kernelzero_jax.sandbox import light_names
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox.go_gate import GoGate
from kernelzero_jax.sandbox.worker_handle import StageFailure, WorkerHandle


# A Triton worker that waits for its judge to time the reference first gets its go at the latest
# this long after its start (its own start-up takes about 0.45 s on an H200 machine): a judge still
# loading a large reference by then would hold its worker back for nothing.
TRITON_GO_DEADLINE_S = 1.0


@functools.cache
def gpu_capability() -> int | None:
  """The compute capability every GPU of this machine shares (NVML, which starts no CUDA
  context), read once per process; None where there is none."""
  from kernelzero_jax.sandbox import triton_precompile  # pylint: disable=import-outside-toplevel
  return triton_precompile.nvml_capability()


def startup_seconds(built: dict[str, Any], worker_started: float,
                    judge_laps: dict[str, float]) -> dict[str, dict[str, float]]:
  """Where the time up to a built candidate went, for evidence["startup_seconds"]: the worker's
  steps in order (`start`: from the judge starting it to its entry point; then its own steps;
  `candidate_import`: the candidate's module) and the judge's, which overlap the worker's.

  The worker reports its steps after the candidate's code has run, so they are for reading
  only, never for a verdict, and anything in them that is not a finite number is dropped."""
  finite = worker_handle.finite_number
  worker: dict[str, float] = {}
  if finite(built.get("entered_at")):
    worker["start"] = round(built["entered_at"] - worker_started, 4)
  laps = built.get("startup_seconds")
  if isinstance(laps, dict):
    worker.update({str(k)[:32]: round(x, 4) for k, x in list(laps.items())[:16] if finite(x)})
  if finite(built.get("seconds")):
    worker["candidate_import"] = round(built["seconds"], 4)
  return {"worker": worker, "judge": dict(judge_laps)}


def fence_span(held: Any) -> list[float] | None:
  """The wall-clock bounds [from, to] of a new worker's start-up fence (its build reply's
  "fence_held"), for evidence["fence_holds"]: the worker tells it after its candidate's code
  ran, so it is for reading only, and anything but two finite times in order is dropped."""
  finite = worker_handle.finite_number
  if (isinstance(held, list) and len(held) == 2 and all(finite(x) for x in held)
      and held[0] <= held[1]):
    return [round(float(held[0]), 3), round(float(held[1]), 3)]
  return None


def build_steps(steps: Any) -> list[dict[str, Any]]:
  """The worker's load_inline calls with their seconds (fast_build.fast_load_inline's `steps`),
  for evidence["build_steps"]: the worker reports them after the candidate's code ran, so they
  are for reading only, and only well-formed entries of known steps are kept (at most 8)."""
  from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
  kept = []
  for step in steps[:8] if isinstance(steps, list) else []:
    if (isinstance(step, dict) and step.get("step") in fast_build.BUILD_STEPS
        and worker_handle.finite_number(step.get("seconds")) and step["seconds"] >= 0):
      kept.append({"step": step["step"], "seconds": round(float(step["seconds"]), 3),
                   "ok": step.get("ok") is True})
  return kept


class WorkerSteps:
  """Judge's handling of its candidate's worker and builders. A mixin of Judge: the state it
  reads is Judge.__init__'s."""

  def _start_worker(self) -> None:
    cfg = self.cfg
    spec = {"workdir": self.workdir,
            "device": judge_gpu.device_name(cfg, self.job.get("gpu_index", 0)),
            "backend": self.backend, "candidate_source": self.job["candidate_source"],
            "reference_source": self.job["reference_source"],
            "memory_limit_gb": cfg.memory_limit_gb, "gpu_memory_fraction": cfg.gpu_memory_fraction,
            "registered_uploads": cfg.registered_uploads,
            "own_kernel_names": self.own_kernels,
            "setup_kernel_ms_limit": cfg.setup_kernel_ms_limit}
    if cfg.device == "cuda" and cfg.startup_fence:  # the worker's start-up takes it too
      spec["startup_fence"] = [int(self.job.get("gpu_index", 0)), tempfile.gettempdir(),
                               cfg.startups_at_once]
    if self.backend == "cuda" and cfg.fast_build:
      from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
      self.pch_header = fast_build.ready_pch(cfg.pch_dir or fast_build.default_cache_dir(),
                                             with_cuda=True)
      spec["fast_build"] = True
      spec["pch_header"] = self.pch_header
      if cfg.lite_cuda_header and self.pch_header and fast_build.lite_intact(self.pch_header):
        self.lite_object = spec["lite_object"] = fast_build.lite_object_of(self.pch_header)
        spec["lite_main"] = cfg.lite_main_cpp
        spec["capi_main"] = cfg.lite_main_cpp and cfg.lite_capi_main
        if cfg.lite_main_cpp and cfg.lite_bind_pch and fast_build.bind_intact(self.pch_header):
          self.bind_dir = spec["bind_dir"] = fast_build.bind_dir_of(self.pch_header)
        names = light_names.path_of(self.pch_header)
        if cfg.skip_light_after_lite_errors and os.path.exists(names):
          spec["light_names"] = names
    if self.backend == "triton" and cfg.device == "cuda" and cfg.triton_seed:
      self._plant_triton_seed()
    prebuild = spec.get("fast_build") and cfg.device == "cuda" and cfg.cuda_prebuild
    # A CUDA worker without a prebuilder builds at once: its candidate's code would run while
    # the reference is timed.
    self.awaits_go = (cfg.device == "cuda" and cfg.reference_first
                      and (self.backend == "triton" or prebuild) and self._reference_unmeasured())
    self.go_gate = GoGate() if self.awaits_go else None
    self.worker_started = time.perf_counter()
    if (worker_handle.KEEP_WORKERS and cfg.worker_candidates() > 1
        and not self.job.get("fresh_worker")):
      spec["candidates_per_worker"] = cfg.worker_candidates()
      # Extension names of this candidate's own (worker_build._renamed), its prebuilder's too.
      spec["extension_suffix"] = "_kz" + os.urandom(4).hex()
      self.worker_key = worker_handle.worker_key(spec)
    worker_spec = dict(spec, await_go=True) if prebuild or self.awaits_go else spec
    self._worker_spec = worker_spec  # (a new worker's, where it replaces a kept one)
    if not worker_spec.get("await_go"):  # it imports its candidate as soon as it is set up
      self._open_setup_window("import")
    # A kept worker looks itself over first (worker_handle.take_kept_worker, a few tenths of a
    # second): its builders start before that, and the look runs in a thread while this judge
    # loads the reference and times it (_reference_first: the look is the worker's own CPU work,
    # with no candidate of this job in it, and a new worker started where it fails starts its
    # CUDA context inside the fence, apart from that timing). On an H200, done before them, the
    # look held a lone Triton candidate back 0.33 s. A new worker's start beside the builders,
    # as it always has.
    builders_first = self.worker_key is not None and worker_handle.PARKED is not None
    if builders_first:
      self._start_builders(spec, prebuild)
      self._looking = True
      self._looking_thread = threading.Thread(target=self._take_worker, args=(worker_spec,),
                                              name="kept-worker-look", daemon=True)
      self._looking_thread.start()
    else:
      self._take_worker(worker_spec)
    if self.awaits_go and not prebuild:
      self._go_timer = threading.Timer(TRITON_GO_DEADLINE_S, self._let_triton_worker_go)
      self._go_timer.daemon = True
      self._go_timer.start()
    if not builders_first:
      self._start_builders(spec, prebuild)
    if prebuild:  # the worker builds once its prebuilder is done
      self._start_hand_over()

  def _take_worker(self, worker_spec: dict[str, Any]) -> None:
    """The kept worker, if it passes its look (worker_handle.take_kept_worker), else a new one,
    as this judge's worker. (In a thread where a kept worker looks: _looking_thread.)"""
    try:
      kept, reuse = (worker_handle.take_kept_worker(self.worker_key) if self.worker_key
                     else (None, None))
      if kept is not None:
        kept.next_candidate(worker_spec)
        self.worker, self.worker_serves = kept, reuse["served"] + 1
      else:
        self.worker = WorkerHandle(worker_spec, self.cfg.memory_limit_gb)
        self.worker_serves = 1
      if reuse is not None:
        self.verdict.evidence["worker_reuse"] = dict(reuse, kept=kept is not None)
      self._record_worker()
    except BaseException as e:  # pylint: disable=broad-except
      if not self._looking:
        raise
      self._looking_error = e  # raised where the judge waits for its worker (_await_worker)
    finally:
      with self._go_lock:
        self._looking = False
        deferred, self._go_deferred = self._go_deferred, False
      if deferred:
        self._let_triton_worker_go()

  def _join_look(self) -> None:
    """Waits for the kept worker's look (_take_worker), if one was started."""
    if self._looking_thread is not None:
      self._looking_thread.join()

  def _await_worker(self) -> None:
    """_join_look, then raises what failed in the look."""
    self._join_look()
    error, self._looking_error = self._looking_error, None
    if error is not None:
      raise error

  def _start_builders(self, spec: dict[str, Any], prebuild: bool) -> None:
    """Workers beside the worker that only build: on no GPU, niced (SandboxConfig.build_nice)
    where other judges may be timing meanwhile (alone, its build is this judge's critical
    path), and killing one leaves the candidate's worker alone."""
    cfg = self.cfg
    from kernelzero_jax.sandbox import worker  # pylint: disable=import-outside-toplevel
    nice = cfg.build_nice if int(self.job.get("judges_at_once") or 1) > 1 else 0

    def builder(role: str) -> WorkerHandle:
      # The GPUs' compute capability, for which it builds, read by the judge (once per
      # process), so that it need not read NVML itself (in a worker forked from a forked worker
      # server, NVML state an import left behind failed on an H200: forked_worker_server.py).
      capability = gpu_capability()
      return WorkerHandle(dict(spec, role=role, device="meta", nice=nice,
                               triton_capability=capability, cuda_capability=capability),
                          cfg.memory_limit_gb, kill_descendants=False)

    if prebuild:
      # Beside the worker, while that one sets itself up: the candidate's extensions built into
      # the directory they share (_start_hand_over).
      self.prebuilder = builder(worker.PREBUILD)
    if self.backend == "triton" and cfg.device == "cuda" and cfg.triton_precompile:
      # Beside the worker, while that one starts its CUDA context: the candidate's kernels
      # compiled into the cache they share.
      self.precompiler = builder(worker.PRECOMPILE)

  def _plant_triton_seed(self) -> None:
    """Triton's driver utilities into the candidate's cache, before its processes start
    (triton_seed.py); without a seed built on this machine, they compile them as before."""
    # pylint: disable-next=import-outside-toplevel
    from kernelzero_jax.sandbox import fast_build, triton_seed, worker
    seed = triton_seed.ready_seed(self.cfg.pch_dir or fast_build.default_cache_dir())
    self.verdict.evidence["triton_seed"] = (
        triton_seed.plant(seed, os.path.join(self.workdir, worker.TRITON_CACHE)) if seed
        else {"planted": 0, "changed": [], "missing": True})

  def _await_precompile(self) -> None:
    """Waits for the precompiler (within the build's deadline) before the GPU is taken, then
    stops it. Whatever happened to it, the evaluation goes on: it changes only how much the
    candidate's first check compiles (evidence["triton_precompile"])."""
    from kernelzero_jax.sandbox import triton_precompile  # pylint: disable=import-outside-toplevel
    remaining = min(self.cfg.build_timeout_s - (time.perf_counter() - self.worker_started),
                    triton_precompile.MAX_WAIT_S)
    self.verdict.evidence["triton_precompile"] = worker_handle.finish_side_worker(
        self.precompiler, remaining, "precompile", triton_precompile.sanitize,
        triton_precompile.REPLY_LIMITS["error_chars"])

  def _start_hand_over(self) -> None:
    """A thread that waits for the prebuilder (within the build's deadline), stops it and lets
    the worker build (cuda_prebuild.hand_over) as soon as it can, while this judge loads the
    reference (on the CPU, KernelBench's way: 8 s for level 2 problem 59 on an H200 machine).
    Whatever happened to the prebuilder, the worker builds as it would have without one
    (evidence["cuda_prebuild"])."""
    from kernelzero_jax.sandbox import cuda_prebuild  # pylint: disable=import-outside-toplevel
    prebuilder, gate = self.prebuilder, self.go_gate

    def hand_over() -> None:
      self._join_look()  # a kept worker's: the worker is known after it
      worker = self.worker
      if worker is None:  # it failed to start: the judge's wait for it says why
        return
      wait_s = min(self.cfg.build_timeout_s, cuda_prebuild.MAX_WAIT_S)

      def before_go() -> None:
        if gate is not None:
          gate.open()
        self._open_setup_window("import")
      self.verdict.evidence["cuda_prebuild"] = cuda_prebuild.hand_over(
          prebuilder, worker, self.workdir, wait_s, before_go, self._worker_for_the_build)
      self.go_sent_at = time.perf_counter()
    self._hand_over_thread = threading.Thread(target=hand_over, name="prebuild-hand-over",
                                              daemon=True)
    self._hand_over_thread.start()

  def _worker_for_the_build(self, prebuild: dict[str, Any]) -> WorkerHandle | None:
    """The worker that builds the candidate, once its prebuilder is done (`prebuild`: its
    summary, cuda_prebuild.hand_over): a new one instead of a kept one where the lite build
    failed and SandboxConfig.fresh_worker_for_fallback_builds. Such a candidate nearly always
    fails to compile in the worker too, and a kept worker's failure is judged again in a new
    one (Judge.run), with every build made again; the kept worker has not seen the candidate
    yet (it waits for the go). None where the worker was killed after a failure meanwhile."""
    kept = self.worker
    if (kept is None or self.worker_serves <= 1 or not prebuild.get("lite_failed")
        or not self.cfg.fresh_worker_for_fallback_builds):
      return kept
    kept.kill()
    self.verdict.evidence.setdefault("worker_reuse", {})["replaced"] = {
        "served": self.worker_serves - 1, "why": "the lite build failed in the prebuilder"}
    self.worker = WorkerHandle(self._worker_spec, self.cfg.memory_limit_gb)
    self.worker_serves = 1
    self._record_worker()
    return self.worker

  def _record_worker(self) -> None:
    """Where this judge's worker (just taken or started) accounts for its exchanges, and its
    start and process id in the verdict's evidence."""
    ev = self.verdict.evidence
    # What each command's exchange with the worker took (WorkerHandle._account).
    self.worker.messages = ev.setdefault("messages", {})
    ev["worker_start"] = "kept" if self.worker_serves > 1 else self.worker.start_method
    ev["worker_pid"] = self.worker.pid  # (benchmarks/gpu_steps.py)

  def _prebuild_holds_the_go(self) -> bool:
    """Whether the worker's go still waits for its prebuilder (_start_hand_over)."""
    hand_over = self._hand_over_thread
    return (hand_over is not None and hand_over.is_alive()
            and (self.go_gate is None or self.go_gate.opened_at is None))

  def _let_triton_worker_go(self) -> None:
    """A Triton worker's go, once (go_gate.GoGate.open: not while the reference is timed).
    A CUDA worker's comes from its prebuilder's hand-over (_start_hand_over)."""
    with self._go_lock:
      if self._looking:
        self._go_deferred = True  # sent when the kept worker's look ends (_take_worker)
        return
    if (self.backend != "triton" or self.go_gate is None or self.worker is None
        or not self.go_gate.open()):  # (none: killed after a failure, _give_back_after_failure)
      return
    self._open_setup_window("import")
    self.go_sent_at = time.perf_counter()
    with contextlib.suppress(OSError, ValueError):  # a dead worker: its build's wait says why
      channel.send(self.worker.conn, {"cmd": "go"}, by_value=True)

  def _expect(self, reply: dict[str, Any], stage: str) -> dict[str, Any]:
    if not reply.get("ok"):
      raise StageFailure(reply.get("status", V.RUNTIME_ERROR), f"{stage}: {reply.get('error')}")
    if reply.get("violations"):
      raise StageFailure(V.REJECTED, "; ".join(dict.fromkeys(reply["violations"])))
    return reply

  def _drop_or_kill_worker(self) -> None:
    """After a correct candidate's last check, under its hold: the worker gives its GPU memory
    back and is kept for the next job (_keep_worker), where it may serve more; otherwise it is
    killed, as it always is after a failure."""
    cfg = self.cfg
    if self.worker_key and self.worker_serves < cfg.worker_candidates():
      try:
        dropped = self.worker.request({"cmd": "drop"}, cfg.correctness_timeout_s, "cleanup")
        # (Memory it could not give back would stay, outside every hold, while it is kept.)
        self.keep_worker = bool(dropped.get("ok")) and dropped.get("reusable") is not False
        if isinstance(dropped.get("left_bytes"), int):
          self.verdict.evidence["worker_drop_left_bytes"] = dropped["left_bytes"]
      except StageFailure:
        self.keep_worker = False
    if not self.keep_worker:
      self.worker.kill()
      self.worker = None

  def _keep_worker(self) -> None:
    """Stops the worker and keeps it for the next job (worker_handle.park; take_kept_worker
    looks it over then): stopped, nothing of it runs while this judge writes its verdict."""
    if self.keep_worker and self.worker is not None:
      handle, self.worker = self.worker, None
      handle.stop()
      worker_handle.park(handle, self.worker_key, self.worker_serves)

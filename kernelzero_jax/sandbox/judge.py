"""The judge: one process per evaluation that owns the reference and every comparison.

    python -m kernelzero_jax.sandbox.judge JOB.json RESULT.json

It runs the static checks, computes reference outputs and times (TF32 off unless configured),
starts the candidate's worker (worker.py) in a process of its own, sends it commands stage by
stage with a time limit each, compares what comes back, and writes the verdict. The caller (a
trainer, the CLI, the pool) never imports torch; the worker never sees the reference's results.

Judge's steps, in order, are in _evaluate here; the rest of it lives beside, one concern a file:
its worker and builders (judge_worker.py), what it measures about the reference
(judge_reference.py), the candidate's checks and timing (judge_checks.py), and its use of the GPU
(judge_gpu.py: holds, fence, memory, uploads). Worker processes are handled in worker_handle.py;
who may use the GPU when, and how much of its memory, is decided in gpu_budget.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

from kernelzero_jax import atomic_file
from kernelzero_jax.sandbox import judge_gpu
from kernelzero_jax.sandbox import judge_start
from kernelzero_jax.sandbox import judge_worker
from kernelzero_jax.sandbox import static_checks
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.go_gate import GoGate
from kernelzero_jax.sandbox.judge_checks import CandidateSteps
from kernelzero_jax.sandbox.judge_gpu import GpuSteps
from kernelzero_jax.sandbox.judge_reference import ReferenceSteps
from kernelzero_jax.sandbox.judge_worker import WorkerSteps
from kernelzero_jax.sandbox.worker_handle import StageFailure, WorkerHandle

# Steps of evidence["gpu_seconds"] that a judge does without holding the GPU: building models on
# the CPU before it takes the GPU. (Its releases of GPU memory are under the hold they end.)
STEPS_OFF_THE_HOLD = ("candidate_construct", "reference_construct", "register_ahead")
_PR_SET_CHILD_SUBREAPER = 36


class Judge(CandidateSteps, ReferenceSteps, WorkerSteps, GpuSteps):
  """Evaluates one candidate against one reference."""

  def __init__(self, job: dict[str, Any]):
    self.job = job
    self.cfg = SandboxConfig.from_dict(job.get("config", {}))
    self.backend = job["backend"]
    self.verdict = V.Verdict(status=V.RUNTIME_ERROR, backend=self.backend, device=self.cfg.device)
    self.verdict.tolerance = {"name": self.cfg.tolerance_name(),
                              "float32": list(self.cfg.tolerance_for("float32")),
                              "float16": list(self.cfg.tolerance_for("float16")),
                              "bfloat16": list(self.cfg.tolerance_for("bfloat16"))}
    self.worker: WorkerHandle | None = None
    self._worker_spec: dict[str, Any] | None = None  # what it was started with (_start_worker)
    self.device = None  # torch's, once the judge has imported it (_evaluate)
    self.precompiler: WorkerHandle | None = None  # a Triton candidate's (triton_precompile.py)
    self.prebuilder: WorkerHandle | None = None  # a CUDA candidate's (cuda_prebuild.py)...
    self._hand_over_thread: threading.Thread | None = None  # ...which waits for it
    self.go_sent_at: float | None = None  # when it let the worker build
    self.second_reference = None  # the reference checks' second model, built on the CPU...
    self._second_reference_thread: threading.Thread | None = None  # ...by this thread
    self.close_stats = None  # problem._close_stats, or the fused kernel's (fused_compare.py)...
    self._fused_thread: threading.Thread | None = None  # ...compiled by this thread
    self.pch_header: str | None = None  # the shared precompiled header this worker builds with
    self.lite_object: str | None = None  # and the lite header's runtime (lite_build.py)
    self.bind_dir: str | None = None  # and the precompiled binding header (fast_build.py)
    # Facts about the reference that other judges of the same reference and config measured,
    # shared through `facts_path` (SandboxPool) and read when this judge needs them.
    self.known: dict[str, Any] = {}
    self.facts_path = job.get("facts_path") if self.cfg.reuse_reference else None
    # What this judge measured about the reference itself, before its candidate ran where
    # SandboxConfig.reference_first let it (_reference_first), or in the checks.
    self.reference_checked = False
    self.reference_timed: dict[str, Any] | None = None
    # When the last timing ran (time.time(), from _timed): what setup windows must overlap.
    self.timing_span: tuple[float, float] = (0.0, 0.0)
    # The input sets this judge made for the reference: their making's time (CUDA events, read
    # once the checks are done: evidence["input_set_ms"]; _reference).
    self.input_set_times: list[Any] = []
    # Until its first hold (_weights_apart; SandboxConfig.reference_upload_in_hold).
    self._reference_on_cpu = False
    self._reference_ahead = None  # its pages registered before that hold (_register_ahead)
    self._host_memory: contextlib.ExitStack | None = None  # its host_memory_hold, if taken
    # Its place in the GPU's ledger of kept weights (_weights_apart), if it keeps them.
    self._weights_place: contextlib.ExitStack | None = None
    # Whether the worker waits for this judge to time the reference first (_reference_first,
    # go_gate.py): a Triton worker's go comes from this judge (_let_triton_worker_go, at the
    # latest at a deadline), a CUDA worker's from its prebuilder's hand-over.
    self.awaits_go = False
    self.go_gate: GoGate | None = None
    self._go_timer: threading.Timer | None = None
    # A kept worker's look at itself runs in this thread beside the judge's own start-up
    # (_start_worker); a go asked for while `_looking` is sent when it ends
    # (_let_triton_worker_go). Both flags change under `_go_lock`.
    self._looking_thread: threading.Thread | None = None
    self._looking_error: BaseException | None = None
    self._go_lock = threading.Lock()
    self._looking = False
    self._go_deferred = False
    self.workdir = tempfile.mkdtemp(prefix="kz_candidate_")
    # Seconds of each kind of work done after the build, summed over its repeats: what a
    # candidate costs the GPU, by step (evidence["gpu_seconds"]).
    self.steps: dict[str, float] = {}
    self._fence_held = False  # gpu_fence.startup_fence, taken by _fence
    # Windows open while its worker runs candidate code outside every hold, by kind
    # (setup_windows.py: _open_setup_window, _close_setup_window).
    self._setup_windows: dict[str, str] = {}
    # This judge's start-up steps in order (evidence["startup_seconds"]["judge"]): the static
    # checks and its worker's start (run), then its own device and reference (_evaluate).
    self.startup = V.StepClock()
    # Candidates this judge's worker served, this one included (1: a new worker; more: a kept
    # one, SandboxConfig.candidates_per_worker); 0 before it has one.
    self.worker_serves = 0
    self.worker_key: str | None = None
    self.keep_worker = False  # whether the worker is kept for the next job (_post_check)
    # Input seeds: from the config's seed alone, unless workers serve several candidates: then
    # every judge draws its own, so that nothing one candidate left in a worker (its outputs,
    # say) matches the inputs of the next.
    self.base_seed = self.cfg.seed * 1_000_003
    if self.cfg.worker_candidates() > 1:
      self.base_seed += 2_000_006 * (1 + int.from_bytes(os.urandom(4), "little"))
    self.verdict.evidence["input_seed_base"] = self.base_seed  # (its inputs made again from it)

  def run(self) -> V.Verdict:
    try:
      verdict = self._run()
    except Exception as e:  # pylint: disable=broad-except
      if self.worker_serves <= 1:
        raise  # the judge's own failure (judge_job_file reports it)
      # (On an H200 a judge beside kept workers ran out of GPU memory once.)
      verdict = V.Verdict(status=V.RUNTIME_ERROR, backend=self.backend, stage=self.verdict.stage,
                          reasons=[f"judge failed: {type(e).__name__}: {e}"[:500]])
    if self.worker_serves > 1 and verdict.status != V.CORRECT:
      # What a kept worker's last candidate left could have caused the failure: judged again
      # in a worker of its own, whose verdict stands.
      again = Judge(dict(self.job, fresh_worker=True)).run()
      again.evidence["judged_again"] = {"status": verdict.status, "stage": verdict.stage,
                                        "reasons": verdict.reasons[:3],
                                        "worker_serves": self.worker_serves,
                                        **V.first_attempt(self.verdict.evidence)}
      return again
    return verdict

  def _run(self) -> V.Verdict:
    v = self.verdict
    try:
      v.stage = "static"
      report = static_checks.check_candidate(self.job["candidate_source"], self.backend)
      self.startup.lap("static")
      if report.format_errors:
        return self._finish(V.FORMAT_ERROR, report.format_errors)
      if report.rejections:
        return self._finish(V.REJECTED, report.rejections)
      self.own_kernels = (report.cuda_kernel_names if self.backend == "cuda"
                          else report.triton_kernel_names)
      if self.backend == "cuda" and self.cfg.device == "cpu":
        raise StageFailure(V.UNSUPPORTED,
                           "backend cuda needs a CUDA device; this run is on the CPU")
      # The worker starts (and builds) before this process touches the device: a forked worker
      # must come from a process without a CUDA context, and the build overlaps the reference.
      self._start_worker()
      self.startup.lap("start_worker")
      self._evaluate()
    except StageFailure as f:
      return self._finish(f.status, [f.reason])
    finally:
      self._join_look()
      killed = self.worker
      for handle in (killed, self.precompiler, self.prebuilder):
        if handle is not None:
          handle.kill()
      if self._go_timer is not None:
        self._go_timer.cancel()
      # Done at once now (its worker is dead): it writes into the verdict, and may have opened
      # the import's window.
      if self._hand_over_thread is not None:
        self._hand_over_thread.join()
        if self.worker is not None and self.worker is not killed:  # a new one, started meanwhile
          self.worker.kill()  # (_worker_for_the_build)
      for kind in list(self._setup_windows):  # its worker's code ended with no reply read
        self._close_setup_window(kind, None)
      if self._reference_ahead is not None:  # registered, never moved (a failure before)
        self._reference_ahead.close()
        self._reference_ahead = None
      if self._host_memory is not None:  # its models on the CPU go before its slot does
        self.ref_model = self.second_reference = None
        self._host_memory.close()
      self._give_weights_place_back()
      if self.close_stats is not None:
        v.evidence["fused_compare"].update(fused=self.close_stats.fused,
                                           fallbacks=self.close_stats.fallbacks)
      shutil.rmtree(self.workdir, ignore_errors=True)
    return v

  def _finish(self, status: str, reasons: list[str]) -> V.Verdict:
    self.verdict.status = status
    self.verdict.reasons.extend(reasons)
    return self.verdict

  def _make_device_ready(self) -> None:
    """This judge's device, with torch's settings for the reference; on a GPU, its CUDA context
    made under the start-up fence, apart from timings (a judge process that made it for an
    earlier job, judge_host.py, or ahead of its candidates, judge_start.py, has none to make)."""
    torch, cfg = self.torch, self.cfg
    self.verdict.stage = "device"
    if cfg.device == "cuda" and not torch.cuda.is_available():
      raise StageFailure(V.UNSUPPORTED, "device cuda requested but no CUDA device is visible")
    self.device = torch.device(judge_gpu.device_name(cfg, self.job.get("gpu_index", 0)))
    if self.device.type == "cuda":
      with (contextlib.nullcontext() if torch.cuda.is_initialized()
            else self._fence("device", timing=False)):
        torch.cuda.set_device(self.device)
        torch.cuda.synchronize(self.device)
    torch.backends.cuda.matmul.allow_tf32 = cfg.reference_tf32
    torch.backends.cudnn.allow_tf32 = cfg.reference_tf32
    torch.set_grad_enabled(False)

  def _warm_up_device(self) -> bool:
    """judge_gpu.warm_up_device, once per process and GPU, under the start-up fence (without a
    start-up slot: it creates no context). Whether it ran now."""
    if (self.device.type != "cuda" or not self.cfg.judge_warm_up
        or str(self.device) in judge_gpu.WARMED_UP):
      return False
    with self._fence("warm_up", timing=False, slot=False):
      judge_gpu.warm_up_device(self.torch, self.problem, self.device)
    judge_gpu.WARMED_UP.add(str(self.device))
    return True

  def _evaluate(self) -> None:
    startup = self.startup  # this judge's steps while its worker starts and builds
    import torch  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import problem  # pylint: disable=import-outside-toplevel
    self.torch, self.problem = torch, problem
    cfg, v = self.cfg, self.verdict
    startup.lap("imports")
    self._make_device_ready()
    startup.lap("device")
    if self.device.type == "cuda" and cfg.fused_compare:
      self._start_fused_compare()

    v.stage = "reference"
    try:
      ref_mod = problem.load_module(self.job["reference_source"], "kz_reference")
      problem.require_attrs(ref_mod, ("Model", "get_inputs", "get_init_inputs"))
      self.ref_mod = ref_mod
      if self._weights_apart:
        self._take_host_memory()
      # Built on the CPU, KernelBench's way (seconds for a large model), then uploaded with the
      # warm-up, apart from timings.
      constructed_at = time.perf_counter()
      model = problem.construct_model(ref_mod.Model, ref_mod.get_init_inputs, cfg.init_seed)
      construct_s = time.perf_counter() - constructed_at
      # (startup_seconds' "reference" also holds the upload and its wait for the start-up fence)
      v.evidence["reference_construct_s"] = round(construct_s, 4)
      if self._reference_waits_for_a_hold(model):
        self.ref_model, self._reference_on_cpu = model, True  # _upload_reference, under a hold
      else:
        self.ref_model = self._upload_at_start(model)
      del model
    except Exception as e:  # pylint: disable=broad-except
      v.reference_error = True
      raise StageFailure(V.RUNTIME_ERROR, f"reference failed to load: {type(e).__name__}: {e}")
    startup.lap("reference")
    if self._warm_up_device():
      startup.lap("warm_up")
    second_after = self._second_reference_after(construct_s)
    if not second_after:
      self._start_second_reference()
    if self.awaits_go:
      self._reference_first(checks=not second_after)
    if second_after:
      self._start_second_reference()

    v.stage = "build"
    # The deadline counts from the worker's start, or from its go (after a prebuilder, or after
    # _reference_first); the build ran while the reference loaded.
    self._await_worker()
    if self._hand_over_thread is not None:
      self._hand_over_thread.join()
    started = self.go_sent_at or self.worker_started
    remaining = cfg.build_timeout_s - (time.perf_counter() - started)
    reply = None
    try:
      reply = self.worker.wait(max(remaining, worker_handle.POLL_S), "build", cfg.build_timeout_s)
    finally:
      self._close_setup_window("import", reply)
    v.stage_seconds["build"] = round(time.perf_counter() - self.worker_started, 3)
    log = reply.get("build_log")
    if isinstance(log, list) and log:  # how each load_inline built (fast, or fell back), or failed
      v.evidence["build"] = [str(line)[:300] for line in log[:8]]
    steps = judge_worker.build_steps(reply.get("build_steps"))
    if steps:
      v.evidence["build_steps"] = steps
    built = self._expect(reply, "build")
    v.evidence["startup_seconds"] = judge_worker.startup_seconds(built, self.worker_started,
                                                                 startup.seconds)
    if (held := judge_worker.fence_span(built.get("fence_held"))) is not None:
      v.evidence.setdefault("fence_holds", []).append(["worker_startup", *held])
    if built.get("setup_gpu"):  # the GPU work of its import, which no hold covers
      v.evidence.setdefault("setup_gpu", {})["import"] = built["setup_gpu"]
    if self.pch_header:
      from kernelzero_jax.sandbox import fast_build  # pylint: disable=import-outside-toplevel
      if not fast_build.pch_intact(self.pch_header):
        raise StageFailure(V.REJECTED, "the build changed the shared precompiled header "
                           f"{self.pch_header}.gch (compiler flags that write outside the build "
                           "directory)")
      if self.lite_object and not fast_build.lite_intact(self.pch_header):
        raise StageFailure(V.REJECTED, "the build changed the shared lite runtime "
                           f"{self.lite_object} (compiler flags that write outside the build "
                           "directory)")
      if self.bind_dir and not fast_build.bind_intact(self.pch_header):
        raise StageFailure(V.REJECTED, "the build changed the shared lite headers or binding "
                           f"header in {self.bind_dir} (compiler flags that write outside the "
                           "build directory)")

    # The candidate's model is built on the CPU before the GPU is taken (worker.construct); its
    # move to the device stays under the hold ("init" in _checks).
    built_at = time.perf_counter()
    v.stage = "init"
    with self._step("candidate_construct"):
      self._open_setup_window("constructor")
      reply = None
      try:
        reply = self.worker.request({"cmd": "construct", "seed": cfg.init_seed},
                                    cfg.correctness_timeout_s, "init")
      finally:
        self._close_setup_window("constructor", reply)
      constructed = self._expect(reply, "init")
    if constructed.get("setup_gpu"):
      v.evidence.setdefault("setup_gpu", {})["constructor"] = constructed["setup_gpu"]
    if self._second_reference_thread is not None:
      with self._step("reference_construct"):  # what is left of it: it ran beside the build
        self._second_reference_thread.join()
    if self.precompiler is not None:
      self._await_precompile()
    if self._fused_thread is not None:
      self._ready_fused_compare()

    # From the build's end to the first hold's request: construction, joins, the fused
    # comparison's load (none of it holds the GPU).
    v.evidence["build_to_hold_s"] = round(time.perf_counter() - built_at, 3)
    self._held_stages()
    set_speedups(v)
    v.stage = "done"
    v.status = V.CORRECT
    self._keep_worker()

  def _held_stages(self) -> None:
    """The candidate's checks, timing and last check, under the GPU holds they need."""
    cfg, v, base = self.cfg, self.verdict, self.base_seed
    cuda = self.device.type == "cuda"
    slots = cfg.gpu_concurrency if cuda else 1
    hold = lambda exclusive, width=1: (self._gpu_hold(slots, exclusive, width) if cuda
                                       else contextlib.nullcontext())
    # The whole evaluation under one hold, nothing else on the GPU meanwhile: always with one
    # slot; when one check of this problem needs the memory of all the slots (check_width;
    # otherwise its checks hold as many as they need); when its weights are too large to keep
    # on the GPU between holds (_weights_apart); and when a candidate that ran out of memory on
    # a shared GPU anyway is judged again (evaluate.shared_gpu_oom).
    width = (self._check_width(slots) if slots > 1 and not self.job.get("exclusive_gpu")
             and not self._weights_apart else slots)
    if cuda:
      self._register_ahead()
    if width == slots:
      # The checks' memory given back before the timing, as between holds below: on an H100
      # (80 GiB) beside 23 other judges, the judge's cached blocks and the worker's outputs of a
      # 6 GiB problem left its timing out of memory, and honest candidates failed.
      release = cuda and cfg.timing and not self._keeps_memory(slots)
      with hold(exclusive=True):
        self._holding(self._upload_reference, lambda: self._checks(base),
                      lambda: release and self._release_gpu_memory(),
                      lambda: cuda and cfg.timing and self._timed_in_hold(base),
                      lambda: self._post_check(base))
      # Its worker is gone by now (_post_check): a last timing disturbed still after
      # _timed_in_hold's retimes is only told, and the windows that overlapped it.
      self._after_the_timing(cuda and cfg.timing and self._timing_disturbed(
          *self.timing_span, retimed=False,
          after_forward=v.evidence.get("timing_after_forward_ms")))
    else:  # untimed checks share the GPU with other judges' checks; timing has it alone
      # A judge gives back the memory of its checks and of its timing *before* it lets go of
      # the GPU: the next holder takes the slots at once, while judges waiting for the GPU are
      # not among those that check_width counts. (Memory kept past a hold, up to 5 input sets of
      # a 6-8 GiB problem, ran 21-41 of 69-123 candidates out of memory on an H200.) Unless it
      # is small enough for every judge on the GPU to keep as much (memory_kept_fits): then the
      # releases are saved, driver work that other judges' start-ups stretch to 0.1-0.25 s in a
      # busy batch (benchmarks/hold_interference.py), half of it with the GPU held alone.
      release = cfg.timing and not self._keeps_memory(slots)
      with hold(exclusive=False, width=width):
        self._holding(self._upload_reference, lambda: self._checks(base),
                      lambda: release and self._release_gpu_memory())
      if cfg.timing:
        self._timed_apart(base, hold, release)
      with hold(exclusive=False, width=width):
        self._holding(lambda: self._post_check(base))


def set_speedups(v: V.Verdict) -> None:
  """The verdict's speedups from its times; none from a timing left disturbed
  (evidence["timing_unreliable"]: CandidateSteps._after_the_timing)."""
  if "timing_unreliable" in v.evidence:
    return
  if v.candidate_ms and v.reference_ms:
    v.speedup = v.reference_ms / v.candidate_ms
  if v.compile_ms and v.candidate_ms:
    v.speedup_vs_compile = v.compile_ms / v.candidate_ms


EXIT_WITH_PARENT = "exit-with-parent"  # the name of its thread


def _exit_with_parent(parent_pid: int) -> None:
  """Ends this judge and its worker when the caller dies (killed trainer, Ctrl-C'd CLI).

  The judge runs in a session of its own, so nothing else would stop a candidate that hangs
  after its caller, with the deadline, is gone; without this it would spin forever."""
  def watch():
    while True:
      time.sleep(1.0)
      if os.getppid() != parent_pid:
        worker_handle.kill_descendants()
        os._exit(3)  # pylint: disable=protected-access

  if not any(t.name == EXIT_WITH_PARENT for t in threading.enumerate()):  # once per process
    threading.Thread(target=watch, name=EXIT_WITH_PARENT, daemon=True).start()


def _read_line(fd: int, limit: int = 4096) -> str:
  """One line from a file descriptor, unbuffered (sys.stdin may be a copy made before a fork)."""
  data = b""
  while not data.endswith(b"\n") and len(data) < limit:
    chunk = os.read(fd, 256)
    if not chunk:
      break
    data += chunk
  return data.decode(errors="replace").strip()


def run_job(job: dict[str, Any]) -> V.Verdict:
  return Judge(job).run()


def judge_job_file(job_path: str, result_path: str, job_number: int = 1) -> bool:
  """Judges the job in `job_path` and writes its verdict, with the caller's secret from stdin,
  to `result_path`. `job_number`: which job of this process it is (judge_host.py serves several;
  evidence["judge_process"]). Returns False where the judge itself failed (an exception of its
  own, not a verdict): a process serving several jobs ends then."""
  # The caller's stage_seconds["launch"] ends here. time.monotonic() (CLOCK_MONOTONIC) is one
  # clock for every process of a Linux host, and unlike time.time() it never steps when the
  # wall clock is set: a CI machine's step once made a 3 s exit read 6.9 s.
  entered_at = time.monotonic()
  _exit_with_parent(os.getppid())
  judged = True
  with open(job_path) as f:
    job = json.load(f)
  try:
    if job.get("kind") == "module":  # a proposed module's validation (module_check.py)
      from kernelzero_jax.sandbox import module_check  # pylint: disable=import-outside-toplevel
      verdict = module_check.run_module_job(job)
    elif job.get("kind") == judge_start.KIND:  # a start ahead of the candidates
      verdict = judge_start.start_job(job)
    else:
      verdict = run_job(job)
  except Exception as e:  # pylint: disable=broad-except
    judged = False
    verdict = V.Verdict(status=V.RUNTIME_ERROR, backend=job.get("backend", ""),
                        reasons=[f"judge failed: {type(e).__name__}: {e}"], reference_error=True)
  worker_handle.kill_descendants()
  if hasattr(verdict, "evidence"):  # (a module's verdict has none)
    verdict.evidence["judge_process"] = {"pid": os.getpid(), "job": job_number}
  # The caller's secret arrives on stdin (not argv or the environment, which other processes
  # can read); the verdict is only accepted with it, so a candidate that writes a result file
  # and kills this judge forges nothing. It is read only now, when no worker is left: a forked
  # worker copies this process's memory, so the secret must not be in it yet.
  nonce = _read_line(0)
  # When, so that the caller can tell how long the process took to end after it (its exit
  # tears its CUDA context down: driver work that other processes' start-ups contend for).
  atomic_file.write_json(result_path, {"nonce": nonce, "verdict": verdict.to_dict(),
                                       "entered_at": entered_at, "written_at": time.monotonic()},
                         allow_nan=False, default=repr)
  return judged


def become_subreaper() -> None:
  """Processes this one's descendants orphan come to it (and are killed:
  worker_handle.kill_descendants)."""
  with contextlib.suppress(Exception):
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def main(argv: list[str]) -> int:
  if len(argv) != 3:
    print("usage: python -m kernelzero_jax.sandbox.judge JOB.json RESULT.json", file=sys.stderr)
    return 2
  become_subreaper()
  judge_job_file(argv[1], argv[2])
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))

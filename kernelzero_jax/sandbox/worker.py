"""The candidate worker: the only process in which a candidate's code ever runs.

Started by the judge (judge.py) with the multiprocessing "spawn" method, one per candidate (or
forked, when the judge itself was forked by the warm server in zygote.py; a judge process that
serves several jobs may keep it for later candidates where SandboxConfig.candidates_per_worker
allows: `serve`, `park`, worker_state.py). It builds the candidate (worker_build.py),
instantiates ModelNew with the reference's init seed, and answers the judge's commands over a
pipe (worker_run.py): run forward on input set `seed` (returning the outputs and the inputs as
they are afterwards, plus runtime evidence), or time forward over fresh input sets. The reference
model and every comparison live in the judge, never here.

Tensors cross the pipe through torch.multiprocessing's reductions (shared memory on the CPU, CUDA
IPC on a GPU), so full-size outputs are not copied through the pipe.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from typing import Any

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import guard as guard_lib
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.worker_build import PREBUILD, PRECOMPILE, BuildSteps
from kernelzero_jax.sandbox.worker_run import RunSteps

# A candidate's Triton cache, in its directory: its own, shared by its worker and precompiler.
TRITON_CACHE = "triton_cache"
_PR_SET_PDEATHSIG = 1


def output_file(spec: dict[str, Any], name: str) -> str:
  """Where a worker's stdout or stderr goes: a precompiler's or prebuilder's beside its
  worker's."""
  role = spec.get("role")
  return os.path.join(spec["workdir"], (f"{role}_" if role else "") + name)


def _enter_directory(spec: dict[str, Any]) -> None:
  """The candidate's directory as this process's: its working directory, its stdout and stderr
  files, its extensions', Triton's and temporary files' home. Again for each candidate a kept
  worker serves (worker_state.PER_CANDIDATE_ENV)."""
  workdir = spec["workdir"]
  os.makedirs(workdir, exist_ok=True)
  os.chdir(workdir)
  sys.stdout.flush()
  sys.stderr.flush()
  for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
    f = os.open(output_file(spec, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(f, fd)
    os.close(f)
  os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(workdir, "torch_extensions")
  os.environ["TRITON_CACHE_DIR"] = os.path.join(workdir, TRITON_CACHE)
  os.environ["TMPDIR"] = workdir
  os.environ["HOME"] = workdir
  # A worker forked from a warm judge inherits tempfile's cached directory (triton's driver
  # builds its launcher in a temporary directory on first use): point it here too.
  tempfile.tempdir = workdir


def _setup_process(spec: dict[str, Any]) -> None:
  """Own session, own directory, own input and output files, limits; all before torch/triton
  load (or, in a worker forked from a warm judge, before the candidate's code runs)."""
  os.setsid()
  # The judge's stdin carries the caller's secret, read by the judge only at the very end.
  devnull = os.open(os.devnull, os.O_RDONLY)
  os.dup2(devnull, 0)
  os.close(devnull)
  _enter_directory(spec)
  if spec["device"] in ("cpu", "meta"):  # meta: a precompiler or prebuilder: never a GPU
    if spec["device"] == "cpu":
      os.environ["TRITON_INTERPRET"] = "1"
    else:  # kernels compile for a GPU; interpreted ones would not
      os.environ.pop("TRITON_INTERPRET", None)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    limit = int(spec["memory_limit_gb"] * 2**30)
    # Address-space limit makes a huge allocation fail fast on the CPU. (On a GPU, CUDA reserves
    # far more address space than it uses, so there the judge watches resident memory instead.)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
  resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
  if spec.get("nice"):  # a process that only builds yields the CPU to those that time
    os.nice(int(spec["nice"]))
  try:  # die with the judge, whatever happens to it
    import ctypes  # pylint: disable=import-outside-toplevel
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
  except Exception:  # pylint: disable=broad-except
    pass


class _Worker(BuildSteps, RunSteps):
  """Holds the state of one candidate between commands. Its build stage is BuildSteps'
  (worker_build.py), its run stage RunSteps' (worker_run.py); its start-up, its loop over the
  judge's commands and its reuse for further candidates are here."""

  def __init__(self, conn, spec, entered_at: float | None = None):
    """`entered_at`: time.perf_counter() when the process entered worker_main (the clock is
    the machine's monotonic one, so the judge can subtract its own readings from it)."""
    self.entered_at = time.perf_counter() if entered_at is None else entered_at
    # Seconds of each start-up step, in order, for the judge's evidence["startup_seconds"].
    self.startup = V.StepClock(self.entered_at)
    self.startup.lap("setup")
    import torch  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import evidence, problem, timing  # pylint: disable=import-outside-toplevel
    self.torch, self.evidence, self.problem, self.timing = torch, evidence, problem, timing
    self.startup.lap("imports")
    self.conn = conn
    self.spec = spec
    self.failed_setup_gpu = None  # the profile of an import or constructor that raised
    self.backend = spec["backend"]
    self.device = torch.device(spec["device"])
    torch.set_grad_enabled(False)
    self.fence_held: list[float] | None = None  # the start-up fence's wall-clock bounds
    # The start-up's driver work (the CUDA context, the timer's buffer, the profiler) with the
    # GPU's start-up fence taken shared, apart from other judges' timings (gpu_fence.py).
    fence = contextlib.ExitStack()
    if spec.get("startup_fence") and self.device.type == "cuda":
      from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
      device_index, lock_dir, *slots = spec["startup_fence"]
      fence.enter_context(gpu_fence.startup_fence(device_index, False, lock_dir,
                                                  startup_slots=int(slots[0]) if slots else 0))
      self.startup.lap("fence")
      fence.callback(lambda held_from=time.time(): setattr(
          self, "fence_held", [round(held_from, 3), round(time.time(), 3)]))
    if self.device.type == "cuda":
      torch.cuda.set_device(self.device)
      torch.cuda.set_per_process_memory_fraction(spec["gpu_memory_fraction"], self.device)
      self.marker = torch.zeros(1, device=self.device)  # also initialises the CUDA context
      self.timer = timing.Timer(self.device)
    self.startup.lap("device")
    self._load_inline = None  # torch's own, while fast_build's wraps it
    self.ops = evidence.OpRecorder()
    self.launches = evidence.LaunchRecorder()
    self.launches.op_recorder = self.ops
    self.hooks = evidence.install_triton_launch_hook(self.launches)
    if self.device.type == "cpu":
      _make_autotune_work_in_interpreter()
    self._warm_up_observers()
    if self.device.type == "cuda":
      torch.cuda.synchronize(self.device)
    fence.close()
    self.startup.lap("observers")
    self.baseline_threads = {t.ident for t in threading.enumerate()}
    self.guard = guard_lib.Guard(spec["workdir"], os.path.join(spec["workdir"], "candidate.py"))
    self.guard.install()
    self.integrity = evidence.IntegritySnapshot({
        "_thread.start_new_thread": __import__("_thread").start_new_thread})
    self.served = 0  # candidates begun in this process
    self.pristine = None  # worker_state.Pristine, where this worker may serve several
    if spec.get("candidates_per_worker", 1) > 1 and not spec.get("role"):
      # pylint: disable-next=import-outside-toplevel,unused-import
      import torch.utils.cpp_extension  # what _begin_candidate imports (it extends sys.path)
      from kernelzero_jax.sandbox import worker_state  # pylint: disable=import-outside-toplevel
      self.pristine = worker_state.Pristine(torch, self.device)
    self.startup.lap("guard")
    self._begin_candidate(spec)

  def _begin_candidate(self, spec: dict[str, Any]) -> None:
    """This candidate's state: its directory (again, in a kept worker: _enter_directory), its
    reference's inputs, its source file, the guard's view of both."""
    self.guard.workdir = os.path.realpath(spec["workdir"])  # before the harness writes there
    if self.served:
      self.entered_at = time.perf_counter()
      self.startup = V.StepClock(self.entered_at)
      _enter_directory(spec)
      self.startup.lap("directory")
    self.served += 1
    self.spec = spec
    self.build_log: list[str] = []
    self.build_steps: list[dict] = []  # each load_inline call's seconds (fast_build.BUILD_STEPS)
    if spec.get("fast_build") or spec.get("extension_suffix"):  # before the candidate's import
      self._wrap_load_inline(lite=True if spec.get("fast_build") else None)
    self.reference = self.problem.load_module(spec["reference_source"], "kz_reference_inputs")
    self.problem.require_attrs(self.reference, ("get_inputs", "get_init_inputs"))
    self.startup.lap("reference")
    # A precompiler or prebuilder shares the worker's directory (its Triton cache, its
    # extensions) but not its source file.
    folder = (os.path.join(spec["workdir"], spec["role"]) if spec.get("role")
              else spec["workdir"])
    os.makedirs(folder, exist_ok=True)
    self.candidate_path = os.path.join(folder, "candidate.py")
    self.guard.candidate_file = self.candidate_path
    self.module = None
    self.model = None
    self.constructed: tuple[int, Any] | None = None  # (seed, ModelNew on the CPU): construct()
    self.ahead = None  # its pages registered ahead of init's move: register()
    self.own_kernels = list(spec.get("own_kernel_names") or [])
    self._held: Any = None  # keeps tensors sent to the judge alive until the next command
    self._last_send_s: float | None = None  # the last reply's (_serve_candidate)

  def _warm_up_observers(self) -> None:
    """Runs each observer once before the integrity snapshot: their first use imports modules
    that legitimately rebind torch functions (torch._dynamo wraps torch.manual_seed)."""
    torch = self.torch
    with self.ops:
      torch.empty(1, device=self.device).fill_(0.0)
    self.problem.make_inputs(lambda: [torch.rand(1)], 0, self.device)
    if self.spec.get("candidates_per_worker", 1) > 1:
      # The CPU's thread pool starts on the first parallel operation: here, not in a
      # candidate's constructor, where it would look like threads left behind
      # (worker_state.Pristine).
      torch.ones(1 << 20).add_(1.0)
    self.profiler_works = False
    if self.device.type == "cuda":
      try:
        self.evidence.profile_kernels(lambda: None, lambda: self.marker.fill_(1.0))
        self.profiler_works = True
      except RuntimeError:
        pass
      if self.backend == "triton" and self.spec.get("candidates_per_worker", 1) > 1:
        # Triton's driver utilities (CUDA's, for its launchers) load on first use, setting
        # attributes of the driver's module: here, before the pristine state is taken.
        with contextlib.suppress(Exception):
          from triton.runtime import driver  # pylint: disable=import-outside-toplevel
          driver.active.utils  # pylint: disable=pointless-statement
    self.ops.ops.clear()
    self.ops.violations.clear()

  # -- loop ----------------------------------------------------------------------------------

  def _send(self, obj) -> None:
    channel.send(self.conn, obj, by_value=self.device.type != "cuda")

  def serve(self) -> None:
    """Serves its candidate, and, where its judge keeps it after a clean park, the next ones."""
    while self._serve_candidate():
      msg = channel.recv(self.conn)
      if msg.get("cmd") != "next":
        return
      try:
        self._begin_candidate(msg["spec"])
      except BaseException as e:  # pylint: disable=broad-except
        self._send({"ok": False, "status": V.RUNTIME_ERROR, "setup": True,
                    "error": "kept worker's set-up failed: " + V.error_tail(e)})
        return

  def _serve_candidate(self) -> bool:
    """Answers the judge's commands for one candidate. Returns whether this process serves
    another (a park found nothing of it left: park)."""
    if self.spec.get("await_go") and not self._await_go():
      return False
    if self.spec.get("role") == PREBUILD:
      self._send(self.prebuild())
      return False
    built = self.build()
    if self.spec.get("role") == PRECOMPILE:
      self._send(self.precompile() if built.get("ok") else built)
      return False
    self._send(built)
    while True:
      msg = channel.recv(self.conn)
      received_at = time.perf_counter()
      # The last reply's tensors go now (the judge is done with its CUDA IPC views of them):
      # _held kept them alive, and nothing else may. (A reply kept in a local of this loop until
      # the next one replaced it kept a 6 GiB problem's inputs and outputs past the release on an
      # H200: where checks share the GPU, the next check ran out of memory.)
      self._held = None
      if msg.get("cmd") == "exit":
        return False
      if msg.get("cmd") == "park":
        try:
          reply = self.park()
        except Exception as e:  # pylint: disable=broad-except
          reply = {"ok": True, "reusable": False, "drift": ["park failed: " + V.error_tail(e, 3)]}
        self._send(reply)
        return reply["reusable"]
      reply = self._answer(msg)
      # For reading only (its judge's evidence["messages"], WorkerHandle.wait): this command's
      # seconds here, and the last reply's sending (on a GPU, its CUDA IPC handles made).
      reply["spent_s"] = time.perf_counter() - received_at
      if self._last_send_s is not None:
        reply["last_send_s"] = self._last_send_s
      sent_at = time.perf_counter()
      self._send(reply)
      self._last_send_s = time.perf_counter() - sent_at
      del reply  # (its tensors stay alive only in _held, as above)

  # -- serving several candidates (worker_state.py) --------------------------------------------

  def drop(self) -> dict[str, Any]:
    """Lets go of everything of the candidate (its model, module, reference and the tensors of
    the last reply) and gives its GPU memory back: under its judge's last hold, as a kill
    would."""
    if self.ahead is not None:  # registered, never moved
      self.ahead.close()
    self.model = self.constructed = self.module = self.reference = self._held = self.ahead = None
    gc.collect()
    reply = self.release()
    if self.pristine is not None and isinstance(reply.get("allocated_bytes"), int):
      from kernelzero_jax.sandbox import worker_state  # pylint: disable=import-outside-toplevel
      # Not kept if its GPU memory is not back to what it held before its first candidate (a
      # block its judge still views through CUDA IPC, say): parked, the worker would hold it
      # outside every hold, where no check's memory budget counts it (gpu_budget.check_width).
      reply["left_bytes"] = reply["allocated_bytes"] - self.pristine.gpu_bytes
      reply["reusable"] = reply["left_bytes"] <= worker_state.GPU_BYTES_LEFT_OK
    return reply

  def park(self) -> dict[str, Any]:
    """After a candidate: whether this process may serve another ({"reusable", "drift": why
    not}). Its modules leave sys.modules first (the next candidate imports its own); what is
    left is compared with the state before the first candidate (worker_state.Pristine)."""
    if self.pristine is None:  # (its judge keeps none then: worker_handle.take_kept_worker)
      return {"ok": True, "reusable": False, "drift": ["this worker serves one candidate"]}
    t0 = time.perf_counter()
    if self.model is not None or self.module is not None:
      self.drop()
    os.chdir("/")  # the judge removed the candidate's directory
    if self._load_inline is not None:  # torch's own again, as before the first candidate
      import torch.utils.cpp_extension as cpp_extension  # pylint: disable=import-outside-toplevel
      cpp_extension.load_inline = self._load_inline
    workdir = self.guard.workdir + os.sep
    before = self.pristine.modules
    for name, mod in list(sys.modules.items()):
      origin = getattr(mod, "__file__", None)
      # (Not what the worker loaded before its first candidate: Triton's driver utilities,
      # loaded from that candidate's cache directory.)
      if name in ("kz_candidate", "kz_reference_inputs") or (
          name not in before and isinstance(origin, str) and os.path.isabs(origin) and
          os.path.realpath(origin).startswith(workdir)):
        del sys.modules[name]
    # load_inline names an extension it saw before with other sources name_v1, name_v2...: a
    # prebuilder's build (which saw none) would not be found.
    extensions = sys.modules.get("torch.utils.cpp_extension")
    if extensions is not None:
      extensions.JIT_EXTENSION_VERSIONER.entries.clear()
    drift = self._tamper_violations() + self.pristine.drift()
    return {"ok": True, "reusable": not drift, "drift": drift[:6],
            "seconds": round(time.perf_counter() - t0, 3)}

  def _answer(self, msg: dict[str, Any]) -> dict[str, Any]:
    cmd = msg.get("cmd")
    try:
      if cmd == "construct":
        return self.construct(msg["seed"])
      if cmd == "register":
        return self.register()
      if cmd == "init":
        return self.init(msg["seed"])
      if cmd == "run":
        return self.run(msg["seed"], msg.get("profile", False))
      if cmd == "time":
        return self.time(msg["seeds"], msg["audit_positions"], msg["warmup"], msg["target_s"],
                         msg["min_trials"], msg.get("precision"), msg.get("outside_ms"),
                         msg.get("outside_min_trials", 5), msg.get("far_ms"),
                         msg.get("far_min_trials", 3))
      if cmd == "release":
        return self.release()
      if cmd == "drop":
        return self.drop()
      return {"ok": False, "status": V.RUNTIME_ERROR, "error": f"unknown command {cmd!r}"}
    except BaseException as e:  # pylint: disable=broad-except
      if self.guard.violations:
        reply = {"ok": False, "status": V.REJECTED, "error": "; ".join(self._tamper_violations())}
      else:
        status = V.RUNTIME_ERROR
        if type(e).__name__ in ("CompilationError", "CompileTimeAssertionFailure"):
          status = V.COMPILE_ERROR
        reply = {"ok": False, "status": status, "error": V.error_tail(e)}
      return self.with_failed_setup(reply) if cmd == "construct" else reply


def _make_autotune_work_in_interpreter() -> None:
  """Triton's autotuner benchmarks configs with the GPU driver's timer, which the CPU
  interpreter lacks; there, run each config once (for correctness) and call them all equal."""
  try:
    from triton.runtime import autotuner  # pylint: disable=import-outside-toplevel
  except ImportError:
    return

  def bench_once(fn, quantiles=None, **_):
    fn()
    return [1.0, 1.0, 1.0] if quantiles else 1.0

  if hasattr(autotuner.Autotuner, "do_bench"):
    autotuner.Autotuner.do_bench = property(lambda self: bench_once)


def worker_main(conn, spec: dict[str, Any], inherited_fds: tuple[int, ...] = ()) -> None:
  """Entry point of the worker process. `inherited_fds`: descriptors a forked worker got from
  its judge and must not keep (the judge's end of the pipe)."""
  entered_at = time.perf_counter()
  try:
    for fd in inherited_fds:
      os.close(fd)
    _setup_process(spec)
    worker = _Worker(conn, spec, entered_at)
  except BaseException as e:  # pylint: disable=broad-except
    channel.send(conn, {"ok": False, "status": V.RUNTIME_ERROR,
                        "error": "worker setup failed: " + V.error_tail(e), "setup": True},
                 by_value=True)
    return
  worker.serve()
  sys.stdout.flush()

"""The judge: one process per evaluation that owns the reference and every comparison.

    python -m kernelzero_jax.sandbox.judge JOB.json RESULT.json

It runs the static checks, computes reference outputs and times (TF32 off unless configured),
starts the candidate's worker (worker.py) in a process of its own, sends it commands stage by
stage with a time limit each, compares what comes back, and writes the verdict. The caller (a
trainer, the CLI, the pool) never imports torch; the worker never sees the reference's results.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import json
import math
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any, Callable

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import static_checks
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.go_gate import GoGate

POLL_S = 0.05
# How long _reference_first waits for the reference's second construction (a thread, which
# reseeds torch) before it gives up measuring first: the worker waits for its go meanwhile.
REFERENCE_FIRST_WAIT_S = 0.5
# A Triton judge that times the reference first builds the reference's second model after that
# timing instead of before it, when building the first took at least this long: the timing then
# need not wait for it (it reseeds torch), and it runs beside the worker's import of the
# candidate; the reference checks that use it follow under the candidate's hold. (On an H200, a
# lone level-2 Triton candidate's reference waited 0.4-0.6 s for it: the timing, and the worker's
# go after it, that much later.)
SECOND_REFERENCE_AFTER_S = 0.2
# A Triton worker that waits for its judge to time the reference first gets its go at the latest
# this long after its start (its own start-up takes about 0.45 s on an H200 machine): a judge still
# loading a large reference by then would hold its worker back for nothing.
TRITON_GO_DEADLINE_S = 1.0
# Steps of evidence["gpu_seconds"] that a judge does without holding the GPU: building models on
# the CPU before it takes the GPU. (Its releases of GPU memory are under the hold they end.)
STEPS_OFF_THE_HOLD = ("candidate_construct", "reference_construct")
_PR_SET_CHILD_SUBREAPER = 36
# How this process starts its workers (multiprocessing's start method). "spawn": a fresh
# interpreter (a plain judge). "fork": judges forked by the warm server (zygote.py) fork their
# worker too, from a process that has torch imported but no CUDA context or secret yet.
# "forkserver": a judge that serves several jobs (judge_host.py) has both after its first, so
# its workers come from a server it started before either, which never saw a job.
WORKER_START = "spawn"
# Descriptors of the process serving this judge (judge_host.py) that a forked worker closes
# before anything else, beside the judge's end of its pipe.
HOST_FDS: tuple[int, ...] = ()
# Processes this judge's process keeps across jobs (judge_host.py: its worker server and
# multiprocessing's resource tracker), spared when it kills the processes it adopted.
KEPT_PIDS: frozenset[int] = frozenset()
# Devices this process has warmed up (warm_up_device): once per process, since a judge process
# that serves several jobs (judge_host.py) keeps its kernels and cuBLAS handle.
WARMED_UP: set[str] = set()
# Whether this process serves further jobs (judge_host.py), so that it may keep a worker for the
# next one (SandboxConfig.candidates_per_worker).
KEEP_WORKERS = False
# The worker kept after the last job, stopped: {"handle", "key", "served"} (Judge._keep_worker).
PARKED: dict[str, Any] | None = None
# Fields of a worker's spec that differ from candidate to candidate (a kept worker takes them
# with the next candidate); every other field must match for a kept worker to serve a job.
PER_CANDIDATE_SPEC = frozenset({"workdir", "candidate_source", "reference_source",
                                "own_kernel_names", "await_go", "startup_fence",
                                "setup_kernel_ms_limit", "extension_suffix"})
# How long a kept worker gets to look itself over before the next candidate (worker.park).
PARK_TIMEOUT_S = 30.0
# How long WorkerHandle.stop waits for its SIGSTOP to take effect.
STOP_WAIT_S = 1.0


@functools.cache
def gpu_capability() -> int | None:
  """The compute capability every GPU of this machine shares (NVML, which starts no CUDA
  context), read once per process; None where there is none."""
  from kernelzero_jax.sandbox import triton_precompile  # pylint: disable=import-outside-toplevel
  return triton_precompile.nvml_capability()


def device_name(cfg: SandboxConfig, gpu_index: int) -> str:
  """The torch device a judge and its worker use ("cpu" or "cuda:N")."""
  return "cpu" if cfg.device == "cpu" else f"cuda:{int(gpu_index)}"


class StageFailure(Exception):
  """Ends the evaluation with a verdict status."""

  def __init__(self, status: str, reason: str):
    super().__init__(reason)
    self.status = status
    self.reason = reason


class WorkerHandle:
  """The judge's side of one candidate worker: requests with deadlines and a memory watchdog."""

  def __init__(self, spec: dict[str, Any], memory_limit_gb: float, target=None,
               kill_descendants: bool = True):
    """`target`: the worker's entry point (default: worker.worker_main, a candidate's).
    `kill_descendants`: killing it kills every other process the judge adopted too (not for a
    precompiler, whose candidate worker lives on)."""
    self.kill_descendants = kill_descendants
    from kernelzero_jax.sandbox import worker  # pylint: disable=import-outside-toplevel
    self.stderr_path = worker.output_file(spec, "stderr.txt")
    self.memory_limit = memory_limit_gb * 2**30
    try:
      self._start(WORKER_START, target or worker.worker_main, spec)
    except (OSError, EOFError) as e:
      if WORKER_START != "forkserver":
        raise
      # The worker server is gone or broken (judge_host.py): a fresh interpreter does the same.
      print(f"[judge] the worker server failed ({type(e).__name__}: {e}); spawning the worker")
      self._start("spawn", target or worker.worker_main, spec)

  def _start(self, method: str, target, spec: dict[str, Any]) -> None:
    self.start_method = method  # how it was started (evidence["worker_start"])
    ctx = multiprocessing.get_context(method)
    self.conn, child = ctx.Pipe(duplex=True)
    # A forked worker inherits the judge's end of the pipe (and its host's descriptors); it
    # closes them first thing.
    inherited = [self.conn.fileno(), *HOST_FDS] if method == "fork" else []
    self.proc = ctx.Process(target=target, args=(child, spec, inherited), daemon=False)
    try:
      self.proc.start()
    except BaseException:
      self.conn.close()
      raise
    finally:
      child.close()

  def request(self, msg: dict[str, Any], timeout_s: float, stage: str) -> dict[str, Any]:
    channel.send(self.conn, msg, by_value=True)
    return self.wait(timeout_s, stage)

  def wait(self, timeout_s: float, stage: str, limit_s: float | None = None) -> dict[str, Any]:
    """The worker's reply within `timeout_s`; `limit_s`: the stage's whole limit, which a
    timeout reports (default `timeout_s`), where part of it was spent before this wait."""
    import psutil  # pylint: disable=import-outside-toplevel
    deadline = time.monotonic() + timeout_s
    while True:
      ready = self.conn.poll(POLL_S)
      # One look at the worker per round, after the poll, and everything below goes by it: a
      # reply sent just before the exit can arrive after that poll gave up (the judge's thread
      # descheduled in between, 16 cores building 24 candidates), so a worker seen gone gets one
      # more look at the pipe; and one seen alive is never called dead in the same round (a
      # second look at the process, after that exit, reported 1 of 256 prebuilders dead with
      # exit code 0 on an H200).
      alive = self.proc.is_alive() and self.proc.exitcode is None
      if ready or (not alive and self.conn.poll(0)):
        try:
          return channel.recv(self.conn)
        except (EOFError, ConnectionError, OSError):
          pass  # died mid-message; reported below
        except Exception as e:  # pylint: disable=broad-except
          raise StageFailure(V.RUNTIME_ERROR, f"{stage}: unreadable reply from worker: {e}")
      if not alive:  # dead before the look, or died mid-message
        self.proc.join(timeout=1)
        raise StageFailure(V.COMPILE_ERROR if stage == "build" else V.RUNTIME_ERROR,
                           f"{stage}: worker died ({_describe_exit(self.proc.exitcode)})"
                           + self._stderr_tail())
      try:
        rss = _tree_rss(psutil.Process(self.proc.pid))
      except psutil.Error:
        rss = 0
      if rss > self.memory_limit:
        self.kill()
        raise StageFailure(V.RUNTIME_ERROR, f"{stage}: worker exceeded the memory limit "
                           f"({rss / 2**30:.1f} GiB > {self.memory_limit / 2**30:.1f} GiB)")
      if time.monotonic() > deadline:
        self.kill()
        raise StageFailure(V.TIMEOUT, f"{stage}: no answer within "
                           f"{timeout_s if limit_s is None else limit_s:g} s")

  def _stderr_tail(self, lines: int = 8) -> str:
    try:
      with open(self.stderr_path, errors="replace") as f:
        tail = f.read()[-4000:].strip().splitlines()[-lines:]
      return ("; stderr: " + " | ".join(tail)) if tail else ""
    except OSError:
      return ""

  def next_candidate(self, spec: dict[str, Any]) -> None:
    """Gives a kept worker (worker.serve) its next candidate."""
    from kernelzero_jax.sandbox import worker  # pylint: disable=import-outside-toplevel
    self.stderr_path = worker.output_file(spec, "stderr.txt")
    self.start_method = "kept"
    channel.send(self.conn, {"cmd": "next", "spec": spec}, by_value=True)

  @property
  def pid(self) -> int | None:
    """The worker's process id (evidence["worker_pid"])."""
    return self.proc.pid

  def stop(self) -> None:
    """Stops the worker (SIGSTOP) and returns once it is stopped, which the kernel makes it
    only when it next schedules it (up to STOP_WAIT_S): nothing of it runs until resume."""
    import psutil  # pylint: disable=import-outside-toplevel
    with contextlib.suppress(ProcessLookupError, PermissionError):
      os.killpg(self.proc.pid, signal.SIGSTOP)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
      try:
        if psutil.Process(self.proc.pid).status() in (psutil.STATUS_STOPPED,
                                                      psutil.STATUS_ZOMBIE):
          return
      except psutil.Error:  # gone
        return
      time.sleep(0.001)

  def resume(self) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
      os.killpg(self.proc.pid, signal.SIGCONT)

  def kill(self) -> None:
    """Kills the worker's process group and (see __init__) every other process the judge
    adopted; whatever is left goes when the judge ends (Judge.run)."""
    if self.proc.pid is None:
      return
    with contextlib.suppress(ProcessLookupError, PermissionError):
      os.killpg(self.proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
      self.proc.kill()
    self.proc.join(timeout=5)
    if self.kill_descendants:
      _kill_descendants()


def _tree_rss(proc) -> int:
  import psutil  # pylint: disable=import-outside-toplevel
  total = 0
  for p in [proc] + proc.children(recursive=True):
    with contextlib.suppress(psutil.Error):
      total += p.memory_info().rss
  return total


def finish_side_worker(handle: WorkerHandle, wait_s: float, stage: str,
                       sanitize: Callable[[Any], dict[str, Any]],
                       error_chars: int) -> dict[str, Any]:
  """What a candidate's precompiler or prebuilder (a worker beside its worker) answered within
  `wait_s`, through `sanitize` (it ran candidate code: evidence only), or its failure as
  {"error": ...}; with "waited_s". The handle is killed either way."""
  t0 = time.perf_counter()
  try:
    reply = sanitize(handle.wait(max(wait_s, POLL_S), stage))
  except StageFailure as f:
    reply = {"error": f.reason[:error_chars]}
  handle.kill()
  reply["waited_s"] = round(time.perf_counter() - t0, 3)
  return reply


def _kill_descendants() -> None:
  """Kills every process this judge adopted (it is a child subreaper), e.g. daemons a candidate
  double-forked to outlive its worker and tamper with output written later."""
  kept = KEPT_PIDS | ({PARKED["handle"].proc.pid} if PARKED else set())
  try:
    import psutil  # pylint: disable=import-outside-toplevel
    for p in psutil.Process().children(recursive=True):
      if p.pid not in kept:
        with contextlib.suppress(psutil.Error):
          p.kill()
  except Exception:  # pylint: disable=broad-except
    pass


def worker_key(spec: dict[str, Any]) -> str:
  """What a kept worker must share with a job's spec to serve it (all but PER_CANDIDATE_SPEC)."""
  return json.dumps({k: v for k, v in spec.items() if k not in PER_CANDIDATE_SPEC},
                    sort_keys=True, default=repr)


def take_kept_worker(key: str) -> tuple[WorkerHandle | None, dict[str, Any] | None]:
  """The worker kept after the last job, if it was made for `key`, is alive and finds nothing
  of its last candidate left (worker.park), with what its park found ({"served": candidates it
  served, "drift": what it found left, "park_s"}; None where none was kept). Any other is
  killed. Either way none is kept after this."""
  global PARKED
  parked, PARKED = PARKED, None
  if parked is None:
    return None, None
  handle, t0 = parked["handle"], time.perf_counter()
  info = {"served": parked["served"], "drift": []}
  handle.kill_descendants = False  # the job's builders may have started (_start_worker)
  if parked["key"] != key:
    info["drift"] = ["the kept worker was made for another device, backend or build"]
  elif not handle.proc.is_alive():
    info["drift"] = ["the kept worker is gone"]
  else:
    handle.resume()
    try:
      reply = handle.request({"cmd": "park"}, PARK_TIMEOUT_S, "park")
      info["drift"] = list(reply.get("drift") or (
          [] if reply.get("reusable") else ["the kept worker declined"]))
      info["check_s"] = reply.get("seconds")  # the worker's own look at itself
    except StageFailure as f:
      info["drift"] = [f.reason]
  info["park_s"] = round(time.perf_counter() - t0, 3)
  if info["drift"]:
    handle.kill()
    return None, info
  handle.kill_descendants = True
  return handle, info


def end_kept_worker() -> None:
  """Kills the worker kept for a next job (the process serves no more)."""
  global PARKED
  parked, PARKED = PARKED, None
  if parked is not None:
    parked["handle"].kill()


def _describe_exit(code: int | None) -> str:
  if code is None:
    return "no exit code"
  if code < 0:
    try:
      return f"killed by signal {signal.Signals(-code).name}"
    except ValueError:
      return f"killed by signal {-code}"
  return f"exit code {code}"


def drop_tracebacks(error: BaseException) -> None:
  """Drops the tracebacks of `error` and of every exception it chains to (its cause, its
  context). Their frames hold the failed step's locals, which on a GPU judge are its input sets
  and outputs: with the tracebacks gone, they go too."""
  seen: set[int] = set()
  chain: list[BaseException | None] = [error]
  while chain:
    e = chain.pop()
    if e is None or id(e) in seen:
      continue
    seen.add(id(e))
    e.__traceback__ = None
    chain += [e.__cause__, e.__context__]


def _lock_path(device_index: int, slot: int, lock_dir: str | None) -> str:
  directory = lock_dir or tempfile.gettempdir()
  name = (f"kernelzero_sandbox_gpu{device_index}.lock" if slot == 0
          else f"kernelzero_sandbox_gpu{device_index}.slot{slot}.lock")
  return os.path.join(directory, name)


@contextlib.contextmanager
def gpu_slots(device_index: int, slots: int = 1, exclusive: bool = True,
              lock_dir: str | None = None, width: int = 1, wait: bool = True):
  """GPU work of all judges on one GPU, coordinated by `slots` lock files.

  Exclusive (timing, or everything when slots is 1) holds every slot, so nothing else runs on
  the GPU; shared (untimed correctness checks) holds `width` of them (one group of consecutive
  slots: 0..width-1, width..2*width-1, ...), so checks of a problem whose memory would not fit
  `slots` times still share the GPU with `slots / width` others (check_width). A free group is
  taken if there is one; otherwise the holder waits for one. Whoever waits while holding a slot
  takes its slots in index order, and single slots are taken without waiting for another: no
  deadlock. Yields whether the slots are held: always, unless `wait` is False and none was
  free."""
  width = slots if exclusive else max(1, min(width, slots))
  groups = [range(g * width, (g + 1) * width) for g in range(slots // width)]
  order = list(range(len(groups)))
  random.Random(os.getpid()).shuffle(order)
  files = []

  def take(slot: int, wait: bool) -> bool:
    f = open(_lock_path(device_index, slot, lock_dir), "a+")  # pylint: disable=consider-using-with
    try:
      fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      f.close()
      return False
    files.append(f)
    return True

  def release() -> None:
    for f in reversed(files):
      with contextlib.suppress(OSError):
        fcntl.flock(f, fcntl.LOCK_UN)
      f.close()
    files.clear()

  try:
    for g in order:  # a free group if there is one
      if all(take(slot, wait=False) for slot in groups[g]):
        break
      release()
    else:  # all busy: wait for one, its slots in index order
      if not wait:
        yield False
        return
      for slot in groups[order[0]]:
        take(slot, wait=True)
    yield True
  finally:
    release()


# What one correctness check holds on the GPU at its peak: three input sets (the judge's inputs,
# their pristine copy, the worker's own inputs) and two of what a forward makes (the reference's
# outputs in the judge, the candidate's in the worker; where larger, the largest result inside
# the forward: problem.output_bytes). The reference checks before it hold as much (two seeds'
# outputs, inputs and pristine copy). For KernelBench's elementwise problems that is 5 input
# sets; on an H200, 4 were too few: 4 judges checking the 6 GiB ones at once ran out of memory
# (BENCHMARKS.md). Counted in input sets alone, a 16 MiB matmul input that makes a 4 GiB output
# (level 1 problems 7 and 9, level 2 problem 59) passed for 80 MiB a check.
CHECK_INPUT_SETS = 3
CHECK_OUTPUT_SETS = 2
# The share of the GPU's memory that checks running at once may fill (the rest: the allocators'
# slack, the reference's weights)...
CHECK_MEMORY_SHARE = 0.8
# ...less what every judge on the GPU holds whatever it is doing: its CUDA context and its
# worker's, with the worker's L2 flush buffer (518 + 880 MiB on an H200, torch 2.11).
JUDGE_GPU_BYTES = 1400 * 2**20


def check_bytes(input_bytes: int, output_bytes: int | None = None) -> int:
  """The GPU memory of one correctness check of a problem whose input set has `input_bytes` and
  whose forward makes `output_bytes` (problem.output_bytes; unknown: as much as its inputs)."""
  outputs = input_bytes if output_bytes is None else output_bytes
  return CHECK_INPUT_SETS * input_bytes + CHECK_OUTPUT_SETS * outputs


def _check_room(gpu_bytes: int, judges: int) -> float:
  """The bytes that checks running at once may fill on a GPU of `gpu_bytes` beside `judges`
  judges' processes."""
  return CHECK_MEMORY_SHARE * gpu_bytes - judges * JUDGE_GPU_BYTES


def checks_fit(one_check_bytes: int, slots: int, gpu_bytes: int, judges: int = 1) -> bool:
  """Whether `slots` correctness checks of `one_check_bytes` each (check_bytes) fit in a GPU of
  `gpu_bytes` at once, beside `judges` judges' processes (then each holds one of the slots:
  check_width)."""
  return one_check_bytes * slots <= _check_room(gpu_bytes, judges)


def check_width(one_check_bytes: int, slots: int, gpu_bytes: int, judges: int = 1) -> int:
  """How many of `slots` slots a correctness check of `one_check_bytes` (check_bytes) holds
  (gpu_slots' width): each slot stands for 1/slots of the memory that checks_fit lets checks
  fill, so that checks of any problems holding the slots at once fit: 1 when `slots` such
  checks fit (checks_fit), `slots` (the GPU alone) when one check needs more than `slots - 1`
  slots' share."""
  room = _check_room(gpu_bytes, judges)
  if room <= 0:
    return slots
  return max(1, min(slots, math.ceil(one_check_bytes * slots / room)))


# The share of the GPU's memory that judges' model weights may take between their holds, each
# judge's twice (its reference's from its start-up, its worker's candidate's from its first hold
# to its last): half of what CHECK_MEMORY_SHARE leaves. Level-2 problems 55, 56 and 59 have 4 GiB
# of weights (a 32768 x 32768 Linear), 66 and 68 1 GiB; 24 judges of one of them would hold
# 48-192 GiB so, in no hold.
WEIGHTS_KEPT_SHARE = 0.1


def weights_kept_fit(weight_bytes: int, gpu_bytes: int, judges: int = 1) -> bool:
  """Whether a judge may keep its problem's weights on the GPU between its holds (its reference
  uploaded at its start-up, its worker's model kept from one hold to the next): when every one
  of the `judges` judges on the GPU could keep as much, twice over, in WEIGHTS_KEPT_SHARE of it.
  Otherwise its whole evaluation runs in one hold of the whole GPU, its reference uploaded in it
  (Judge._weights_apart)."""
  return judges * 2 * weight_bytes <= WEIGHTS_KEPT_SHARE * gpu_bytes


# The share of the host's memory that judges whose weights stay off the GPU (weights_kept_fit)
# may fill with their models on the CPU at once, each with three copies: its reference (kept
# there until its hold), the reference checks' second one and its worker's candidate. On an
# H200 machine (128 GiB), 16 judges of level-2 problem 59 (4 GiB of weights) at once had 5 of
# them killed by the kernel for memory.
HOST_WEIGHTS_SHARE = 0.5
HOST_MODEL_COPIES = 3


@contextlib.contextmanager
def host_memory_hold(weight_bytes: int, host_bytes: int, wait: bool = True):
  """One of the host-memory slots for a judge of large weights (HOST_WEIGHTS_SHARE), lock files
  as gpu_slots' are, so that such judges at once fit the host's memory. Yields the number of
  slots its size allows (at least 1), or 0 where `wait` is False and none was free. (Judges of
  problems with different weights count different numbers of slots over the same files: the
  smaller problem's bound holds only approximately beside a larger one's judges.)"""
  slots = max(1, int(HOST_WEIGHTS_SHARE * host_bytes) // (HOST_MODEL_COPIES * max(1, weight_bytes)))
  lock_dir = os.path.join(tempfile.gettempdir(), "kz_host_memory")
  os.makedirs(lock_dir, exist_ok=True)
  with gpu_slots(0, slots, exclusive=False, lock_dir=lock_dir, wait=wait) as held:
    yield slots if held else 0


def warm_up_device(torch, problem, device) -> None:
  """Loads what a judge's first reference check would load under the GPU hold: the RNG's
  kernels, cuBLAS's handle and workspace, and torch.equal's kernels. On an H200, a matmul
  reference's first check took 0.14-0.18 s more than the next ones, 0.03-0.06 s more with this
  (benchmarks/first_run.py). A few kernels on 256 elements and small allocations, run beside
  the judge's own context start-up, which is driver work of the same kind and far more."""
  problem.make_inputs(lambda: [torch.rand(16, 16)], 0, device)
  one = torch.ones(16, 16, device=device)
  torch.mm(one, one)
  problem.inputs_unchanged([one], [one.clone()])
  if device.type == "cuda":
    torch.cuda.synchronize(device)


def memory_kept_fits(one_check_bytes: int, slots: int, gpu_bytes: int, judges: int = 1) -> bool:
  """Whether a judge may keep its checks' GPU memory (`one_check_bytes`: check_bytes) from one
  hold to the next instead of freeing it before it lets go (Judge._release_gpu_memory): when,
  beside `slots` checks running in the slots, every one of the `judges` judges on the GPU could
  keep as much (checks_fit with `slots + judges` checks). Then no judge's memory kept outside a
  hold can starve a check."""
  return checks_fit(one_check_bytes, slots + judges, gpu_bytes, judges)


def startup_seconds(built: dict[str, Any], worker_started: float,
                    judge_laps: dict[str, float]) -> dict[str, dict[str, float]]:
  """Where the time up to a built candidate went, for evidence["startup_seconds"]: the worker's
  steps in order (`start`: from the judge starting it to its entry point; then its own steps;
  `candidate_import`: the candidate's module) and the judge's, which overlap the worker's.

  The worker reports its steps after the candidate's code has run, so they are for reading
  only, never for a verdict, and anything in them that is not a finite number is dropped."""
  finite = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
  worker: dict[str, float] = {}
  if finite(built.get("entered_at")):
    worker["start"] = round(built["entered_at"] - worker_started, 4)
  laps = built.get("startup_seconds")
  if isinstance(laps, dict):
    worker.update({str(k)[:32]: round(x, 4) for k, x in list(laps.items())[:16] if finite(x)})
  if finite(built.get("seconds")):
    worker["candidate_import"] = round(built["seconds"], 4)
  return {"worker": worker, "judge": dict(judge_laps)}


def gpu_lock(device_index: int, slots: int = 1):
  """The whole GPU (every slot): what timing needs, and what outside timers take too."""
  return gpu_slots(device_index, slots, exclusive=True)


class Judge:
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
    self._reference_on_cpu = False  # until its candidate's hold (_weights_apart)
    self._host_memory: contextlib.ExitStack | None = None  # its host_memory_hold, if taken
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

  # -- entry ---------------------------------------------------------------------------------

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
      for handle in (self.worker, self.precompiler, self.prebuilder):
        if handle is not None:
          handle.kill()
      if self._host_memory is not None:  # its models on the CPU go before its slot does
        self.ref_model = self.second_reference = None
        self._host_memory.close()
      if self._go_timer is not None:
        self._go_timer.cancel()
      if self._hand_over_thread is not None:  # done at once now: it writes into the verdict
        self._hand_over_thread.join()
      if self.close_stats is not None:
        v.evidence["fused_compare"].update(fused=self.close_stats.fused,
                                           fallbacks=self.close_stats.fallbacks)
      shutil.rmtree(self.workdir, ignore_errors=True)
    return v

  def _finish(self, status: str, reasons: list[str]) -> V.Verdict:
    self.verdict.status = status
    self.verdict.reasons.extend(reasons)
    return self.verdict

  # -- stages --------------------------------------------------------------------------------

  def _start_worker(self) -> None:
    cfg = self.cfg
    spec = {"workdir": self.workdir, "device": device_name(cfg, self.job.get("gpu_index", 0)),
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
        if cfg.lite_main_cpp and cfg.lite_bind_pch and fast_build.bind_intact(self.pch_header):
          self.bind_dir = spec["bind_dir"] = fast_build.bind_dir_of(self.pch_header)
    if self.backend == "triton" and cfg.device == "cuda" and cfg.triton_seed:
      self._plant_triton_seed()
    prebuild = spec.get("fast_build") and cfg.device == "cuda" and cfg.cuda_prebuild
    # A CUDA worker without a prebuilder builds at once: its candidate's code would run while
    # the reference is timed.
    self.awaits_go = (cfg.device == "cuda" and cfg.reference_first
                      and (self.backend == "triton" or prebuild) and self._reference_unmeasured())
    self.go_gate = GoGate() if self.awaits_go else None
    self.worker_started = time.perf_counter()
    if KEEP_WORKERS and cfg.worker_candidates() > 1 and not self.job.get("fresh_worker"):
      spec["candidates_per_worker"] = cfg.worker_candidates()
      # Extension names of this candidate's own (worker._renamed), its prebuilder's too.
      spec["extension_suffix"] = "_kz" + os.urandom(4).hex()
      self.worker_key = worker_key(spec)
    worker_spec = dict(spec, await_go=True) if prebuild or self.awaits_go else spec
    # A kept worker looks itself over first (take_kept_worker, a few tenths of a second): its
    # builders start before that, and the look runs in a thread while this judge loads the
    # reference and times it (_reference_first: the look is the worker's own CPU work, with no
    # candidate of this job in it, and a new worker started where it fails starts its CUDA
    # context inside the fence, apart from that timing). On an H200, done before them, the
    # look held a lone Triton candidate back 0.33 s. A new worker's start beside the builders,
    # as it always has.
    builders_first = self.worker_key is not None and PARKED is not None
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
    """The kept worker, if it passes its look (take_kept_worker), else a new one, as this
    judge's worker. (In a thread where a kept worker looks: _looking_thread.)"""
    try:
      kept, reuse = take_kept_worker(self.worker_key) if self.worker_key else (None, None)
      if kept is not None:
        kept.next_candidate(worker_spec)
        self.worker, self.worker_serves = kept, reuse["served"] + 1
      else:
        self.worker = WorkerHandle(worker_spec, self.cfg.memory_limit_gb)
        self.worker_serves = 1
      if reuse is not None:
        self.verdict.evidence["worker_reuse"] = dict(reuse, kept=kept is not None)
      self.verdict.evidence["worker_start"] = ("kept" if kept is not None
                                               else self.worker.start_method)
      self.verdict.evidence["worker_pid"] = self.worker.pid  # (benchmarks/gpu_steps.py)
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

  def _start_second_reference(self) -> None:
    """The reference checks build the reference a second time (to see that it reproduces
    itself). On the CPU, KernelBench's way, that can take seconds (4 GiB of nn.Linear: 9 s on
    an H200 machine), so it is done in a thread while the candidate builds, unless another judge
    has shared the checks' findings by now; the judge joins it before it takes the GPU, and
    before anything of its own draws random numbers (construct_model reseeds torch)."""
    if not self.cfg.check_degenerate or self._knows("degenerate"):
      return

    def construct() -> None:
      try:
        self.second_reference = self.problem.construct_model(
            self.ref_mod.Model, self.ref_mod.get_init_inputs, self.cfg.init_seed)
      except Exception:  # pylint: disable=broad-except
        pass  # the reference checks build it again, and fail there as they would have
    self._second_reference_thread = threading.Thread(target=construct, daemon=True)
    self._second_reference_thread.start()

  def _plant_triton_seed(self) -> None:
    """Triton's driver utilities into the candidate's cache, before its processes start
    (triton_seed.py); without a seed built on this machine, they compile them as before."""
    # pylint: disable-next=import-outside-toplevel
    from kernelzero_jax.sandbox import fast_build, triton_seed, worker
    seed = triton_seed.ready_seed(self.cfg.pch_dir or fast_build.default_cache_dir())
    self.verdict.evidence["triton_seed"] = (
        triton_seed.plant(seed, os.path.join(self.workdir, worker.TRITON_CACHE)) if seed
        else {"planted": 0, "changed": [], "missing": True})

  def _evaluate(self) -> None:
    startup = self.startup  # this judge's steps while its worker starts and builds
    import torch  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import problem  # pylint: disable=import-outside-toplevel
    self.torch, self.problem = torch, problem
    cfg, v = self.cfg, self.verdict
    startup.lap("imports")
    v.stage = "device"
    if cfg.device == "cuda" and not torch.cuda.is_available():
      raise StageFailure(V.UNSUPPORTED, "device cuda requested but no CUDA device is visible")
    self.device = torch.device(device_name(cfg, self.job.get("gpu_index", 0)))
    if self.device.type == "cuda":
      # The CUDA context, apart from timings; a judge process that made it for an earlier job
      # (judge_host.py) has no driver work to do here.
      with (contextlib.nullcontext() if torch.cuda.is_initialized()
            else self._fence("device", timing=False)):
        torch.cuda.set_device(self.device)
        torch.cuda.synchronize(self.device)
    torch.backends.cuda.matmul.allow_tf32 = cfg.reference_tf32
    torch.backends.cudnn.allow_tf32 = cfg.reference_tf32
    torch.set_grad_enabled(False)
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
      # No start-up slot: those are for context creations (gpu_fence.py), and this process's
      # context exists (in a batch of 70 on an H200, uploads of small models waited 7-10 s for
      # a slot behind workers' context creations, to hold it for milliseconds).
      if self._weights_apart:
        self.ref_model, self._reference_on_cpu = model, True  # _upload_reference, under the hold
      else:
        with self._fence("upload", timing=False, slot=False):
          self.ref_model = self._to_device(model, "reference")
          if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
      del model
    except Exception as e:  # pylint: disable=broad-except
      v.reference_error = True
      raise StageFailure(V.RUNTIME_ERROR, f"reference failed to load: {type(e).__name__}: {e}")
    startup.lap("reference")
    if self.device.type == "cuda" and cfg.judge_warm_up and str(self.device) not in WARMED_UP:
      with self._fence("warm_up", timing=False, slot=False):
        warm_up_device(torch, problem, self.device)
      WARMED_UP.add(str(self.device))
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
    built = self._expect(self.worker.wait(max(remaining, POLL_S), "build",
                                          cfg.build_timeout_s), "build")
    v.stage_seconds["build"] = round(time.perf_counter() - self.worker_started, 3)
    v.evidence["startup_seconds"] = startup_seconds(built, self.worker_started, startup.seconds)
    if built.get("setup_gpu"):  # the GPU work of its import, which no hold covers
      v.evidence.setdefault("setup_gpu", {})["import"] = built["setup_gpu"]
    if built.get("build_log"):  # how each load_inline built (fast, or fell back to plain)
      v.evidence["build"] = list(built["build_log"])[:8]
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
      constructed = self._expect(self.worker.request({"cmd": "construct", "seed": cfg.init_seed},
                                                     cfg.correctness_timeout_s, "init"), "init")
    if constructed.get("setup_gpu"):
      v.evidence.setdefault("setup_gpu", {})["constructor"] = constructed["setup_gpu"]
    if self._second_reference_thread is not None:
      with self._step("reference_construct"):  # what is left of it: it ran beside the build
        self._second_reference_thread.join()
    if self.precompiler is not None:
      self._await_precompile()
    if self._fused_thread is not None:
      self._ready_fused_compare()

    cuda = self.device.type == "cuda"
    slots = cfg.gpu_concurrency if cuda else 1
    hold = lambda exclusive, width=1: (self._gpu_hold(slots, exclusive, width) if cuda
                                       else contextlib.nullcontext())
    base = self.base_seed
    # From the build's end to the first hold's request: construction, joins, the fused
    # comparison's load (none of it holds the GPU).
    v.evidence["build_to_hold_s"] = round(time.perf_counter() - built_at, 3)
    # The whole evaluation under one hold, nothing else on the GPU meanwhile: always with one
    # slot; when one check of this problem needs the memory of all the slots (check_width;
    # otherwise its checks hold as many as they need); when its weights are too large to keep
    # on the GPU between holds (_weights_apart); and when a candidate that ran out of memory on
    # a shared GPU anyway is judged again (evaluate.shared_gpu_oom).
    width = (self._check_width(slots) if slots > 1 and not self.job.get("exclusive_gpu")
             and not self._weights_apart else slots)
    if width == slots:
      with hold(exclusive=True):
        self._holding(self._upload_reference, lambda: self._checks(base),
                      lambda: cuda and cfg.timing and self._timed(base),
                      lambda: self._post_check(base))
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
        self._holding(lambda: self._checks(base),
                      lambda: release and self._release_gpu_memory())
      if cfg.timing:
        # The fence before the GPU: a timing that held every slot while start-ups under way
        # finished would leave the GPU idle (on an H200, a batch of 70 ran 16% slower so).
        with self._fence("timing", timing=True), hold(exclusive=True):
          self._holding(lambda: self._timed(base),
                        lambda: release and self._release_gpu_memory())
      with hold(exclusive=False, width=width):
        self._holding(lambda: self._post_check(base))
    if v.candidate_ms and v.reference_ms:
      v.speedup = v.reference_ms / v.candidate_ms
    if v.compile_ms and v.candidate_ms:
      v.speedup_vs_compile = v.compile_ms / v.candidate_ms
    v.stage = "done"
    v.status = V.CORRECT
    self._keep_worker()

  def _await_precompile(self) -> None:
    """Waits for the precompiler (within the build's deadline) before the GPU is taken, then
    stops it. Whatever happened to it, the evaluation goes on: it changes only how much the
    candidate's first check compiles (evidence["triton_precompile"])."""
    from kernelzero_jax.sandbox import triton_precompile  # pylint: disable=import-outside-toplevel
    remaining = min(self.cfg.build_timeout_s - (time.perf_counter() - self.worker_started),
                    triton_precompile.MAX_WAIT_S)
    self.verdict.evidence["triton_precompile"] = finish_side_worker(
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
      self.verdict.evidence["cuda_prebuild"] = cuda_prebuild.hand_over(
          prebuilder, worker, self.workdir, wait_s, gate.open if gate is not None else None)
      self.go_sent_at = time.perf_counter()
    self._hand_over_thread = threading.Thread(target=hand_over, name="prebuild-hand-over",
                                              daemon=True)
    self._hand_over_thread.start()

  def _start_fused_compare(self) -> None:
    """A thread that compiles the comparison kernel (fused_compare.py, about 0.3 s of one CPU
    core) while the candidate builds."""
    from kernelzero_jax.sandbox import fused_compare  # pylint: disable=import-outside-toplevel
    capability = self.torch.cuda.get_device_capability(self.device)
    built: dict[str, Any] = {}

    def compile_kernel() -> None:
      t0 = time.perf_counter()
      try:
        built["cubin"] = fused_compare.compile_cubin(capability)
      except Exception as e:  # pylint: disable=broad-except
        built["error"] = f"{type(e).__name__}: {e}"[:500]
      built["compile_s"] = round(time.perf_counter() - t0, 3)
    self._fused_built = built
    self._fused_thread = threading.Thread(target=compile_kernel, name="fused-compare",
                                          daemon=True)
    self._fused_thread.start()

  def _ready_fused_compare(self) -> None:
    """Loads the compiled kernel before the GPU is taken; if it did not compile or load, the
    comparisons go the torch way (evidence["fused_compare"]["error"])."""
    from kernelzero_jax.sandbox import fused_compare  # pylint: disable=import-outside-toplevel
    t0 = time.perf_counter()
    self._fused_thread.join()
    self._fused_thread = None  # once
    built = self._fused_built
    # The wait for the compile, and the module's load into this judge's context (driver work).
    evidence = self.verdict.evidence["fused_compare"] = {
        "compile_s": built["compile_s"], "join_s": round(time.perf_counter() - t0, 3)}
    if "cubin" not in built:
      evidence["error"] = built["error"]
      return
    t0 = time.perf_counter()
    try:
      self.close_stats = fused_compare.FusedCloseStats(self.device, built["cubin"])
    except Exception as e:  # pylint: disable=broad-except
      evidence["error"] = f"{type(e).__name__}: {e}"[:500]
    evidence["load_s"] = round(time.perf_counter() - t0, 3)

  def _holding(self, *steps: Callable[[], Any]) -> None:
    """Runs `steps` in turn under the GPU hold its caller holds. A failure there ends the
    evaluation, and what the evaluation still has on the GPU goes before the hold does
    (_give_back_after_failure). Otherwise it would stay, in no hold and counted by no memory
    budget, until this process's next job, or through a whole new evaluation where a kept
    worker's failure is judged again here (Judge.run): on an H200, judges held 19-31 GiB so and
    candidates beside them ran out of memory (BENCHMARKS.md)."""
    try:
      for step in steps:
        step()
      return
    except BaseException as error:  # pylint: disable=broad-except
      failure = error
    # Out of the except clause, the failure's traceback is all that holds the failed steps'
    # frames (a with statement's exit would still hold it: hence a function, not a context).
    drop_tracebacks(failure)
    self._give_back_after_failure()
    raise failure

  def _give_back_after_failure(self) -> None:
    """After a failure under a hold, before it ends: the worker is killed (its candidate's memory
    goes with its CUDA context; this judge's views of its outputs went with the failure's
    frames), and this judge's reference model and cached blocks are freed. (A kept worker
    still looking itself over, _take_worker, holds no candidate's memory: it goes at the end of
    the job.)"""
    if self.worker is not None:
      self.worker.kill()
      self.worker = None
    self.ref_model = None
    if self.device is not None and self.device.type == "cuda":
      self.torch.cuda.empty_cache()

  def _release_gpu_memory(self) -> None:
    """Frees the GPU memory of the last check's (or timing's) inputs and outputs in this judge
    and its worker (Worker.release), this judge's first: its CUDA IPC views of the worker's
    outputs must be gone for the worker to free them. What each still has allocated after it
    goes to evidence["left_after_release"], [judge bytes, worker bytes] per release."""
    with self._step("release"):
      self.torch.cuda.empty_cache()
      reply = self._expect(self.worker.request({"cmd": "release"}, self.cfg.correctness_timeout_s,
                                               "release"), "release")
      worker_bytes = reply.get("allocated_bytes")
      self.verdict.evidence.setdefault("left_after_release", []).append(
          [self.torch.cuda.memory_allocated(self.device),
           worker_bytes if isinstance(worker_bytes, int) else None])

  @functools.cached_property
  def _memory_on_gpu(self) -> tuple[dict[str, int | None], int, int]:
    """(one check's memory: {"input_bytes", "output_bytes", "check_bytes"}, the last None when
    the input size is unknown, and the model's "weight_bytes"; the GPU's bytes; the judges of the
    pool on it), what the memory model of checks_fit and weights_kept_fit counts: read once, for
    _check_width, _keeps_memory and _weights_apart. (Read before the reference's second
    construction starts: that thread reseeds torch, and nothing may draw numbers beside it.)"""
    ref = self.ref_mod
    inputs = self.problem.input_bytes(ref.get_inputs)
    outputs = (None if inputs is None else
               self.problem.output_bytes(ref.Model, ref.get_init_inputs, ref.get_inputs))
    sizes = {"input_bytes": inputs, "output_bytes": outputs,
             "check_bytes": None if inputs is None else check_bytes(inputs, outputs),
             "weight_bytes": self.problem.weight_bytes(ref.Model, ref.get_init_inputs)}
    total = self.torch.cuda.get_device_properties(self.device).total_memory
    return sizes, total, max(1, int(self.job.get("judges_on_gpu") or 1))

  def _keeps_memory(self, slots: int) -> bool:
    """Whether this judge keeps its checks' memory between its holds (memory_kept_fits, with
    SandboxConfig.keep_memory_between_holds; evidence["memory_kept_between_holds"])."""
    if not self.cfg.keep_memory_between_holds:
      return False
    sizes, total, judges = self._memory_on_gpu
    if sizes["check_bytes"] is None or not memory_kept_fits(sizes["check_bytes"], slots, total,
                                                            judges):
      return False
    self.verdict.evidence["memory_kept_between_holds"] = {
        **sizes, "slots": slots, "gpu_bytes": total, "judges_on_gpu": judges}
    return True

  @functools.cached_property
  def _weights_apart(self) -> bool:
    """Whether this judge's problem has weights too large to keep on a GPU between holds
    (weights_kept_fit, evidence["weights_apart"]): then its reference stays on the CPU until
    its candidate's hold, and everything runs in that one hold of the whole GPU, the worker (and
    its model) killed in it."""
    if self.device is None or self.device.type != "cuda":
      return False
    sizes, total, judges = self._memory_on_gpu
    if sizes["weight_bytes"] is None or weights_kept_fit(sizes["weight_bytes"], total, judges):
      return False
    self.verdict.evidence["weights_apart"] = {"weight_bytes": sizes["weight_bytes"],
                                              "gpu_bytes": total, "judges_on_gpu": judges}
    return True

  def _take_host_memory(self) -> None:
    """Waits for a host-memory slot (host_memory_hold) before this judge builds its large
    models on the CPU; kept until its evaluation ends (_run)."""
    import psutil  # pylint: disable=import-outside-toplevel
    t0 = time.perf_counter()
    self._host_memory = contextlib.ExitStack()
    slots = self._host_memory.enter_context(host_memory_hold(
        self._memory_on_gpu[0]["weight_bytes"], psutil.virtual_memory().total))
    self.verdict.evidence["weights_apart"].update(
        host_slots=slots, host_wait_s=round(time.perf_counter() - t0, 3))

  def _upload_reference(self) -> None:
    """Under the hold, a reference kept on the CPU so far (_weights_apart) goes to the GPU."""
    if self._reference_on_cpu:
      with self._step("reference_upload"):
        self.ref_model = self._to_device(self.ref_model, "reference")
        if self.device.type == "cuda":
          self.torch.cuda.synchronize(self.device)
      self._reference_on_cpu = False

  def _to_device(self, model, name: str):
    """`model` moved to this judge's device; from its own pages page-locked in place where it
    is large and SandboxConfig.registered_uploads (host_registration.py;
    evidence["registered_upload"][name])."""
    if not self.cfg.registered_uploads:
      return model.to(self.device)
    from kernelzero_jax.sandbox import host_registration  # pylint: disable=import-outside-toplevel
    moved, upload = host_registration.to_device(self.torch, model, self.device)
    if upload:
      self.verdict.evidence.setdefault("registered_upload", {})[name] = upload
    return moved

  def _check_width(self, slots: int) -> int:
    """How many of the `slots` this judge's checks hold (check_width), beside the processes of
    the pool's other judges on this GPU (evidence["check_width"]; evidence["checks_alone"] when
    that is all of them, as it is for any more than one without SandboxConfig.wide_checks).
    Unknown input sizes take one."""
    sizes, total, judges = self._memory_on_gpu
    if sizes["check_bytes"] is None:
      return 1
    width = check_width(sizes["check_bytes"], slots, total, judges)
    if width > 1 and not self.cfg.wide_checks:
      width = slots
    if width > 1:
      self.verdict.evidence["checks_alone" if width == slots else "check_width"] = {
          **sizes, "slots": slots, "width": width, "gpu_bytes": total, "judges_on_gpu": judges}
    return width

  @contextlib.contextmanager
  def _step(self, name: str):
    """Adds the seconds of the enclosed work to self.steps[name], also when it fails."""
    t0 = time.perf_counter()
    try:
      yield
    finally:
      self.steps[name] = round(self.steps.get(name, 0.0) + time.perf_counter() - t0, 4)
      self.verdict.evidence["gpu_seconds"] = dict(self.steps)

  @contextlib.contextmanager
  def _fence(self, name: str, timing: bool, holding_gpu: bool = False, slot: bool = True):
    """gpu_fence.startup_fence around a start-up step or a timing of a GPU judge, with the
    seconds it waited in evidence["fence_wait_s"][name] (summed over repeats). `holding_gpu`:
    a timing within a hold of every slot (gpu_fence's docstring: it must not wait). `slot`: a
    start-up that creates a CUDA context, which takes one of the start-up slots."""
    if self.cfg.device != "cuda" or not self.cfg.startup_fence or self._fence_held:
      yield  # (held already: a timing's steps within a timing's hold)
      return
    from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
    slots = self.cfg.startups_at_once if slot else 0
    with gpu_fence.startup_fence(self.job.get("gpu_index", 0), timing,
                                 holding_gpu=holding_gpu, startup_slots=slots) as waited:
      waits = self.verdict.evidence.setdefault("fence_wait_s", {})
      waits[name] = round(waits.get(name, 0.0) + waited, 4)
      self._fence_held = True
      try:
        yield
      finally:
        self._fence_held = False

  @contextlib.contextmanager
  def _gpu_hold(self, slots: int, exclusive: bool, width: int = 1, wait: bool = True):
    """gpu_slots, with the time spent waiting for them added up in stage_seconds["gpu_wait"].
    Yields whether the GPU is held (see gpu_slots' `wait`)."""
    t0 = time.perf_counter()
    with gpu_slots(self.device.index or 0, slots, exclusive, width=width, wait=wait) as held:
      if not held:
        yield False
        return
      stages = self.verdict.stage_seconds
      stages["gpu_wait"] = round(stages.get("gpu_wait", 0.0) + time.perf_counter() - t0, 3)
      # Wall-clock bounds of every hold, so that a run's holds can be laid side by side (how
      # many judges had the GPU at once, and for how long one had it alone:
      # benchmarks/gpu_steps.py).
      hold = [round(time.time(), 3), None, "alone" if exclusive or slots == 1 else "shared"]
      self.verdict.evidence.setdefault("gpu_holds", []).append(hold)
      try:
        yield True
      finally:
        hold[1] = round(time.time(), 3)

  def _knows(self, fact: str) -> bool:
    """Whether `fact` about the reference is known: shared by another judge by now."""
    if fact not in self.known and self.facts_path:
      self.known = {**read_facts(self.facts_path), **self.known}
    return fact in self.known

  def _checks(self, base: int) -> None:
    """Reference checks, the candidate's init, and its outputs on fresh input sets."""
    cfg, v = self.cfg, self.verdict
    seeds = self._check_seeds(base)
    if cfg.check_degenerate:
      self._degenerate_facts(seeds)
    v.stage = "init"
    with self._step("candidate_init"):
      inited = self._expect(self.worker.request({"cmd": "init", "seed": cfg.init_seed},
                                                cfg.correctness_timeout_s, "init"), "init")
    if inited.get("upload"):  # the worker's own account (host_registration.sanitize)
      from kernelzero_jax.sandbox import host_registration  # pylint: disable=import-outside-toplevel
      self.verdict.evidence.setdefault("registered_upload", {})["candidate"] = (
          host_registration.sanitize(inited["upload"]))
    v.stage = "correctness"
    t0 = time.perf_counter()
    for i, seed in enumerate(seeds):
      self._check_seed(seed, profile=(i == 0), stage="correctness")
      v.num_correct_trials += 1
    v.stage_seconds["correctness"] = round(time.perf_counter() - t0, 3)

  def _check_seeds(self, base: int) -> list[int]:
    return [base + 1 + i for i in range(self.cfg.num_correct_trials)]

  def _timing_seeds(self, base: int) -> list[int]:
    return [base + 10_007 + i for i in range(self.cfg.warmup + self.cfg.max_trials)]

  def _reference_to_check(self) -> bool:
    """Whether the reference checks are this judge's to run: not run here, none shared by now."""
    return (self.cfg.check_degenerate and not self.reference_checked
            and not self._knows("degenerate"))

  def _reference_to_time(self) -> bool:
    """Whether the reference's time is this judge's to measure: not timed here, none shared."""
    cfg = self.cfg
    return (cfg.timing and cfg.device == "cuda" and self.reference_timed is None
            and not self._knows("reference_ms"))

  def _reference_unmeasured(self) -> bool:
    """Whether this judge has a fact about the reference to measure."""
    return self._reference_to_check() or self._reference_to_time()

  def _second_reference_after(self, construct_s: float) -> bool:
    """Whether the reference's second model is built after _reference_first's timing rather
    than before it (SECOND_REFERENCE_AFTER_S): only where that timing comes first and nothing
    else holds the go meanwhile (a CUDA worker's prebuilder takes seconds, which the second
    construction fits in), only where this judge has both the reference's time and its checks
    to measure, and only where building the first took long."""
    if os.environ.get("KZ_SECOND_REFERENCE_AFTER", "1") == "0":  # (benchmarks: before, as was)
      return False
    return (self.awaits_go and self.prebuilder is None and not self._weights_apart
            and construct_s >= SECOND_REFERENCE_AFTER_S and self._reference_to_time()
            and self._reference_to_check())

  def _reference_first(self, checks: bool = True) -> None:
    """What this judge measures about the reference (its timing, then its checks), measured
    before the candidate's checks, if the GPU is free now: a judge that would wait for it
    measures after the candidate's checks as before. The reference is timed only while the
    worker still waits for its go, set up and without the candidate's code imported, so that
    nothing of the candidate runs in a process with a GPU meanwhile (its precompiler or
    prebuilder has none; go_gate.py); the untimed checks follow while the worker imports it
    (evidence["reference_first"]), unless not `checks`: then they wait for the reference's
    second model, built after this timing (_second_reference_after), until the candidate's hold."""
    cfg, torch = self.cfg, self.torch
    t0 = time.perf_counter()
    evidence = self.verdict.evidence["reference_first"] = {"held": False, "timed": False}
    try:
      if self._weights_apart:  # its reference is uploaded under the candidate's hold
        evidence["skipped"] = "the reference's weights stay off the GPU until the candidate's hold"
        return
      construct = self._second_reference_thread
      if construct is not None:  # it reseeds torch: nothing here may draw random numbers before
        self._join_second_reference(construct)
      if construct is not None and construct.is_alive():
        evidence["skipped"] = "the reference's second construction was still running"
        return
      base = self.base_seed

      def measure() -> None:
        evidence["held"] = True
        if self._reference_to_time() and self.go_gate.claim():
          try:
            self.reference_timed = self._time_reference(self._timing_seeds(base))
            evidence["timed"] = True
          finally:
            self.go_gate.release()
        self._let_triton_worker_go()
        if not checks:
          evidence["checks"] = "after the second construction, under the candidate's hold"
        elif self._reference_to_check():
          if self._fused_thread is not None and not self._fused_thread.is_alive():
            self._ready_fused_compare()  # compiled by now: the checks compare in one kernel
          self._degenerate_facts(self._check_seeds(base))
        torch.cuda.empty_cache()

      with self._gpu_hold(cfg.gpu_concurrency, exclusive=True, wait=False) as held:
        if held:
          self._holding(measure)
    finally:
      self._let_triton_worker_go()
      evidence["seconds"] = round(time.perf_counter() - t0, 3)

  def _join_second_reference(self, construct: threading.Thread) -> None:
    """Waits for the reference's second construction before _reference_first: up to
    REFERENCE_FIRST_WAIT_S, or for as long as a CUDA worker still waits for its prebuilder's
    hand-over (seconds of build), which it does whatever this judge does. (On an H200, lone
    level-2 CUDA candidates' judges gave up at 0.5 s and timed the reference under the
    candidate's hold instead, 0.3 s longer there.)"""
    deadline = time.perf_counter() + REFERENCE_FIRST_WAIT_S
    while construct.is_alive():
      construct.join(POLL_S)
      if time.perf_counter() >= deadline and not self._prebuild_holds_the_go():
        return

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
    self.go_sent_at = time.perf_counter()
    with contextlib.suppress(OSError, ValueError):  # a dead worker: its build's wait says why
      channel.send(self.worker.conn, {"cmd": "go"}, by_value=True)

  def _degenerate_facts(self, seeds: list[int]) -> None:
    """The reference checks' findings (verdict.degenerate), once per judge: shared by another
    judge, or measured here and shared at once, before this judge lets go of the GPU (the next
    judge reads them)."""
    v = self.verdict
    if self.reference_checked:
      return
    self.reference_checked = True
    v.stage = "reference_checks"
    if self._knows("degenerate"):
      v.degenerate = list(self.known["degenerate"])
      v.evidence.setdefault("reference_reused", []).append("degenerate")
    else:
      with self._step("reference_checks"):
        self._reference_checks(seeds[:2])
    v.reference_facts["degenerate"] = list(v.degenerate)
    if self.facts_path:
      share_facts(self.facts_path, v.reference_facts)

  def _timed(self, base: int) -> None:
    v = self.verdict
    v.stage = "timing"
    t0 = time.perf_counter()
    self._timing(base)
    v.stage_seconds["timing"] = round(time.perf_counter() - t0, 3)

  def _post_check(self, base: int) -> None:
    """A last check on unseen inputs, then this evaluation's GPU memory is freed for the next."""
    self.verdict.stage = "post_check"
    self._check_seed(base + 999_983, profile=True, stage="post_check")
    with self._step("cleanup"):
      self._drop_or_kill_worker()
      del self.ref_model
      if self.device.type == "cuda":
        self.torch.cuda.empty_cache()

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
    """Stops the worker and keeps it for the next job (take_kept_worker looks it over then):
    stopped, nothing of it runs while this judge writes its verdict."""
    global PARKED
    if self.keep_worker and self.worker is not None:
      handle, self.worker = self.worker, None
      handle.stop()
      PARKED = {"handle": handle, "key": self.worker_key, "served": self.worker_serves}

  def _expect(self, reply: dict[str, Any], stage: str) -> dict[str, Any]:
    if not reply.get("ok"):
      raise StageFailure(reply.get("status", V.RUNTIME_ERROR), f"{stage}: {reply.get('error')}")
    if reply.get("violations"):
      raise StageFailure(V.REJECTED, "; ".join(dict.fromkeys(reply["violations"])))
    return reply

  def _reference(self, seed: int) -> tuple[list, list, bool]:
    """(reference outputs, pristine inputs, whether the reference itself mutates its inputs)."""
    problem = self.problem
    inputs = problem.make_inputs(self.ref_mod.get_inputs, seed, self.device)
    pristine = problem.clone_leaves(inputs)
    try:
      out = self.ref_model(*inputs)
    except Exception as e:  # pylint: disable=broad-except
      self.verdict.reference_error = True
      raise StageFailure(V.RUNTIME_ERROR, f"reference forward failed: {type(e).__name__}: {e}")
    mutates = bool(problem.inputs_unchanged(inputs, pristine))
    return problem.flatten(out), pristine, mutates

  def _check_seed(self, seed: int, profile: bool, stage: str) -> list:
    """Runs the candidate on input set `seed` and checks it. Returns the reference outputs.

    The candidate's tensors are compared where they arrive (CUDA IPC views of the worker's
    memory, or copies on the CPU) without cloning: the worker is blocked until the next command,
    and any thread it might have started is reported as a violation in the reply itself.
    """
    cfg = self.cfg
    request = {"cmd": "run", "seed": seed, "profile": profile}
    candidate_step = "candidate_profiled_run" if profile else "candidate_run"
    if cfg.concurrent_reference:
      # The reference's outputs for the same input set, computed while the worker runs (two
      # processes, nothing timed): the step records the wait for the worker that is left after.
      # A candidate's failure is reported before a reference's, as when they ran in turn.
      t0 = time.perf_counter()
      channel.send(self.worker.conn, request, by_value=True)
      reference_failure, flagged = None, self.verdict.reference_error
      with self._step("reference_run"):
        try:
          refs, pristine, ref_mutates = self._reference(seed)
        except StageFailure as f:
          reference_failure, self.verdict.reference_error = f, flagged  # flagged if raised
      with self._step(candidate_step):
        remaining = cfg.correctness_timeout_s - (time.perf_counter() - t0)
        reply = self._expect(self.worker.wait(max(remaining, POLL_S), stage,
                                              cfg.correctness_timeout_s), stage)
      self._merge_evidence(reply.get("evidence", {}))
      if reference_failure is not None:
        self.verdict.reference_error = True
        raise reference_failure
    else:
      with self._step(candidate_step):
        reply = self._expect(self.worker.request(request, cfg.correctness_timeout_s, stage),
                             stage)
      self._merge_evidence(reply.get("evidence", {}))
      with self._step("reference_run"):
        refs, pristine, ref_mutates = self._reference(seed)
    with self._step("compare"):
      if not ref_mutates:
        changed = self.problem.inputs_unchanged(reply["inputs_after"], pristine)
        if changed:
          raise StageFailure(V.REJECTED, f"{stage}: forward changed its inputs in place "
                             f"({', '.join(changed)})")
      del pristine
      self._compare(reply["outputs"], refs, stage)
    return refs

  def _compare(self, outputs: list, refs: list, stage: str) -> None:
    ok, reasons, max_abs, max_rel = self.problem.compare_outputs(
        outputs, refs, self.cfg.tolerance_for, self.close_stats)
    v = self.verdict
    for name, val in (("max_abs_error", max_abs), ("max_rel_error", max_rel)):
      if math.isfinite(val):
        setattr(v, name, max(getattr(v, name) or 0.0, val))
    if not ok:
      raise StageFailure(V.INCORRECT, f"{stage}: " + "; ".join(reasons[:4]))

  def _merge_evidence(self, ev: dict[str, Any]) -> None:
    store = self.verdict.evidence
    for key, val in ev.items():
      if isinstance(val, list):
        store[key] = sorted(set(store.get(key, [])) | set(val))
      elif isinstance(val, dict):
        merged = dict(store.get(key, {}))
        for k, n in val.items():
          merged[k] = merged.get(k, 0) + n
        store[key] = merged

  def _reference_checks(self, seeds: list[int]) -> None:
    """Flags references that cannot discriminate candidates, before any candidate runs:
    outputs that are not finite, outputs that a constant (all zeros, or their mean) passes on
    every checked input set, and references that do not reproduce themselves from their seeds
    under a different random state (e.g. active dropout)."""
    torch, v, problem = self.torch, self.verdict, self.problem
    constant_everywhere = True
    first_refs = None
    for seed in seeds:
      refs, _, _ = self._reference(seed)
      tensors = [r for r in refs if isinstance(r, torch.Tensor) and r.is_floating_point()]
      if any(not torch.isfinite(r).all() for r in tensors):
        if V.DEGENERATE_NONFINITE not in v.degenerate:
          v.degenerate.append(V.DEGENERATE_NONFINITE)
      passes = False
      for fill in ("zeros", "mean"):
        ok = bool(tensors)
        for r in tensors:
          atol, rtol = self.cfg.tolerance_for(str(r.dtype).replace("torch.", ""))
          value = 0.0 if fill == "zeros" else problem.mean_float64(r)
          ok = ok and problem.constant_passes(r, value, atol, rtol)
        passes = passes or ok
      constant_everywhere = constant_everywhere and passes
      if first_refs is None:
        first_refs = refs
      del refs
    if constant_everywhere:
      v.degenerate.append(V.DEGENERATE_CONSTANT)
    second, self.second_reference = self.second_reference, None
    if second is None:  # (its construction in a thread failed, or none was started)
      second = problem.construct_model(self.ref_mod.Model, self.ref_mod.get_init_inputs,
                                       self.cfg.init_seed)
    model = self._to_device(second, "second_reference")
    del second
    inputs = problem.make_inputs(self.ref_mod.get_inputs, seeds[0], self.device)
    torch.manual_seed(seeds[0] + 0x5EED)  # a different random state for the forward itself
    again = problem.flatten(model(*inputs))
    ok, _, _, _ = problem.compare_outputs(again, first_refs, self.cfg.tolerance_for,
                                          self.close_stats)
    if not ok:
      v.degenerate.append(V.DEGENERATE_NONDETERMINISTIC)
    del model, inputs, again, first_refs
    if self.device.type == "cuda":  # the checks that follow, and other judges', need it more
      torch.cuda.empty_cache()

  def _timing(self, base: int) -> None:
    cfg, v = self.cfg, self.verdict
    seeds = self._timing_seeds(base)
    if self.reference_timed is not None:  # by _reference_first
      ref = self.reference_timed
    elif self._knows("reference_ms"):
      v.reference_ms = self.known["reference_ms"]
      v.compile_ms = self.known.get("compile_ms")
      ref = {"trials": self.known.get("reference_trials")}
      v.evidence.setdefault("reference_reused", []).append("timing")
    else:
      ref = self._time_reference(seeds)
    v.reference_facts.update(reference_ms=v.reference_ms, compile_ms=v.compile_ms,
                             reference_trials=ref["trials"])
    rng = random.Random(os.urandom(8))
    audit_positions = sorted(rng.sample(range(cfg.min_trials), min(cfg.num_audits, cfg.min_trials)))
    with self._step("candidate_timing"), self._fence("candidate_timing", timing=True,
                                                     holding_gpu=True):
      reply = self._expect(self.worker.request(
          {"cmd": "time", "seeds": seeds, "audit_positions": audit_positions,
           "warmup": cfg.warmup, "target_s": cfg.timing_target_s,
           "min_trials": cfg.min_trials + len(audit_positions)},
          cfg.timing_timeout_s, "timing"), "timing")
    audits = reply["audits"]
    v.candidate_ms = reply["median_ms"]
    v.evidence["timing_trials"] = {"reference": ref["trials"], "candidate": reply["trials"]}
    # What each measured interval held past the end of forward's work on its stream (timing.py):
    # the host's wake-up, and work left on other streams. The reference's, where measured here.
    after = {"reference": ref.get("after_forward_ms"),
             "candidate": reply.get("after_forward_ms")}
    v.evidence["timing_after_forward_ms"] = {
        k: float(x) for k, x in after.items() if isinstance(x, (int, float)) and math.isfinite(x)}
    if len(audits) != len(audit_positions):
      raise StageFailure(V.REJECTED, "timing: the audited calls did not all happen")
    with self._step("audits"):
      for seed, outs in audits:
        refs, _, _ = self._reference(seed)
        self._compare(outs, refs, "timing (audited call)")
        del refs
    # Shared once the candidate's timing has passed its audits: a candidate caught here (e.g.
    # one that kept the GPU busy while the reference was timed) leaves no time for others.
    if self.facts_path:
      share_facts(self.facts_path, v.reference_facts)

  def _time_reference(self, seeds: list[int]) -> dict[str, Any]:
    """Times the reference (and torch.compile's, if asked) into the verdict; returns
    timing.time_forward's summary of the reference."""
    from kernelzero_jax.sandbox import timing  # pylint: disable=import-outside-toplevel
    cfg, v = self.cfg, self.verdict
    # The timer's L2-flush buffer (256 MB) is needed only when the reference is timed here.
    with self._step("reference_timing"), self._fence("reference_timing", timing=True,
                                                     holding_gpu=True):
      timer = timing.Timer(self.device)
      make = lambda s: self.problem.make_inputs(self.ref_mod.get_inputs, s, self.device)
      ref = timing.time_forward(timer, self.ref_model, make, seeds, cfg.warmup,
                                cfg.timing_target_s, cfg.min_trials,
                                reuse_inputs=cfg.reference_reuses_inputs)
    v.reference_ms = ref["median_ms"]
    if ref.get("input_sets") is not None:  # (timing.time_forward's; made again if changed)
      v.evidence["reference_input_sets"] = ref["input_sets"]
    if cfg.compare_torch_compile:
      try:
        compiled = self.torch.compile(self.ref_model)
        comp = timing.time_forward(timer, compiled, make, seeds, cfg.warmup,
                                   cfg.timing_target_s, cfg.min_trials,
                                   reuse_inputs=cfg.reference_reuses_inputs)
        v.compile_ms = comp["median_ms"]
      except Exception as e:  # pylint: disable=broad-except
        v.reasons.append(f"torch.compile baseline failed: {type(e).__name__}: {e}"[:300])
    return ref


def read_facts(path: str) -> dict[str, Any]:
  """The reference facts judges shared in `path` ({} if none yet, or unreadable)."""
  try:
    with open(path) as f:
      facts = json.load(f)
  except (OSError, ValueError):
    return {}
  return facts if isinstance(facts, dict) else {}


def share_facts(path: str, facts: dict[str, Any]) -> None:
  """Adds `facts` to the file at `path`, which judges of one reference share (SandboxPool); a
  fact already there stays, as the first measurement of it. Judges are trusted processes, and
  the file lies outside every candidate's directory, where a candidate cannot write. Sharing is
  an optimisation: if it fails (e.g. the pool was closed meanwhile), later judges measure."""
  try:
    with open(path + ".lock", "a+") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      merged = read_facts(path)
      for name, value in facts.items():
        merged.setdefault(name, value)
      tmp = f"{path}.{os.getpid()}.tmp"
      with open(tmp, "w") as f:
        json.dump(merged, f)
      os.replace(tmp, path)
  except OSError:
    pass


EXIT_WITH_PARENT = "exit-with-parent"  # the name of its thread


def _exit_with_parent(parent_pid: int) -> None:
  """Ends this judge and its worker when the caller dies (killed trainer, Ctrl-C'd CLI).

  The judge runs in a session of its own, so nothing else would stop a candidate that hangs
  after its caller, with the deadline, is gone; without this it would spin forever."""
  def watch():
    while True:
      time.sleep(1.0)
      if os.getppid() != parent_pid:
        _kill_descendants()
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
  entered_at = time.time()  # the caller's stage_seconds["launch"] ends here
  _exit_with_parent(os.getppid())
  judged = True
  with open(job_path) as f:
    job = json.load(f)
  try:
    if job.get("kind") == "module":  # a proposed module's validation (module_check.py)
      from kernelzero_jax.sandbox import module_check  # pylint: disable=import-outside-toplevel
      verdict = module_check.run_module_job(job)
    else:
      verdict = run_job(job)
  except Exception as e:  # pylint: disable=broad-except
    judged = False
    verdict = V.Verdict(status=V.RUNTIME_ERROR, backend=job.get("backend", ""),
                        reasons=[f"judge failed: {type(e).__name__}: {e}"], reference_error=True)
  _kill_descendants()
  if hasattr(verdict, "evidence"):  # (a module's verdict has none)
    verdict.evidence["judge_process"] = {"pid": os.getpid(), "job": job_number}
  # The caller's secret arrives on stdin (not argv or the environment, which other processes
  # can read); the verdict is only accepted with it, so a candidate that writes a result file
  # and kills this judge forges nothing. It is read only now, when no worker is left: a forked
  # worker copies this process's memory, so the secret must not be in it yet.
  nonce = _read_line(0)
  tmp = result_path + ".tmp"
  with open(tmp, "w") as f:
    # When, so that the caller can tell how long the process took to end after it (its exit
    # tears its CUDA context down: driver work that other processes' start-ups contend for).
    json.dump({"nonce": nonce, "verdict": verdict.to_dict(), "entered_at": entered_at,
               "written_at": time.time()}, f, allow_nan=False, default=repr)
  os.replace(tmp, result_path)
  return judged


def become_subreaper() -> None:
  """Processes this one's descendants orphan come to it (and are killed: _kill_descendants)."""
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

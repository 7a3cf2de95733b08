"""The judge's side of its worker processes: requests with deadlines, a memory watchdog, kills,
and the worker a judge process keeps for its next job.

A candidate's worker (worker.py), and its precompiler or prebuilder beside it, each run in a
process of their own that the judge starts here (WorkerHandle). Everything the judge asks of one
has a deadline and a memory limit over its whole process tree; a worker that misses either, or
dies, ends the evaluation with a verdict status (StageFailure). A judge process that serves
several jobs (judge_host.py) may keep a correct candidate's worker, stopped, for the next job
(take_kept_worker), where it looks itself over first (worker.park).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import math
import multiprocessing
import os
import signal
import threading
import time
from typing import Any, Callable

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import process_tree
from kernelzero_jax.sandbox import verdict as V


POLL_S = 0.05
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
# The parts of a check a worker accounts for (worker_run.RunSteps.run's "steps_s"), which its
# judge adds up by command (evidence["messages"]: where a check's exchange goes).
RUN_STEPS = ("inputs", "forward", "checks")


# A worker dies with its parent (worker._setup_process: PR_SET_PDEATHSIG), and to Linux its
# parent is the *thread* that started it: a worker started from a judge's short-lived thread (a
# kept worker's look, a prebuild's hand-over) was killed as that thread ended, whenever the
# worker had set its signal by then (2 of 25 such starts on a busy 2-core machine: "worker died
# (killed by signal SIGKILL)"). Workers started off the main thread are started by this one
# thread instead, which lives as long as the process (a forked child has none of its parent's
# threads, so it makes its own).
STARTER_THREAD = "kz-worker-starter"  # (its name's start: judge_host lets it run between jobs)
_STARTER: concurrent.futures.ThreadPoolExecutor | None = None
_STARTER_LOCK = threading.Lock()


def _forget_starter() -> None:
  global _STARTER, _STARTER_LOCK
  _STARTER, _STARTER_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_starter)


def _start_from_a_lasting_thread(start: Callable[[], None]) -> None:
  """Runs `start` (a process's start) here on the main thread, else on _STARTER's thread."""
  global _STARTER
  if threading.current_thread() is threading.main_thread():
    start()
    return
  with _STARTER_LOCK:
    if _STARTER is None:
      _STARTER = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                       thread_name_prefix=STARTER_THREAD)
    starter = _STARTER
  starter.submit(start).result()


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
    # Where its replies are accounted for (_account), when its judge gives a dict; the command
    # whose reply is awaited, with its time of sending; the command answered last.
    self.messages: dict[str, dict[str, Any]] | None = None
    self._sent: tuple[str, float] | None = None
    self._answered: str | None = None
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
      _start_from_a_lasting_thread(self.proc.start)
    except BaseException:
      self.conn.close()
      raise
    finally:
      child.close()

  def send(self, msg: dict[str, Any]) -> None:
    """Sends a command whose reply the next wait takes (and accounts for: `messages`)."""
    self._sent = (str(msg.get("cmd")), time.perf_counter())
    channel.send(self.conn, msg, by_value=True)

  def request(self, msg: dict[str, Any], timeout_s: float, stage: str) -> dict[str, Any]:
    self.send(msg)
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
          read_at = time.perf_counter()
          reply = channel.recv(self.conn)
          self._account(reply, read_at)
        except (EOFError, ConnectionError, OSError):
          pass  # died mid-message; reported below
        except Exception as e:  # pylint: disable=broad-except
          raise StageFailure(V.RUNTIME_ERROR, f"{stage}: unreadable reply from worker: {e}")
        else:
          if not isinstance(reply, dict):  # (the worker's own are; its candidate may send any)
            raise StageFailure(V.RUNTIME_ERROR, f"{stage}: the worker's reply is not a message "
                               f"({type(reply).__name__})")
          return reply
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

  def _account(self, reply: Any, read_at: float) -> None:
    """Adds the reply to the command sent last (send) to `messages`, where the judge gave one
    (Judge: its verdict's evidence["messages"]): {command: {"n", "until_read_s" (from the send
    to the start of the reply's read), "read_s" (its read: on a GPU, the CUDA IPC handles of its
    tensors opened), "worker_s" and "worker_send_s" (the worker's own account, for reading
    only: its seconds on the command, and on sending its reply), and for a check
    "worker_inputs_s", "worker_forward_s" and "worker_checks_s" (its account of where those
    seconds went: RUN_STEPS)}}."""
    now = time.perf_counter()
    sent, self._sent = self._sent, None
    if self.messages is None or sent is None:
      return
    cmd, sent_at = sent
    stats = self.messages.setdefault(cmd, {"n": 0})
    stats["n"] += 1
    add_seconds(stats, "until_read_s", read_at - sent_at)
    add_seconds(stats, "read_s", now - read_at)
    said = reply if isinstance(reply, dict) else {}
    add_seconds(stats, "worker_s", said.get("spent_s"))
    steps = said.get("steps_s")
    if isinstance(steps, dict):  # only the names a worker has; anything else is not kept
      for step in RUN_STEPS:
        add_seconds(stats, f"worker_{step}_s", steps.get(step))
    if self._answered is not None:  # that reply's sending, said with this one
      add_seconds(self.messages.setdefault(self._answered, {"n": 0}), "worker_send_s",
           said.get("last_send_s"))
    self._answered = cmd

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
    self._sent = self._answered = None  # (its park's reply was the last candidate's)
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
      kill_descendants()


def finite_number(x: Any) -> bool:
  """Whether `x` is a finite int or float (not a bool): what the judge takes of a number that a
  worker or a side worker replied, since their replies may be anything."""
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def add_seconds(stats: dict[str, Any], key: str, seconds: Any) -> None:
  """stats[key] += seconds (rounded to 10 µs), where seconds is a finite number >= 0 (a
  worker's own account may be anything)."""
  if finite_number(seconds) and seconds >= 0:
    stats[key] = round(stats.get(key, 0.0) + seconds, 5)


def _tree_rss(proc) -> int:
  import psutil  # pylint: disable=import-outside-toplevel
  total = 0
  for pid in [proc.pid] + process_tree.descendant_pids(proc.pid):
    with contextlib.suppress(psutil.Error):
      total += (proc if pid == proc.pid else psutil.Process(pid)).memory_info().rss
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


def kill_descendants() -> None:
  """Kills every process this judge adopted (it is a child subreaper), e.g. daemons a candidate
  double-forked to outlive its worker and tamper with output written later."""
  kept = KEPT_PIDS | ({PARKED["handle"].proc.pid} if PARKED else set())
  try:
    import psutil  # pylint: disable=import-outside-toplevel
    for pid in process_tree.descendant_pids():
      if pid not in kept:
        with contextlib.suppress(psutil.Error):
          psutil.Process(pid).kill()  # (not a process that took a gone one's number since)
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


def park(handle: WorkerHandle, key: str, served: int) -> None:
  """Keeps `handle`'s worker (stopped: WorkerHandle.stop) for the next job, made for `key`
  (worker_key) after serving `served` candidates; take_kept_worker takes it."""
  global PARKED
  handle.messages = None  # (the next job's judge gives its own)
  PARKED = {"handle": handle, "key": key, "served": served}

"""A judge process that serves several jobs in turn, so that a GPU judge makes its CUDA context once.

On an H200 a batch of CUDA candidates spends about half of each candidate's time creating two
CUDA contexts (its judge's and its worker's), which the driver serialises (about 0.18 s each
when 32 start at once: benchmarks/cuda_context.py) and which must stay apart from timings
(gpu_fence.py). A judge's context belongs to the judge, not to the candidate: the warm server
(zygote.py) keeps a judge process after its verdict and gives it the next job for the same
device, up to SandboxConfig.jobs_per_judge() jobs.

What stays as it was: each candidate runs in a worker process of its own, started for it, which
never shares a process with the reference or the comparison, and never with another candidate
(unless SandboxConfig.candidates_per_worker, 8 on a GPU by default, lets this process keep a
worker for its next job: worker_handle.take_kept_worker, worker_state.py).
What changes, and how isolation is kept:
- After its first job this process holds a CUDA context and has read a caller's secret, so its
  workers can no longer be forked from it. Its first job's workers are forked before either (as
  a one-job judge's are); for every later job a worker server forks them: multiprocessing's
  forkserver, which never sees a job: a fork of this process made before its first job, before
  it had anything to hide (forked_worker_server.py), or, where that cannot be, a fresh
  interpreter that imports what the warm server imports (worker_server_preload.py).
- Between jobs it kills every process it adopted (it is a child subreaper) except that server
  and multiprocessing's resource tracker, and goes on only when the job's threads have ended,
  its GPU memory is back, and the judge did not fail on its own. Anything else ends it: the next
  job gets a new judge process.
- A forked first worker closes this process's descriptors to the warm server first thing
  (worker_handle.HOST_FDS): nothing a candidate runs can talk to it.

Protocol with the warm server, over a socket pair: this process answers {"done": 0} (one JSON
line) when a job's verdict is written and it can take another; the server sends the next request
as it sends requests to itself (one JSON line with the secret's pipe attached), or closes the
socket to end it. The caller's connection stays with the server.
"""

from __future__ import annotations

import contextlib
import gc
import json
import multiprocessing
import os
import socket
import sys
import threading
import time

from kernelzero_jax.sandbox import forked_worker_server
from kernelzero_jax.sandbox import judge
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox import zygote

# How long a job's threads get to end after its verdict before this process stops serving.
THREADS_END_S = 5.0
# GPU memory a finished job may leave allocated in this process (the judge's own kernels and
# workspaces) for it to serve another; more (a leak) ends it.
GPU_MEMORY_LEFT_OK = 256 * 2**20
DEVICE_ENV = "KZ_WORKER_SERVER_DEVICE"  # the device worker_server_preload.py prepares for


def _redirect(request: dict, secret_fd: int) -> None:
  """This job's secret on stdin, its log on stdout and stderr, its directory."""
  sys.stdout.flush()
  sys.stderr.flush()
  os.dup2(secret_fd, 0)
  os.close(secret_fd)
  log = os.open(request["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
  os.dup2(log, 1)
  os.dup2(log, 2)
  os.close(log)
  os.chdir(request["cwd"])


def _threads_ended(deadline_s: float) -> bool:
  """Whether every thread but the main one, the parent watch and the worker starter (idle
  between jobs: each start's caller waits for it) ended within `deadline_s`."""
  deadline = time.monotonic() + deadline_s
  for thread in threading.enumerate():
    if (thread is threading.main_thread() or thread.name == judge.EXIT_WITH_PARENT
        or thread.name.startswith(worker_handle.STARTER_THREAD)):
      continue
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
      print(f"[judge_host] a thread of the last job is still running ({thread.name}); "
            "this judge process serves no more jobs")
      return False
  return True


def _gpu_memory_back() -> bool:
  """Whether the GPU memory of the last job is back (no CUDA error pending either)."""
  torch = sys.modules.get("torch")
  if torch is None or not torch.cuda.is_initialized():
    return True
  gc.collect()
  try:
    # The judge's device (judge.py sets it): looking at another would create a context there.
    index = torch.cuda.current_device()
    torch.cuda.synchronize(index)
    torch.cuda.empty_cache()
    left = torch.cuda.memory_allocated(index)
    if left > GPU_MEMORY_LEFT_OK:
      print(f"[judge_host] {left / 2**20:.0f} MiB left allocated on cuda:{index} after the "
            "job; this judge process serves no more jobs")
      return False
  except RuntimeError as e:  # a CUDA error in this process
    print(f"[judge_host] the device is not usable after the job ({e}); this judge process "
          "serves no more jobs")
    return False
  return True


def _reap_adopted() -> None:
  """Reaps what _kill_descendants killed among this process's own children (orphans it
  adopted), so that they do not stay as zombies while it serves on. Its workers' handles and
  the kept processes are left to multiprocessing."""
  import psutil  # pylint: disable=import-outside-toplevel
  managed = {p.pid for p in multiprocessing.active_children()} | set(worker_handle.KEPT_PIDS)
  for child in psutil.Process().children():
    if child.pid not in managed:
      with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(child.pid, os.WNOHANG)


def _running(pid: int) -> bool:
  import psutil  # pylint: disable=import-outside-toplevel
  try:
    return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
  except psutil.Error:
    return False


class _WorkerServer:
  """multiprocessing's forkserver for this process's later workers: forked from this process
  before its first job (forked_worker_server.py), or, where that cannot be, started as a fresh
  interpreter after it; started again after any job that ended it (a worker can kill its
  parent), so that the one running is always among the processes kept (worker_handle.KEPT_PIDS), not
  killed after every job."""

  def __init__(self, device: str):
    self.device = device
    self.pids: frozenset[int] = frozenset()  # the server's and the resource tracker's
    self.how: str | None = None  # "fork" or "spawn": how the running one started

  def start(self, fork: bool = False) -> None:
    """Starts the server unless it runs. `fork`: as a fork of this process, which must have no
    CUDA context, secret or thread of a job yet (before its first job); else, or where this
    Python's forkserver cannot be forked, a fresh interpreter that imports for itself."""
    if self.pids and all(_running(pid) for pid in self.pids):
      return
    import psutil  # pylint: disable=import-outside-toplevel
    before = {p.pid for p in psutil.Process().children()}
    os.environ[DEVICE_ENV] = self.device
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["kernelzero_jax.sandbox.worker_server_preload"])
    from multiprocessing import forkserver  # pylint: disable=import-outside-toplevel
    forked = None
    if fork:
      forked = forked_worker_server.start()
    if forked is None:
      # Not in the last job's directory: its caller removes it, and an interpreter started in
      # a removed directory fails before it runs anything.
      os.chdir("/")
      # Spawns a fresh interpreter, which imports in the background; the first worker it
      # forks waits for that. Its descriptors are the ones multiprocessing passes, none of a
      # job's. (Reaps a dead one and starts another.)
      forkserver.ensure_running()
    self.how = "fork" if forked is not None else "spawn"
    started = {p.pid for p in psutil.Process().children()} - before
    self.pids = frozenset({pid for pid in self.pids if _running(pid)} | started)
    worker_handle.KEPT_PIDS = self.pids


def _next_request(control: socket.socket) -> tuple[dict, int] | None:
  """The next job from the warm server, or None when it ends this process."""
  try:
    return zygote.read_request(control)
  except (ValueError, OSError, EOFError):
    return None


def serve(request: dict, secret_fd: int, control: socket.socket, device: str,
          max_jobs: int) -> int:
  """Serves `request`, then further ones from `control`, up to `max_jobs`. Returns the exit
  code of this process. (In a process the warm server forked: in its own session, holding no
  other descriptor of the server's.)"""
  judge.become_subreaper()
  worker_handle.HOST_FDS = (control.fileno(),)
  server = _WorkerServer(device)
  if max_jobs > 1 and os.environ.get("KZ_WORKER_SERVER_FORK", "1") != "0":
    # Now, while this process is what a worker server must be (forked_worker_server.py); a
    # failure leaves the standard start after the first job. (KZ_WORKER_SERVER_FORK=0 leaves
    # that start: benchmarks compare the two.)
    try:
      server.start(fork=True)
    except Exception as e:  # pylint: disable=broad-except
      print(f"[judge_host] forking the worker server failed ({type(e).__name__}: {e}); "
            "starting one after the first job")
  try:
    return _serve(request, secret_fd, control, device, max_jobs, server)
  finally:
    worker_handle.end_kept_worker()


def _serve(request: dict, secret_fd: int, control: socket.socket, device: str, max_jobs: int,
           server: _WorkerServer) -> int:
  jobs = 0
  while True:
    jobs += 1
    # A job's worker may be kept for the next (SandboxConfig.candidates_per_worker), not after
    # the last.
    worker_handle.KEEP_WORKERS = jobs < max_jobs
    # A job for another device gets a spawned worker (this process's triton mode is not its).
    same_device = zygote.job_facts(request["job_path"]).device == device
    worker_handle.WORKER_START = ("spawn" if not same_device
                          else "fork" if jobs == 1 else "forkserver")
    _redirect(request, secret_fd)
    judged = judge.judge_job_file(request["job_path"], request["result_path"], jobs)
    if jobs >= max_jobs or not judged:
      return 0
    settled = _threads_ended(THREADS_END_S) and _gpu_memory_back()
    _reap_adopted()
    sys.stdout.flush()
    sys.stderr.flush()
    if not settled:
      return 0
    # (A kept worker stays stopped: take_kept_worker looks it over when the next job comes.)
    # The server forked before the first job runs on; one that did not start then, or that a
    # worker killed, starts now as a fresh interpreter (not before the first job: its imports
    # took the CPU from the first wave's builds, their prebuilds 2.6x as long on an H200).
    server.start()
    try:
      control.sendall(json.dumps({"done": 0}).encode() + b"\n")
    except OSError:
      return 0
    following = _next_request(control)
    if following is None:
      return 0
    request, secret_fd = following


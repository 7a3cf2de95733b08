"""A warm judge server: judges forked from one process that has torch already imported.

    python -m kernelzero_jax.sandbox.zygote SOCKET_PATH cpu|cuda

A fresh judge pays for a Python start and `import torch`, and so does its worker: about 4 s of
CPU per candidate, more than judging a small Triton kernel takes. This server imports torch once,
never touches a GPU, and forks judge processes; a judge forks its first worker before it creates
a CUDA context (worker_handle.WORKER_START). Every candidate still gets a process of its own that
shares nothing with the reference or the comparison, exactly as with the plain launcher
(launchers.SubprocessLauncher), and the judge's code is the same.

A judge process serves up to SandboxConfig.jobs_per_judge() jobs of one device and GPU in turn
(judge_host.py: on a GPU it keeps its CUDA context; its later workers come from a worker server
of its own). After a verdict it tells this server it is done; the server answers the caller and
gives the process the next request for its device and GPU, or, after JUDGE_IDLE_S without one,
closes its line, which ends it. A start ahead of the candidates (judge_start.py) always gets a
new process: handed to an idle one, it would start nothing.

Protocol, one Unix-socket connection per job: the caller sends one JSON line
{"job_path", "result_path", "log_path", "cwd"} with one file descriptor attached (SCM_RIGHTS):
the read end of a pipe holding the caller's secret, which becomes the judge's stdin. This server
never reads it, so no judge or worker can find another's secret in memory it copied from here.
The server answers {"pid": PID} once a judge process has the job, and {"exit": CODE} when the
process ended, or {"exit": 0, "kept": true} when it wrote the verdict and stays for another job
(the caller then leaves it alone: it has killed what the job left behind).

The server ends when its caller does (and kills the judges it started); judges end with it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import gc
import json
import os
import select
import socket
import sys
import time
import traceback
from typing import NamedTuple

from kernelzero_jax.sandbox.launchers import kill_group

# How long the server sleeps between looks at whether its caller is still there. It wakes at once
# for a new request and, through each judge's pidfd, for a judge's end: before pidfds it found
# an ended judge only at the next look, which rounded every judgement up to the next 0.2 s.
PARENT_CHECK_S = 1.0
POLL_S = 0.2  # the looks where a judge has no pidfd (a kernel before Linux 5.3)
MAX_REQUEST_BYTES = 65536
# How long a judge process that serves several jobs (judge_host.py) waits, idle, for the next
# one before it is told to end: it holds a CUDA context (GPU memory) meanwhile.
JUDGE_IDLE_S = 30.0


def preload(device: str) -> None:
  """What every judge and worker imports, imported once here, without initialising a device.

  torch._dynamo (2 s) comes in with the worker's op recorder, and it imports triton, which
  decides at import whether its own library kernels are interpreted: so a server serves one
  device, with TRITON_INTERPRET set as that device's workers need it."""
  if device == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
  else:
    os.environ.pop("TRITON_INTERPRET", None)
    # torch.cuda.is_available() through NVML: the CUDA driver must not start before a fork.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
  # pylint: disable=import-outside-toplevel,unused-import
  import numpy  # noqa: F401
  import psutil  # noqa: F401
  import torch
  import torch._dynamo  # noqa: F401
  import torch.multiprocessing.reductions  # noqa: F401
  from kernelzero_jax.sandbox import evidence, guard, judge, problem, static_checks, timing, worker  # noqa: F401
  if device != "cpu":
    # What a CUDA candidate's worker and prebuilder import before they build (setuptools comes
    # with cpp_extension: 0.13 s on this project's CPU machine, per process).
    import torch.utils.cpp_extension  # noqa: F401
    from kernelzero_jax.sandbox import cuda_prebuild, fast_build, triton_precompile  # noqa: F401
    # Triton keys its cache with a hash of its own files, its compiled library included, which
    # every worker would otherwise compute at its first compile, inside the GPU hold (memoised,
    # so forked judges and workers inherit it; on an H200 a first check 0.61 s -> 0.23 s).
    from triton.runtime import cache  # pylint: disable=import-outside-toplevel
    cache.triton_key()
  if torch.cuda.is_initialized():
    raise RuntimeError("importing the sandbox initialised CUDA; judges cannot be forked")
  freeze_imports()


def freeze_imports() -> None:
  """Moves every object alive now (the imports: about 180,000 objects with torch and triton) out
  of the garbage collector's sight, in this process and in every process forked from it. A full
  collection then looks only at what was made since: 0.04 ms instead of 90 ms on this project's
  CPU machine. Judges collect after each job (judge_host._gpu_memory_back: between a verdict
  and its report) and kept workers before their memory is checked (worker.drop: under the hold),
  and Python's own full collections come during checks and timings. Frozen objects are still
  freed when nothing refers to them; only cycles among them would stay. Off with
  KZ_GC_FREEZE=0 (benchmarks compare the two)."""
  if os.environ.get("KZ_GC_FREEZE", "1") == "0":
    return
  gc.collect()
  gc.freeze()
  # Interpreter exit then frees nothing frozen, and extension modules (triton's nanobind) print
  # leak reports about it: unfrozen first. (Processes that end with os._exit skip this.)
  atexit.register(gc.unfreeze)


class JobFacts(NamedTuple):
  """What the server reads of a job: its device and GPU index, how many jobs one judge process
  may serve, and whether it is a start ahead of the candidates (judge_start.py), which always
  gets a judge process of its own."""
  device: str | None
  gpu_index: int
  max_jobs: int
  starts_ahead: bool = False


def job_facts(job_path: str) -> JobFacts:
  """The JobFacts of the job in `job_path`; a job it cannot read gets a judge of its own, which
  reports the problem."""
  try:
    with open(job_path) as f:
      job = json.load(f)
    from kernelzero_jax.sandbox.config import SandboxConfig  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox.judge_start import KIND  # pylint: disable=import-outside-toplevel
    config = SandboxConfig.from_dict(job["config"])
    return JobFacts(config.device, int(job.get("gpu_index") or 0), config.jobs_per_judge(),
                    job.get("kind") == KIND)
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return JobFacts(None, 0, 1)


def _send(conn: socket.socket, obj: dict) -> None:
  try:
    conn.sendall(json.dumps(obj).encode() + b"\n")
  except OSError:
    pass  # the caller is gone (it kills the judge itself)


def read_request(conn: socket.socket) -> tuple[dict, int]:
  """(request, secret pipe fd); raises ValueError on a malformed request, EOFError at the
  connection's end."""
  data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES, 1)
  if not data and not fds:
    raise EOFError("the connection ended")
  while data and not data.endswith(b"\n") and len(data) < MAX_REQUEST_BYTES:
    more = conn.recv(MAX_REQUEST_BYTES)
    if not more:
      break
    data += more
  try:
    request = json.loads(data.decode())
    keys = ("job_path", "result_path", "log_path", "cwd")
    if not isinstance(request, dict) or not all(isinstance(request.get(k), str) for k in keys):
      raise ValueError(f"a request needs the string fields {keys}")
    if len(fds) != 1:
      raise ValueError("a request carries exactly one descriptor (the secret's pipe)")
    return request, fds[0]
  except ValueError:
    for fd in fds:
      os.close(fd)
    raise


def _pidfd(pid: int) -> int | None:
  """A descriptor that becomes readable when child `pid` ends, or None where there is none."""
  try:
    return os.pidfd_open(pid)
  except (AttributeError, OSError):
    return None


@dataclasses.dataclass
class _Judge:
  """A judge process this server forked: busy with `client`'s job, or idle since `idle_since`
  and waiting on `control` for another (judge_host.py)."""
  pid: int
  control: socket.socket
  key: tuple[str | None, int]  # (device, GPU index) of the jobs it serves
  client: socket.socket | None
  pidfd: int | None = None
  idle_since: float = 0.0
  retired: bool = False  # told to end (its control closed): serves no more


def _run_host(request: dict, secret_fd: int, control: socket.socket, max_jobs: int,
              inherited: list[int], device: str) -> None:
  """In the forked child: become a judge process for `request` (and, with max_jobs > 1, later
  ones: judge_host.py). Never returns."""
  code = 1
  try:
    for fd in inherited:  # other callers' connections, other judges' controls and pidfds
      with contextlib.suppress(OSError):
        os.close(fd)
    os.setsid()
    from kernelzero_jax.sandbox import judge_host  # pylint: disable=import-outside-toplevel
    code = judge_host.serve(request, secret_fd, control, device, max_jobs)
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
  finally:
    try:
      sys.stdout.flush()
      sys.stderr.flush()
    finally:
      os._exit(code)  # pylint: disable=protected-access


class _Server:
  """The server's state: connections waiting to send their request, and the judges."""

  def __init__(self, listener: socket.socket, device: str):
    self.listener, self.device = listener, device
    self.poller = select.poll()
    self.poller.register(listener, select.POLLIN)
    self.waiting: dict[int, socket.socket] = {}  # connected, request not read yet (by fd)
    self.judges: dict[int, _Judge] = {}          # by pid
    self.by_fd: dict[int, _Judge] = {}           # by control fd and by pidfd

  def _descriptors(self) -> list[int]:
    """Every descriptor of the server's that a forked judge must not keep."""
    fds = [self.listener.fileno(), *self.waiting]
    for j in self.judges.values():
      fds += [s.fileno() for s in (j.control, j.client) if s is not None and s.fileno() >= 0]
      fds += [j.pidfd] if j.pidfd is not None else []
    return fds

  def accept(self) -> None:
    conn, _ = self.listener.accept()
    conn.settimeout(5.0)  # a client that sends half a request cannot stall the server
    self.waiting[conn.fileno()] = conn
    self.poller.register(conn, select.POLLIN)

  def take_request(self, fd: int) -> None:
    s = self.waiting.pop(fd)
    self.poller.unregister(fd)
    try:
      request, secret_fd = read_request(s)
    except (ValueError, OSError, EOFError) as e:
      _send(s, {"error": f"bad request: {e}"})
      s.close()
      return
    facts = job_facts(request["job_path"])
    key, max_jobs = (facts.device, facts.gpu_index), facts.max_jobs
    if max_jobs > 1 and not facts.starts_ahead:
      for j in self.judges.values():
        if j.client is None and not j.retired and j.key == key and self._hand(j, request,
                                                                              secret_fd):
          j.client = s
          _send(s, {"pid": j.pid})
          return
    self._fork(request, secret_fd, s, key, max_jobs)

  def _hand(self, j: _Judge, request: dict, secret_fd: int) -> bool:
    """Gives an idle judge process the next request; False (and retires it) if it is gone."""
    try:
      socket.send_fds(j.control, [json.dumps(request).encode() + b"\n"], [secret_fd])
    except OSError:
      self.retire(j)
      return False
    os.close(secret_fd)
    return True

  def _fork(self, request: dict, secret_fd: int, client: socket.socket,
            key: tuple[str | None, int], max_jobs: int) -> None:
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
      ours.close()
      _run_host(request, secret_fd, theirs, max_jobs, self._descriptors() + [client.fileno()],
                self.device)
    theirs.close()
    os.close(secret_fd)
    _send(client, {"pid": pid})
    j = _Judge(pid, ours, key, client, pidfd=_pidfd(pid))
    self.judges[pid] = j
    self.by_fd[ours.fileno()] = j
    self.poller.register(ours, select.POLLIN)
    if j.pidfd is not None:
      self.by_fd[j.pidfd] = j
      self.poller.register(j.pidfd, select.POLLIN)

  def control_message(self, j: _Judge) -> None:
    """A judge process said it is done with its job (and stays), or closed its control."""
    try:
      line = j.control.recv(4096)
    except OSError:
      line = b""
    try:
      done = "done" in json.loads(line) if line else False
    except ValueError:
      done = False
    if not done:
      self.retire(j)  # it is ending: its exit is reported when it is reaped
      return
    if j.client is not None:
      _send(j.client, {"exit": 0, "kept": True})
      j.client.close()
      j.client = None
    j.idle_since = time.monotonic()

  def retire(self, j: _Judge) -> None:
    """Tells a judge process to end (it sees its control close) and serves it no more jobs."""
    if not j.retired:
      j.retired = True
      self.by_fd.pop(j.control.fileno(), None)
      with contextlib.suppress(KeyError, ValueError):
        self.poller.unregister(j.control)
      j.control.close()

  def retire_idle(self, now: float) -> None:
    for j in self.judges.values():
      if j.client is None and not j.retired and now - j.idle_since > JUDGE_IDLE_S:
        self.retire(j)

  def reap(self) -> None:
    while self.judges:
      try:
        pid, status = os.waitpid(-1, os.WNOHANG)
      except ChildProcessError:
        break
      if pid == 0:
        break
      j = self.judges.pop(pid, None)
      if j is None:
        continue
      if j.pidfd is not None:
        self.by_fd.pop(j.pidfd, None)
        self.poller.unregister(j.pidfd)
        os.close(j.pidfd)
      self.retire(j)
      if j.client is not None:
        _send(j.client, {"exit": os.waitstatus_to_exitcode(status)})
        j.client.close()

  def sleep_s(self) -> float:
    if any(j.pidfd is None for j in self.judges.values()):
      return POLL_S
    if any(j.client is None and not j.retired for j in self.judges.values()):
      return min(PARENT_CHECK_S, JUDGE_IDLE_S)
    return PARENT_CHECK_S


def serve(socket_path: str, device: str) -> None:
  preload(device)
  parent = os.getppid()
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(socket_path + ".tmp")
  os.chmod(socket_path + ".tmp", 0o600)
  listener.listen(256)
  os.replace(socket_path + ".tmp", socket_path)  # the caller connects once the path exists
  server = _Server(listener, device)
  while True:
    if os.getppid() != parent:  # the caller died: so do its judges
      for pid in server.judges:
        kill_group(pid)
      return
    for fd, _ in server.poller.poll(server.sleep_s() * 1000):
      if fd == listener.fileno():
        server.accept()
      elif fd in server.waiting:
        server.take_request(fd)
      elif fd in server.by_fd and server.by_fd[fd].control.fileno() == fd:
        server.control_message(server.by_fd[fd])
      # else a judge's pidfd: it has ended, and is reaped below
    server.reap()
    server.retire_idle(time.monotonic())


def main(argv: list[str]) -> int:
  if len(argv) != 3 or argv[2] not in ("cpu", "cuda"):
    print("usage: python -m kernelzero_jax.sandbox.zygote SOCKET_PATH cpu|cuda", file=sys.stderr)
    return 2
  serve(argv[1], argv[2])
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))

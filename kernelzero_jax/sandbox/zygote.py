"""A warm judge server: judges forked from one process that has torch already imported.

    python -m kernelzero_jax.sandbox.zygote SOCKET_PATH cpu|cuda

A fresh judge pays for a Python start and `import torch`, and so does its worker: about 4 s of
CPU per candidate, more than judging a small Triton kernel takes. This server imports torch once,
never touches a GPU, and forks one judge per request; each judge forks its worker
before it creates a CUDA context (judge.FORK_WORKERS). Every candidate still gets a process of its
own that shares nothing with the reference or the comparison, exactly as with the plain launcher
(evaluate.SubprocessLauncher), and the judge's code is the same.

Protocol, one Unix-socket connection per judge: the caller sends one JSON line
{"job_path", "result_path", "log_path", "cwd"} with one file descriptor attached (SCM_RIGHTS):
the read end of a pipe holding the caller's secret, which becomes the judge's stdin. This server
never reads it, so no judge or worker can find another's secret in memory it copied from here.
The server answers {"pid": PID} once the judge runs and {"exit": CODE} when it ends.

The server ends when its caller does (and kills the judges it started); judges end with it.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import traceback

from kernelzero_jax.sandbox.evaluate import kill_group

# How long the server sleeps between looks at whether its caller is still there. It wakes at once
# for a new request and, through each judge's pidfd, for a judge's end: before pidfds it found
# an ended judge only at the next look, which rounded every judgement up to the next 0.2 s.
PARENT_CHECK_S = 1.0
POLL_S = 0.2  # the looks where a judge has no pidfd (a kernel before Linux 5.3)
MAX_REQUEST_BYTES = 65536


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


def _job_device(job_path: str) -> str | None:
  try:
    with open(job_path) as f:
      return json.load(f)["config"]["device"]
  except (OSError, ValueError, KeyError, TypeError):
    return None


def _send(conn: socket.socket, obj: dict) -> None:
  try:
    conn.sendall(json.dumps(obj).encode() + b"\n")
  except OSError:
    pass  # the caller is gone (it kills the judge itself)


def _read_request(conn: socket.socket) -> tuple[dict, int]:
  """(request, secret pipe fd); raises ValueError on a malformed request."""
  data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES, 1)
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


def _run_judge(request: dict, secret_fd: int, sockets: list[socket.socket], pidfds: list[int],
               device: str) -> None:
  """In the forked child: become a judge for `request`. Never returns."""
  code = 1
  try:
    for s in sockets:
      s.close()
    for fd in pidfds:  # other judges' (a candidate could signal them through one)
      os.close(fd)
    os.setsid()
    os.dup2(secret_fd, 0)
    os.close(secret_fd)
    log = os.open(request["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(request["cwd"])
    from kernelzero_jax.sandbox import judge  # pylint: disable=import-outside-toplevel
    # A job for another device gets a spawned worker (this process's triton mode is not its).
    judge.FORK_WORKERS = _job_device(request["job_path"]) == device
    code = judge.main(["judge", request["job_path"], request["result_path"]])
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
  finally:
    try:
      sys.stdout.flush()
      sys.stderr.flush()
    finally:
      os._exit(code)  # pylint: disable=protected-access


def serve(socket_path: str, device: str) -> None:
  preload(device)
  parent = os.getppid()
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(socket_path + ".tmp")
  os.chmod(socket_path + ".tmp", 0o600)
  listener.listen(256)
  os.replace(socket_path + ".tmp", socket_path)  # the caller connects once the path exists
  waiting: dict[int, socket.socket] = {}         # connected, request not read yet (by fd)
  running: dict[int, socket.socket] = {}         # judge pid -> its caller's connection
  pidfds: dict[int, int] = {}                    # judge pid -> its pidfd, where it has one
  poller = select.poll()
  poller.register(listener, select.POLLIN)
  while True:
    if os.getppid() != parent:  # the caller died: so do its judges
      for pid in running:
        kill_group(pid)
      return
    sleep_s = PARENT_CHECK_S if len(pidfds) == len(running) else POLL_S
    for fd, _ in poller.poll(sleep_s * 1000):
      if fd == listener.fileno():
        conn, _ = listener.accept()
        conn.settimeout(5.0)  # a client that sends half a request cannot stall the server
        waiting[conn.fileno()] = conn
        poller.register(conn, select.POLLIN)
        continue
      s = waiting.pop(fd, None)
      if s is None:
        continue  # a judge's pidfd: it has ended, and is reaped below
      poller.unregister(fd)
      try:
        request, secret_fd = _read_request(s)
      except (ValueError, OSError) as e:
        _send(s, {"error": f"bad request: {e}"})
        s.close()
        continue
      pid = os.fork()
      if pid == 0:
        _run_judge(request, secret_fd, [listener, s] + list(waiting.values()) +
                   list(running.values()), list(pidfds.values()), device)
      os.close(secret_fd)
      _send(s, {"pid": pid})
      running[pid] = s
      pidfd = _pidfd(pid)
      if pidfd is not None:
        pidfds[pid] = pidfd
        poller.register(pidfd, select.POLLIN)
    while running:
      try:
        pid, status = os.waitpid(-1, os.WNOHANG)
      except ChildProcessError:
        break
      if pid == 0:
        break
      pidfd = pidfds.pop(pid, None)
      if pidfd is not None:
        poller.unregister(pidfd)
        os.close(pidfd)
      conn = running.pop(pid, None)
      if conn is not None:
        _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
        conn.close()


def main(argv: list[str]) -> int:
  if len(argv) != 3 or argv[2] not in ("cpu", "cuda"):
    print("usage: python -m kernelzero_jax.sandbox.zygote SOCKET_PATH cpu|cuda", file=sys.stderr)
    return 2
  serve(argv[1], argv[2])
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))

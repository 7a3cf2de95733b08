"""multiprocessing's forkserver started as a fork of this process, not as a fresh interpreter.

A judge process that serves several jobs (judge_host.py) forks its later jobs' workers from a
worker server: multiprocessing's forkserver. Started the standard way, that is a fresh
interpreter that imports what the warm server imports (worker_server_preload.py): torch, its
compiler stack and triton, about 8 s on an H200 machine. A lone stream of Triton candidates
waited for it at its second job (9.6 s instead of about 1.5 s), and a batch's judge processes
each spent those 8 s of a core at once while the first builds wanted them (BENCHMARKS.md).

Before its first job a judge process is what the worker server would be: the warm server's
imports, no CUDA context (judges are forked from a process that never started one), no job's
secret, no thread of its own. So `start` forks it there and runs the forkserver's own loop
(`multiprocessing.forkserver.main`) in the child: the same server, ready in milliseconds. The
child keeps only the forkserver's two descriptors, stdio and device files (_close_all_but): not
the judge's line to the warm server, not the job's secret pipe. Its memory is the judge's before
the job: the imports and the first request's paths (which the first job's worker, forked from
the judge, sees as well).

It relies on the ForkServer fields of CPython 3.11-3.13 (`_forkserver_address`,
`_forkserver_alive_fd`, `_forkserver_pid`); where they differ (3.14 authenticates its clients
with a key) `start` returns None and the caller starts the standard one.
"""

from __future__ import annotations

import inspect
import os
import socket
import stat
import sys

_FIELDS = ("_lock", "_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid")
_MAIN_PARAMS = ["listener_fd", "alive_r", "preload", "main_path", "sys_path"]


def supported() -> bool:
  """Whether this Python's forkserver has the shape `start` fills in."""
  from multiprocessing import forkserver  # pylint: disable=import-outside-toplevel
  server = forkserver._forkserver  # pylint: disable=protected-access
  try:
    params = list(inspect.signature(forkserver.main).parameters)
  except (TypeError, ValueError):
    return False
  return (all(hasattr(server, f) for f in _FIELDS)
          and not hasattr(server, "_forkserver_authkey") and params == _MAIN_PARAMS)


def _close_all_but(keep: set[int]) -> None:
  """Closes every descriptor but `keep` and device files: the judge's sockets, pipes and files
  go, and what libraries opened on devices stays (NVML, initialised once by an import, keeps
  /dev/nvidiactl open and fails in every later child without it, as the forked workers of a
  judge's first job keep it too). A device file carries nothing of a job."""
  try:
    fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
  except OSError:
    fds = list(range(3, os.sysconf("SC_OPEN_MAX")))
  for fd in fds:
    if fd in keep:
      continue
    try:
      if stat.S_ISCHR(os.fstat(fd).st_mode):
        continue
      os.close(fd)
    except OSError:
      pass


def start() -> int | None:
  """Starts this process's forkserver as a fork of it, and returns its pid; None where one runs
  already or this Python's forkserver is not the one `supported` knows (nothing started)."""
  # pylint: disable=import-outside-toplevel,protected-access
  from multiprocessing import connection, forkserver, resource_tracker, util
  if not supported():
    return None
  server = forkserver._forkserver
  with server._lock:
    if server._forkserver_pid is not None:
      return None
    # Shared with the workers as in the standard start (each gets its descriptor per request).
    resource_tracker.ensure_running()
    sys.stdout.flush()  # what is buffered is printed once, by this process
    sys.stderr.flush()
    with socket.socket(socket.AF_UNIX) as listener:
      address = connection.arbitrary_address("AF_UNIX")
      listener.bind(address)
      if not util.is_abstract_socket_namespace(address):
        os.chmod(address, 0o600)
      listener.listen()
      # Every client holds the write end; the server ends when the last one closes it.
      alive_r, alive_w = os.pipe()
      try:
        pid = os.fork()
        if pid == 0:  # the server: never returns to the caller's code
          code = 1
          try:
            _close_all_but({0, 1, 2, listener.fileno(), alive_r})
            os.chdir("/")  # not a job's directory, which its caller removes
            util._run_after_forkers()
            forkserver.main(listener.fileno(), alive_r, [])
            code = 0
          except SystemExit as e:  # its loop ends so when the last client is gone
            code = e.code if isinstance(e.code, int) else 0
          finally:
            os._exit(code)
      except BaseException:
        os.close(alive_w)
        raise
      finally:
        os.close(alive_r)
      server._forkserver_address = address
      server._forkserver_alive_fd = alive_w
      server._forkserver_pid = pid
  return pid

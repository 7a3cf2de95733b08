"""A runtime guard for the worker process: Python audit hooks plus a thread-start counter.

Installed by the worker after the harness is set up and before the candidate is imported; audit
hooks cannot be removed from Python code. It blocks, and records as violations, what a candidate
could use to reach outside its worker: starting programs (other than the compilers its build
needs), signalling other processes (e.g. killing the judge to forge a result), writing or deleting
files outside its own temporary directory, opening sockets, and replacing the code of torch,
triton or harness functions from candidate code. (Python does not audit plain attribute
assignment on classes; the static checks and the integrity snapshot cover that.) Thread starts from candidate code are counted even if
the thread has finished by the time anyone looks.

Static checks (static_checks.py) already forbid the imports these need; this is the layer for
whatever reaches them anyway.
"""

from __future__ import annotations

import _thread
import os
import sys
import threading
from typing import Any

# Programs that torch's load_inline and Triton's compiler run.
ALLOWED_PROGRAMS = frozenset({
    "ninja", "nvcc", "c++", "g++", "gcc", "cc", "clang", "clang++", "ld", "ptxas", "cicc",
    "fatbinary", "nvlink", "cuobjdump", "nvdisasm", "which", "ldconfig", "uname", "cudafe++",
    # Triton 3.9 and later assemble for sm_90 and newer with the ptxas it ships under this name.
    "ptxas-blackwell",
    # ctypes.util.find_library, which Triton uses to locate libcuda, runs these.
    "file", "objdump", "ld.bfd", "ld.gold",
})
_PROTECTED_MODULE_ROOTS = ("torch", "triton", "time", "threading", "kernelzero_jax",
                           "multiprocessing", "builtins", "os", "sys")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Guard:
  """Audit-hook policy for one worker. `violations` is read by the worker after every stage."""

  def __init__(self, workdir: str, candidate_file: str):
    self.workdir = os.path.realpath(workdir)
    self.candidate_file = candidate_file
    self.violations: list[str] = []
    self._installed = False

  # -- policy --------------------------------------------------------------------------------

  def _inside_workdir(self, path: Any) -> bool:
    if isinstance(path, int):
      return True  # an already-open descriptor: its opening was checked
    try:
      p = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
      return False
    return p == self.workdir or p.startswith(self.workdir + os.sep) or p in ("/dev/null",)

  def _from_candidate(self, max_depth: int = 64) -> bool:
    """Whether candidate code is among the `max_depth` callers of the audited operation."""
    frame = sys._getframe(2)  # pylint: disable=protected-access
    depth = 0
    while frame is not None and depth < max_depth:
      if frame.f_code.co_filename == self.candidate_file:
        return True
      frame = frame.f_back
      depth += 1
    return False

  def _deny(self, what: str) -> None:
    self.violations.append(what)
    raise PermissionError(f"sandbox: {what}")

  def _hook(self, event: str, args: tuple) -> None:
    if event == "open":
      path, mode, flags = (list(args) + [None, None, None])[:3]
      writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
          isinstance(flags, int) and flags & _WRITE_FLAGS)
      if writing and not self._inside_workdir(path):
        self._deny(f"the candidate tried to write {os.fsdecode(path) if not isinstance(path, int) else path} "
                   "outside its directory")
    elif event in ("os.remove", "os.rmdir", "os.rename", "os.replace", "shutil.rmtree",
                   "os.unlink", "os.link", "os.symlink", "os.truncate", "os.chmod", "os.chown"):
      paths = [a for a in args if isinstance(a, (str, bytes, os.PathLike))]
      if any(not self._inside_workdir(p) for p in paths):
        self._deny(f"the candidate tried {event} outside its directory")
    elif event in ("subprocess.Popen", "os.posix_spawn"):
      # subprocess may start a program through posix_spawn: both events name the program.
      executable, argv = args[0], args[1]
      prog = executable or (argv[0] if isinstance(argv, (list, tuple)) and argv else argv)
      name = os.path.basename(os.fsdecode(prog)) if prog is not None else ""
      if name not in ALLOWED_PROGRAMS:
        self._deny(f"the candidate tried to start the program {name!r}")
    elif event in ("os.system", "os.exec", "os.spawn", "os.fork", "os.forkpty",
                   "pty.spawn", "os.startfile"):
      self._deny(f"the candidate tried to start a process ({event})")
    elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
      if not args or args[0] != os.getpid():
        self._deny(f"the candidate tried to signal another process ({event})")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.__new__"):
      self._deny(f"the candidate tried to use the network ({event})")
    elif event == "object.__setattr__":
      # Raised for writes to functions' code and defaults (`f.__code__ = ...`), the way to patch
      # a function in place while keeping its identity.
      obj = args[0] if args else None
      if str(getattr(obj, "__module__", "")).split(".")[0] in _PROTECTED_MODULE_ROOTS and \
          self._from_candidate(max_depth=1):
        # Only the candidate's own statement counts: libraries set attributes of their own
        # while the candidate's forward lazily imports them.
        self._deny(f"the candidate patched {obj.__module__}.{getattr(obj, '__qualname__', obj)}"
                   f".{args[1]}")

  # -- installation --------------------------------------------------------------------------

  def install(self) -> None:
    """Installs the hook (irreversibly) and the thread-start counter."""
    if self._installed:
      return
    self._installed = True
    sys.dont_write_bytecode = True  # importing later modules must not write .pyc files
    sys.addaudithook(self._hook)
    guard = self
    original = _thread.start_new_thread

    def start_new_thread(function, args, kwargs=None, *rest):
      if guard._from_candidate():  # pylint: disable=protected-access
        guard.violations.append("the candidate started a thread")
      if kwargs is None:
        return original(function, args, *rest)
      return original(function, args, kwargs, *rest)

    _thread.start_new_thread = start_new_thread
    if hasattr(threading, "_start_new_thread"):
      threading._start_new_thread = start_new_thread  # pylint: disable=protected-access

"""How a judge process is started, and its verdict read back (evaluate.py's callers never see
this): a plain `python -m kernelzero_jax.sandbox.judge` per candidate (SubprocessLauncher), or a
fork of a warm server that has torch imported (ZygoteLauncher, zygote.py). Either way the judge
gets its job as a file and a secret on stdin, and its verdict counts only if it carries that
secret (run_judge). Verdicts do not depend on the launcher.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from kernelzero_jax.sandbox.config import DEVICES, SandboxConfig

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def overall_timeout_s(config: SandboxConfig) -> float:
  """Upper bound for one judge: every stage at its limit, plus start-up margin."""
  return (config.build_timeout_s + config.correctness_timeout_s * (config.num_correct_trials + 3)
          + (config.timing_timeout_s if config.timing else 0.0) + 180.0)


def judge_env() -> dict[str, str]:
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
  return env


def _judge_command(job_path: str, result_path: str) -> list[str]:
  return [sys.executable, "-m", "kernelzero_jax.sandbox.judge", job_path, result_path]


def kill_group(pid: int) -> None:
  """SIGKILL to a process group (a judge's or the warm server's: each runs in its own session)."""
  try:
    os.killpg(pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


class SubprocessLauncher:
  """Starts each judge as a fresh `python -m kernelzero_jax.sandbox.judge` (and its worker with
  multiprocessing spawn): the plain path, about 4 s of interpreter start and imports per
  candidate."""

  def run(self, job_path: str, result_path: str, log_path: str, cwd: str, nonce: str,
          timeout_s: float) -> tuple[int | None, bool]:
    """Runs one judge to its end; returns (exit code, whether it was killed at `timeout_s`)."""
    with open(log_path, "a") as log:
      proc = subprocess.Popen(_judge_command(job_path, result_path), stdin=subprocess.PIPE, stdout=log, stderr=log,
                              env=judge_env(), cwd=cwd, start_new_session=True)
      timed_out = False
      try:
        proc.stdin.write(nonce.encode() + b"\n")
        proc.stdin.close()
      except OSError:
        pass
      try:
        proc.wait(timeout=timeout_s)
      except subprocess.TimeoutExpired:
        timed_out = True
      finally:
        kill_group(proc.pid)  # whatever the judge left behind
        proc.wait()
    return proc.returncode, timed_out


class ZygoteUnavailable(RuntimeError):
  """The warm server could not be started or reached (`server`: which one, if it ran)."""

  def __init__(self, message: str, server: subprocess.Popen | None = None):
    super().__init__(message)
    self.server = server


class ZygoteLauncher:
  """Forks judges from one warm server process (zygote.py) that has torch imported, and the
  judge forks its worker: the same judge code and the same isolation (a process per candidate,
  none shared with the reference), without an interpreter start and `import torch` per process.
  On a GPU a judge process serves several jobs in turn (judge_host.py), its CUDA context made
  once.

  The server starts on first use, is shared by all threads, and is started again if it died; a
  judge lost with it is run again by the plain launcher, so no candidate is lost to the server.
  """

  START_TIMEOUT_S = 180.0

  def __init__(self, device: str = "cuda"):
    if device not in DEVICES:
      raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    self.device = device  # the server's; a job for another device gets a spawned worker
    self._lock = threading.Lock()
    self._proc: subprocess.Popen | None = None
    self._dir: str | None = None
    self._plain = SubprocessLauncher()
    self.start_failure: str | None = None  # set once a server failed to start: no more tries

  @property
  def socket_path(self) -> str | None:
    return os.path.join(self._dir, "zygote.sock") if self._dir else None

  def server_pid(self) -> int | None:
    with self._lock:
      return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

  def _ensure_server(self) -> tuple[str, subprocess.Popen]:
    with self._lock:
      if self.start_failure is not None:
        raise ZygoteUnavailable(self.start_failure)
      if self._proc is not None and self._proc.poll() is None:
        return self.socket_path, self._proc
      self._stop_locked()
      self._dir = tempfile.mkdtemp(prefix="kz_zygote_")
      path = self.socket_path
      log = open(os.path.join(self._dir, "zygote.log"), "w")  # pylint: disable=consider-using-with
      self._proc = subprocess.Popen(
          [sys.executable, "-m", "kernelzero_jax.sandbox.zygote", path, self.device], stdin=subprocess.DEVNULL,
          stdout=log, stderr=log, env=judge_env(), cwd=self._dir, start_new_session=True)
      log.close()
      deadline = time.monotonic() + self.START_TIMEOUT_S
      while not os.path.exists(path):
        if self._proc.poll() is not None or time.monotonic() > deadline:
          with open(os.path.join(self._dir, "zygote.log"), errors="replace") as f:
            tail = " | ".join(f.read()[-1500:].strip().splitlines()[-5:])
          self._stop_locked()
          # It would fail again the same way (an import, a device): plain judges from now on.
          self.start_failure = f"the warm judge server did not start: {tail}"
          logging.warning("%s; using plain judge processes", self.start_failure)
          raise ZygoteUnavailable(self.start_failure)
        time.sleep(0.02)
      return path, self._proc

  def _stop_locked(self) -> None:
    if self._proc is not None:
      kill_group(self._proc.pid)
      self._proc.wait()
      self._proc = None
    if self._dir is not None:
      shutil.rmtree(self._dir, ignore_errors=True)
      self._dir = None

  def _discard(self, server: subprocess.Popen | None) -> None:
    """Stops a server that failed a request (it may be dying, not yet dead), so that the next
    request starts a new one; a newer server that other threads started stays."""
    with self._lock:
      if server is not None and server is self._proc:
        self._stop_locked()

  def start(self) -> bool:
    """Starts the server now unless it runs (it takes seconds: it imports torch and triton).
    Returns whether it runs; one that fails to start leaves plain judges, as at a first run."""
    try:
      self._ensure_server()
    except ZygoteUnavailable:
      return False
    return True

  def close(self) -> None:
    """Stops the server (running judges end with it); the next run starts a new one."""
    with self._lock:
      self._stop_locked()

  def __del__(self):
    with contextlib.suppress(Exception):
      self.close()

  def run(self, job_path: str, result_path: str, log_path: str, cwd: str, nonce: str,
          timeout_s: float) -> tuple[int | None, bool]:
    try:
      return self._run(job_path, result_path, log_path, cwd, nonce, timeout_s)
    except ZygoteUnavailable as e:
      self._discard(e.server)
      with open(log_path, "a") as log:
        log.write(f"[sandbox] {e}; judged again by a plain judge process\n")
      # What the lost judge may have left: its result, or a result half written
      # (atomic_file.replacing's temporary file, named for the judge's process).
      for leftover in [result_path, *glob.glob(glob.escape(result_path) + ".*tmp")]:
        with contextlib.suppress(OSError):
          os.remove(leftover)
      return self._plain.run(job_path, result_path, log_path, cwd, nonce, timeout_s)

  def _run(self, job_path, result_path, log_path, cwd, nonce, timeout_s):
    path, server = self._ensure_server()
    read_fd, write_fd = os.pipe()
    try:
      os.write(write_fd, nonce.encode() + b"\n")
    finally:
      os.close(write_fd)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
      try:
        conn.settimeout(30.0)
        conn.connect(path)
        request = {"job_path": job_path, "result_path": result_path, "log_path": log_path,
                   "cwd": cwd}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [read_fd])
      except OSError as e:
        raise ZygoteUnavailable(f"the warm judge server is unreachable ({e})", server) from e
      finally:
        os.close(read_fd)
      reader = conn.makefile("rb")
      started = self._reply(reader, "pid", server)
      pid = int(started["pid"])
      kept = False
      try:
        conn.settimeout(timeout_s)
        ended = self._reply(reader, "exit", server)
        # A judge process that serves further jobs (judge_host.py) has killed what its job
        # left behind itself, and stays.
        kept = ended.get("kept") is True
        return int(ended["exit"]), False
      except TimeoutError:
        return None, True
      finally:
        if not kept:
          kill_group(pid)  # whatever the judge left behind (all of it, after a timeout)
    finally:
      conn.close()

  @staticmethod
  def _reply(reader, key: str, server: subprocess.Popen) -> dict:
    try:
      line = reader.readline()
    except TimeoutError:
      raise
    except OSError as e:
      raise ZygoteUnavailable(f"the warm judge server dropped the connection ({e})",
                              server) from e
    try:
      reply = json.loads(line) if line else {}
    except ValueError:
      reply = {}
    if key not in reply:
      raise ZygoteUnavailable(f"the warm judge server ended or refused the judge "
                              f"({reply.get('error', 'no reply')})", server)
    return reply


LAUNCHERS = ("subprocess", "zygote")


def make_launcher(name: str, device: str) -> SubprocessLauncher | ZygoteLauncher:
  if name not in LAUNCHERS:
    raise ValueError(f"launcher must be one of {LAUNCHERS}, got {name!r}")
  return ZygoteLauncher(device) if name == "zygote" else SubprocessLauncher()


def run_judge(job: dict, config: SandboxConfig, launcher) -> tuple[dict | None, str, bool]:
  """Runs one judge on `job`: (its verdict dict, "", False), or (None, why there is none,
  whether it was stopped at the deadline)."""
  launcher = launcher or SubprocessLauncher()
  with tempfile.TemporaryDirectory(prefix="kz_judge_") as tmp:
    job_path, result_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
    log_path = os.path.join(tmp, "judge.log")
    with open(job_path, "w") as f:
      json.dump(job, f)
    nonce = secrets.token_hex(16)
    judge_cwd = os.path.join(tmp, "cwd")
    os.mkdir(judge_cwd)
    open(log_path, "w").close()  # pylint: disable=consider-using-with
    launched_at = time.monotonic()  # the judge's clock for its entry and its verdict (judge.py)
    returncode, timed_out = launcher.run(job_path, result_path, log_path, judge_cwd, nonce,
                                         overall_timeout_s(config))
    result = read_result(result_path) if returncode == 0 and not timed_out else None
    if result is not None and result.get("nonce") == nonce:
      stages = result["verdict"].get("stage_seconds")
      # From the launch to the judge's entry point, and from its written verdict to its end: its
      # process's exit (a GPU judge's tears its CUDA context down), while the pool keeps its place.
      spans = (("launch", launched_at, result.get("entered_at")),
               ("exit", result.get("written_at"), time.monotonic()))
      for stage, start, end in spans:
        if isinstance(stages, dict) and all(isinstance(t, (int, float)) for t in (start, end)):
          stages[stage] = round(max(0.0, end - start), 3)
      return result["verdict"], "", False
    with open(log_path, errors="replace") as f:
      tail = " | ".join(f.read()[-2000:].strip().splitlines()[-6:])
  if timed_out:
    return None, (f"the evaluation exceeded {overall_timeout_s(config):g} s (the reference may "
                  f"hang); {tail}"), True
  why = ("its result did not carry this evaluation's secret (forged)" if result is not None
         else f"exit code {returncode}")
  return None, (f"the judge process ended without a valid verdict ({why}); a candidate may have "
                f"killed it; {tail}"), False


def read_result(path: str) -> dict | None:
  try:
    with open(path) as f:
      result = json.load(f)
    return result if isinstance(result, dict) and isinstance(result.get("verdict"), dict) else None
  except (OSError, ValueError):
    return None

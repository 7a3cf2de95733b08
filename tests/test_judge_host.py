"""Judge processes that serve several jobs in turn (judge_host.py), on the CPU.

Their verdicts on every cheat and fault are compared with one-job judges' in
test_sandbox_launchers.py. Here: where their workers come from (the judge itself before its first
job, its worker server after), that no worker holds the judge's line to the warm server, what
the judge keeps between jobs and what it kills, when it stops serving, and that the server ends
an idle one.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
import threading
import time

import psutil
import pytest

from kernelzero_jax.sandbox import Job
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import SandboxPool
from kernelzero_jax.sandbox import launchers
from kernelzero_jax.sandbox import judge_host

REPO = pathlib.Path(__file__).parent.parent
CANDIDATES = pathlib.Path(__file__).parent / "candidates"
CONFIG = SandboxConfig(device="cpu", num_correct_trials=1, correctness_timeout_s=6.0,
                       build_timeout_s=60.0, jobs_per_judge_process=4)


def _read(path: str) -> str:
  return (CANDIDATES / f"{path}.py").read_text()


def _hanging_job() -> Job:
  return Job(_read("references/scaled_relu"), _read("faults/hang_forward"), "triton", "hang")


def _sockets(pid: int) -> set[str]:
  """The socket inodes process `pid` holds ("socket:[N]")."""
  out = set()
  for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
      target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
      continue
    if target.startswith("socket:"):
      out.add(target)
  return out


def _worker_of(server_pid: int, deadline_s: float = 60.0) -> psutil.Process:
  """The candidate worker under the warm server (the one process in a candidate's directory)."""
  deadline = time.monotonic() + deadline_s
  while time.monotonic() < deadline:
    for p in psutil.Process(server_pid).children(recursive=True):
      try:
        if "kz_candidate_" in p.cwd():
          return p
      except psutil.Error:
        continue
    time.sleep(0.05)
  raise AssertionError("no candidate worker appeared")


def test_workers_come_from_the_judge_before_its_first_job_and_from_its_server_after():
  # Two hanging candidates, one at a time: both are judged by one judge process. The first's
  # worker is forked by the judge (it had no CUDA context or secret yet); the second's by the
  # worker server, which the judge forked before its first job (forked_worker_server.py), not
  # by the judge. None of the three holds the judge's line to the warm server.
  seen = []
  with SandboxPool(CONFIG, max_parallel=1) as pool:
    out = []
    thread = threading.Thread(target=lambda: out.extend(
        pool.evaluate([_hanging_job()] * 2, once_per_candidate=False)))
    thread.start()
    server = None
    while server is None:
      server = pool.launcher.server_pid()
      time.sleep(0.05)
    for _ in range(2):
      worker = _worker_of(server)
      parent = worker.parent()
      seen.append((worker.pid, parent.pid, parent.ppid(), _sockets(worker.pid),
                   _sockets(parent.pid)))
      while worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.05)
    thread.join(timeout=120)
    judges = psutil.Process(server).children()
    assert len(judges) == 1, judges  # the judge process stays, idle, for another job
    judge_pid = judges[0].pid
    judge_sockets = _sockets(judge_pid)
  assert [v.status for v in out] == ["timeout", "timeout"], out
  assert [v.evidence["judge_process"] for v in out] == [{"pid": judge_pid, "job": 1},
                                                        {"pid": judge_pid, "job": 2}]
  first, second = seen
  assert first[1] == judge_pid
  assert second[1] != judge_pid and second[2] == judge_pid  # the server, the judge's child
  server_sockets = second[4]
  # the judge's control socket to the warm server (held all along) is in no worker, nor in
  # the server
  assert judge_sockets and not judge_sockets & (first[3] | second[3] | server_sockets)


def _script(code: str, timeout: float = 120) -> str:
  return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=timeout,
                        check=True).stdout


def test_between_jobs_everything_adopted_is_killed_but_the_kept_processes():
  out = _script(
      "import os, subprocess, sys, time, psutil\n"
      "from kernelzero_jax.sandbox import judge, judge_host, worker_handle\n"
      "judge.become_subreaper()\n"
      "kept = subprocess.Popen(['sleep', '60'])\n"
      "other = subprocess.Popen(['sleep', '60'])\n"
      # an orphan: its parent exits at once, so it is adopted by this (subreaper) process
      "subprocess.run([sys.executable, '-c', 'import subprocess; "
      "subprocess.Popen([\"sleep\", \"60\"])'])\n"
      "time.sleep(0.2)\n"
      "orphans = [c.pid for c in psutil.Process().children() "
      "           if c.pid not in (kept.pid, other.pid)]\n"
      "worker_handle.KEPT_PIDS = frozenset({kept.pid})\n"
      "worker_handle.kill_descendants()\n"
      "time.sleep(0.2)\n"
      "judge_host._reap_adopted()\n"
      "alive = lambda pid: psutil.pid_exists(pid) and "
      "psutil.Process(pid).status() != psutil.STATUS_ZOMBIE\n"
      "print(len(orphans), alive(kept.pid), other.poll() is not None, "
      "[psutil.pid_exists(p) for p in orphans])\n"
      "kept.kill()\n")
  assert out.split() == ["1", "True", "True", "[False]"], out


def test_a_worker_server_that_died_is_started_again_and_kept():
  # A worker can kill its parent, the worker server. The next job starts another, which must be
  # among the kept processes: otherwise every job's end would kill it, and every next job wait
  # for a new one.
  out = _script(
      "import os, signal, time\n"
      "from multiprocessing import forkserver\n"
      "from kernelzero_jax.sandbox import judge, judge_host, worker_handle\n"
      "server = judge_host._WorkerServer('cpu')\n"
      "server.start()\n"
      "first = forkserver._forkserver._forkserver_pid\n"
      "kept = set(worker_handle.KEPT_PIDS)\n"
      "server.start()  # running: nothing to do\n"
      "same = worker_handle.KEPT_PIDS == kept\n"
      "os.kill(first, signal.SIGKILL)\n"
      "time.sleep(0.5)\n"
      "server.start()\n"
      "second = forkserver._forkserver._forkserver_pid\n"
      "worker_handle.kill_descendants()\n"
      "time.sleep(0.5)\n"
      "print(first in kept, same, second != first, second in worker_handle.KEPT_PIDS, "
      "len(worker_handle.KEPT_PIDS), judge_host._running(second))\n")
  assert out.split() == ["True", "True", "True", "True", "2", "True"], out


_FORKED_SERVER = (
    "import multiprocessing, os, socket, sys, psutil\n"
    "from multiprocessing import forkserver\n"
    "from kernelzero_jax.sandbox import forked_worker_server, judge, judge_host\n"
    "{setup}"
    "line, _ = socket.socketpair()  # as the judge's line to the warm server\n"
    "secret_r, secret_w = os.pipe()  # as a job's secret\n"
    "device = os.open('/dev/zero', os.O_RDONLY)  # as NVML's /dev/nvidiactl\n"
    "server = judge_host._WorkerServer('cpu')\n"
    "server.start(fork=True)\n"
    "pid = forkserver._forkserver._forkserver_pid\n"
    "me = psutil.Process()\n"
    "def fds(p):\n"
    "  out = set()\n"
    "  for fd in os.listdir(f'/proc/{{p}}/fd'):\n"
    "    try:\n"
    "      out.add(os.readlink(f'/proc/{{p}}/fd/{{fd}}'))\n"
    "    except FileNotFoundError:  # closed meanwhile (a fresh interpreter still starting)\n"
    "      pass\n"
    "  return out\n"
    "mine = {{os.readlink(f'/proc/self/fd/{{fd}}') for fd in (line.fileno(), secret_r)}}\n"
    "ctx = multiprocessing.get_context('forkserver')\n"
    "w = ctx.Process(target=judge_host._running, args=(os.getpid(),))\n"
    "w.start(); w.join(60)\n"
    "print(server.how, pid in server.pids, psutil.Process(pid).ppid() == os.getpid(),\n"
    "      psutil.Process(pid).cmdline() == me.cmdline(), bool(mine & fds(pid)), w.exitcode,\n"
    "      '/dev/zero' in fds(pid))\n")


def test_the_worker_server_is_forked_before_the_first_job_and_keeps_none_of_its_descriptors():
  # The judge's line to the warm server and a job's secret stay out of the forked server, a
  # device file libraries keep open (NVML's) stays in; it is this process's child, with this
  # process's command line (no fresh interpreter), among the kept processes, and it starts
  # workers.
  out = _script(_FORKED_SERVER.format(setup=""))
  assert out.split() == ["fork", "True", "True", "True", "False", "0", "True"], out


def test_a_forkserver_of_another_shape_is_started_the_standard_way():
  # Where this Python's forkserver is not the one forked_worker_server knows (3.14 adds a key),
  # nothing is forked: the standard server, a fresh interpreter, starts instead.
  out = _script(_FORKED_SERVER.format(
      setup="forkserver._forkserver._forkserver_authkey = None\n"))
  assert out.split() == ["spawn", "True", "True", "False", "False", "0", "False"], out


def test_a_forked_worker_server_that_died_is_started_again_as_a_fresh_interpreter():
  # After the first job this process holds a CUDA context and a secret: never forked again.
  out = _script(
      "import os, signal, time, psutil\n"
      "from multiprocessing import forkserver\n"
      "from kernelzero_jax.sandbox import judge, judge_host, worker_handle\n"
      "server = judge_host._WorkerServer('cpu')\n"
      "server.start(fork=True)\n"
      "first, how = forkserver._forkserver._forkserver_pid, server.how\n"
      "os.kill(first, signal.SIGKILL)\n"
      "time.sleep(0.5)\n"
      "server.start()\n"
      "second = forkserver._forkserver._forkserver_pid\n"
      "print(how, server.how, second != first, second in worker_handle.KEPT_PIDS,\n"
      "      'forkserver' in ' '.join(psutil.Process(second).cmdline()))\n")
  assert out.split() == ["fork", "spawn", "True", "True", "True"], out


def test_a_thread_of_the_last_job_still_running_ends_the_service():
  stop = threading.Event()
  lingering = threading.Thread(target=stop.wait, name="lingering", daemon=True)
  lingering.start()
  try:
    assert not judge_host._threads_ended(0.2)  # pylint: disable=protected-access
  finally:
    stop.set()
  lingering.join()
  assert judge_host._threads_ended(0.2)  # pylint: disable=protected-access


def test_an_unreachable_worker_server_leaves_spawned_workers(tmp_path):
  # The worker server refuses the connection (it died, or never came up): the worker is
  # spawned instead, and runs.
  out = _script(
      "from multiprocessing import forkserver\n"
      "from kernelzero_jax.sandbox import worker_handle\n"
      "def refuse(fds):\n"
      "  raise ConnectionRefusedError('no server today')\n"
      "forkserver.connect_to_new_process = refuse\n"
      "worker_handle.WORKER_START = 'forkserver'\n"
      f"handle = worker_handle.WorkerHandle({{'workdir': {str(tmp_path)!r}}}, 4.0, "
      "target=worker_handle._describe_exit)\n"
      "handle.proc.join(60)\n"
      "print(handle.proc.exitcode, type(handle.proc._popen).__module__)\n")
  # _describe_exit(conn, spec, fds) takes one argument: the spawned worker exits with 1
  assert out.strip().splitlines()[-1] == "1 multiprocessing.popen_spawn_posix", out
  assert "the worker server failed (ConnectionRefusedError: no server today)" in out


def test_an_idle_judge_process_is_ended_by_the_server(monkeypatch):
  real_popen = launchers.subprocess.Popen

  def popen(args, *a, **k):  # the warm server, with a short idle limit
    if "kernelzero_jax.sandbox.zygote" in args:
      args = [args[0], "-c", "import sys; from kernelzero_jax.sandbox import zygote; "
              "zygote.JUDGE_IDLE_S = 1.0; zygote.main(['zygote'] + sys.argv[1:])", *args[3:]]
    return real_popen(args, *a, **k)

  monkeypatch.setattr(launchers.subprocess, "Popen", popen)
  job = Job(_read("references/scaled_relu"), _read("honest/scaled_relu"), "triton", "honest")
  with SandboxPool(CONFIG, max_parallel=1) as pool:
    first = pool.evaluate([job])[0]
    judge_pid = first.evidence["judge_process"]["pid"]
    deadline = time.monotonic() + 30
    while psutil.pid_exists(judge_pid) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert not psutil.pid_exists(judge_pid), "the idle judge process was not ended"
    second = pool.evaluate([job])[0]
  assert first.correct and second.correct
  assert second.evidence["judge_process"]["job"] == 1
  assert second.evidence["judge_process"]["pid"] != judge_pid


def test_jobs_per_judge_process_defaults_by_device_and_is_checked():
  assert SandboxConfig(device="cuda").jobs_per_judge() == 32
  assert SandboxConfig(device="cpu").jobs_per_judge() == 1
  assert dataclasses.replace(CONFIG, jobs_per_judge_process=2).jobs_per_judge() == 2
  with pytest.raises(ValueError, match="jobs_per_judge_process"):
    SandboxConfig(device="cpu", jobs_per_judge_process=0)

"""The judge's wait for a worker (worker_handle.WorkerHandle.wait), with real processes on the
CPU."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import worker
from kernelzero_jax.sandbox import worker_handle

REPO = pathlib.Path(__file__).parent.parent


def _answer_and_exit(conn, spec, inherited_fds):
  del spec
  for fd in inherited_fds:
    os.close(fd)
  channel.send(conn, {"ok": True, "answer": 42}, by_value=True)


def _answer_with_a_list(conn, spec, inherited_fds):
  del spec
  for fd in inherited_fds:
    os.close(fd)
  channel.send(conn, ["ok", True], by_value=True)


def _exit_silently(conn, spec, inherited_fds):
  del conn, spec, inherited_fds


def _set_up_then_wait(conn, spec, inherited_fds):
  for fd in inherited_fds:
    os.close(fd)
  worker._setup_process(spec)  # pylint: disable=protected-access  # (its parent-death signal)
  channel.send(conn, {"ok": True}, by_value=True)
  time.sleep(120)


class _PollLate:
  """The judge's end of the pipe, whose first poll gives up just before the reply arrives: what
  happens when the judge's thread is descheduled between its poll and its look at the worker."""

  def __init__(self, conn):
    self.conn, self.polls = conn, 0

  def poll(self, timeout=0.0):
    self.polls += 1
    return False if self.polls == 1 else self.conn.poll(timeout)

  def __getattr__(self, name):
    return getattr(self.conn, name)


def test_a_reply_sent_just_before_the_worker_exits_is_read(tmp_path):
  handle = worker_handle.WorkerHandle({"workdir": str(tmp_path)}, 1.0, target=_answer_and_exit)
  handle.proc.join(30)  # answered and gone before the judge looks
  assert handle.proc.exitcode == 0
  handle.conn = _PollLate(handle.conn)
  assert handle.wait(10, "prebuild") == {"ok": True, "answer": 42}


class _AliveAtFirstLook:
  """The worker's process, seen alive by the judge's first look and gone afterwards: a worker
  that answers and exits between two looks of one round."""

  def __init__(self, proc):
    self.proc, self.looks = proc, 0

  def is_alive(self):
    self.looks += 1
    return True if self.looks == 1 else self.proc.is_alive()

  @property
  def exitcode(self):
    return None if self.looks <= 1 else self.proc.exitcode

  def __getattr__(self, name):
    return getattr(self.proc, name)


def test_a_worker_seen_alive_is_not_called_dead_when_it_answers_and_exits_in_that_round(
    tmp_path):
  handle = worker_handle.WorkerHandle({"workdir": str(tmp_path)}, 1.0, target=_answer_and_exit)
  handle.proc.join(30)
  handle.conn = _PollLate(handle.conn)
  handle.proc = _AliveAtFirstLook(handle.proc)
  assert handle.wait(10, "prebuild") == {"ok": True, "answer": 42}


def test_a_worker_that_exits_without_a_reply_died(tmp_path):
  handle = worker_handle.WorkerHandle({"workdir": str(tmp_path)}, 1.0, target=_exit_silently)
  handle.proc.join(30)
  handle.conn = _PollLate(handle.conn)
  with pytest.raises(worker_handle.StageFailure, match=r"prebuild: worker died \(exit code 0\)"):
    handle.wait(10, "prebuild")


def test_a_replys_tensors_are_gone_when_the_next_command_is_answered():
  """The worker's command loop (worker._Worker.serve) keeps the tensors of a reply only in _held,
  which goes when the next command comes: where checks share a GPU, a reply kept until the next
  one replaced it held a problem's inputs and outputs past the judge's release."""
  import multiprocessing  # pylint: disable=import-outside-toplevel
  import threading  # pylint: disable=import-outside-toplevel
  import weakref  # pylint: disable=import-outside-toplevel

  import torch  # pylint: disable=import-outside-toplevel

  from kernelzero_jax.sandbox import worker as worker_lib  # pylint: disable=import-outside-toplevel

  sent = []
  stub = object.__new__(worker_lib._Worker)  # pylint: disable=protected-access
  judge_end, stub.conn = multiprocessing.Pipe(duplex=True)
  stub.spec, stub.device, stub._held = {}, torch.device("cpu"), None  # pylint: disable=protected-access
  stub._last_send_s = None  # pylint: disable=protected-access
  stub.build = lambda: {"ok": True}

  def run(seed, profile):
    del profile
    outputs = torch.full((4,), float(seed))  # stands for the outputs and inputs a run sends
    sent.append(weakref.ref(outputs))
    stub._held = outputs  # pylint: disable=protected-access
    return {"ok": True, "seed": seed, "outputs": outputs}

  stub.run = run
  # What release finds still alive of the last run's reply.
  stub.release = lambda: {"ok": True, "alive": [r() is not None for r in sent]}
  stub._send = lambda obj: channel.send(stub.conn, obj, by_value=True)  # pylint: disable=protected-access
  loop = threading.Thread(target=stub.serve, daemon=True)
  loop.start()

  said = []  # each answer's own account of its time: which of its keys it had

  def answer():
    assert judge_end.poll(30), "the worker's loop did not answer"
    reply = channel.recv(judge_end)
    times = {k: reply.pop(k) for k in ("spent_s", "last_send_s") if k in reply}
    assert all(isinstance(t, float) and 0 <= t < 30 for t in times.values())
    said.append(sorted(times))
    return reply

  ask = lambda msg: (channel.send(judge_end, msg, by_value=True), answer())[1]
  assert answer() == {"ok": True}  # built
  assert ask({"cmd": "run", "seed": 1})["seed"] == 1
  assert ask({"cmd": "release"}) == {"ok": True, "alive": [False]}
  assert ask({"cmd": "run", "seed": 2})["seed"] == 2
  assert ask({"cmd": "nonsense"})["error"] == "unknown command 'nonsense'"
  assert ask({"cmd": "release"}) == {"ok": True, "alive": [False, False]}
  # The build's reply says nothing; every answer its time, and from the second on the last's
  # sending.
  assert said == [[]] + [["spent_s"]] + [["last_send_s", "spent_s"]] * 4
  channel.send(judge_end, {"cmd": "exit"}, by_value=True)
  loop.join(10)
  assert not loop.is_alive()


def _answer_with_accounts(conn, spec, inherited_fds):
  """Answers four commands with the accounts a worker gives (worker._Worker._serve_candidate),
  some of them nonsense, as a candidate sharing the worker's process could make them."""
  del spec
  for fd in inherited_fds:
    os.close(fd)
  for said in ({"spent_s": 0.5, "steps_s": {"inputs": 0.0625, "forward": 0.25, "rogue": 9.0}},
               {"spent_s": "fast", "last_send_s": -1.0, "steps_s": [0.5]},
               {"spent_s": float("nan"), "last_send_s": 0.25, "steps_s": {"checks": 0.125}},
               {"spent_s": True, "last_send_s": 0.125,
                "steps_s": {"inputs": -1.0, "forward": "slow", "checks": float("inf")}}):
    channel.recv(conn)
    channel.send(conn, {"ok": True, **said}, by_value=True)
  channel.recv(conn)


def test_the_handle_accounts_for_each_command_and_ignores_a_workers_nonsense(tmp_path):
  handle = worker_handle.WorkerHandle({"workdir": str(tmp_path)}, 1.0,
                                      target=_answer_with_accounts)
  try:
    handle.request({"cmd": "a"}, 30, "a")  # before the judge asks for accounts: none kept
    handle.messages = {}
    for cmd in ("b", "c", "b"):
      assert handle.request({"cmd": cmd}, 30, cmd)["ok"]
    messages = handle.messages
    assert sorted(messages) == ["b", "c"] and messages["b"]["n"] == 2 and messages["c"]["n"] == 1
    # "b" was answered first with nonsense, then with a bool: no worker time either way; its
    # first reply's sending was said with "c"'s reply (0.25 s), "c"'s with the last (0.125 s).
    assert "worker_s" not in messages["b"] and "worker_s" not in messages["c"]
    assert messages["b"]["worker_send_s"] == 0.25 and messages["c"]["worker_send_s"] == 0.125
    # A check's parts (RUN_STEPS) are kept by name where they are seconds: "a"'s (and a name
    # the worker does not have, "rogue") came before the judge asked; "b"'s were a list, then
    # no seconds (negative, text, infinite); "c"'s were "checks" alone.
    parts = lambda stats: {k: v for k, v in stats.items()
                           if k not in ("n", "until_read_s", "read_s", "worker_send_s")}
    assert parts(messages["b"]) == {} and parts(messages["c"]) == {"worker_checks_s": 0.125}
    for stats in messages.values():
      assert 0 <= stats["read_s"] <= stats["until_read_s"] < 30 * stats["n"]
  finally:
    channel.send(handle.conn, {"cmd": "exit"}, by_value=True)
    handle.proc.join(30)


def test_a_reply_that_is_not_a_message_ends_the_stage_not_the_judge(tmp_path):
  """What a candidate sharing the worker's process could send in its stead: a status, where the
  judge reading it as a message would fail itself."""
  handle = worker_handle.WorkerHandle({"workdir": str(tmp_path)}, 1.0, target=_answer_with_a_list)
  with pytest.raises(worker_handle.StageFailure, match="run: the worker's reply is not a "
                     r"message \(list\)") as failure:
    handle.wait(10, "run")
  assert failure.value.status == "runtime_error"
  handle.proc.join(30)


_THREAD_START = """
import sys, threading
from kernelzero_jax.sandbox import worker_handle
from tests import test_worker_handle as t
worker_handle.WORKER_START = sys.argv[1]
started = {}

def start():
  spec = {"workdir": sys.argv[2], "device": "cpu", "memory_limit_gb": 1024.0}
  started["handle"] = worker_handle.WorkerHandle(spec, 1024.0, target=t._set_up_then_wait,
                                                 kill_descendants=False)
  started["reply"] = started["handle"].wait(60, "start")

thread = threading.Thread(target=start)
thread.start()
thread.join()
handle = started["handle"]
handle.proc.join(0.5)
print(started["reply"], handle.proc.is_alive(), handle.proc.exitcode)
handle.kill()
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_started_from_a_thread_that_ends_lives_on(tmp_path, method):
  # A worker dies with its parent, which to Linux is the thread that started it: a judge starts
  # a worker from threads that end soon after (a kept worker's look, a prebuild's hand-over).
  # Here the thread waits until the worker has set up its parent-death signal, and then ends.
  # (In a fresh interpreter: a fork of this one, which has JAX's threads, is warned against.)
  out = subprocess.run([sys.executable, "-c", _THREAD_START, method, str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
  assert out.strip().splitlines()[-1] == "{'ok': True} True None", out

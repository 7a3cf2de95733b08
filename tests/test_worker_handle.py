"""The judge's wait for a worker (judge.WorkerHandle.wait), with real processes on the CPU."""

from __future__ import annotations

import os

import pytest

from kernelzero_jax.sandbox import channel
from kernelzero_jax.sandbox import judge as judge_lib


def _answer_and_exit(conn, spec, inherited_fds):
  del spec
  for fd in inherited_fds:
    os.close(fd)
  channel.send(conn, {"ok": True, "answer": 42}, by_value=True)


def _exit_silently(conn, spec, inherited_fds):
  del conn, spec, inherited_fds


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
  handle = judge_lib.WorkerHandle({"workdir": str(tmp_path)}, 1.0, target=_answer_and_exit)
  handle.proc.join(30)  # answered and gone before the judge looks
  assert handle.proc.exitcode == 0
  handle.conn = _PollLate(handle.conn)
  assert handle.wait(10, "prebuild") == {"ok": True, "answer": 42}


def test_a_worker_that_exits_without_a_reply_died(tmp_path):
  handle = judge_lib.WorkerHandle({"workdir": str(tmp_path)}, 1.0, target=_exit_silently)
  handle.proc.join(30)
  handle.conn = _PollLate(handle.conn)
  with pytest.raises(judge_lib.StageFailure, match=r"prebuild: worker died \(exit code 0\)"):
    handle.wait(10, "prebuild")

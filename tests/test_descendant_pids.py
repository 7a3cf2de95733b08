"""The processes descended from one (process_tree.descendant_pids: what a worker looks for after
each command, what its judge watches the memory of and kills) against psutil's
children(recursive=True), which it replaced: the same processes, with real ones."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from kernelzero_jax.sandbox import evidence
from kernelzero_jax.sandbox import process_tree

# A child that starts a grandchild and waits for it; both sleep until killed.
TREE = [sys.executable, "-c",
        "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); import time; time.sleep(60)"]


def _psutils(pid: int | None = None) -> set[int]:
  return {p.pid for p in psutil.Process(pid).children(recursive=True)}


def _wait_for(count: int, before: set[int]) -> None:
  """Until `count` processes beside `before` descend from this one."""
  deadline = time.monotonic() + 30
  while len(_psutils() - before) < count:
    assert time.monotonic() < deadline, "the processes did not start"
    time.sleep(0.02)


@pytest.fixture(name="before")
def _before():
  """This process's descendants before the test (multiprocessing's resource tracker, say, or
  the zombie of an earlier test's subprocess, which the test's own Popen may reap meanwhile: so
  the test counts its own processes apart); those the test started are killed after it."""
  before = _psutils()
  yield before
  started = [psutil.Process(pid) for pid in _psutils() - before]
  for p in started:
    p.kill()
  psutil.wait_procs(started, timeout=10)


def test_children_grandchildren_and_those_of_other_threads_are_found(before):
  assert set(process_tree.descendant_pids()) == before
  child = subprocess.Popen(TREE)  # pylint: disable=consider-using-with
  # One started by a thread that has ended since: its process adopts it.
  start = lambda: subprocess.Popen(TREE)  # pylint: disable=consider-using-with
  thread = threading.Thread(target=start)
  thread.start()
  thread.join()
  _wait_for(4, before)
  found = set(process_tree.descendant_pids()) - before
  assert len(found) == 4 and found == _psutils() - before
  # (This child by its handle: the process may have older children, a zombie say, and the pids
  # may wrap, so the highest pid need not be one of the test's.)
  assert set(process_tree.descendant_pids(child.pid)) == _psutils(child.pid) and len(
      _psutils(child.pid)) == 1
  baseline = {t.ident for t in threading.enumerate()}
  now = len(_psutils())  # (no Popen since: none of `before` can have been reaped)
  assert evidence.thread_and_process_violations(baseline) == [
      f"the candidate started {now} child process(es)"] and now >= 4


def test_without_children_files_psutil_looks(monkeypatch, before):
  subprocess.Popen(TREE)  # pylint: disable=consider-using-with
  _wait_for(2, before)
  exists = os.path.exists
  monkeypatch.setattr(os.path, "exists",
                      lambda p: False if str(p).endswith("/children") else exists(p))
  listdir, tasks_listed = os.listdir, []
  monkeypatch.setattr(os, "listdir", lambda p: (
      tasks_listed.append(p) if str(p).endswith("/task") else None, listdir(p))[1])
  found = set(process_tree.descendant_pids()) - before
  assert found == _psutils() - before and len(found) == 2
  assert tasks_listed == []  # (not from the children files)
  assert process_tree.descendant_pids(2**22 + 7) == []  # no such process

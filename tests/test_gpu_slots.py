"""The judges' GPU coordination (gpu_budget.gpu_slots), exercised with threads on the CPU.

Shared holders (untimed checks) may overlap up to the slot count; an exclusive holder (timing)
overlaps with nobody. With one slot, every hold is exclusive, as the sandbox has always been.

Two kinds of test: threads that hammer the slots and must never overlap more than allowed
(whatever the scheduling), and holds taken one after another in one thread (each hold opens its
own lock files, so it excludes the others as another process's would), which show exactly how
many fit together. Whether racing threads happen to fill every slot depends on the scheduler, so
no test asks it of them.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
import time

import pytest

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import gpu_budget
from kernelzero_jax.sandbox.gpu_budget import gpu_slots


class Recorder:
  """Counts concurrent holders of each kind and remembers the worst overlap seen."""

  def __init__(self):
    self.lock = threading.Lock()
    self.shared = 0
    self.exclusive = 0
    self.max_shared = 0
    self.violations = []

  def enter(self, exclusive: bool):
    with self.lock:
      if exclusive:
        self.exclusive += 1
        if self.shared or self.exclusive > 1:
          self.violations.append(("exclusive overlapped", self.shared, self.exclusive))
      else:
        self.shared += 1
        self.max_shared = max(self.max_shared, self.shared)
        if self.exclusive:
          self.violations.append(("shared during exclusive", self.shared, self.exclusive))

  def leave(self, exclusive: bool):
    with self.lock:
      if exclusive:
        self.exclusive -= 1
      else:
        self.shared -= 1


def _run_all(work, args: list) -> None:
  """work(a) for every a in args, each in its own thread, all at once; none may hang."""
  threads = [threading.Thread(target=work, args=(a,)) for a in args]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout=60)
  assert not any(t.is_alive() for t in threads), "deadlock"


def _hammer(tmp_path, slots: int, kinds: list[bool], hold_s: float = 0.05) -> Recorder:
  rec = Recorder()

  def work(exclusive: bool):
    for _ in range(3):
      with gpu_slots(0, slots, exclusive, lock_dir=str(tmp_path)):
        rec.enter(exclusive)
        time.sleep(hold_s)
        rec.leave(exclusive)

  _run_all(work, kinds)
  return rec


def _fits(tmp_path, slots: int, holds: list[tuple[bool, int]]) -> list[bool]:
  """Takes the holds (exclusive, width) one after another without waiting, keeping each one
  taken; whether each got its slots."""
  with contextlib.ExitStack() as stack:
    return [stack.enter_context(gpu_slots(0, slots, exclusive, lock_dir=str(tmp_path),
                                          width=width, wait=False))
            for exclusive, width in holds]


def test_shared_holders_overlap_up_to_the_slot_count(tmp_path):
  assert _fits(tmp_path, 3, [(False, 1)] * 4) == [True, True, True, False]
  assert _fits(tmp_path, 3, [(False, 1)] * 3) == [True] * 3  # all given back after
  rec = _hammer(tmp_path, slots=3, kinds=[False] * 6)
  assert not rec.violations, rec.violations[:3]
  assert 1 <= rec.max_shared <= 3


def test_exclusive_holders_overlap_with_nobody(tmp_path):
  assert _fits(tmp_path, 4, [(False, 1), (True, 1)]) == [True, False]
  assert _fits(tmp_path, 4, [(True, 1), (False, 1), (True, 1)]) == [True, False, False]
  rec = _hammer(tmp_path, slots=4, kinds=[False] * 5 + [True] * 3)
  assert not rec.violations, rec.violations[:3]


def test_one_slot_is_one_holder_at_a_time(tmp_path):
  assert _fits(tmp_path, 1, [(False, 1), (False, 1)]) == [True, False]
  assert _fits(tmp_path, 1, [(False, 4), (True, 1)]) == [True, False]
  rec = _hammer(tmp_path, slots=1, kinds=[False] * 4)
  assert not rec.violations and rec.max_shared == 1


class SlotRecorder:
  """How many slots the holders inside hold together, and the most seen."""

  def __init__(self, slots: int):
    self.lock, self.slots = threading.Lock(), slots
    self.held = self.most = self.most_holders = self.holders = 0
    self.violations = []

  def enter(self, width: int):
    with self.lock:
      self.held += width
      self.holders += 1
      self.most, self.most_holders = max(self.most, self.held), max(self.most_holders,
                                                                    self.holders)
      if self.held > self.slots:
        self.violations.append(self.held)

  def leave(self, width: int):
    with self.lock:
      self.held -= width
      self.holders -= 1


@pytest.mark.parametrize("widths", [[2] * 6, [2, 2, 1, 1, 1, 4, 3, 1], [3, 3, 1, 1, 1]],
                         ids=["pairs", "mixed", "threes"])
def test_wide_holders_hold_their_slots_and_share_the_rest(tmp_path, widths):
  slots = 4
  rec = SlotRecorder(slots)

  def work(width: int):
    for _ in range(3):
      exclusive = width == slots
      with gpu_slots(0, slots, exclusive, lock_dir=str(tmp_path), width=width):
        rec.enter(width)
        time.sleep(0.04)
        rec.leave(width)

  _run_all(work, widths)
  assert not rec.violations, rec.violations[:3]  # never more than the 4 slots' worth


@pytest.mark.parametrize("holds,fit", [
    ([2, 2, 2], [True, True, False]),   # two pairs fill 4 slots
    ([3, 1, 1], [True, True, False]),   # a three leaves one slot to a one
    ([3, 2], [True, False]),            # a pair's group (slots 2-3) is half taken by the three
    ([1, 2, 1], [True, True, True]),    # a one and a pair in the other group, then the last one
    ([1, 1, 3], [True, True, False]),   # a three's group (slots 0-2) is taken in part
])
def test_wide_holders_take_whole_groups_and_leave_the_rest(tmp_path, holds, fit):
  taken = _fits(tmp_path, 4, [(False, w) for w in holds])
  assert taken == fit


def test_gpu_concurrency_must_be_positive():
  with pytest.raises(ValueError, match="gpu_concurrency"):
    SandboxConfig(gpu_concurrency=0)


def _turnstile_closed(tmp_path) -> bool:
  """Whether an exclusive holder has gpu_slots' turnstile closed (it waits for slots)."""
  path = gpu_budget._turnstile_path(0, str(tmp_path))  # pylint: disable=protected-access
  with open(path, "a+") as gate:
    return not gpu_budget._pass(gate, wait=False)  # pylint: disable=protected-access


def _until(condition, timeout_s: float = 10.0) -> None:
  deadline = time.monotonic() + timeout_s
  while not condition():
    assert time.monotonic() < deadline, "timed out"
    time.sleep(0.002)


@pytest.mark.parametrize("timings_first", [True, False])
def test_a_waiting_timing_keeps_new_checks_off_the_gpu(tmp_path, timings_first):
  """A check holds slot 0; a timing waits for it (taking the slots in index order, it holds
  none meanwhile); a check asked for after that starts at once without timings_first (3 slots
  are free), after the timing with it."""
  order, lock = [], threading.Lock()
  first_may_end = threading.Event()

  def first_check() -> None:
    # Slot 0 as a check holds it (gpu_slots' own choice of slot depends on the process id).
    path = gpu_budget._lock_path(0, 0, str(tmp_path))  # pylint: disable=protected-access
    with open(path, "a+") as slot:
      fcntl.flock(slot, fcntl.LOCK_EX)
      with lock:
        order.append("first check")
      assert first_may_end.wait(10)

  def hold(name: str, exclusive: bool) -> None:
    with gpu_slots(0, 4, exclusive, lock_dir=str(tmp_path), timings_first=timings_first):
      with lock:
        order.append(name)

  first = threading.Thread(target=first_check)
  first.start()
  _until(lambda: order == ["first check"])
  timing = threading.Thread(target=hold, args=("timing", True))
  timing.start()
  if timings_first:
    _until(lambda: _turnstile_closed(tmp_path))
  else:
    time.sleep(0.05)  # (it waits for slot 0 by now, or will before the first check ends)
  # Without waiting: a check is refused while the timing waits, though 3 slots are free.
  with gpu_slots(0, 4, False, lock_dir=str(tmp_path), wait=False,
                 timings_first=timings_first) as got:
    assert got is not timings_first
  later = threading.Thread(target=hold, args=("later check", False))
  later.start()
  if not timings_first:
    _until(lambda: "later check" in order)
  time.sleep(0.05)
  first_may_end.set()
  for t in (first, timing, later):
    t.join(10)
  assert not any(t.is_alive() for t in (first, timing, later)), "deadlock"
  assert order == (["first check", "timing", "later check"] if timings_first
                   else ["first check", "later check", "timing"])
  assert not _turnstile_closed(tmp_path)  # opened again once the timing held every slot


@pytest.mark.parametrize("widths", [[1] * 6 + [4] * 3, [2, 2, 1, 1, 4, 3, 1, 4]],
                         ids=["ones", "mixed"])
def test_timings_first_never_overlaps_a_timing_and_never_deadlocks(tmp_path, widths):
  slots, rec = 4, SlotRecorder(4)
  exclusive_rec = Recorder()

  def work(width: int):
    exclusive = width == slots
    for _ in range(4):
      with gpu_slots(0, slots, exclusive, lock_dir=str(tmp_path), width=width,
                     timings_first=True):
        rec.enter(width)
        exclusive_rec.enter(exclusive)
        time.sleep(0.02)
        exclusive_rec.leave(exclusive)
        rec.leave(width)

  _run_all(work, widths)
  assert not rec.violations and not exclusive_rec.violations
  assert rec.most_holders >= 1


def test_timings_first_with_one_slot_takes_no_turnstile(tmp_path):
  with gpu_slots(0, 1, False, lock_dir=str(tmp_path), timings_first=True) as held:
    assert held
  assert not any(p.name.endswith("timings_first.lock") for p in tmp_path.iterdir())

"""The judges' GPU coordination (judge.gpu_slots), exercised with threads on the CPU.

Shared holders (untimed checks) may overlap up to the slot count; an exclusive holder (timing)
overlaps with nobody. With one slot, every hold is exclusive, as the sandbox has always been.
With alone_first (the default), a judge waiting to hold the GPU alone goes before checks that
ask after it.
"""

from __future__ import annotations

import threading
import time

import pytest

from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox.judge import gpu_slots


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


def _hammer(tmp_path, slots: int, kinds: list[bool], hold_s: float = 0.05,
            alone_first: bool = True) -> Recorder:
  rec = Recorder()

  def work(exclusive: bool):
    for _ in range(3):
      with gpu_slots(0, slots, exclusive, lock_dir=str(tmp_path), alone_first=alone_first):
        rec.enter(exclusive)
        time.sleep(hold_s)
        rec.leave(exclusive)

  threads = [threading.Thread(target=work, args=(k,)) for k in kinds]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout=60)
  assert not any(t.is_alive() for t in threads), "deadlock"
  return rec


def test_shared_holders_overlap_up_to_the_slot_count(tmp_path):
  rec = _hammer(tmp_path, slots=3, kinds=[False] * 6)
  assert not rec.violations
  assert rec.max_shared == 3  # 6 threads, 3 slots: they do overlap, and never more than 3


@pytest.mark.parametrize("alone_first", [True, False])
def test_exclusive_holders_overlap_with_nobody(tmp_path, alone_first):
  rec = _hammer(tmp_path, slots=4, kinds=[False] * 5 + [True] * 3, alone_first=alone_first)
  assert not rec.violations, rec.violations[:3]
  assert rec.max_shared >= 2


def test_a_judge_waiting_alone_goes_before_checks_that_ask_after_it(tmp_path):
  """A check runs; a judge asks for the GPU alone; another check asks after it. With 4 slots,
  3 free, that check could start at once, but it starts only after the alone holder is done."""
  entered, lock = [], threading.Lock()

  def hold(name: str, exclusive: bool, start_after_s: float, hold_s: float):
    time.sleep(start_after_s)
    with gpu_slots(0, 4, exclusive, lock_dir=str(tmp_path)):
      with lock:
        entered.append((name, time.perf_counter()))
      time.sleep(hold_s)
    with lock:
      entered.append((name + " done", time.perf_counter()))

  threads = [threading.Thread(target=hold, args=args) for args in
             (("check", False, 0.0, 0.4), ("alone", True, 0.1, 0.1), ("late check", False, 0.2, 0.0))]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout=30)
  order = [name for name, _ in sorted(entered, key=lambda e: e[1])]
  assert order == ["check", "check done", "alone", "alone done", "late check", "late check done"]


def test_checks_share_the_gpu_when_nobody_waits_for_it_alone(tmp_path):
  """The gate costs checks nothing by themselves: with no alone holder they still overlap."""
  rec = _hammer(tmp_path, slots=4, kinds=[False] * 8, hold_s=0.1)
  assert not rec.violations and rec.max_shared == 4


def test_one_slot_is_one_holder_at_a_time(tmp_path):
  rec = _hammer(tmp_path, slots=1, kinds=[False] * 4)
  assert not rec.violations and rec.max_shared == 1


def test_gpu_concurrency_must_be_positive():
  with pytest.raises(ValueError, match="gpu_concurrency"):
    SandboxConfig(gpu_concurrency=0)

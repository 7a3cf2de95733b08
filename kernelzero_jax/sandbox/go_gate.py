"""When a worker that waits for its go may have it (judge.Judge._reference_first).

A judge may time the reference before its worker imports the candidate, so that none of the
candidate's code runs in a process with a GPU meanwhile. The go comes from the judge (a Triton
worker's, at the latest at a deadline) or from the prebuilder's hand-over (a CUDA worker's, once
the prebuilder is done). Either way it comes once, never while the judge times the reference,
and the judge times the reference first only if the go has not come yet.
"""

from __future__ import annotations

import threading
import time


class GoGate:
  """The go's bookkeeping; whoever opens the gate sends the go."""

  def __init__(self):
    self._cond = threading.Condition()
    self._timing = False
    self.opened_at: float | None = None  # time.perf_counter() when the go was let out

  def claim(self) -> bool:
    """The judge is about to time the reference: True, and the gate stays shut until release(),
    unless it is open already (False: the worker may be running the candidate's code)."""
    with self._cond:
      if self.opened_at is not None:
        return False
      self._timing = True
      return True

  def release(self) -> None:
    with self._cond:
      self._timing = False
      self._cond.notify_all()

  def open(self) -> bool:
    """Waits while the judge times the reference, then opens the gate for good. True for the
    call that opened it (that caller sends the go), False for any later one."""
    with self._cond:
      while self._timing:
        self._cond.wait()
      if self.opened_at is not None:
        return False
      self.opened_at = time.perf_counter()
      return True

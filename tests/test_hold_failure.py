"""A failure under a GPU hold gives the evaluation's GPU memory back before the hold ends
(judge.Judge._holding, _give_back_after_failure, drop_tracebacks).

On an H200, judges whose kept worker's candidate failed held 19-31 GiB through the whole new
evaluation that judged it again, in no hold, and candidates beside them ran out of memory
(BENCHMARKS.md). What held it: the failed steps' frames, kept alive by the failure's traceback,
and the allocator's cached blocks. On the CPU, with the GPU's lock files in a temporary directory:
that those frames are gone and the worker killed while the slots are still held, and that the
failure still ends the evaluation with its own status and reason.
"""

from __future__ import annotations

import fcntl
import types
import weakref

import pytest
import torch

from test_reference_first import make_judge  # noqa: F401  pylint: disable=unused-import
from kernelzero_jax.sandbox import gpu_budget
from kernelzero_jax.sandbox import judge as judge_lib
from kernelzero_jax.sandbox import judge_gpu
from kernelzero_jax.sandbox import timing
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox import worker_handle


def _slot_free(slot: int = 0) -> bool:
  """Whether another judge could take `slot` of GPU 0 now (gpu_budget.gpu_slots' lock files)."""
  with open(gpu_budget._lock_path(0, slot, None), "a+") as f:  # pylint: disable=protected-access
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      return False
    fcntl.flock(f, fcntl.LOCK_UN)
    return True


def _fails_holding(alive: list, chained: bool):
  """A step that fails with a tensor of its own alive in its frame: a StageFailure, or (chained)
  a StageFailure raised from a reference's error whose frame holds the tensor."""
  def forward():
    outputs = torch.ones(8)
    alive.append(weakref.ref(outputs))
    raise RuntimeError("CUDA out of memory")

  def step():
    inputs = torch.zeros(8)
    alive.append(weakref.ref(inputs))
    if not chained:
      raise worker_handle.StageFailure(V.INCORRECT, "correctness: outputs differ")
    try:
      forward()
    except RuntimeError as e:
      raise worker_handle.StageFailure(V.RUNTIME_ERROR, f"reference forward failed: {e}") from e
  return step


@pytest.mark.parametrize("chained", [False, True])
def test_a_failed_steps_tensors_are_gone_before_its_memory_is_given_back(chained):
  alive, seen = [], []
  stub = types.SimpleNamespace(
      _give_back_after_failure=lambda: seen.append([ref() is None for ref in alive]))
  ran = []
  with pytest.raises(worker_handle.StageFailure) as raised:
    judge_lib.Judge._holding(stub, lambda: ran.append(1), _fails_holding(alive, chained),  # pylint: disable=protected-access
                             lambda: ran.append(3))
  assert ran == [1]  # the steps after the failure do not run
  assert seen == [[True] * len(alive)] and len(alive) == (2 if chained else 1)
  assert raised.value.status == (V.RUNTIME_ERROR if chained else V.INCORRECT)


def test_a_traceback_kept_would_keep_them():
  """What the test above rules out: a failure caught and kept, as a with statement's exit keeps
  it, keeps its frames' tensors."""
  alive = []
  try:
    _fails_holding(alive, chained=True)()
  except worker_handle.StageFailure as e:
    kept = e
  assert all(ref() is not None for ref in alive)
  judge_gpu.drop_tracebacks(kept)
  assert all(ref() is None for ref in alive)


def test_steps_that_pass_give_nothing_back():
  seen = []
  stub = types.SimpleNamespace(_give_back_after_failure=lambda: seen.append(1))
  judge_lib.Judge._holding(stub, lambda: None, lambda: None)  # pylint: disable=protected-access
  assert not seen


class _Killed:
  """A worker whose kill records whether the failed steps' tensors were gone by then and
  whether the GPU's slots were still held."""

  start_method = "fork"
  pid = None

  def __init__(self, alive: list):
    self.alive, self.killed = alive, []

  def kill(self):
    self.killed.append({"tensors_gone": all(ref() is None for ref in self.alive),
                        "slot_held": not _slot_free()})


def test_a_reference_that_fails_under_the_hold_gives_its_memory_back_before_the_hold_ends(
    make_judge, monkeypatch):  # pylint: disable=redefined-outer-name
  """The judge's measuring of the reference before its candidate (_reference_first), on the
  CPU: the reference's timing runs out of memory with an input set of its own alive."""
  judge, _, _ = make_judge()
  alive = []

  def runs_out(*args, **kwargs):
    del args, kwargs
    inputs = torch.zeros(8)
    alive.append(weakref.ref(inputs))
    raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB")

  monkeypatch.setattr(timing, "time_forward", runs_out)
  worker = _Killed(alive)
  judge.worker = worker
  with pytest.raises(RuntimeError, match="Tried to allocate 6.00 GiB"):
    judge._reference_first()  # pylint: disable=protected-access
  assert worker.killed == [{"tensors_gone": True, "slot_held": True}]
  assert judge.worker is None and judge.ref_model is None
  assert _slot_free()  # and then the hold ended
  assert len(judge.verdict.evidence["gpu_holds"]) == 1


def test_on_a_gpu_the_judges_cached_blocks_are_freed_after_the_worker():
  order = []
  fake_torch = types.SimpleNamespace(
      cuda=types.SimpleNamespace(empty_cache=lambda: order.append("empty_cache")))
  worker = types.SimpleNamespace(kill=lambda: order.append("kill"))
  stub = types.SimpleNamespace(worker=worker, ref_model=object(), torch=fake_torch,
                               device=torch.device("cuda", 0))
  judge_lib.Judge._give_back_after_failure(stub)  # pylint: disable=protected-access
  assert order == ["kill", "empty_cache"]
  assert stub.worker is None and stub.ref_model is None
  # Before a device (a failure that early holds nothing): nothing to free on it.
  early = types.SimpleNamespace(worker=None, ref_model=None, torch=fake_torch, device=None)
  judge_lib.Judge._give_back_after_failure(early)  # pylint: disable=protected-access
  assert order == ["kill", "empty_cache"]

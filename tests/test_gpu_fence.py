"""The GPU's start-up fence (gpu_fence.py): start-ups share it, a timing has it alone, and a
timing that waits for it is not starved by start-ups that come after it. Threads stand in for
judges (flock's locks belong to each open file, so two in one process exclude each other)."""

from __future__ import annotations

import threading
import time

import pytest

from kernelzero_jax.sandbox import gpu_fence

WAIT_S = 0.3  # long enough for a thread that could take the fence to have taken it


def _enter(lock_dir, timing: bool, order: list, name: str, holding_gpu: bool = False,
           waits: list | None = None, slots: int = 0):
  """A thread that takes the fence (as one of at most `slots` start-ups, if not 0), notes `name`
  in `order` (and the seconds it waited in `waits`), and holds it until released."""
  taken, release = threading.Event(), threading.Event()

  def hold():
    with gpu_fence.startup_fence(0, timing, str(lock_dir), holding_gpu=holding_gpu,
                                 startup_slots=slots) as waited:
      order.append(name)
      if waits is not None:
        waits.append(waited)
      taken.set()
      release.wait(10)
  thread = threading.Thread(target=hold, daemon=True)
  thread.start()
  return taken, release, thread


def test_start_ups_share_the_fence(tmp_path):
  order = []
  first = _enter(tmp_path, False, order, "a")
  assert first[0].wait(5)
  second = _enter(tmp_path, False, order, "b")
  assert second[0].wait(5)  # while the first still holds it
  for _, release, thread in (first, second):
    release.set()
    thread.join(5)
  assert order == ["a", "b"]


def test_at_most_the_start_up_slots_hold_the_fence_and_a_timing_waits_for_those_only(tmp_path):
  order = []
  first = _enter(tmp_path, False, order, "a", slots=2)
  assert first[0].wait(5)
  second = _enter(tmp_path, False, order, "b", slots=2)
  assert second[0].wait(5)
  third = _enter(tmp_path, False, order, "c", slots=2)
  assert not third[0].wait(WAIT_S)  # both slots are taken
  first[1].set()
  assert third[0].wait(5)  # the first's slot
  timing = _enter(tmp_path, True, order, "timing", slots=2)  # a timing takes no slot
  assert not timing[0].wait(WAIT_S)
  for _, release, thread in (second, third):
    release.set()
    thread.join(5)
  assert timing[0].wait(5)
  timing[1].set()
  assert order == ["a", "b", "c", "timing"]


def test_a_timing_waits_for_start_ups_and_start_ups_for_a_timing(tmp_path):
  order = []
  start_up = _enter(tmp_path, False, order, "start-up")
  assert start_up[0].wait(5)
  timing = _enter(tmp_path, True, order, "timing")
  assert not timing[0].wait(WAIT_S)
  start_up[1].set()
  assert timing[0].wait(5)
  late = _enter(tmp_path, False, order, "late start-up")
  assert not late[0].wait(WAIT_S)
  timing[1].set()
  assert late[0].wait(5)
  late[1].set()
  assert order == ["start-up", "timing", "late start-up"]


def test_a_waiting_timing_goes_before_start_ups_that_come_after_it(tmp_path):
  order = []
  first = _enter(tmp_path, False, order, "first start-up")
  assert first[0].wait(5)
  timing = _enter(tmp_path, True, order, "timing")
  assert not timing[0].wait(WAIT_S)
  # Without the turnstile this one would share the fence with the first at once, and a stream
  # of them would keep the timing out.
  second = _enter(tmp_path, False, order, "second start-up")
  assert not second[0].wait(WAIT_S)
  first[1].set()
  assert timing[0].wait(5)
  assert not second[0].wait(WAIT_S)
  timing[1].set()
  assert second[0].wait(5)
  second[1].set()
  assert order == ["first start-up", "timing", "second start-up"]


def test_the_waited_seconds_are_yielded_and_the_lock_files_are_the_gpus(tmp_path):
  turnstile, fence = gpu_fence.fence_paths(3, str(tmp_path))
  assert turnstile.endswith("kernelzero_sandbox_gpu3.turnstile.lock")
  assert fence.endswith("kernelzero_sandbox_gpu3.startups.lock")
  with gpu_fence.startup_fence(3, True, str(tmp_path)) as waited:
    assert 0.0 <= waited < WAIT_S
  # another GPU's fence is another pair of files
  with gpu_fence.startup_fence(3, True, str(tmp_path)), \
      gpu_fence.startup_fence(4, True, str(tmp_path)):
    pass


def test_the_throughput_benchmark_sums_the_fence_waits_and_the_setup_profiler():
  from benchmarks.sandbox_throughput import start_ups_apart  # pylint: disable=import-outside-toplevel
  rows = [
      {"evidence": {"fence_wait_s": {"device": 0.25, "candidate_timing": 0.125},
                    "setup_gpu": {"import": {"kernel_ms": 0.0, "profiler_s": 0.05},
                                  "constructor": {"kernel_ms": 2.5, "profiler_s": 0.03}}}},
      {"evidence": {"fence_wait_s": {"device": 0.5}}},
      {"evidence": None},
      {},
  ]
  assert start_ups_apart(rows) == {
      "fence_wait_s": {"candidate_timing": 0.125, "device": 0.75}, "setup_profiled": 1,
      "setup_profiler_s": 0.08, "setup_kernel_ms_max": 2.5}


def test_a_timing_that_holds_the_gpu_does_not_wait_for_one_waiting_for_the_gpu(tmp_path):
  """Judge A holds every GPU slot (its whole evaluation, or the reference first) and times;
  judge B took the fence for its timing and waits for the slots. Were A to wait for the fence,
  neither would go on. A goes on without the fence, which B holds, keeping start-ups out."""
  from kernelzero_jax.sandbox.gpu_budget import gpu_slots  # pylint: disable=import-outside-toplevel
  order = []
  b_holds_fence = threading.Event()

  def judge_b():
    with gpu_fence.startup_fence(0, True, str(tmp_path)):
      b_holds_fence.set()
      with gpu_slots(0, 4, exclusive=True, lock_dir=str(tmp_path)):
        order.append("B times")
  with gpu_slots(0, 4, exclusive=True, lock_dir=str(tmp_path)):
    b = threading.Thread(target=judge_b, daemon=True)
    b.start()
    assert b_holds_fence.wait(5)
    with gpu_fence.startup_fence(0, True, str(tmp_path), holding_gpu=True) as waited:
      order.append("A times")
      assert waited < WAIT_S
      # B holds the fence alone: no start-up can begin meanwhile
      start_up = _enter(tmp_path, False, order, "start-up")
      assert not start_up[0].wait(WAIT_S)
  b.join(5)
  assert not b.is_alive()
  assert start_up[0].wait(5)
  start_up[1].set()
  assert order == ["A times", "B times", "start-up"]


def test_a_timing_that_holds_the_gpu_waits_for_start_ups_and_keeps_new_ones_out(tmp_path):
  order, waits = [], []
  under_way = _enter(tmp_path, False, order, "start-up under way")
  assert under_way[0].wait(5)
  timing = _enter(tmp_path, True, order, "timing", holding_gpu=True, waits=waits)
  assert not timing[0].wait(WAIT_S)
  under_way[1].set()
  assert timing[0].wait(5)
  late = _enter(tmp_path, False, order, "late start-up")
  assert not late[0].wait(WAIT_S)  # alone: no start-up while it times
  timing[1].set()
  assert waits[0] >= WAIT_S and late[0].wait(5)
  late[1].set()
  assert order == ["start-up under way", "timing", "late start-up"]


def test_only_a_timing_takes_the_fence_while_holding_the_gpu(tmp_path):
  with pytest.raises(ValueError, match="only a timing"):
    with gpu_fence.startup_fence(0, False, str(tmp_path), holding_gpu=True):
      pass


def test_a_judge_takes_a_start_up_slot_for_its_context_only(tmp_path, monkeypatch):
  # The judge's own steps (judge.Judge._fence): its context creation ("device") waits for one
  # of the start-up slots; its upload and warm-up, in the context that exists, pass while every
  # slot is held (they still wait for a timing: the fence itself).
  from kernelzero_jax.sandbox import judge as judge_lib  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import verdict as verdict_lib  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.config import SandboxConfig  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(gpu_fence.tempfile, "gettempdir", lambda: str(tmp_path))

  class _JudgeSteps:
    _fence = judge_lib.Judge._fence
    _in_fence = judge_lib.Judge._in_fence
    cfg = SandboxConfig(device="cuda", startups_at_once=2)
    job = {"gpu_index": 0}
    verdict = verdict_lib.Verdict(status="runtime_error", backend="cuda")
    _fence_held = False

  steps = _JudgeSteps()
  order = []
  holders = []
  for name in ("a", "b"):
    holders.append(_enter(tmp_path, False, order, name, slots=2))
    assert holders[-1][0].wait(5)

  def step(name: str, slot: bool) -> threading.Event:
    entered = threading.Event()

    def run():
      with steps._fence(name, timing=False, slot=slot):  # pylint: disable=protected-access
        order.append(name)
        entered.set()
    threading.Thread(target=run, daemon=True).start()
    return entered
  assert step("upload", slot=False).wait(5)  # while both slots are held
  assert step("warm_up", slot=False).wait(5)
  device_entered = step("device", slot=True)
  assert not device_entered.wait(WAIT_S)  # both slots are held
  holders[0][1].set()
  assert device_entered.wait(5)
  for _, release, holder in holders:
    release.set()
    holder.join(5)
  assert order == ["a", "b", "upload", "warm_up", "device"]
  assert set(steps.verdict.evidence["fence_wait_s"]) == {"upload", "warm_up", "device"}


def test_a_timing_that_may_wait_a_while_gets_the_fence_once_start_ups_leave(tmp_path):
  order = []
  under_way = _enter(tmp_path, False, order, "start-up under way")
  assert under_way[0].wait(5)
  threading.Timer(WAIT_S, under_way[1].set).start()
  with gpu_fence.timing_fence_within(0, 5.0, str(tmp_path)) as waited:
    assert waited is not None and waited >= WAIT_S * 0.9
    late = _enter(tmp_path, False, order, "late start-up")
    assert not late[0].wait(WAIT_S)  # held alone
  assert late[0].wait(5)
  late[1].set()
  assert order == ["start-up under way", "late start-up"]


def test_a_timing_that_may_wait_a_while_gives_up_after_its_patience_and_keeps_nothing(tmp_path):
  order = []
  under_way = _enter(tmp_path, False, order, "start-up under way")
  assert under_way[0].wait(5)
  with gpu_fence.timing_fence_within(0, WAIT_S, str(tmp_path)) as waited:
    assert waited is None
  # neither the fence nor the turnstile kept: a start-up begins beside the one under way
  another = _enter(tmp_path, False, order, "another start-up")
  assert another[0].wait(5)
  under_way[1].set()
  another[1].set()


def test_a_timing_that_may_wait_a_while_gives_up_at_once_behind_another_timing(tmp_path):
  order = []
  other = _enter(tmp_path, True, order, "another timing")
  assert other[0].wait(5)
  t0 = time.perf_counter()
  with gpu_fence.timing_fence_within(0, 10.0, str(tmp_path)) as waited:
    assert waited is None
  assert time.perf_counter() - t0 < 1.0
  other[1].set()


def test_a_reference_with_nothing_to_move_is_uploaded_without_the_fence(monkeypatch):
  """Judge._upload_at_start: a reference with parameters or buffers, or whose class moves
  itself, takes the fence for its upload; one with neither (a level-1 ReLU) moves without it,
  unless SandboxConfig.fence_empty_uploads asks for the fence as before."""
  import contextlib  # pylint: disable=import-outside-toplevel
  import dataclasses  # pylint: disable=import-outside-toplevel
  import types  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge as judge_lib  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge_gpu  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.config import SandboxConfig  # pylint: disable=import-outside-toplevel
  fenced = []

  @contextlib.contextmanager
  def fence(name, timing, slot=True):
    assert (timing, slot) == (False, False)
    fenced.append(name)
    yield

  class MovesItself(torch.nn.Module):
    def to(self, *args, **kwargs):  # pylint: disable=invalid-overridden-method
      return self

  class OwnApply(torch.nn.Module):
    def _apply(self, fn, recurse=True):
      return self

  class WithChild(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.child = OwnApply()

  config = SandboxConfig(device="cpu")
  judge = types.SimpleNamespace(torch=torch, device=torch.device("cpu"), cfg=config,
                                verdict=types.SimpleNamespace(evidence={}), _fence=fence)
  # pylint: disable=protected-access
  judge._to_device = types.MethodType(judge_lib.Judge._to_device, judge)
  upload = types.MethodType(judge_lib.Judge._upload_at_start, judge)
  for model, takes_fence in ((torch.nn.ReLU(), False), (torch.nn.Linear(2, 2), True),
                             (torch.nn.BatchNorm1d(2, affine=False), True),
                             (MovesItself(), True), (WithChild(), True)):
    fenced.clear()
    assert upload(model) is model  # (on the CPU, moved in place)
    assert fenced == (["upload"] if takes_fence else []), type(model).__name__
    assert judge_gpu.moves_nothing(torch, model) is not takes_fence
  judge.cfg = dataclasses.replace(config, fence_empty_uploads=True)
  fenced.clear()
  upload(torch.nn.ReLU())
  assert fenced == ["upload"]


def test_a_reference_with_tensors_may_wait_on_the_cpu_for_its_first_hold():
  """Judge._reference_waits_for_a_hold: with SandboxConfig.reference_upload_in_hold, on a GPU,
  a reference with something to move waits for a hold instead of the start-up fence; one with
  nothing moves at once (unfenced); a reference whose weights stay apart always waits."""
  import types  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge as judge_lib  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.config import SandboxConfig  # pylint: disable=import-outside-toplevel
  for in_hold, device, model, apart, waits in (
      (True, "cuda", torch.nn.Linear(2, 2), False, True),
      (True, "cuda", torch.nn.ReLU(), False, False),
      (True, "cpu", torch.nn.Linear(2, 2), False, False),
      (False, "cuda", torch.nn.Linear(2, 2), False, False),
      (False, "cuda", torch.nn.ReLU(), True, True)):
    judge = types.SimpleNamespace(
        torch=torch, cfg=SandboxConfig(device=device, reference_upload_in_hold=in_hold),
        device=types.SimpleNamespace(type=device), _weights_apart=apart)
    assert judge_lib.Judge._reference_waits_for_a_hold(  # pylint: disable=protected-access
        judge, model) is waits, (in_hold, device, model, apart)

"""The GPU's start-up fence (gpu_fence.py): start-ups share it, a timing has it alone, and a
timing that waits for it is not starved by start-ups that come after it. Threads stand in for
judges (flock's locks belong to each open file, so two in one process exclude each other)."""

from __future__ import annotations

import threading

from kernelzero_jax.sandbox import gpu_fence

WAIT_S = 0.3  # long enough for a thread that could take the fence to have taken it


def _enter(lock_dir, timing: bool, order: list, name: str):
  """A thread that takes the fence, notes `name` in `order`, and holds it until released."""
  taken, release = threading.Event(), threading.Event()

  def hold():
    with gpu_fence.startup_fence(0, timing, str(lock_dir)):
      order.append(name)
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

"""setup_windows: the windows in which candidates' code ran outside every GPU hold, opened and
closed by other (real) processes, as judges do, and what a timing that overlapped them is told;
and the judge's and worker's parts: the kernel time a window closes with, a disturbed timing's
evidence, a failed import's profile."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types

import pytest

from kernelzero_jax.sandbox import setup_windows
from kernelzero_jax.sandbox.config import SandboxConfig

# Another process's window: opened at once (its handle printed), closed with the kernel time read
# from stdin ("none": unknown; "exit": ends without closing it).
OTHER = textwrap.dedent("""
    import sys
    from kernelzero_jax.sandbox import setup_windows
    handle = setup_windows.open_window(0, "import", sys.argv[1])
    print(handle, flush=True)
    line = sys.stdin.readline().strip()
    if line != "exit":
      setup_windows.close_window(handle, None if line == "none" else float(line))
    print("done", flush=True)
""")


class Other:
  """A process that holds a window open on GPU 0 of `lock_dir` until `close` is called."""

  def __init__(self, lock_dir):
    self.proc = subprocess.Popen([sys.executable, "-c", OTHER, str(lock_dir)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self.handle = self.proc.stdout.readline().strip()
    self.opened = time.time()

  def close(self, kernel_ms="0"):
    self.proc.stdin.write(f"{kernel_ms}\n")
    self.proc.stdin.flush()
    assert self.proc.stdout.readline().strip() == "done"
    self.proc.wait(timeout=10)


def _window(lock_dir, kernel_ms):
  """Another process's window, opened and closed now with `kernel_ms`."""
  other = Other(lock_dir)
  other.close(kernel_ms)
  return other.opened


def test_windows_without_kernels_leave_nothing_and_disturb_nothing(tmp_path):
  start = time.time()
  _window(tmp_path, "0")
  _window(tmp_path, "0.5")  # under DISTURBING_KERNEL_MS
  assert os.listdir(setup_windows.window_dir(0, str(tmp_path))) == []
  found = setup_windows.disturbances(0, start, time.time(), wait_s=1.0, lock_dir=str(tmp_path))
  assert found["disturbing"] == [] and found["unresolved"] == []


def test_a_window_with_kernels_disturbs_the_timings_it_overlapped_and_no_other(tmp_path):
  before = time.time()
  time.sleep(0.05)
  opened = _window(tmp_path, "2020.5")
  after = time.time()
  lock = str(tmp_path)
  found = setup_windows.disturbances(0, before, after, wait_s=0.0, lock_dir=lock)
  assert [(w["kind"], w["kernel_ms"]) for w in found["disturbing"]] == [("import", 2020.5)]
  assert found["disturbing"][0]["from_s"] == pytest.approx(opened - before, abs=0.05)
  assert setup_windows.disturbances(0, before - 10, before, 0.0, lock)["disturbing"] == []
  assert setup_windows.disturbances(0, after + 0.01, after + 5, 0.0, lock)["disturbing"] == []
  # Unknown kernels (the worker died before it replied) count as disturbing.
  _window(tmp_path, "none")
  found = setup_windows.disturbances(0, before, time.time(), 0.0, lock)
  assert sorted(w["kernel_ms"] is None for w in found["disturbing"]) == [False, True]


def test_a_timing_waits_for_an_overlapping_window_to_close(tmp_path):
  lock = str(tmp_path)
  other = Other(tmp_path)
  start, end = time.time(), time.time() + 0.01
  closer = threading.Timer(0.3, other.close, args=("5",))
  closer.start()
  found = setup_windows.disturbances(0, start, end, wait_s=10.0, lock_dir=lock)
  closer.join()
  assert [w["kernel_ms"] for w in found["disturbing"]] == [5.0]
  assert found["unresolved"] == [] and 0.25 <= found["waited_s"] < 5


def test_a_window_still_open_at_the_deadline_is_unresolved_and_a_dead_owners_counts(tmp_path):
  lock = str(tmp_path)
  other = Other(tmp_path)
  start = time.time()
  found = setup_windows.disturbances(0, start, start + 0.01, wait_s=0.2, lock_dir=lock)
  assert found["disturbing"] == [] and len(found["unresolved"]) == 1
  assert 0.2 <= found["waited_s"] < 2
  other.close("exit")  # its process ends with the window open: its kernels are unknown
  found = setup_windows.disturbances(0, start, start + 0.01, wait_s=5.0, lock_dir=lock)
  assert [(w["kernel_ms"], w.get("owner_gone")) for w in found["disturbing"]] == [(None, True)]
  assert found["waited_s"] < 1


def test_this_process_s_own_windows_never_count(tmp_path):
  lock = str(tmp_path)
  start = time.time()
  handle = setup_windows.open_window(0, "constructor", lock)
  found = setup_windows.disturbances(0, start, time.time() + 1, wait_s=5.0, lock_dir=lock)
  assert found == {"disturbing": [], "unresolved": [], "waited_s": found["waited_s"]}
  assert found["waited_s"] < 1
  setup_windows.close_window(handle, 100.0)
  assert setup_windows.disturbances(0, start, time.time(), 0.0, lock)["disturbing"] == []
  setup_windows.close_window(handle, 100.0)  # closed twice: nothing happens


def test_old_closed_windows_are_deleted_and_other_gpus_are_apart(tmp_path):
  lock = str(tmp_path)
  directory = setup_windows.window_dir(0, lock)
  os.makedirs(directory)
  old = time.time() - setup_windows.KEEP_CLOSED_S - 5
  with open(os.path.join(directory, "1-old.closed"), "w") as f:
    json.dump({"pid": 1, "kind": "import", "start": old - 1, "end": old, "kernel_ms": 9.0}, f)
  assert setup_windows.disturbances(0, old - 2, old + 1, 0.0, lock)["disturbing"] == []
  assert os.listdir(directory) == []
  _window(tmp_path, "9")
  assert setup_windows.disturbances(1, 0, time.time() + 1, 0.0, lock)["disturbing"] == []


class _Judge:
  """What GpuSteps' window methods read of a Judge."""

  def __init__(self, device="cuda"):
    from kernelzero_jax.sandbox import judge_gpu  # pylint: disable=import-outside-toplevel
    from kernelzero_jax.sandbox import verdict as V  # pylint: disable=import-outside-toplevel
    self.cfg = SandboxConfig(device=device)
    self.job = {"gpu_index": 0}
    self.verdict = V.Verdict(status=V.RUNTIME_ERROR, backend="cuda", device=device)
    self._setup_windows = {}
    for name in ("_open_setup_window", "_close_setup_window", "_timing_disturbed",
                 "_stretched_timings"):
      setattr(self, name, types.MethodType(getattr(judge_gpu.GpuSteps, name), self))


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  return tmp_path


@pytest.mark.parametrize("reply, kept", [
    ({"ok": True, "setup_gpu": {"kernels": 2, "kernel_ms": 2020.2}}, 2020.2),
    ({"ok": False, "status": "compile_error", "setup_gpu": {"kernel_ms": 3.5}}, 3.5),
    (None, None),  # no reply: the worker died or hung
    ({"ok": True}, "gone"),  # no profile (no profiler there): no kernels seen
    ({"ok": True, "setup_gpu": {"kernel_ms": 0.0}}, "gone"),
    ({"ok": True, "setup_gpu": {"kernel_ms": float("nan")}}, "gone"),
    ({"ok": True, "setup_gpu": {"kernel_ms": True}}, "gone"),
    ({"ok": True, "setup_gpu": "much"}, "gone"),
])
def test_a_judge_closes_its_window_with_its_workers_kernel_time(own_tmp, reply, kept):
  judge = _Judge()
  judge._open_setup_window("import")
  judge._open_setup_window("import")  # one window a kind
  directory = setup_windows.window_dir(0)
  assert len(os.listdir(directory)) == 1
  judge._close_setup_window("import", reply)
  judge._close_setup_window("import", reply)  # closed already: nothing
  names = os.listdir(directory)
  if kept == "gone":
    assert names == []
  else:
    assert len(names) == 1 and names[0].endswith(".closed")
    with open(os.path.join(directory, names[0])) as f:
      assert json.load(f)["kernel_ms"] == kept


def test_a_cpu_judge_opens_no_window(own_tmp):
  judge = _Judge(device="cpu")
  judge._open_setup_window("import")
  assert judge._setup_windows == {}
  assert judge._timing_disturbed(0.0, time.time(), retimed=True) is False


def test_a_window_with_kernels_beside_a_timing_is_told_but_disturbs_only_a_stretched_one(own_tmp):
  """The windows say whose code ran beside a timing; the stretched interval says whether it
  disturbed the timing (on an H100, none of 83 timings that only overlapped a window was off)."""
  judge = _Judge()
  start = time.time()
  assert judge._timing_disturbed(start, time.time(), retimed=True) is False
  assert "timing_disturbed" not in judge.verdict.evidence
  _window(own_tmp, "2020")
  judge.verdict.candidate_ms, judge.verdict.reference_ms = 39.7, 6.3
  quiet, stretched = {"candidate": 0.1}, {"reference": 0.1, "candidate": 2.386}
  assert judge._timing_disturbed(start, time.time(), retimed=True, after_forward=quiet) is False
  assert judge._timing_disturbed(start, time.time(), retimed=True, after_forward=stretched)
  assert judge._timing_disturbed(start, time.time(), retimed=False, after_forward=stretched)
  told = judge.verdict.evidence["timing_disturbed"]
  assert [(t["candidate_ms"], t["reference_ms"], t["after_forward_ms"], t["retimed"])
          for t in told] == [(39.7, 6.3, {}, False), (39.7, 6.3, {"candidate": 2.386}, True),
                             (39.7, 6.3, {"candidate": 2.386}, False)]
  assert [[w["kernel_ms"] for w in t["windows"]] for t in told] == [[2020.0]] * 3
  assert judge.verdict.evidence["setup_window_wait_s"] >= 0


def test_the_config_refuses_negative_retimes_and_waits():
  for bad in ({"retime_disturbed": -1}, {"setup_window_wait_s": -0.1}):
    with pytest.raises(ValueError, match="retime_disturbed"):
      SandboxConfig(**bad)


def test_a_failed_import_still_reports_its_kernels():
  """worker_build._outside_the_hold: an import that ran kernels and then raised keeps their
  profile for its failure's reply (a cheat could otherwise disturb timings and hide it)."""
  from kernelzero_jax.sandbox import worker_build  # pylint: disable=import-outside-toplevel

  class Evidence:
    @staticmethod
    def trace_gpu(run):
      return run(), [{"cat": "kernel", "dur": 2_000_000, "name": "occupy_kernel"}]

    @staticmethod
    def gpu_work_summary(events):
      return {"kernels": len(events), "kernel_ms": sum(e["dur"] for e in events) / 1e3}

    @staticmethod
    def setup_gpu_violation(summary, where, limit):
      return None

  worker = types.SimpleNamespace(spec={"setup_kernel_ms_limit": 50.0},
                                 device=types.SimpleNamespace(type="cuda"), profiler_works=True,
                                 evidence=Evidence, failed_setup_gpu=None)
  outside = types.MethodType(worker_build.BuildSteps._outside_the_hold, worker)
  failed = types.MethodType(worker_build.BuildSteps.with_failed_setup, worker)

  def raising():
    raise ImportError("broken after its kernels")
  with pytest.raises(ImportError, match="broken after its kernels"):
    outside("at import", raising)
  assert failed({"ok": False})["setup_gpu"] == {"kernels": 1, "kernel_ms": 2000.0}
  result, summary = outside("at import", lambda: "module")
  assert result == "module" and summary["kernel_ms"] == 2000.0
  assert worker.failed_setup_gpu is None and "setup_gpu" not in failed({"ok": False})


@pytest.mark.parametrize("disturbed, retimes, timed, shared", [
    ([False], 2, 1, True),
    ([True, False], 2, 2, True),  # made again once, clean then: the reference's time shared
    ([True, True, True], 2, 3, False),  # disturbed every time: the last stands, nothing shared
    ([True], 0, 1, False),  # retime_disturbed 0: only told
])
def test_a_disturbed_timing_is_made_again_up_to_the_configured_times(disturbed, retimes, timed,
                                                                    shared):
  """Judge._timed_apart: each timing in its own fence and hold of the whole GPU, then asked
  whether it was disturbed (here, as the list says in turn)."""
  import contextlib  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge_checks  # pylint: disable=import-outside-toplevel
  calls, asked, holds = [], [], []
  answers = iter(disturbed)

  def timing_disturbed(start, end, retimed, after_forward):
    asked.append(retimed)
    # The span of the timing just made (Judge.timing_span), not of the waits before it.
    assert (start, end) == (100.0 * len(asked), 100.0 * len(asked) + 1)
    assert after_forward == {"candidate": 0.1}
    return next(answers)

  def time_once(base):
    calls.append(base)
    judge.timing_span = (100.0 * len(calls), 100.0 * len(calls) + 1)

  judge = types.SimpleNamespace(
      cfg=SandboxConfig(retime_disturbed=retimes),
      verdict=types.SimpleNamespace(evidence={"timing_after_forward_ms": {"candidate": 0.1}}),
      _fence=lambda name, timing: contextlib.nullcontext(),
      _holding=lambda *steps: [step() for step in steps],
      _timed=time_once, _release_gpu_memory=lambda: None,
      _timing_disturbed=timing_disturbed,
      _share_reference_facts=lambda: calls.append("shared"))
  judge._after_the_timing = types.MethodType(judge_checks.CandidateSteps._after_the_timing, judge)
  hold = lambda exclusive: holds.append(exclusive) or contextlib.nullcontext()
  judge_checks.CandidateSteps._timed_apart(judge, 7, hold, False)
  assert calls == [7] * timed + (["shared"] if shared else [])
  # The last timing disturbed too: no speedup from it.
  assert ("timing_unreliable" in judge.verdict.evidence) == (not shared)
  assert holds == [True] * timed
  assert asked == [i < retimes for i in range(timed)]


@pytest.mark.parametrize("disturbed, retimes, timed", [
    ([False], 2, 1),
    ([True, False], 2, 2),
    ([True, True], 2, 3),  # the last is not asked about in the hold: the caller asks after it
    ([], 0, 1),
])
def test_a_whole_evaluation_makes_its_disturbed_timing_again_in_its_hold(disturbed, retimes,
                                                                        timed):
  """Judge._timed_in_hold: asked without waiting for open windows (the GPU is held), and only
  while a timing may still be made again."""
  from kernelzero_jax.sandbox import judge_checks  # pylint: disable=import-outside-toplevel
  calls, asked = [], []
  answers = iter(disturbed)

  def timing_disturbed(start, end, retimed, after_forward, wait):
    asked.append((start, end, retimed, wait))
    return next(answers)

  def time_once(base):
    calls.append(base)
    judge.timing_span = (float(len(calls)), len(calls) + 0.5)

  judge = types.SimpleNamespace(
      cfg=SandboxConfig(retime_disturbed=retimes), _timed=time_once,
      verdict=types.SimpleNamespace(evidence={"timing_after_forward_ms": {"candidate": 2.4}}),
      _timing_disturbed=timing_disturbed)
  judge_checks.CandidateSteps._timed_in_hold(judge, 3)
  assert calls == [3] * timed
  assert asked == [(float(i + 1), i + 1.5, True, False) for i in range(len(disturbed))]


def test_a_timings_span_is_kept_when_it_fails():
  """Judge._timed: the span of _timing itself, also when it raises."""
  from kernelzero_jax.sandbox import judge_checks  # pylint: disable=import-outside-toplevel

  def timing(base):
    time.sleep(0.05)
    raise RuntimeError("timing failed")

  judge = types.SimpleNamespace(verdict=types.SimpleNamespace(stage="checks", stage_seconds={}),
                                _timing=timing, timing_span=(0.0, 0.0))
  before = time.time()
  with pytest.raises(RuntimeError, match="timing failed"):
    judge_checks.CandidateSteps._timed(judge, 1)
  start, end = judge.timing_span
  assert before <= start and end - start >= 0.05 and end <= time.time()
  assert judge.verdict.stage == "timing"


def test_under_a_hold_open_windows_are_not_waited_for_nor_told(own_tmp):
  """_timing_disturbed(wait=False), as _timed_in_hold asks: a closed window with kernels counts
  at once; one still open is left for the look after the hold, which waits and tells it."""
  judge = _Judge()
  judge.cfg = SandboxConfig(setup_window_wait_s=1.0)
  start = time.time()
  other = Other(own_tmp)
  t0 = time.perf_counter()
  assert judge._timing_disturbed(start, time.time(), retimed=True, wait=False) is False
  assert time.perf_counter() - t0 < 0.75  # no wait
  assert "timing_disturbed" not in judge.verdict.evidence
  t0 = time.perf_counter()
  assert judge._timing_disturbed(start, time.time(), retimed=False) is False  # waited: unresolved
  assert time.perf_counter() - t0 >= 1.0
  assert [t["unresolved"] != [] for t in judge.verdict.evidence["timing_disturbed"]] == [True]
  other.close("2020")
  assert judge._timing_disturbed(start, time.time(), retimed=True, wait=False) is False
  assert len(judge.verdict.evidence["timing_disturbed"]) == 1  # closed since, but not stretched
  assert judge._timing_disturbed(start, time.time(), retimed=True, wait=False,
                                 after_forward={"candidate": 2.4})
  told = judge.verdict.evidence["timing_disturbed"][-1]
  assert [w["kernel_ms"] for w in told["windows"]] == [2020.0] and told["retimed"]


def test_by_default_a_judge_does_not_wait_for_open_windows(own_tmp):
  judge = _Judge()
  start = time.time()
  other = Other(own_tmp)
  t0 = time.perf_counter()
  assert judge._timing_disturbed(start, time.time(), retimed=True) is False
  assert time.perf_counter() - t0 < 1.0
  assert [len(t["unresolved"]) for t in judge.verdict.evidence["timing_disturbed"]] == [1]
  other.close("0")


def test_a_timing_that_held_too_long_past_its_forward_is_disturbed_whatever_took_it(own_tmp):
  judge = _Judge()
  start = time.time()
  quiet = {"reference": 0.09, "candidate": 0.16}
  assert judge._timing_disturbed(start, time.time(), retimed=True, after_forward=quiet) is False
  stretched = {"reference": 0.09, "candidate": 2.386}
  assert judge._timing_disturbed(start, time.time(), retimed=True, after_forward=stretched)
  told = judge.verdict.evidence["timing_disturbed"]
  assert [(t["after_forward_ms"], t["windows"], t["retimed"]) for t in told] == [
      ({"candidate": 2.386}, [], True)]
  judge.cfg = SandboxConfig(retime_after_forward_ms=None)
  assert judge._timing_disturbed(start, time.time(), retimed=True, after_forward=stretched) is False
  with pytest.raises(ValueError, match="retime_after_forward_ms"):
    SandboxConfig(retime_after_forward_ms=0.0)


def test_a_rejected_setup_still_reports_its_kernels():
  """worker_run._clean_reply: a candidate rejected for its kernels at import or in its
  constructor (busy_at_import's 2 s) keeps their profile in the reply, for its judge's window."""
  from kernelzero_jax.sandbox import worker_run  # pylint: disable=import-outside-toplevel
  worker = types.SimpleNamespace(_tamper_violations=lambda: [])
  clean = types.MethodType(worker_run.RunSteps._clean_reply, worker)
  summary = {"kernels": 2, "kernel_ms": 2020.2, "violations": ["ran 2020.2 ms of GPU kernels"]}
  reply = clean(dict(summary))
  assert reply["ok"] is False and reply["status"] == "rejected"
  assert reply["setup_gpu"] == {"kernels": 2, "kernel_ms": 2020.2}
  assert clean({"kernels": 0, "kernel_ms": 0.0, "violations": []}) == {
      "ok": True, "setup_gpu": {"kernels": 0, "kernel_ms": 0.0}}
  assert clean() == {"ok": True}


def test_the_benchmarks_count_disturbed_and_retimed_timings():
  """gpu_steps.disturbed_timings, as sandbox_throughput and gpu_steps report it."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  window = {"kind": "import", "kernel_ms": 2020.0, "from_s": 0.1, "to_s": 2.2}
  rows = [
      {"name": "a", "candidate_ms": 17.6, "evidence": {
          "setup_window_wait_s": 0.5,
          "timing_disturbed": [{"candidate_ms": 39.7, "windows": [window], "unresolved": [],
                                "after_forward_ms": {"candidate": 2.386}, "retimed": True}]}},
      {"name": "b", "candidate_ms": 8.08, "evidence": {
          "setup_window_wait_s": 5.0,
          "timing_disturbed": [{"candidate_ms": 8.08, "windows": [], "unresolved": [window],
                                "after_forward_ms": {}, "retimed": False}]}},
      {"name": "c", "candidate_ms": 5.0, "evidence": {"setup_window_wait_s": 0.0}},
      {"name": "d", "evidence": {}},
      {"name": "e", "candidate_ms": 11.9, "evidence": {
          "timing_unreliable": "its last timing was disturbed too",
          "timing_disturbed": [{"candidate_ms": 11.9, "windows": [window], "unresolved": [],
                                "after_forward_ms": {"candidate": 2.39}, "retimed": False}]}},
      {"name": "f", "candidate_ms": 5.4, "evidence": {
          "timing_disturbed": [{"candidate_ms": 5.4, "windows": [window], "unresolved": [],
                                "after_forward_ms": {}, "retimed": False}]}}]
  assert gpu_steps.disturbed_timings(rows) == {
      "timings_disturbed": 2, "retimed": 1, "left_disturbed": 1, "beside_windows_only": 1,
      "unresolved": 1, "retimed_ms": [(39.7, 17.6, "a")],
      "wait_s": {"n": 3, "sum": 5.5, "median": 0.5, "max": 5.0}}
  assert gpu_steps.disturbed_timings([])["wait_s"] == {"n": 0}


def test_the_benchmarks_compare_told_timings_with_their_problems_median():
  """gpu_steps.disturbance_classes: each told timing by what was told, against the median of
  the correct verdicts' final times of its problem."""
  from benchmarks import gpu_steps  # pylint: disable=import-outside-toplevel
  window = {"kind": "import", "kernel_ms": 2020.0}

  def verdict(cand, ref, *told, status="correct"):
    return {"problem": "p", "kind": "teacher", "status": status, "candidate_ms": cand,
            "reference_ms": ref, "evidence": {"timing_disturbed": list(told)} if told else {}}

  rows = [verdict(10.0, 4.0), verdict(10.2, 4.0), verdict(9.8, 4.1),
          verdict(10.0, 4.0, {"candidate_ms": 23.0, "reference_ms": 4.0, "windows": [window],
                              "unresolved": [], "after_forward_ms": {"candidate": 2.4}}),
          verdict(10.1, 4.0, {"candidate_ms": 10.1, "reference_ms": 4.0, "windows": [window],
                              "unresolved": [], "after_forward_ms": {}}),
          verdict(None, None, {"candidate_ms": 10.0, "reference_ms": 9.2, "windows": [],
                               "unresolved": [window], "after_forward_ms": {}},
                  status="runtime_error")]
  report = gpu_steps.disturbance_classes(rows)
  assert report == {
      "stretched": {"n": 1, "over_1.3x": 1, "ratios": [(2.3, 1.0)]},
      "windows": {"n": 1, "over_1.3x": 0, "ratios": []},
      "unresolved": {"n": 1, "over_1.3x": 1, "ratios": [(1.0, 2.3)]},
      "nothing told": {"n": 3, "over_1.3x": 0, "ratios": []}}

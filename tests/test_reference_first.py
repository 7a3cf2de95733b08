"""A judge measures the reference before its worker imports the candidate, if the GPU is free
then (judge.Judge._reference_first, SandboxConfig.reference_first).

On the CPU, with the GPU's lock files in a temporary directory, the GPU timer replaced and a
pipe standing in for the worker: what is measured and shared, that the worker's go is sent
whatever happens, and that a busy GPU leaves the order as it was.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import shutil
import tempfile
import threading

import pytest

from test_sandbox_faults import CONFIG
from test_sandbox_reference_reuse import judge_on_the_cpu
from kernelzero_jax.sandbox import judge as judge_lib
from kernelzero_jax.sandbox import judge_reference
from kernelzero_jax.sandbox import judge_worker
from kernelzero_jax.sandbox import timing
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox.go_gate import GoGate
from kernelzero_jax.sandbox.gpu_budget import gpu_slots

# What the judge's timing sees of the reference and, from the worker, of the candidate.
REFERENCE_TIMED = {"median_ms": 2.0, "trials": 10, "after_forward_ms": 0.25}


class _Worker:
  """The judge's end of a pipe (for the go) and a worker's answer to the timing request."""
  start_method = "fork"  # as worker_handle.WorkerHandle records it
  pid = None

  def __init__(self):
    self.conn, self.far_end = multiprocessing.Pipe()

  def request(self, msg, timeout_s, stage):
    del timeout_s, stage
    assert msg["cmd"] == "time"
    return {"ok": True, "median_ms": 1.0, "trials": 12, "audits": [], "after_forward_ms": 0.5}

  def go_sent(self) -> bool:
    return self.far_end.poll(0) and self.far_end.recv().get("cmd") == "go"


@pytest.fixture
def make_judge(monkeypatch, tmp_path):
  """A judge of the scaled ReLU on the CPU, past its start-up, with its reference timing
  counted in `timed` (a list) instead of measured."""
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the GPU's lock files, this test's
  timed = []
  monkeypatch.setattr(timing, "Timer", lambda device: None)
  monkeypatch.setattr(timing, "time_forward",
                      lambda *a, **k: timed.append(1) or dict(REFERENCE_TIMED))

  made = []

  def make(facts=None, **config):
    # A GPU's config (timing is measured only there) for a judge whose tensors are on the CPU.
    config = dataclasses.replace(CONFIG, **{"device": "cuda", "timing": True, "num_audits": 0,
                                            **config})
    made.append(1)
    facts_path = str(tmp_path / f"facts{len(made)}.json")  # each judge its own pool's
    judge = judge_on_the_cpu(config, facts_path, facts)
    judge.worker = _Worker()
    judge.awaits_go, judge.go_gate = True, GoGate()  # a Triton judge's (no prebuilder)
    return judge, timed, facts_path
  return make


def test_a_free_gpu_measures_the_reference_first_and_shares_its_checks_at_once(make_judge):
  judge, timed, facts_path = make_judge()
  assert judge._reference_unmeasured()  # pylint: disable=protected-access
  judge._reference_first()  # pylint: disable=protected-access
  v = judge.verdict
  assert judge.worker.go_sent() and judge.go_sent_at is not None
  assert v.evidence["reference_first"]["held"] is True
  assert not judge.worker.go_sent()  # once
  assert timed == [1] and v.reference_ms == 2.0
  assert "reference_checks" in v.evidence["gpu_seconds"]
  assert v.degenerate == [] and judge.reference_checked
  # The checks' findings are shared now; the time only after the candidate's audits.
  assert judge_reference.read_facts(facts_path) == {"degenerate": []}
  assert not judge._reference_unmeasured()  # pylint: disable=protected-access
  # Later, nothing is measured again, and nothing is called reused.
  judge._degenerate_facts([1, 2])  # pylint: disable=protected-access
  judge._timing(0)  # pylint: disable=protected-access
  assert timed == [1] and v.candidate_ms == 1.0 and "reference_reused" not in v.evidence
  assert v.evidence["timing_trials"] == {"reference": 10, "candidate": 12}
  assert v.evidence["timing_after_forward_ms"] == {"reference": 0.25, "candidate": 0.5}
  # The time once the timing is known undisturbed (Judge._timed_apart).
  assert judge_reference.read_facts(facts_path) == {"degenerate": []}
  judge._share_reference_facts()  # pylint: disable=protected-access
  assert judge_reference.read_facts(facts_path) == {"degenerate": [], "reference_ms": 2.0,
                                               "compile_ms": None, "reference_trials": 10}


def test_a_reference_waiting_on_the_cpu_moves_in_the_hold_that_measures_it_first(make_judge):
  """SandboxConfig.reference_upload_in_hold: the reference that waited on the CPU for a hold
  moves in the first one, before its timing; the candidate's check hold then moves nothing."""
  judge, timed, _ = make_judge(reference_upload_in_hold=True)
  judge._reference_on_cpu = True  # pylint: disable=protected-access
  judge._reference_first()  # pylint: disable=protected-access
  v = judge.verdict
  assert v.evidence["reference_first"]["held"] is True and timed == [1]
  assert not judge._reference_on_cpu  # pylint: disable=protected-access
  assert "reference_upload" in v.evidence["gpu_seconds"]
  upload_s = v.evidence["gpu_seconds"]["reference_upload"]
  judge._upload_reference()  # pylint: disable=protected-access
  assert v.evidence["gpu_seconds"]["reference_upload"] == upload_s  # once


def test_the_go_comes_after_the_timing_and_before_the_checks(make_judge, monkeypatch):
  judge, _, _ = make_judge()
  seen = []
  time_reference, reference_checks = judge._time_reference, judge._reference_checks
  monkeypatch.setattr(judge, "_time_reference",
                      lambda seeds: seen.append(("timed", judge.go_sent_at)) or
                      time_reference(seeds))
  monkeypatch.setattr(judge, "_reference_checks",
                      lambda seeds: seen.append(("checked", judge.go_sent_at)) or
                      reference_checks(seeds))
  judge._reference_first()  # pylint: disable=protected-access
  assert [what for what, _ in seen] == ["timed", "checked"]
  assert seen[0][1] is None and seen[1][1] is not None  # timed with the worker waiting
  assert judge.worker.go_sent()


def test_the_checks_measured_first_are_those_measured_after(make_judge):
  first, _, _ = make_judge(check_degenerate=True)
  first._reference_first()  # pylint: disable=protected-access
  after, _, _ = make_judge(check_degenerate=True, reuse_reference=False)
  after._degenerate_facts(after._check_seeds(0))  # pylint: disable=protected-access
  assert first.verdict.degenerate == after.verdict.degenerate
  assert first.verdict.reference_facts["degenerate"] == after.verdict.reference_facts["degenerate"]


def test_a_busy_gpu_leaves_the_measuring_for_later_and_still_lets_the_worker_go(make_judge):
  judge, timed, facts_path = make_judge()
  with gpu_slots(0, 1, exclusive=True):  # another judge holds the GPU
    judge._reference_first()  # pylint: disable=protected-access
  v = judge.verdict
  assert judge.worker.go_sent()
  assert v.evidence["reference_first"]["held"] is False and "gpu_holds" not in v.evidence
  assert timed == [] and not judge.reference_checked
  assert judge_reference.read_facts(facts_path) == {}
  judge._timing(0)  # pylint: disable=protected-access
  assert timed == [1] and v.reference_ms == 2.0  # measured after, as before


def test_a_second_construction_still_running_leaves_the_measuring_for_later(make_judge,
                                                                            monkeypatch):
  monkeypatch.setattr(judge_reference, "REFERENCE_FIRST_WAIT_S", 0.05)
  judge, timed, _ = make_judge()
  release = threading.Event()
  judge._second_reference_thread = threading.Thread(target=release.wait, daemon=True)
  judge._second_reference_thread.start()
  try:
    judge._reference_first()  # pylint: disable=protected-access
  finally:
    release.set()
  ev = judge.verdict.evidence["reference_first"]
  assert judge.worker.go_sent() and ev["held"] is False and "still running" in ev["skipped"]
  assert timed == [] and not judge.reference_checked


def test_a_slow_first_construction_puts_the_second_after_the_timing(make_judge, monkeypatch):
  judge, _, _ = make_judge()
  after = judge._second_reference_after  # pylint: disable=protected-access
  assert after(judge_reference.SECOND_REFERENCE_AFTER_S) and not after(0.01)
  judge.prebuilder = object()  # a CUDA worker's go waits for seconds of build anyway
  assert not after(10.0)
  judge, _, _ = make_judge(facts={"reference_ms": 4.0, "compile_ms": None, "reference_trials": 7})
  assert not judge._second_reference_after(10.0)  # pylint: disable=protected-access
  judge, _, _ = make_judge(check_degenerate=False)  # no second model to build
  assert not judge._second_reference_after(10.0)  # pylint: disable=protected-access
  judge, _, _ = make_judge()
  judge.awaits_go = False  # nothing measured first: the second model as before
  assert not judge._second_reference_after(10.0)  # pylint: disable=protected-access
  judge, _, _ = make_judge()
  monkeypatch.setenv("KZ_SECOND_REFERENCE_AFTER", "0")  # the benchmark's `secondfirst`
  assert not judge._second_reference_after(10.0)  # pylint: disable=protected-access


def test_with_the_second_construction_after_it_the_timing_first_leaves_the_checks(make_judge):
  judge, timed, facts_path = make_judge()
  judge._reference_first(checks=False)  # pylint: disable=protected-access
  v = judge.verdict
  assert timed == [1] and judge.worker.go_sent() and v.evidence["reference_first"]["timed"]
  assert "under the candidate's hold" in v.evidence["reference_first"]["checks"]
  assert not judge.reference_checked and "reference_checks" not in v.evidence["gpu_seconds"]
  assert judge_reference.read_facts(facts_path) == {}
  judge._start_second_reference()  # pylint: disable=protected-access
  judge._second_reference_thread.join(60)  # pylint: disable=protected-access
  assert judge.second_reference is not None
  judge._degenerate_facts(judge._check_seeds(0))  # under the candidate's hold, as they were
  assert judge.reference_checked and v.degenerate == []
  assert judge_reference.read_facts(facts_path) == {"degenerate": []}


def test_known_facts_need_no_measuring_first(make_judge):
  judge, _, _ = make_judge(facts={"degenerate": [], "reference_ms": 4.0, "compile_ms": None,
                                  "reference_trials": 7})
  assert not judge._reference_unmeasured()  # pylint: disable=protected-access
  judge, _, _ = make_judge(facts={"degenerate": []})  # the time is still to be measured
  assert judge._reference_unmeasured()  # pylint: disable=protected-access
  judge, _, _ = make_judge(facts={"degenerate": []}, timing=False)
  assert not judge._reference_unmeasured()  # pylint: disable=protected-access


def test_a_dead_worker_does_not_stop_the_judge(make_judge):
  judge, timed, _ = make_judge()
  judge.worker.far_end.close()
  judge.worker.conn.close()
  judge._reference_first()  # pylint: disable=protected-access
  assert timed == [1]


@pytest.mark.parametrize("compiled", [True, False])
def test_the_checks_first_take_the_fused_comparison_if_it_has_compiled_by_then(make_judge,
                                                                               compiled):
  judge, _, _ = make_judge()
  release = threading.Event()
  judge._fused_built = {"compile_s": 0.1, "error": "no cubin on the CPU"}
  judge._fused_thread = threading.Thread(target=release.wait, daemon=True)
  judge._fused_thread.start()
  if compiled:
    release.set()
    judge._fused_thread.join()
  try:
    judge._reference_first()  # pylint: disable=protected-access
  finally:
    release.set()
  readied = "fused_compare" in judge.verdict.evidence
  assert readied is compiled and (judge._fused_thread is None) is compiled
  assert judge.reference_checked  # measured either way (the torch way when not readied)


def test_a_cuda_judge_holds_the_prebuilders_hand_over_back_only_while_it_times(make_judge):
  # A CUDA worker's go comes from its prebuilder's hand-over, which opens the gate
  # (cuda_prebuild.hand_over's before_go): it waits while the judge times the reference.
  judge, timed, _ = make_judge()
  judge.backend = "cuda"  # a CUDA candidate's judge: it sends no go itself
  opened = []
  hand_over = threading.Thread(target=lambda: opened.append(judge.go_gate.open()))
  time_reference = judge._time_reference  # pylint: disable=protected-access

  def slow_timing(seeds):
    hand_over.start()  # the prebuilder is done while the judge times
    hand_over.join(0.3)
    opened.append("timing")
    return time_reference(seeds)
  judge._time_reference = slow_timing  # pylint: disable=protected-access
  judge._reference_first()  # pylint: disable=protected-access
  hand_over.join(10)
  assert opened == ["timing", True] and timed == [1]
  assert judge.verdict.evidence["reference_first"]["timed"] is True
  assert not judge.worker.go_sent() and judge.go_sent_at is None


def test_after_the_go_the_reference_is_not_timed_first_but_still_checked(make_judge):
  # The go came first (a Triton worker's deadline, or a CUDA prebuilder done while the judge
  # still loaded the reference): the worker may run the candidate's code, so the reference is
  # timed after the candidate's checks, as without reference_first; the untimed checks need
  # no quiet GPU.
  judge, timed, _ = make_judge()
  assert judge.go_gate.open()
  judge._reference_first()  # pylint: disable=protected-access
  ev = judge.verdict.evidence["reference_first"]
  assert ev["held"] is True and ev["timed"] is False and timed == []
  assert judge.reference_checked and not judge.worker.go_sent()  # the opener sent it
  judge._timing(0)  # pylint: disable=protected-access
  assert timed == [1]


def test_the_go_gate_opens_once_and_never_while_the_reference_is_timed():
  gate = GoGate()
  assert gate.claim()
  opened = []
  opener = threading.Thread(target=lambda: opened.append(gate.open()))
  opener.start()
  opener.join(0.2)
  assert opener.is_alive() and opened == []  # waiting for the timing to end
  gate.release()
  opener.join(10)
  assert opened == [True] and gate.opened_at is not None
  assert not gate.open() and not gate.claim()  # once; and no timing after the go


def test_a_triton_worker_gets_its_go_by_the_deadline_from_a_slow_judge(monkeypatch):
  monkeypatch.setattr(judge_worker, "TRITON_GO_DEADLINE_S", 0.05)
  workers = []

  class Recorded(_Worker):
    def __init__(self, spec, memory_limit_gb, target=None, kill_descendants=True):
      del memory_limit_gb, target, kill_descendants
      super().__init__()
      self.spec = spec
      workers.append(self)

    def kill(self):
      pass
  monkeypatch.setattr(judge_worker, "WorkerHandle", Recorded)
  config = dataclasses.replace(CONFIG, device="cuda", triton_precompile=False, triton_seed=False)
  judge = judge_lib.Judge({"backend": "triton", "config": config.to_dict(),
                           "candidate_source": "", "reference_source": ""})
  shutil.rmtree(judge.workdir, ignore_errors=True)
  judge.own_kernels = []
  judge._start_worker()  # pylint: disable=protected-access
  (worker,) = workers
  assert worker.spec["await_go"] and judge.awaits_go
  assert worker.far_end.poll(10) and worker.far_end.recv() == {"cmd": "go"}
  assert judge.go_sent_at is not None and not judge.go_gate.claim()


def test_the_timings_wait_for_a_start_up_under_way_and_note_how_long(make_judge):
  """gpu_fence.py: another judge creating its CUDA context holds the start-up fence shared; the
  reference's timing and the candidate's wait until it is done."""
  from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
  judge, timed, _ = make_judge()
  in_start_up, done = threading.Event(), threading.Event()

  def start_up():
    with gpu_fence.startup_fence(0, timing=False):
      in_start_up.set()
      done.wait(0.4)
  other = threading.Thread(target=start_up)
  other.start()
  assert in_start_up.wait(5)
  judge._reference_first()  # pylint: disable=protected-access
  other.join()
  judge._timing(0)  # pylint: disable=protected-access
  waits = judge.verdict.evidence["fence_wait_s"]
  # (before the GPU: "reference_first"; with it held, as the candidate's: "..._timing")
  assert timed == [1] and set(waits) == {"reference_first", "candidate_timing"}
  assert waits["reference_first"] >= 0.3 and waits["candidate_timing"] < 0.3


def test_the_reference_waits_for_start_ups_without_holding_the_gpu(make_judge):
  """A timing that waited for the fence with every slot held left the GPU idle: the judge waits
  first, and another judge's checks may take the GPU meanwhile."""
  from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
  judge, timed, _ = make_judge()
  in_start_up, done, free_meanwhile = threading.Event(), threading.Event(), []

  def start_up():
    with gpu_fence.startup_fence(0, timing=False):
      in_start_up.set()
      done.wait(0.3)
      with gpu_slots(0, judge.cfg.gpu_concurrency, exclusive=False, wait=False) as held:
        free_meanwhile.append(held)
  other = threading.Thread(target=start_up)
  other.start()
  assert in_start_up.wait(5)
  judge._reference_first()  # pylint: disable=protected-access
  other.join()
  assert free_meanwhile == [True] and timed == [1]
  assert judge.verdict.evidence["reference_first"]["timed"] is True


def test_start_ups_past_the_patience_leave_the_timing_for_later_and_the_checks_first(
    make_judge, monkeypatch):
  from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(judge_reference, "REFERENCE_FIRST_FENCE_S", 0.1)
  judge, timed, _ = make_judge()
  with gpu_fence.startup_fence(0, timing=False):  # a start-up that outlasts it
    judge._reference_first()  # pylint: disable=protected-access
  first = judge.verdict.evidence["reference_first"]
  assert timed == [] and first["timed"] is False and "fence" in first["untimed"]
  assert first["held"] is True and judge.reference_checked and judge.worker.go_sent()
  assert "reference_first" not in judge.verdict.evidence.get("fence_wait_s", {})
  judge._timing(0)  # pylint: disable=protected-access
  assert timed == [1] and judge.verdict.reference_ms == 2.0


def test_a_busy_gpu_keeps_the_fence_open_for_start_ups(make_judge):
  """Nothing to gain from the fence while another judge holds the GPU: the judge does not wait
  for it (and keep start-ups out) there."""
  judge, timed, _ = make_judge()
  with gpu_slots(0, 1, exclusive=True):
    judge._reference_first()  # pylint: disable=protected-access
  first = judge.verdict.evidence["reference_first"]
  assert timed == [] and "untimed" not in first and "fence_wait_s" not in judge.verdict.evidence


def test_without_the_fence_timings_do_not_wait_for_start_ups(make_judge):
  from kernelzero_jax.sandbox import gpu_fence  # pylint: disable=import-outside-toplevel
  judge, timed, _ = make_judge(startup_fence=False)
  with gpu_fence.startup_fence(0, timing=False):
    judge._reference_first()  # pylint: disable=protected-access
    judge._timing(0)  # pylint: disable=protected-access
  assert timed == [1] and "fence_wait_s" not in judge.verdict.evidence


def test_a_timing_within_the_fence_does_not_take_it_again(make_judge):
  """The judge takes the fence before the GPU's slots for its timing hold (Judge._evaluate); the
  timings inside it must not wait for the fence the judge holds itself."""
  judge, timed, _ = make_judge()
  with judge._fence("timing", timing=True):  # pylint: disable=protected-access
    judge._timing(0)  # pylint: disable=protected-access
  assert timed == [1] and set(judge.verdict.evidence["fence_wait_s"]) == {"timing"}
  judge._timing(0)  # pylint: disable=protected-access
  assert "candidate_timing" in judge.verdict.evidence["fence_wait_s"]  # taken again, once out


def test_a_judge_whose_weights_stay_off_the_gpu_measures_the_reference_in_its_one_hold(
    make_judge):
  """(gpu_budget.weights_kept_fit): its reference is uploaded under the candidate's hold, so there
  is none to measure before; the worker still gets its go, and the upload comes as that hold's
  first step."""
  judge, timed, facts_path = make_judge()
  judge.__dict__["_weights_apart"] = True  # (a cached property, as its problem would set it)
  judge._reference_on_cpu = True  # pylint: disable=protected-access
  judge._reference_first()  # pylint: disable=protected-access
  v = judge.verdict
  assert judge.worker.go_sent()
  assert v.evidence["reference_first"]["held"] is False and "gpu_holds" not in v.evidence
  assert "skipped" in v.evidence["reference_first"]
  assert timed == [] and judge_reference.read_facts(facts_path) == {}
  judge._upload_reference()  # pylint: disable=protected-access
  uploaded = dict(v.evidence["gpu_seconds"])
  assert list(uploaded) == ["reference_upload"]
  assert not judge._reference_on_cpu  # pylint: disable=protected-access
  judge._upload_reference()  # once  pylint: disable=protected-access
  assert v.evidence["gpu_seconds"] == uploaded


def _look_in_a_thread(judge, take, monkeypatch):
  """Starts the judge's look at a kept worker (_take_worker) in a thread, as _start_worker does
  where a worker was kept, with `take` in place of take_kept_worker."""
  monkeypatch.setattr(worker_handle, "take_kept_worker", take)
  judge.worker, judge.worker_key = None, "kept worker's key"
  judge._looking = True  # pylint: disable=protected-access
  judge._looking_thread = threading.Thread(  # pylint: disable=protected-access
      target=judge._take_worker, args=({},), daemon=True)  # pylint: disable=protected-access
  judge._looking_thread.start()  # pylint: disable=protected-access


def test_the_reference_is_timed_during_a_kept_workers_look_and_the_go_sent_after_it(
    make_judge, monkeypatch):
  judge, timed, _ = make_judge()
  kept, looked = judge.worker, threading.Event()
  kept.next_candidate = lambda spec: None

  def take(key):
    del key
    looked.wait(30)  # the worker still looks itself over
    return kept, {"served": 1, "drift": []}
  _look_in_a_thread(judge, take, monkeypatch)
  judge._reference_first()  # pylint: disable=protected-access
  # Timed, and the go asked for, while the look went on: the go waits for the look.
  assert timed == [1] and judge.worker is None and not kept.go_sent()
  looked.set()
  judge._await_worker()  # pylint: disable=protected-access
  assert judge.worker is kept and judge.worker_serves == 2
  assert judge.verdict.evidence["worker_start"] == "kept" and kept.go_sent()
  assert not kept.go_sent()  # once


def test_a_kept_workers_look_that_fails_fails_where_the_judge_waits_for_its_worker(
    make_judge, monkeypatch):
  judge, _, _ = make_judge()

  def take(key):
    raise OSError(f"no worker for {key}")
  _look_in_a_thread(judge, take, monkeypatch)
  with pytest.raises(OSError, match="no worker for kept worker's key"):
    judge._await_worker()  # pylint: disable=protected-access
  judge._await_worker()  # pylint: disable=protected-access  (raised once)
  assert judge.worker is None


@pytest.mark.parametrize("prebuilding", [True, False])
def test_the_second_construction_is_awaited_while_a_prebuilder_holds_the_go(
    make_judge, monkeypatch, prebuilding):
  monkeypatch.setattr(judge_reference, "REFERENCE_FIRST_WAIT_S", 0.05)
  judge, timed, _ = make_judge()
  built, handed_over = threading.Event(), threading.Event()
  judge._second_reference_thread = threading.Thread(  # pylint: disable=protected-access
      target=built.wait, args=(0.6,), daemon=True)  # longer than the wait without a prebuilder
  judge._second_reference_thread.start()  # pylint: disable=protected-access
  if prebuilding:  # a CUDA worker's go comes from its prebuilder's hand-over, seconds later
    judge._hand_over_thread = threading.Thread(  # pylint: disable=protected-access
        target=handed_over.wait, args=(30,), daemon=True)
    judge._hand_over_thread.start()  # pylint: disable=protected-access
  judge._reference_first()  # pylint: disable=protected-access
  handed_over.set()
  evidence = judge.verdict.evidence["reference_first"]
  if prebuilding:
    assert evidence["timed"] and timed == [1]
    assert not judge._second_reference_thread.is_alive()  # pylint: disable=protected-access
  else:
    assert evidence["skipped"] == "the reference's second construction was still running"
    assert timed == []


@pytest.mark.parametrize("after_forward_ms", [2.386, 0.1])
def test_a_reference_timing_that_another_candidates_kernels_disturbed_is_made_again(
    make_judge, monkeypatch, after_forward_ms):
  """A window of another process's candidate with kernels (setup_windows.py) over the reference's
  first timing, which held `after_forward_ms` past its forward's end: stretched, that time is
  dropped, neither kept nor shared, and measured again in the candidate's timing; not, it stands
  and the window is only told."""
  import json  # pylint: disable=import-outside-toplevel
  import os  # pylint: disable=import-outside-toplevel
  import time  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import setup_windows  # pylint: disable=import-outside-toplevel
  judge, timed, facts_path = make_judge()
  monkeypatch.setattr(timing, "time_forward", lambda *a, **k: timed.append(1) or dict(
      REFERENCE_TIMED, after_forward_ms=after_forward_ms))
  directory = setup_windows.window_dir(0)
  os.makedirs(directory)
  with open(os.path.join(directory, "other.closed"), "w") as f:
    json.dump({"pid": os.getppid(), "kind": "import", "start": time.time() - 1,
               "end": time.time() + 60, "kernel_ms": 2020.0}, f)
  judge._reference_first()  # pylint: disable=protected-access
  v = judge.verdict
  disturbed = after_forward_ms > 1.0
  assert timed == [1] and v.evidence["reference_first"]["timed"] is not disturbed
  assert (judge.reference_timed is None) is disturbed
  told = v.evidence["timing_disturbed"]
  assert [(t["reference_ms"], t["retimed"]) for t in told] == [(2.0, disturbed)]
  assert [w["kernel_ms"] for w in told[0]["windows"]] == [2020.0]
  assert "reference_ms" not in judge_reference.read_facts(facts_path)
  judge._timing(0)  # pylint: disable=protected-access
  assert timed == ([1, 1] if disturbed else [1]) and v.reference_ms == 2.0


def test_the_timing_asks_for_the_configs_precision_and_keeps_each_trials_time(make_judge,
                                                                               monkeypatch):
  """The time request carries SandboxConfig.timing_precision; the verdict keeps each trial's
  time and why the trials stopped, the worker's coerced (numbers only, at most max_trials) and
  the reference's as measured here."""
  judge, _, _ = make_judge(timing_precision=0.02, min_trials=3, max_trials=4)
  asked = []

  def request(msg, timeout_s, stage):
    del timeout_s, stage
    asked.append(msg)
    return {"ok": True, "median_ms": 1.0, "trials": 5, "audits": [], "stopped": "precision",
            "times_ms": [1.0, "x", float("nan"), 1.01, 0.99, 1.0, 1.02],
            "warmup_ms": [3.0, None, 1.5, 1.2, 1.1]}

  judge.worker.request = request
  monkeypatch.setattr(timing, "time_forward", lambda *a, **k: {
      **REFERENCE_TIMED, "times_ms": [2.0, 2.004], "stopped": "planned"})
  judge._timing(0)  # pylint: disable=protected-access
  assert asked[0]["precision"] == 0.02
  ev = judge.verdict.evidence
  assert ev["timing_times_ms"] == {"reference": [2.0, 2.004], "candidate": [1.0, 1.01]}
  # the warm-ups' times, coerced and capped at the warm-up calls asked for (3)
  assert ev["timing_warmup_ms"] == {"candidate": [3.0, 1.5]}
  assert ev["timing_stopped"] == {"reference": "planned", "candidate": "precision"}
  # A worker's word that is not one of the two is left out.
  judge.worker.request = lambda msg, t, s: {"ok": True, "median_ms": 1.0, "trials": 5,
                                            "audits": [], "stopped": "<forged>"}
  judge._timing(0)  # pylint: disable=protected-access
  assert judge.verdict.evidence["timing_stopped"] == {"reference": "planned"}
  assert judge.verdict.evidence["timing_times_ms"] == {"reference": [2.0, 2.004]}
  assert judge.verdict.evidence["timing_warmup_ms"] == {}


def _time_request(judge, stopped: str) -> dict:
  """Judge._timing with a worker that stops as `stopped` says: the time request it sent."""
  asked = []

  def request(msg, timeout_s, stage):
    del timeout_s, stage
    asked.append(msg)
    return {"ok": True, "median_ms": 9.0, "trials": 6, "audits": [], "stopped": stopped}

  judge.worker.request = request
  judge._timing(0)  # pylint: disable=protected-access
  assert judge.verdict.evidence["timing_stopped"]["candidate"] == stopped
  return asked[0]


def test_the_timing_asks_for_the_band_in_times_from_the_reference_and_keeps_why_it_stopped(
    make_judge):
  """SandboxConfig.speedup_band: the judge turns it into the candidate's times from the
  reference's (2 ms here), the slow start added on the slow side."""
  judge, _, _ = make_judge(speedup_band=(1.0, 4.0), band_slow_start=0.25, band_min_trials=6)
  asked = _time_request(judge, "outside")
  assert asked["outside_ms"] == pytest.approx((0.5, 2.5))
  assert asked["outside_min_trials"] == 6
  assert asked["far_ms"] is None  # the far rule is off by default
  asked = _time_request(make_judge()[0], "planned")
  assert asked["outside_ms"] is None and asked["far_ms"] is None


def test_the_far_rule_asks_for_its_factor_times_the_band_s_slow_end_and_keeps_why_it_stopped(
    make_judge):
  """SandboxConfig.band_far_factor: 3 times the band's slow end (2.5 ms, from a 2 ms
  reference), after band_far_trials; nothing without a band."""
  judge, _, _ = make_judge(speedup_band=(1.0, 4.0), band_slow_start=0.25, band_far_factor=3.0,
                           band_far_trials=4)
  asked = _time_request(judge, "far")
  assert asked["far_ms"] == pytest.approx(7.5) and asked["far_min_trials"] == 4
  asked = _time_request(make_judge(band_far_factor=3.0)[0], "planned")
  assert asked["outside_ms"] is None and asked["far_ms"] is None


@pytest.mark.parametrize("band", [(0.0, 3.0), (3.0, 1.0), (1.0,), ("1", 3.0)])
def test_a_malformed_speedup_band_is_refused(band):
  with pytest.raises(ValueError, match="speedup_band"):
    dataclasses.replace(CONFIG, speedup_band=band)


@pytest.mark.parametrize("far", [{"band_far_factor": 0.5}, {"band_far_factor": float("nan")},
                                 {"band_far_trials": 0}])
def test_a_malformed_far_rule_is_refused(far):
  with pytest.raises(ValueError, match="band_far"):
    dataclasses.replace(CONFIG, **far)

"""Judge._held_stages: which steps run under which GPU hold, with every step scripted; and the
GPU memory that the judge and its worker give back around a timing."""

import contextlib
import types

import pytest

from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.sandbox.judge import Judge
from kernelzero_jax.sandbox.judge_checks import CandidateSteps


def _judge(width, keeps_memory, disturbed=False, timing=True):
  """A judge on a GPU of 4 slots whose checks need `width` of them."""
  calls = []
  judge = types.SimpleNamespace(
      cfg=SandboxConfig(device="cuda", gpu_concurrency=4, timing=timing),
      verdict=types.SimpleNamespace(evidence={"timing_after_forward_ms": {"candidate": 0.1}}),
      base_seed=5, device=types.SimpleNamespace(type="cuda"), job={}, timing_span=(1.0, 2.0),
      _weights_apart=False, calls=calls)

  @contextlib.contextmanager
  def gpu_hold(slots, exclusive, width=1):
    calls.append(("hold", exclusive, width))
    yield
    calls.append("let go")

  def timing_disturbed(start, end, retimed, after_forward):
    calls.append(("disturbed?", start, end, retimed, after_forward))
    return disturbed

  judge.__dict__.update(
      _gpu_hold=gpu_hold, _check_width=lambda slots: width,
      _keeps_memory=lambda slots: keeps_memory,
      _holding=lambda *steps: [step() for step in steps],
      _upload_reference=lambda: calls.append("upload reference"),
      _register_ahead=lambda: calls.append("register ahead"),
      _checks=lambda base: calls.append(("checks", base)),
      _release_gpu_memory=lambda: calls.append("release"),
      _timed_in_hold=lambda base: calls.append(("timed in hold", base)),
      _timed_apart=lambda base, hold, release: calls.append(("timed apart", base, release)),
      _post_check=lambda base: calls.append(("post check", base)),
      _timing_disturbed=timing_disturbed,
      _share_reference_facts=lambda: calls.append("shared"))
  judge._after_the_timing = types.MethodType(CandidateSteps._after_the_timing, judge)
  return judge


@pytest.mark.parametrize("keeps_memory", [False, True])
def test_a_whole_evaluation_gives_its_checks_memory_back_before_its_timing(keeps_memory):
  """One hold of the whole GPU; the memory of the checks given back before the timing unless
  every judge could keep as much (on an H100 beside 23 judges, a 6 GiB problem's timing ran out
  of memory without it); the timing's own span asked about after the hold."""
  judge = _judge(width=4, keeps_memory=keeps_memory)
  Judge._held_stages(judge)
  assert judge.calls == [
      "register ahead", ("hold", True, 1), "upload reference", ("checks", 5)] + (
      [] if keeps_memory else ["release"]) + [
      ("timed in hold", 5), ("post check", 5), "let go",
      ("disturbed?", 1.0, 2.0, False, {"candidate": 0.1}), "shared"]


def test_a_whole_evaluation_disturbed_after_its_hold_shares_nothing_and_is_unreliable():
  judge = _judge(width=4, keeps_memory=False, disturbed=True)
  Judge._held_stages(judge)
  assert judge.calls[-1][0] == "disturbed?" and "shared" not in judge.calls
  assert "no speedup" in judge.verdict.evidence["timing_unreliable"]


def test_without_timing_a_whole_evaluation_neither_releases_nor_asks():
  judge = _judge(width=4, keeps_memory=False, timing=False)
  Judge._held_stages(judge)
  assert judge.calls == ["register ahead", ("hold", True, 1), "upload reference", ("checks", 5),
                         ("post check", 5), "let go", "shared"]


def test_on_the_cpu_one_pass_without_holds_nor_timing():
  judge = _judge(width=4, keeps_memory=False)
  judge.device = types.SimpleNamespace(type="cpu")
  Judge._held_stages(judge)
  assert judge.calls == ["upload reference", ("checks", 5), ("post check", 5), "shared"]


@pytest.mark.parametrize("keeps_memory", [False, True])
def test_shared_checks_and_a_timing_apart(keeps_memory):
  """The reference, where it waited on the CPU (SandboxConfig.reference_upload_in_hold), moves
  in the checks' hold, before them."""
  judge = _judge(width=2, keeps_memory=keeps_memory)
  Judge._held_stages(judge)
  assert judge.calls == [
      "register ahead", ("hold", False, 2), "upload reference", ("checks", 5)] + (
          [] if keeps_memory else ["release"]) + [
      "let go", ("timed apart", 5, not keeps_memory), ("hold", False, 2), ("post check", 5),
      "let go"]


def test_a_reference_timed_on_a_gpu_gives_its_cached_memory_back(monkeypatch):
  """ReferenceSteps._time_reference: its input set and outputs go back to the driver before the
  candidate's timing, which could not use them from torch's cache."""
  from kernelzero_jax.sandbox import judge_reference  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import timing  # pylint: disable=import-outside-toplevel
  calls = []
  monkeypatch.setattr(timing, "Timer", lambda device: calls.append("timer"))
  monkeypatch.setattr(timing, "time_forward",
                      lambda *args, **kwargs: calls.append("timed") or {"median_ms": 4.4})
  for device, emptied in (("cuda", ["empty_cache"]), ("cpu", [])):
    calls.clear()
    judge = types.SimpleNamespace(
        cfg=SandboxConfig(device=device), verdict=types.SimpleNamespace(evidence={}),
        device=types.SimpleNamespace(type=device), ref_model=None, ref_mod=None, problem=None,
        torch=types.SimpleNamespace(cuda=types.SimpleNamespace(
            empty_cache=lambda: calls.append("empty_cache"))),
        _step=lambda name: contextlib.nullcontext(),
        _fence=lambda *args, **kwargs: contextlib.nullcontext())
    assert judge_reference.ReferenceSteps._time_reference(judge, [1, 2]) == {"median_ms": 4.4}
    assert calls == ["timer", "timed"] + emptied and judge.verdict.reference_ms == 4.4


def test_a_workers_timing_gives_its_cached_memory_back_and_keeps_the_audited_outputs():
  """RunSteps.time: on a GPU, torch's cache is emptied once the trials are done, before the
  judge's reference forwards for the audits; the audited outputs stay held for the reply."""
  from kernelzero_jax.sandbox import worker_run  # pylint: disable=import-outside-toplevel
  for device, emptied in (("cuda", True), ("cpu", False)):
    calls = []

    def time_forward(timer, model, make_inputs, seeds, warmup, target_s, min_trials, on_audit,
                     audit_positions, precision, outside_ms, outside_min_trials, far_ms,
                     far_min_trials):
      on_audit(seeds[0], ["inputs"])
      calls.append(("timed", precision))
      assert outside_ms is None and outside_min_trials == 5
      assert far_ms is None and far_min_trials == 3
      return {"median_ms": 1.0}

    worker = types.SimpleNamespace(
        device=types.SimpleNamespace(type=device), timer=None, model=None, _inputs=None,
        timing=types.SimpleNamespace(time_forward=time_forward),
        torch=types.SimpleNamespace(cuda=types.SimpleNamespace(
            empty_cache=lambda: calls.append("empty_cache"))),
        _observed_forward=lambda inputs: ("out", [], {}), _launch_violations=lambda l: [],
        problem=types.SimpleNamespace(flatten=lambda out: [out]), _tamper_violations=lambda: [])
    reply = worker_run.RunSteps.time(worker, [7, 8], [0], 1, 0.1, 3, 0.01)
    assert calls == [("timed", 0.01)] + (["empty_cache"] if emptied else [])
    assert reply["audits"] == [(7, ["out"])] and worker._held == reply["audits"]


def test_a_timing_left_disturbed_reports_no_speedup():
  from kernelzero_jax.sandbox import judge as judge_lib  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import verdict as V  # pylint: disable=import-outside-toplevel
  clean = V.Verdict(status=V.CORRECT, candidate_ms=2.0, reference_ms=5.0, compile_ms=4.0)
  judge_lib.set_speedups(clean)
  assert (clean.speedup, clean.speedup_vs_compile) == (2.5, 2.0)
  left = V.Verdict(status=V.CORRECT, candidate_ms=2.0, reference_ms=5.0, compile_ms=4.0,
                   evidence={"timing_unreliable": "disturbed"})
  judge_lib.set_speedups(left)
  assert (left.speedup, left.speedup_vs_compile) == (None, None)
  assert (left.candidate_ms, left.reference_ms) == (2.0, 5.0)  # kept, for reading


def _registering_judge(weight_bytes, on_cpu, ahead=True, registered=True):
  """A judge past its candidate's construction, for GpuSteps._register_ahead, with its fence,
  steps and worker recorded."""
  from kernelzero_jax.sandbox import judge_gpu  # pylint: disable=import-outside-toplevel
  calls = []

  @contextlib.contextmanager
  def fence(name, timing, slot=True):
    calls.append(("fence", name, timing, slot))
    yield
    calls.append("fence let go")

  @contextlib.contextmanager
  def step(name):
    calls.append(("step", name))
    yield

  def request(msg, timeout_s, stage):
    calls.append((msg["cmd"], stage))
    return {"ok": True, "registered": True}

  judge = types.SimpleNamespace(
      cfg=SandboxConfig(device="cuda", register_uploads_ahead=ahead,
                        registered_uploads=registered),
      _memory_on_gpu=({"weight_bytes": weight_bytes}, 2**30, 1), _reference_on_cpu=on_cpu,
      _reference_ahead=None, ref_model="the reference", device=types.SimpleNamespace(type="cuda"),
      torch=None, worker=types.SimpleNamespace(request=request), _fence=fence, _step=step,
      _expect=lambda reply, stage: reply, calls=calls)
  return judge_gpu.GpuSteps._register_ahead, judge


@pytest.mark.parametrize("on_cpu", [True, False])
def test_large_models_pages_are_registered_under_the_fence_before_the_hold(monkeypatch, on_cpu):
  """SandboxConfig.register_uploads_ahead: the reference kept on the CPU (weights apart) and the
  candidate's model, in its worker, registered before the first hold, under the start-up
  fence without a slot; what the reference's registration gave is what its upload uses."""
  from kernelzero_jax.sandbox import host_registration  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(host_registration, "register_ahead",
                      lambda torch, model, device: ("registered", model))
  register_ahead, judge = _registering_judge(4 * 2**30, on_cpu)
  register_ahead(judge)
  assert judge.calls == [("step", "register_ahead"), ("fence", "upload", False, False),
                         ("register", "init"), "fence let go"]
  assert judge._reference_ahead == (("registered", "the reference") if on_cpu else None)


@pytest.mark.parametrize("weight_bytes, ahead, registered", [
    (1024, True, True), (None, True, True), (4 * 2**30, False, True), (4 * 2**30, True, False)])
def test_nothing_is_registered_ahead_for_small_models_or_switched_off(weight_bytes, ahead,
                                                                       registered):
  register_ahead, judge = _registering_judge(weight_bytes, True, ahead, registered)
  register_ahead(judge)
  assert judge.calls == [] and judge._reference_ahead is None


def test_a_workers_model_registered_ahead_is_moved_from_those_pages_and_let_go_otherwise(
    monkeypatch):
  """RunSteps.register then init: init's move takes the registration made for the constructed
  model; a model constructed again (another seed) does not, and the registration is let go;
  drop lets go of one never moved."""
  from kernelzero_jax.sandbox import host_registration  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import worker  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import worker_run  # pylint: disable=import-outside-toplevel
  closed, moves = [], []

  class Ahead:
    def __init__(self, model):
      self.model = model

    def close(self):
      closed.append(self.model)

  monkeypatch.setattr(host_registration, "register_ahead",
                      lambda torch, model, device, enabled: Ahead(model) if enabled else None)

  def to_device(torch, model, device, enabled, ahead):
    moves.append((model, ahead.model if ahead else None))
    return "on the gpu", {"ahead": True} if ahead else {}
  monkeypatch.setattr(host_registration, "to_device", to_device)

  def new_worker(registered=True):
    w = types.SimpleNamespace(
        torch=None, device="cuda", spec={"registered_uploads": registered}, ahead=None,
        constructed=(42, "built model"), _clean_reply=lambda: {"ok": True},
        problem=types.SimpleNamespace(construct_model=lambda *a: "built again"),
        module=types.SimpleNamespace(ModelNew=None),
        reference=types.SimpleNamespace(get_init_inputs=None))
    return w

  w = new_worker()
  assert worker_run.RunSteps.register(w) == {"ok": True, "registered": True}
  assert worker_run.RunSteps.init(w, 42) == {"ok": True, "upload": {"ahead": True}}
  assert moves == [("built model", "built model")] and w.ahead is None and closed == []

  w = new_worker()
  worker_run.RunSteps.register(w)
  worker_run.RunSteps.init(w, 7)  # another seed: built again, moved plainly
  # (host_registration.to_device lets go of a registration made for another module:
  # tests/test_host_registration.py)
  assert moves[-1] == ("built again", "built model")

  w = new_worker(registered=False)
  assert worker_run.RunSteps.register(w) == {"ok": True, "registered": False}

  w = new_worker()
  worker_run.RunSteps.register(w)
  w.__dict__.update(model=None, module=None, reference=None, _held=None, pristine=None,
                    release=lambda: {"ok": True})
  worker._Worker.drop(w)  # pylint: disable=protected-access
  assert closed == ["built model"] and w.ahead is None


def test_each_hold_records_its_wall_clock_bounds_its_kind_and_the_slots_it_took(
    tmp_path, monkeypatch):
  """Judge._gpu_hold through real slot locks (in a directory of the test's own): a shared
  check takes its width of the slots (at most all of them), a timing all of them, and on a GPU
  of one slot every hold is alone (benchmarks/gpu_steps.hold_timeline reads the 4th field)."""
  import tempfile  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.judge_gpu import GpuSteps  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  judge = types.SimpleNamespace(device=types.SimpleNamespace(index=0), cfg=SandboxConfig(),
                                verdict=types.SimpleNamespace(stage_seconds={}, evidence={}))
  hold = types.MethodType(GpuSteps._gpu_hold, judge)  # pylint: disable=protected-access
  for slots, exclusive, width in ((4, False, 2), (4, True, 1), (4, False, 9), (1, False, 1)):
    with hold(slots, exclusive, width=width) as held:
      assert held
  holds = judge.verdict.evidence["gpu_holds"]
  assert [h[2:] for h in holds] == [["shared", 2], ["alone", 4], ["shared", 4], ["alone", 1]]
  assert all(h[0] <= h[1] for h in holds) and "gpu_wait" in judge.verdict.stage_seconds
  # The alone holds also tell when they asked for the slots and got them (the hold's start).
  asked = judge.verdict.evidence["alone_asked"]
  assert [got for _, got in asked] == [holds[1][0], holds[3][0]]
  assert all(at <= got for at, got in asked)
  assert sorted(p.name for p in tmp_path.iterdir())[0].startswith("kernelzero_sandbox_gpu0")


def test_each_fence_hold_records_its_name_and_wall_clock_bounds():
  """Judge._in_fence (the start-up fence taken: _fence, _fence_within) records the wait by
  name and each hold's [name, from, to] (benchmarks/gpu_steps.timing_gaps lays the start-ups'
  beside the gaps between timings); a new worker's start-up fence, which it tells with its
  first candidate, is kept only as two finite times in order."""
  import time  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge_worker  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.judge_gpu import GpuSteps  # pylint: disable=import-outside-toplevel
  judge = types.SimpleNamespace(verdict=types.SimpleNamespace(evidence={}), _fence_held=False)
  in_fence = types.MethodType(GpuSteps._in_fence, judge)  # pylint: disable=protected-access
  before = time.time()
  for name, waited in (("device", 0.25), ("upload", 0.5), ("device", 0.125)):
    with in_fence(name, waited):
      assert judge._fence_held  # pylint: disable=protected-access
    assert not judge._fence_held  # pylint: disable=protected-access
  evidence = judge.verdict.evidence
  assert evidence["fence_wait_s"] == {"device": 0.375, "upload": 0.5}
  assert [h[0] for h in evidence["fence_holds"]] == ["device", "upload", "device"]
  assert all(before - 1e-3 <= h[1] <= h[2] <= time.time() + 1e-3
             for h in evidence["fence_holds"])
  assert judge_worker.fence_span([1.0, 2.5]) == [1.0, 2.5]
  for told in (None, [2.0, 1.0], [1.0], [1.0, float("nan")], [True, 2.0], "1,2", [1, 2, 3]):
    assert judge_worker.fence_span(told) is None

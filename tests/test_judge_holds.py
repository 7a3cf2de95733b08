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
      ("hold", True, 1), "upload reference", ("checks", 5)] + (
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
  assert judge.calls == [("hold", True, 1), "upload reference", ("checks", 5),
                         ("post check", 5), "let go", "shared"]


def test_on_the_cpu_one_pass_without_holds_nor_timing():
  judge = _judge(width=4, keeps_memory=False)
  judge.device = types.SimpleNamespace(type="cpu")
  Judge._held_stages(judge)
  assert judge.calls == ["upload reference", ("checks", 5), ("post check", 5), "shared"]


@pytest.mark.parametrize("keeps_memory", [False, True])
def test_shared_checks_and_a_timing_apart(keeps_memory):
  judge = _judge(width=2, keeps_memory=keeps_memory)
  Judge._held_stages(judge)
  assert judge.calls == [
      ("hold", False, 2), ("checks", 5)] + ([] if keeps_memory else ["release"]) + [
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
                     audit_positions, precision):
      on_audit(seeds[0], ["inputs"])
      calls.append(("timed", precision))
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

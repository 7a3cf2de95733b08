"""A pool measures a reference's own facts once (sandbox/evaluate.py, SandboxConfig.reuse_reference).

On the CPU that is the degenerate-reference checks (timing runs only on a GPU, where the same
path carries the reference's timing). Real judges, Triton interpreter, one judge at a time so the
order of measurement is fixed.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from test_sandbox_faults import CONFIG, _read
from kernelzero_jax.sandbox import Job, SandboxPool

JOBS = [("faults/constant_kernel", "near_zero"), ("honest/scaled_relu", "scaled_relu"),
        ("faults/constant_kernel", "near_zero"), ("honest/scaled_relu", "scaled_relu")]


def _judge(config):
  jobs = [Job(_read(f"references/{ref}"), _read(cand), "triton", f"{i}")
          for i, (cand, ref) in enumerate(JOBS)]
  with SandboxPool(config, max_parallel=1, launcher="subprocess") as pool:
    return pool.evaluate(jobs, once_per_candidate=False)  # every copy judged: it reuses facts


@pytest.fixture(scope="module")
def reused():
  return _judge(CONFIG)


@pytest.fixture(scope="module")
def measured():
  return _judge(dataclasses.replace(CONFIG, reuse_reference=False))


def test_a_reference_is_checked_once_and_its_flags_reach_every_later_candidate(reused):
  first_near_zero, first_relu, again_near_zero, again_relu = reused
  for v in (first_near_zero, first_relu):
    assert "reference_reused" not in v.evidence
    assert {"reference_construct", "reference_checks"} <= set(v.evidence["gpu_seconds"])
  for v in (again_near_zero, again_relu):
    assert v.evidence["reference_reused"] == ["degenerate"]
    # ...nor is the reference built a second time for them
    assert not {"reference_construct", "reference_checks"} & set(v.evidence["gpu_seconds"])
  assert first_near_zero.degenerate == again_near_zero.degenerate == ["constant_output_passes"]
  assert first_relu.degenerate == again_relu.degenerate == []
  assert first_near_zero.reference_facts == {"degenerate": ["constant_output_passes"]}


def test_reused_facts_give_the_verdicts_measuring_gives(reused, measured):
  for a, b in zip(reused, measured):
    assert (a.status, a.degenerate, a.correct) == (b.status, b.degenerate, b.correct)
  assert all("reference_reused" not in v.evidence for v in measured)
  assert [v.status for v in reused] == ["correct", "correct", "correct", "correct"]


def test_facts_are_keyed_by_reference_config_and_gpu():
  pool = SandboxPool(CONFIG, max_parallel=1, launcher="subprocess")
  other = SandboxPool(dataclasses.replace(CONFIG, num_correct_trials=2), max_parallel=1,
                      launcher="subprocess")
  key = pool.reference_key("class Model: ...", 0)
  assert key == pool.reference_key("class Model: ...", 0)
  assert key != pool.reference_key("class Model: pass", 0)
  assert key != pool.reference_key("class Model: ...", 1)
  assert key != other.reference_key("class Model: ...", 0)


class _TimingWorker:
  """Answers the judge's timing request as a worker would (no audits asked for)."""

  def request(self, msg, timeout_s, stage):
    del timeout_s, stage
    assert msg["cmd"] == "time" and msg["audit_positions"] == []
    # (a worker's numbers are read, never trusted: one that is not finite is dropped)
    return {"ok": True, "median_ms": 1.0, "trials": 12, "audits": [], "after_forward_ms": 0.5,
            "inputs_ms": 2.0, "beyond_ms": float("nan")}


def test_shared_facts_keep_the_first_measurement_of_each_fact(tmp_path):
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.sandbox.judge_reference import read_facts, share_facts
  path = str(tmp_path / "facts.json")
  assert read_facts(path) == {}
  share_facts(path, {"degenerate": []})
  share_facts(path, {"degenerate": ["constant_output_passes"], "reference_ms": 2.5})
  assert read_facts(path) == {"degenerate": [], "reference_ms": 2.5}
  (tmp_path / "broken.json").write_text("{not json")
  assert read_facts(str(tmp_path / "broken.json")) == {}
  share_facts(str(tmp_path / "gone" / "facts.json"), {"reference_ms": 1.0})  # no error


def test_judges_of_a_pool_share_one_file_per_reference_removed_with_the_pool():
  with SandboxPool(CONFIG, max_parallel=1, launcher="subprocess") as pool:
    path = pool.facts_path("class Model: ...", 0)
    assert path == pool.facts_path("class Model: ...", 0)
    assert path != pool.facts_path("class Model: pass", 0)
    assert path != pool.facts_path("class Model: ...", 1)
    assert path.endswith(pool.reference_key("class Model: ...", 0) + ".json")
    directory = path.rsplit("/", 1)[0]
    assert os.path.isdir(directory)
  assert not os.path.exists(directory)


def judge_on_the_cpu(config, facts_path: str, facts: dict | None = None):
  """A Triton judge of the scaled ReLU, past its start-up, with its tensors on the CPU (its
  worker is the caller's to set), and `facts` shared in its pool's file beforehand."""
  import shutil  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge as judge_lib  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import judge_reference  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import problem  # pylint: disable=import-outside-toplevel
  if facts:
    judge_reference.share_facts(facts_path, facts)
  judge = judge_lib.Judge({"backend": "triton", "config": config.to_dict(),
                           "facts_path": facts_path})
  shutil.rmtree(judge.workdir, ignore_errors=True)
  judge.torch, judge.problem, judge.device = torch, problem, torch.device("cpu")
  judge.ref_mod = problem.load_module(_read("references/scaled_relu"), "kz_reference")
  judge.ref_model = problem.make_model(judge.ref_mod.Model, judge.ref_mod.get_init_inputs,
                                       config.init_seed, judge.device)
  return judge


@pytest.mark.parametrize("known,how", [
    ({}, "none shared yet"),
    ({"reference_ms": 4.0, "compile_ms": None, "reference_trials": 7}, "shared"),
    ({"reference_ms": 4.0, "compile_ms": None, "reference_trials": 7}, "shared, reuse off")])
def test_a_known_reference_time_is_not_measured_again(monkeypatch, tmp_path, known, how):
  """The judge's timing stage with the GPU timer replaced: a known reference time, shared in
  the pool's facts file by then, is reused (and named); an unknown one (no file yet) is
  measured, reported as a fact and shared once its timing is known undisturbed."""
  from kernelzero_jax.sandbox import judge_reference  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import timing  # pylint: disable=import-outside-toplevel
  measured, timers = [], []
  monkeypatch.setattr(timing, "Timer", timers.append)
  monkeypatch.setattr(timing, "time_forward",
                      lambda *a, **k: measured.append(1) or {"median_ms": 2.0, "trials": 10,
                                                              "after_forward_ms": 0.25,
                                                              "inputs_ms": 0.0, "beyond_ms": 0.3})
  config = dataclasses.replace(CONFIG, num_audits=0, reuse_reference=how != "shared, reuse off")
  facts_path = str(tmp_path / "facts.json")
  judge = judge_on_the_cpu(config, facts_path, known)
  judge.worker = _TimingWorker()
  judge._timing(0)  # pylint: disable=protected-access
  # Shared only once the timing is known undisturbed (Judge._timed_apart), not by _timing.
  assert judge_reference.read_facts(facts_path) == known
  judge._share_reference_facts()  # pylint: disable=protected-access
  v = judge.verdict
  assert v.candidate_ms == 1.0
  if how == "shared, reuse off":
    assert measured == [1] and v.reference_ms == 2.0 and "reference_reused" not in v.evidence
    assert judge_reference.read_facts(facts_path) == known  # neither read nor written
    return
  assert judge_reference.read_facts(facts_path) == v.reference_facts
  if known:
    assert measured == [] and timers == [] and v.reference_ms == 4.0
    assert v.evidence["reference_reused"] == ["timing"]
    assert v.evidence["timing_trials"] == {"reference": 7, "candidate": 12}
    assert v.evidence["timing_after_forward_ms"] == {"candidate": 0.5}  # only what was measured
    assert v.evidence["timing_loop_ms"] == {"candidate": {"inputs_ms": 2.0}}
  else:
    assert measured == [1] and len(timers) == 1 and v.reference_ms == 2.0
    assert "reference_reused" not in v.evidence
    assert v.evidence["timing_after_forward_ms"] == {"reference": 0.25, "candidate": 0.5}
    assert v.evidence["timing_loop_ms"] == {"reference": {"inputs_ms": 0.0, "beyond_ms": 0.3},
                                            "candidate": {"inputs_ms": 2.0}}
  assert v.reference_facts == {"reference_ms": v.reference_ms, "compile_ms": None,
                               "reference_trials": 7 if known else 10}


def test_the_throughput_benchmark_names_reference_reuse_in_its_paths():
  from absl import app  # pylint: disable=import-outside-toplevel
  from benchmarks.sandbox_throughput import BenchPath, parse_path  # pylint: disable=import-outside-toplevel
  # Every field not named is as in the sandbox's defaults.
  path = lambda name, **fields: BenchPath(name, name.split(":")[0], True, True, None, 0)._replace(
      **fields)
  assert parse_path("zygote:fast") == path("zygote:fast")
  assert tuple(parse_path("zygote:fast")[6:]) == ((True,) * 4 + (None,) + (True,) * 7 + (None,) * 3
                                                 + (True,) * 4 + (None, True, True, True, False,
                                                                   True, None, None, False, None,
                                                                   True, True, False, False,
                                                                   True, True, False, False,
                                                                   False, None, False,
                                                                   False, False, None))
  assert parse_path("zygote:fast:measure") == path("zygote:fast:measure", reuse=False)
  assert parse_path("subprocess:plain:reuse") == path("subprocess:plain:reuse", fast=False)
  assert parse_path("zygote:fast:gpu4") == path("zygote:fast:gpu4", concurrency=4)
  assert parse_path("zygote:fast:measure:gpu16") == path("zygote:fast:measure:gpu16",
                                                         reuse=False, concurrency=16)
  assert parse_path("zygote:lite:gpu4") == path("zygote:lite:gpu4", concurrency=4, lite=1)
  assert parse_path("zygote:lite_main") == path("zygote:lite_main", lite=2)
  assert parse_path("zygote:lite_pch:gpu4") == path("zygote:lite_pch:gpu4", concurrency=4, lite=3)
  assert parse_path("zygote:fast:reuse:gpu4:nopre") == path(
      "zygote:fast:reuse:gpu4:nopre", concurrency=4, precompile=False)
  assert parse_path("zygote:lite_pch:gpu4:serial") == path(
      "zygote:lite_pch:gpu4:serial", concurrency=4, lite=3, concurrent=False)
  assert parse_path("zygote:lite_pch:gpu4:torchcmp") == path(
      "zygote:lite_pch:gpu4:torchcmp", concurrency=4, lite=3, fused=False)
  assert parse_path("zygote:lite_pch:gpu4:alone").wide is False
  # the trailing flags in any order
  for name in ("zygote:fast:nopre:serial", "zygote:fast:serial:nopre"):
    assert parse_path(name) == path(name, precompile=False, concurrent=False)
  assert parse_path("zygote:fast:gpu4:torchcmp:nopre") == path(
      "zygote:fast:gpu4:torchcmp:nopre", concurrency=4, fused=False, precompile=False)
  assert parse_path("zygote:fast:gpu4:alone:torchcmp") == path(
      "zygote:fast:gpu4:alone:torchcmp", concurrency=4, wide=False, fused=False)
  # a timing target per path, among the trailing flags
  assert parse_path("zygote:lite_pch:gpu4:t0.1").timing_target_s == 0.1
  assert parse_path("zygote:lite_pch:gpu4:t2") == path("zygote:lite_pch:gpu4:t2", concurrency=4,
                                                       lite=3, timing_target_s=2.0)
  assert parse_path("zygote:fast:t.5:alone") == path("zygote:fast:t.5:alone", wide=False,
                                                     timing_target_s=0.5)
  assert parse_path("zygote:fast:alone:t0.25") == path("zygote:fast:alone:t0.25", wide=False,
                                                       timing_target_s=0.25)
  assert parse_path("zygote:lite_pch:gpu4:nonice:t0.1") == path(
      "zygote:lite_pch:gpu4:nonice:t0.1", concurrency=4, lite=3, timing_target_s=0.1,
      niced=False)
  assert parse_path("zygote:lite_pch:t0.1:nonice").niced is False
  assert parse_path("zygote:lite_pch:gpu4:refafter:t0.1") == path(
      "zygote:lite_pch:gpu4:refafter:t0.1", concurrency=4, lite=3, timing_target_s=0.1,
      reference_first=False)
  assert parse_path("zygote:lite_pch:refafter:nonice").reference_first is False
  assert parse_path("zygote:lite_pch:gpu4:release:t0.1") == path(
      "zygote:lite_pch:gpu4:release:t0.1", concurrency=4, lite=3, timing_target_s=0.1,
      keep_memory=False)
  assert parse_path("zygote:lite_pch:gpu4:nowarm:release") == path(
      "zygote:lite_pch:gpu4:nowarm:release", concurrency=4, lite=3, keep_memory=False,
      warm_up=False)
  assert parse_path("zygote:lite_pch:gpu4:release:refafter") == path(
      "zygote:lite_pch:gpu4:release:refafter", concurrency=4, lite=3, keep_memory=False,
      reference_first=False)
  assert parse_path("zygote:lite_pch:gpu4:nosetup:nowarm") == path(
      "zygote:lite_pch:gpu4:nosetup:nowarm", concurrency=4, lite=3, warm_up=False,
      setup_profiled=False)
  assert parse_path("zygote:lite_pch:nofence:t0.25") == path(
      "zygote:lite_pch:nofence:t0.25", lite=3, timing_target_s=0.25, fenced=False)
  assert parse_path("zygote:lite_pch:gpu4:p48") == path("zygote:lite_pch:gpu4:p48", lite=3,
                                                        concurrency=4, parallel=48)
  assert parse_path("zygote:lite_pch:gpu4:w8:f2") == path("zygote:lite_pch:gpu4:w8:f2", lite=3,
                                                          concurrency=4, startups_at_once=2,
                                                          candidates_per_worker=8)
  assert parse_path("zygote:lite_pch:onejob:p48") == path(
      "zygote:lite_pch:onejob:p48", lite=3, judges_serve_several=False, parallel=48)
  assert parse_path("zygote:lite_pch:f0:onejob") == path(
      "zygote:lite_pch:f0:onejob", lite=3, judges_serve_several=False, startups_at_once=0)
  assert parse_path("zygote:lite_pch:gpu4:f8").startups_at_once == 8
  assert parse_path("zygote:lite_pch:t0.25:refregen:gcscan") == path(
      "zygote:lite_pch:t0.25:refregen:gcscan", lite=3, timing_target_s=0.25,
      reference_reuses_inputs=False, gc_freeze=False)
  assert parse_path("zygote:lite_pch:gcscan:w1").candidates_per_worker == 1
  assert parse_path("zygote:lite_pch:t0.25:seqlaunch:wsspawn") == path(
      "zygote:lite_pch:t0.25:seqlaunch:wsspawn", lite=3, timing_target_s=0.25,
      worker_server_fork=False, early_launchers=False)
  assert parse_path("zygote:lite_pch:gpu4:wu1:w8:t0.25") == path(
      "zygote:lite_pch:gpu4:wu1:w8:t0.25", lite=3, concurrency=4, warmup=1,
      candidates_per_worker=8, timing_target_s=0.25)
  assert parse_path("zygote:lite_pch:gpu4:pageable:wu1") == path(
      "zygote:lite_pch:gpu4:pageable:wu1", lite=3, concurrency=4, warmup=1,
      registered_uploads=False)
  assert parse_path("zygote:lite_pch:t0.25:secondfirst") == path(
      "zygote:lite_pch:t0.25:secondfirst", lite=3, timing_target_s=0.25,
      second_reference_after=False)
  assert parse_path("zygote:lite_pch:reuse:gpu4:pristine") == path(
      "zygote:lite_pch:reuse:gpu4:pristine", lite=3, concurrency=4,
      inputs_against_reference=False)
  assert parse_path("zygote:lite_pch:t0.25:allseed:w16") == path(
      "zygote:lite_pch:t0.25:allseed:w16", lite=3, timing_target_s=0.25, seed_all_backends=True,
      candidates_per_worker=16)
  assert parse_path("zygote:lite_pch:reuse:gpu4:noretime:t0.1") == path(
      "zygote:lite_pch:reuse:gpu4:noretime:t0.1", lite=3, concurrency=4, timing_target_s=0.1,
      retime_disturbed=False)
  assert parse_path("zygote:lite_pch:p8:nofence:t0.1") == path(
      "zygote:lite_pch:p8:nofence:t0.1", lite=3, parallel=8, fenced=False, timing_target_s=0.1)
  # a timing's precision and its least number of trials
  assert parse_path("zygote:lite_pch:reuse:gpu4:prec0:t0.25") == path(
      "zygote:lite_pch:reuse:gpu4:prec0:t0.25", lite=3, concurrency=4, timing_target_s=0.25,
      timing_precision=0.0)
  assert parse_path("zygote:lite_pch:reuse:gpu4:mt5:prec0.02:wu1") == path(
      "zygote:lite_pch:reuse:gpu4:mt5:prec0.02:wu1", lite=3, concurrency=4, warmup=1,
      timing_precision=0.02, min_trials=5)
  assert parse_path("zygote:lite_pch:prec.005").timing_precision == 0.005
  assert parse_path("zygote:lite_pch:reuse:gpu4:regahead:t0.25") == path(
      "zygote:lite_pch:reuse:gpu4:regahead:t0.25", lite=3, concurrency=4, timing_target_s=0.25,
      register_ahead=True)
  assert parse_path("zygote:lite_pch:reuse:gpu4:band1-3:t0.25") == path(
      "zygote:lite_pch:reuse:gpu4:band1-3:t0.25", lite=3, concurrency=4, timing_target_s=0.25,
      speedup_band=(1.0, 3.0))
  assert parse_path("zygote:lite_pch:band0.5-inf").speedup_band == (0.5, float("inf"))
  assert parse_path("zygote:lite_pch:reuse:gpu4:noledger:t0.25") == path(
      "zygote:lite_pch:reuse:gpu4:noledger:t0.25", lite=3, concurrency=4, timing_target_s=0.25,
      weights_ledger=False)
  assert parse_path("zygote:lite_pch:reuse:gpu4:pybind:noledger") == path(
      "zygote:lite_pch:reuse:gpu4:pybind:noledger", lite=3, concurrency=4, weights_ledger=False,
      capi_main=False)
  assert parse_path("zygote:lite_pch:reuse:gpu4").capi_main
  assert parse_path("zygote:lite_pch:reuse:gpu4:emptyfence:t0.25") == path(
      "zygote:lite_pch:reuse:gpu4:emptyfence:t0.25", lite=3, concurrency=4, timing_target_s=0.25,
      fence_empty_uploads=True)
  assert parse_path("zygote:lite_pch:refinhold:emptyfence").reference_upload_in_hold
  assert parse_path("zygote:lite_pch:reuse:gpu4:keptfallback:w1") == path(
      "zygote:lite_pch:reuse:gpu4:keptfallback:w1", lite=3, concurrency=4,
      candidates_per_worker=1, fresh_worker_for_fallback_builds=False)
  assert parse_path("zygote:lite_pch:reuse:gpu4").fresh_worker_for_fallback_builds
  assert parse_path("zygote:lite_pch:reuse:gpu4:keepall:keptfallback") == path(
      "zygote:lite_pch:reuse:gpu4:keepall:keptfallback", lite=3, concurrency=4,
      fresh_worker_for_fallback_builds=False, choose_workers=False)
  assert parse_path("zygote:lite_pch:reuse:gpu4").choose_workers
  assert parse_path("zygote:lite_pch:reuse:gpu4:skiplight").skip_light
  assert not parse_path("zygote:lite_pch:reuse:gpu4").skip_light
  assert parse_path("zygote:lite_pch:reuse:gpu4:tfirst:skiplight") == path(
      "zygote:lite_pch:reuse:gpu4:tfirst:skiplight", lite=3, concurrency=4, skip_light=True,
      timings_first=True)
  assert not parse_path("zygote:lite_pch:reuse:gpu4").timings_first
  assert parse_path("zygote:lite_pch:reuse:gpu4:stdtext:tfirst") == path(
      "zygote:lite_pch:reuse:gpu4:stdtext:tfirst", lite=3, concurrency=4, timings_first=True,
      std_text_always=True)
  assert parse_path("zygote:lite_pch:reuse:gpu4:band1-3:wk0.15") == path(
      "zygote:lite_pch:reuse:gpu4:band1-3:wk0.15", lite=3, concurrency=4,
      speedup_band=(1.0, 3.0), weights_kept_share=0.15)
  assert parse_path("zygote:lite_pch:wk.2").weights_kept_share == 0.2
  assert parse_path("zygote:lite_pch:reuse:gpu4").weights_kept_share is None
  assert parse_path("zygote:lite_pch:reuse:gpu4:band1-3:again") == path(
      "zygote:lite_pch:reuse:gpu4:band1-3:again", lite=3, concurrency=4,
      speedup_band=(1.0, 3.0), second_batch=True)
  assert not parse_path("zygote:lite_pch:reuse:gpu4").second_batch
  assert parse_path("zygote:lite_pch:reuse:gpu4:prestart:band1-3") == path(
      "zygote:lite_pch:reuse:gpu4:prestart:band1-3", lite=3, concurrency=4,
      speedup_band=(1.0, 3.0), prestart=True)
  assert not parse_path("zygote:lite_pch:reuse:gpu4").prestart
  assert parse_path("zygote:lite_pch:reuse:gpu4:spread:band1-3") == path(
      "zygote:lite_pch:reuse:gpu4:spread:band1-3", lite=3, concurrency=4,
      speedup_band=(1.0, 3.0), spread=True)
  assert not parse_path("zygote:lite_pch:reuse:gpu4").spread
  assert parse_path("zygote:lite_pch:reuse:gpu4:band1-3:far3") == path(
      "zygote:lite_pch:reuse:gpu4:band1-3:far3", lite=3, concurrency=4,
      speedup_band=(1.0, 3.0), band_far_factor=3.0)
  assert parse_path("zygote:lite_pch:far2.5").band_far_factor == 2.5
  assert parse_path("zygote:lite_pch:reuse:gpu4").band_far_factor is None
  with pytest.raises(app.UsageError, match="do not go together"):
    parse_path("zygote:lite_pch:reuse:gpu4:again:prestart")
  for bad in ("zygote:fast:prec", "zygote:fast:prec1", "zygote:fast:prec0:prec0.1",
              "zygote:fast:mt0", "zygote:fast:mt5:mt6", "zygote:fast:prec-0.1",
              "zygote:fast:regahead:regahead", "zygote:fast:band3-1", "zygote:fast:band0-3",
              "zygote:fast:band1", "zygote:fast:band1-3:band1-2", "zygote:fast:bandinf-3",
              "zygote:fast:noledger:noledger", "zygote:fast:pybind:pybind",
              "zygote:fast:emptyfence:emptyfence", "zygote:fast:refinhold:refinhold",
              "zygote:fast:keptfallback:keptfallback", "zygote:fast:keepall:keepall",
              "zygote:fast:again:again", "zygote:fast:prestart:prestart",
              "zygote:fast:spread:spread", "zygote:fast:far0.5", "zygote:fast:far3:far2",
              "zygote:fast:far",
              "zygote:fast:skiplight:skiplight", "zygote:fast:tfirst:tfirst",
              "zygote:fast:stdtext:stdtext", "zygote:fast:wk0", "zygote:fast:wk0.0",
              "zygote:fast:wk1", "zygote:fast:wk0.1:wk0.2", "zygote:fast:wk0.5",
              "zygote:fast:capi"):
    with pytest.raises(app.UsageError, match="LAUNCHER:BUILD"):
      parse_path(bad)
  for bad in ("zygote", "zygote:slow", "zygote:fast:maybe", "zygote:fast:reuse:x", "fork:fast",
              "zygote:fast:", "zygote:fast:gpu0", "zygote:fast:gpu4:reuse",
              "zygote:fast:reuse:gpu4:gpu4", "zygote:fast:nopre:gpu4", "zygote:fast:nopre:nopre",
              "zygote:fast:serial:serial", "zygote:fast:torchcmp:gpu4:nopre",
              "zygote:fast:torchcmp:torchcmp", "zygote:fast:alone:gpu4", "zygote:fast:t0",
              "zygote:fast:t0.1:t0.2", "zygote:fast:t", "zygote:fast:t-1", "zygote:fast:t0.1:gpu4",
              "zygote:fast:tx", "zygote:fast:nonice:nonice", "zygote:fast:wu0", "zygote:fast:wu1:wu2", "zygote:fast:pageable:pageable",
              "zygote:fast:regup",
              "zygote:fast:pristine:pristine", "zygote:fast:allseed:allseed",
              "zygote:fast:noretime:noretime",
              "zygote:fast:refafter:refafter",
              "zygote:fast:release:release", "zygote:fast:release:gpu4",
              "zygote:fast:nowarm:nowarm", "zygote:fast:nosetup:nosetup",
              "zygote:fast:nosetup:gpu4", "zygote:fast:nofence:nofence", "zygote:fast:p0",
              "zygote:fast:p4:p8", "zygote:fast:p", "zygote:fast:p4:gpu4", "zygote:fast:p-2"):
    with pytest.raises(app.UsageError, match="LAUNCHER:BUILD"):
      parse_path(bad)

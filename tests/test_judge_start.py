"""Judge processes started ahead of their candidates (SandboxPool.start_judges, judge_start.py),
on the CPU: the pool's next jobs go to them, as later jobs of a judge that served one, with their
workers from the judge's worker server; the server gives each start a process of its own; where
judges serve one job each, or come from plain processes, none starts; a device that cannot be
made ready says why.
"""

from __future__ import annotations

import dataclasses
import pathlib

from kernelzero_jax.sandbox import Job
from kernelzero_jax.sandbox import SandboxConfig
from kernelzero_jax.sandbox import SandboxPool
from kernelzero_jax.sandbox import evaluate
from kernelzero_jax.sandbox import judge_start
from kernelzero_jax.sandbox import launchers

CANDIDATES = pathlib.Path(__file__).parent / "candidates"
CONFIG = SandboxConfig(device="cpu", num_correct_trials=1, correctness_timeout_s=6.0,
                       build_timeout_s=60.0, jobs_per_judge_process=4)


def _job() -> Job:
  return Job((CANDIDATES / "references/scaled_relu.py").read_text(),
             (CANDIDATES / "honest/scaled_relu.py").read_text(), "triton", "scaled_relu")


def test_the_next_jobs_go_to_the_judges_started_ahead():
  with SandboxPool(CONFIG, max_parallel=2) as pool:
    started = pool.start_judges()
    verdicts = pool.evaluate([_job(), _job()], once_per_candidate=False)
  assert started["started"] == 2 and started["failed"] == [], started
  assert len(set(started["pids"])) == 2 and started["seconds"] > 0
  assert [v.status for v in verdicts] == ["correct", "correct"], [v.reasons for v in verdicts]
  # Each candidate was its judge's second job (the start was the first), and its worker came
  # from the judge's worker server, forked before the start, as for any later job.
  assert sorted(v.evidence["judge_process"]["pid"] for v in verdicts) == sorted(started["pids"])
  assert [v.evidence["judge_process"]["job"] for v in verdicts] == [2, 2]
  assert [v.evidence["worker_start"] for v in verdicts] == ["forkserver", "forkserver"]


def test_each_start_gets_a_judge_process_of_its_own():
  # One judge started, idle in the server, then another: the second start is not handed to the
  # idle one (that would start nothing), as a candidate's job would be.
  with SandboxPool(CONFIG, max_parallel=1) as pool:
    first = pool.start_judges()
    second = pool.start_judges()
  assert first["started"] == second["started"] == 1
  assert first["pids"] != second["pids"]


def test_no_judge_starts_where_a_judge_serves_one_job_or_comes_from_a_plain_process():
  one_job = dataclasses.replace(CONFIG, jobs_per_judge_process=None)  # the CPU's default: 1
  with SandboxPool(one_job, max_parallel=2) as pool:
    assert pool.start_judges() == {"started": 0, "pids": [], "failed": [], "seconds": 0.0}
    assert pool.launcher.server_pid() is None  # not even the server started for it
  with SandboxPool(CONFIG, max_parallel=2, launcher="subprocess") as pool:
    assert pool.start_judges()["started"] == 0
    assert pool.start_judges(judges=0)["started"] == 0


def test_a_start_that_fails_to_run_is_told_not_raised(monkeypatch):
  def broken(job, config, launcher):
    raise OSError("no room for the job's files")
  monkeypatch.setattr(evaluate, "run_judge", broken)
  with SandboxPool(CONFIG, max_parallel=2) as pool:
    got = pool.start_judges()
  assert got["started"] == 0 and got["pids"] == []
  assert got["failed"] == ["OSError: no room for the job's files"] * 2


def test_a_start_reports_its_steps_through_a_judge_process():
  with SandboxPool(CONFIG, max_parallel=1) as pool:
    job = {"kind": judge_start.KIND, "config": CONFIG.to_dict(), "gpu_index": 0}
    report, why, timed_out = launchers.run_judge(job, CONFIG, pool.launcher)
  assert why == "" and not timed_out
  assert report["ready"] is True and report["device"] == "cpu" and report["reasons"] == []
  assert set(report["startup_seconds"]) == {"device"}  # no warm-up or comparison kernel on a CPU
  assert report["evidence"]["judge_process"]["job"] == 1


def test_a_device_that_cannot_be_made_ready_says_why():
  # (In this process: on a machine without a GPU, the check fails before any CUDA call.)
  config = dataclasses.replace(CONFIG, device="cuda")
  report = judge_start.start_job({"kind": judge_start.KIND, "config": config.to_dict(),
                                  "gpu_index": 0})
  assert report.ready is False
  assert report.reasons == ["device cuda requested but no CUDA device is visible"]
  assert report.to_dict()["ready"] is False

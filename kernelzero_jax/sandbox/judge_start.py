"""A judge process started ahead of its candidates (SandboxPool.start_judges).

On an H200 a batch of 259 CUDA candidates lost 14-22 s at its start against the rate of its
middle (benchmarks/gpu_steps.py, completion_rates): its first 24 judges and their 24 workers all
created CUDA contexts at once, through the start-up fence that the driver serialises anyway, while
24 builds took the CPU. The judges' own contexts took 5-10 s at the median there (up to 35 s;
BENCHMARKS.md, "What a batch loses at its start"), against about 0.25 s for one alone; a judge
process that serves several jobs (judge_host.py) makes its context once, for its first.

A start job is that first job without a candidate: the judge process makes its device ready as a
candidate's judge does (its CUDA context under the fence, the device's warm-up, the comparison
kernel's compile), reports, and waits in the warm server like a judge between jobs. Its first
candidate then finds all of it done, and its worker comes from the judge's worker server, which
the process forked before its context existed, as for every later job (judge_host.py); what stays
apart is unchanged. The start job carries no candidate and no reference, and the process reads
the caller's secret as after any job.
"""

from __future__ import annotations

import dataclasses
from typing import Any

KIND = "start"


@dataclasses.dataclass
class StartReport:
  """What a start job did: whether the device is ready (`reasons` if not), its steps' seconds
  (startup_seconds: "device", "warm_up", "fused_compare" where they ran) and `evidence` (the
  start-up fence's waits, as a verdict's; judge_job_file adds "judge_process")."""
  ready: bool
  device: str = ""
  reasons: list[str] = dataclasses.field(default_factory=list)
  startup_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
  evidence: dict[str, Any] = dataclasses.field(default_factory=dict)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def start_job(job: dict[str, Any]) -> StartReport:
  """Makes this judge process's device ready for the candidates of `job["config"]` on GPU
  `job["gpu_index"]`, as Judge._evaluate would for its first one."""
  # pylint: disable=import-outside-toplevel,protected-access
  import shutil

  import torch
  from kernelzero_jax.sandbox import problem
  from kernelzero_jax.sandbox.judge import Judge
  from kernelzero_jax.sandbox.worker_handle import StageFailure

  judge = Judge(dict(job, backend=""))
  judge.torch, judge.problem = torch, problem
  clock = judge.startup
  report = StartReport(ready=False, device=judge.cfg.device, evidence=judge.verdict.evidence)
  try:
    judge._make_device_ready()
    clock.lap("device")
    report.device = str(judge.device)
    if judge._warm_up_device():
      clock.lap("warm_up")
    if judge.device.type == "cuda" and judge.cfg.fused_compare:
      # Its compile as a candidate's judge starts it (fused_compare.compile_cubin is memoised:
      # the first candidate's judge finds it compiled); one that fails is compiled again then,
      # and reported there.
      judge._start_fused_compare()
      judge._fused_thread.join()
      if "error" in judge._fused_built:
        report.reasons.append(f"fused_compare: {judge._fused_built['error']}"[:300])
      clock.lap("fused_compare")
    report.ready = True
  except StageFailure as f:
    report.reasons.append(f.reason)
  finally:
    shutil.rmtree(judge.workdir, ignore_errors=True)
  report.startup_seconds = dict(clock.seconds)
  report.evidence.pop("input_seed_base", None)  # (no inputs are made)
  return report

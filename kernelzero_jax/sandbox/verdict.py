"""The verdict: the one result schema that every sandbox entry point returns (DESIGN.md, Contracts)."""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from typing import Any

CORRECT = "correct"
INCORRECT = "incorrect"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
REJECTED = "rejected"
FORMAT_ERROR = "format_error"
UNSUPPORTED = "unsupported"

STATUSES = (CORRECT, INCORRECT, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, REJECTED, FORMAT_ERROR,
            UNSUPPORTED)

# Flags for references that cannot discriminate candidates (reported, never hidden).
DEGENERATE_CONSTANT = "constant_output_passes"
DEGENERATE_NONDETERMINISTIC = "reference_not_reproducible"
DEGENERATE_NONFINITE = "reference_not_finite"


@dataclasses.dataclass
class Verdict:
  """What the sandbox concluded about one candidate.

  `stage` names where evaluation ended (static, build, init, correctness, timing, post_check, done).
  `reference_error` is true when the *reference* (not the candidate) failed, so callers can tell a
  broken task from a broken kernel. `reference_facts` is what this judgement measured about the
  reference alone (`degenerate` once its checks ran; `reference_ms`, `compile_ms` and
  `reference_trials` once it was timed), which the judges of a pool share with the other
  candidates of the same reference and config (SandboxConfig.reuse_reference; reused facts are
  named in `evidence["reference_reused"]`).
  """

  status: str
  backend: str = ""
  device: str = ""
  speedup: float | None = None
  reference_ms: float | None = None
  candidate_ms: float | None = None
  compile_ms: float | None = None
  speedup_vs_compile: float | None = None
  reasons: list[str] = dataclasses.field(default_factory=list)
  tolerance: dict[str, Any] = dataclasses.field(default_factory=dict)
  degenerate: list[str] = dataclasses.field(default_factory=list)
  stage: str = ""
  stage_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
  num_correct_trials: int = 0
  max_abs_error: float | None = None
  max_rel_error: float | None = None
  reference_error: bool = False
  evidence: dict[str, Any] = dataclasses.field(default_factory=dict)
  reference_facts: dict[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if self.status not in STATUSES:
      raise ValueError(f"unknown verdict status {self.status!r}; expected one of {STATUSES}")

  @property
  def correct(self) -> bool:
    return self.status == CORRECT

  def to_dict(self) -> dict[str, Any]:
    d = dataclasses.asdict(self)
    d["correct"] = self.correct
    return d

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False, default=_json_default)

  @classmethod
  def from_dict(cls, d: dict[str, Any]) -> "Verdict":
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


class StepClock:
  """Seconds of consecutive steps, for stage and start-up timings: lap(name) records the time
  since the previous lap (or since `start`, a time.perf_counter() reading)."""

  def __init__(self, start: float | None = None):
    self.seconds: dict[str, float] = {}
    self._at = time.perf_counter() if start is None else start

  def lap(self, step: str) -> None:
    now = time.perf_counter()
    self.seconds[step] = round(now - self._at, 4)
    self._at = now


def error_tail(exc: BaseException, limit: int = 12) -> str:
  """The last `limit` lines of `exc`'s traceback: the reason a verdict gives for it."""
  lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
  text = "".join(lines).strip().splitlines()
  return "\n".join(text[-limit:])


def first_attempt(evidence: dict[str, Any]) -> dict[str, Any]:
  """Where and when a verdict that is judged again ran (evidence["judged_again"],
  ["shared_gpu_oom_attempt"]): its GPU holds and its worker's pid, its judge's too once known,
  so that benchmarks/gpu_steps.py can place what happened then (the processes an out-of-memory
  error lists, say) beside the other judges; and the attempt before it where it was itself a
  judging again (a kept worker's failure, then out of memory on a shared GPU)."""
  return {key: evidence[key] for key in ("gpu_holds", "worker_pid", "judge_process",
                                         "judged_again") if key in evidence}


def _json_default(obj):
  return repr(obj)

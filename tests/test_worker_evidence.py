"""What a worker's run reply may add to its verdict's evidence (CandidateSteps._merge_evidence).

The worker shares its process with the candidate, which can send the judge anything down the
pipe: only the names and counts a run observes are recorded, coerced, and nothing else the reply
says, nor any malformed value, reaches the verdict or fails the judge.
"""

from __future__ import annotations

import json
import types

from kernelzero_jax.sandbox import judge_checks
from kernelzero_jax.sandbox import verdict as V


def _merge(*replies) -> dict:
  judge = types.SimpleNamespace(verdict=V.Verdict(status=V.RUNTIME_ERROR, backend="cuda"))
  judge.verdict.evidence["gpu_seconds"] = {"compare": 0.5}
  for ev in replies:
    judge_checks.CandidateSteps._merge_evidence(judge, ev)  # pylint: disable=protected-access
  return judge.verdict.evidence


def test_what_runs_observed_is_merged_across_checks():
  first = {"ops": ["aten::add", "aten::empty"], "triton_launches": {"k": 1},
           "gpu_kernels": ["k(float*)"], "own_kernels_ran": ["k(float*)"]}
  second = {"ops": ["aten::empty", "aten::mul"], "triton_launches": {"k": 2, "j": 1}}
  assert _merge(first, second) == {
      "gpu_seconds": {"compare": 0.5}, "ops": ["aten::add", "aten::empty", "aten::mul"],
      "triton_launches": {"k": 3, "j": 1}, "gpu_kernels": ["k(float*)"],
      "own_kernels_ran": ["k(float*)"]}


def test_a_reply_cannot_write_the_judges_own_evidence_nor_fail_it():
  forged = [
      {"gpu_seconds": {"compare": "lots"}, "same_candidate_as": 0, "messages": 7},
      {"ops": [["unhashable"], {"x": 1}, 3], "triton_launches": {"k": "many", "j": True, 5: 2}},
      {"gpu_kernels": {"not": "a list of names"}, "own_kernels_ran": None},
      ["not", "a", "dict"], None, "evidence"]
  evidence = _merge(*forged)
  json.dumps(evidence)  # still a verdict's evidence
  assert evidence == {"gpu_seconds": {"compare": 0.5},
                      "ops": sorted(["['unhashable']", "{'x': 1}", "3"]),
                      "triton_launches": {"5": 2}}

"""The judge's check that a candidate left its inputs as made (Judge._inputs_kept), against the
rule it replaces, re-derived here with a pristine copy of every input set: a candidate that
changes its inputs in place is rejected unless the reference's forward changes them too.

The judge now compares the worker's inputs after its forward with the reference's after its own
(the same set: made from the same seed) and makes the set again only where the two differ; the
verdict must be the rule's for every pair of forwards, and no set is made again where both left
the inputs alike.
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest
import torch

from kernelzero_jax.sandbox import judge_checks
from kernelzero_jax.sandbox import problem
from kernelzero_jax.sandbox import verdict as V
from kernelzero_jax.sandbox.worker_handle import StageFailure


def _get_inputs():
  return [torch.randn(4, 8), torch.randn(8)]


# Forwards by what they do to their inputs (the outputs do not matter here).
FORWARDS = {
    "reads": lambda x, b: x + b,
    "relu_first": lambda x, b: x.relu_() + b,
    "doubles_first": lambda x, b: x.mul_(2) + b,
    "shifts_second": lambda x, b: x + b.add_(1),
    "relu_first_again": lambda x, b: x.relu_() + b,  # the same change as relu_first
}


def _pristine_rule(seed: int, reference, candidate) -> bool:
  """The old rule: with a copy of the set as made, the candidate is accepted when the reference
  changes its inputs, else when the candidate leaves them equal to the copy."""
  made = problem.make_inputs(_get_inputs, seed, torch.device("cpu"))
  pristine = [t.clone() for t in made]
  reference(*made)
  if any(not torch.equal(a, p) for a, p in zip(made, pristine)):
    return True
  theirs = problem.make_inputs(_get_inputs, seed, torch.device("cpu"))
  candidate(*theirs)
  return all(torch.equal(a, p) for a, p in zip(theirs, pristine))


class _CountingProblem:
  """problem, with make_inputs counted."""

  def __init__(self):
    self.made = 0

  def __getattr__(self, name):
    return getattr(problem, name)

  def make_inputs(self, *args):
    self.made += 1
    return problem.make_inputs(*args)


def _judge():
  return types.SimpleNamespace(
      problem=_CountingProblem(), ref_mod=types.SimpleNamespace(get_inputs=_get_inputs),
      device=torch.device("cpu"), verdict=V.Verdict(status=V.RUNTIME_ERROR, backend="triton"))


@pytest.mark.parametrize("copy", [False, True], ids=["against_the_reference", "pristine_copy"])
@pytest.mark.parametrize("reference,candidate", list(itertools.product(FORWARDS, repeat=2)))
def test_the_verdict_is_the_pristine_copys_and_sets_are_made_again_only_where_they_differ(
    reference, candidate, copy):
  """`copy`: as the benchmarks' `pristine` path (KZ_INPUTS_AGAINST_REFERENCE=0) judges, with
  a copy made before the reference's forward: never a set made again."""
  seed = 1234
  judge = _judge()
  ref_inputs = problem.make_inputs(_get_inputs, seed, judge.device)
  pristine = [t.clone() for t in ref_inputs] if copy else None
  FORWARDS[reference](*ref_inputs)
  after = problem.make_inputs(_get_inputs, seed, judge.device)
  FORWARDS[candidate](*after)
  alike = all(torch.equal(a, r) for a, r in zip(after, ref_inputs))
  try:
    judge_checks.CandidateSteps._inputs_kept(  # pylint: disable=protected-access
        judge, seed, after, ref_inputs, "correctness", pristine)
    accepted = True
  except StageFailure as f:
    assert f.status == V.REJECTED and "forward changed its inputs in place" in f.reason
    accepted = False
  assert accepted == _pristine_rule(seed, FORWARDS[reference], FORWARDS[candidate])
  assert judge.problem.made == (0 if alike or copy else 1)
  assert judge.verdict.evidence.get("inputs_made_again", 0) == judge.problem.made


def test_a_rejection_names_the_changed_arguments():
  judge = _judge()
  ref_inputs = problem.make_inputs(_get_inputs, 7, judge.device)
  after = problem.make_inputs(_get_inputs, 7, judge.device)
  after[1].add_(1)
  with pytest.raises(StageFailure, match=r"post_check: forward changed its inputs in place "
                                         r"\(argument 1\)"):
    judge_checks.CandidateSteps._inputs_kept(judge, 7, after, ref_inputs, "post_check")  # pylint: disable=protected-access


@pytest.mark.parametrize("against_reference", ["1", "0"])
def test_a_judge_rejects_a_candidate_that_writes_into_its_input_either_way(against_reference):
  """A whole judge in a process of its own (its worker too, Triton interpreted), the way it
  checks by default and the way the benchmarks' `pristine` path does
  (KZ_INPUTS_AGAINST_REFERENCE=0)."""
  candidates = pathlib.Path(__file__).parent / "candidates"
  job = {"backend": "triton", "config": {"device": "cpu"},
         "reference_source": (candidates / "references" / "scaled_relu.py").read_text(),
         "candidate_source": (candidates / "cheats" / "inplace_input.py").read_text()}
  script = ("import json, sys\n"
            "from kernelzero_jax.sandbox import judge\n"
            "if __name__ == '__main__':\n"
            "  print(json.dumps(judge.run_job(json.loads(sys.stdin.read())).to_dict()))\n")
  done = subprocess.run([sys.executable, "-c", script], input=json.dumps(job), text=True,
                        capture_output=True, timeout=300, check=True,
                        env=dict(os.environ, KZ_INPUTS_AGAINST_REFERENCE=against_reference))
  v = json.loads(done.stdout.strip().splitlines()[-1])
  assert v["status"] == V.REJECTED and v["stage"] == "correctness", v
  assert any("forward changed its inputs in place (argument 0)" in r for r in v["reasons"]), v
  assert v["evidence"].get("inputs_made_again") == (1 if against_reference == "1" else None)


class _WatchedProblem(_CountingProblem):
  """problem, with make_inputs told what must be gone by then."""

  def __init__(self, gone):
    super().__init__()
    self.gone = gone  # weak references to the reference outputs
    self.alive_when_made = []

  def make_inputs(self, *args):
    self.alive_when_made.append(sum(r() is not None for r in self.gone))
    return super().make_inputs(*args)


@pytest.mark.parametrize("outputs_right", [True, False], ids=["right", "wrong"])
@pytest.mark.parametrize("reference,candidate", list(itertools.product(FORWARDS, repeat=2)))
def test_outputs_compared_before_a_set_is_made_again_and_let_go_first(reference, candidate,
                                                                      outputs_right):
  """The compare step (CandidateSteps._outputs_and_inputs_checked): a forward that changed its
  inputs in place is rejected for that whatever its outputs, else wrong outputs are incorrect;
  and where the set is made again, the reference's outputs are gone by then (its memory is
  theirs), with the caller's lists of inputs emptied either way."""
  import weakref  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox.config import SandboxConfig  # pylint: disable=import-outside-toplevel
  seed = 99
  ref_inputs = problem.make_inputs(_get_inputs, seed, torch.device("cpu"))
  refs = [FORWARDS[reference](*ref_inputs)]
  after = problem.make_inputs(_get_inputs, seed, torch.device("cpu"))
  FORWARDS[candidate](*after)  # (what it does to its inputs; its outputs are set below)
  outputs = [refs[0].clone() if outputs_right else refs[0] + 1.0]
  judge = _judge()
  judge.problem = _WatchedProblem([weakref.ref(t) for t in refs])
  judge.cfg, judge.close_stats = SandboxConfig(device="cpu"), None
  steps = judge_checks.CandidateSteps
  judge._inputs_kept = types.MethodType(steps._inputs_kept, judge)  # pylint: disable=protected-access
  judge._compare = types.MethodType(steps._compare, judge)  # pylint: disable=protected-access
  alike = all(torch.equal(a, r) for a, r in zip(after, ref_inputs))
  try:
    steps._outputs_and_inputs_checked(  # pylint: disable=protected-access
        judge, seed, outputs, after, refs, ref_inputs, "correctness", None)
    status = None
  except StageFailure as f:
    status = f.status
  kept = _pristine_rule(seed, FORWARDS[reference], FORWARDS[candidate])
  assert status == (None if kept and outputs_right else V.INCORRECT if kept else V.REJECTED)
  assert judge.problem.alive_when_made == ([] if alike else [0])
  assert len(refs) == (1 if alike else 0)
  if kept:  # (a rejection leaves the caller's lists to its unwinding)
    assert ref_inputs == []
  assert judge.verdict.max_abs_error is not None  # the outputs were compared in every case

"""A pool judges identical jobs once (SandboxPool.evaluate, once_per_candidate).

Real judges on the CPU (Triton interpreter); the launcher is wrapped only to count judgements.
"""

from __future__ import annotations

from test_sandbox_faults import CONFIG, _read
from kernelzero_jax.sandbox import Job, SandboxPool


def _jobs() -> list[Job]:
  honest = Job(_read("references/scaled_relu"), _read("honest/scaled_relu"), "triton", "a")
  constant = Job(_read("references/near_zero"), _read("faults/constant_kernel"), "triton", "b")
  # The same candidate against another reference is another job (it fails there).
  other_reference = Job(_read("references/near_zero"), honest.candidate_source, "triton", "c")
  return [honest, honest, constant, other_reference, honest]


def _judge(once: bool):
  seen = []
  with SandboxPool(CONFIG, max_parallel=2, launcher="subprocess") as pool:
    run = pool.launcher.run
    launched = []
    pool.launcher.run = lambda *a, **k: launched.append(1) or run(*a, **k)
    verdicts = pool.evaluate(_jobs(), on_result=lambda i, job, v: seen.append((i, job.name)),
                             once_per_candidate=once)
  return verdicts, len(launched), sorted(seen)


def test_identical_jobs_are_judged_once_and_every_copy_gets_its_own_verdict():
  verdicts, launched, seen = _judge(once=True)
  assert launched == 3
  assert seen == [(0, "a"), (1, "a"), (2, "b"), (3, "c"), (4, "a")]
  assert [v.correct for v in verdicts] == [True, True, True, False, True]
  assert "same_candidate_as" not in verdicts[0].evidence
  assert verdicts[1].evidence["same_candidate_as"] == verdicts[4].evidence["same_candidate_as"] == 0
  assert all("same_candidate_as" not in verdicts[i].evidence for i in (2, 3))
  assert verdicts[1] is not verdicts[0] and verdicts[1].evidence is not verdicts[0].evidence
  for copy in (verdicts[1], verdicts[4]):
    copy.evidence.pop("same_candidate_as")
    assert copy == verdicts[0]


def test_every_job_is_judged_when_asked():
  verdicts, launched, _ = _judge(once=False)
  assert launched == 5
  assert all("same_candidate_as" not in v.evidence for v in verdicts)
  assert [v.correct for v in verdicts] == [True, True, True, False, True]

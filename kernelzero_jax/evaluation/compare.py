"""Two evaluations of the same problems, compared problem by problem.

A pass rate over a few hundred samples moves by several points between two samplings of one
policy, so "did training raise it" is asked per problem: for each problem both evaluations
sampled, did it get more correct samples after than before, fewer, or as many. Under "no
change" a problem is as likely to go up as down, so the two-sided sign test's p-value over the
problems that moved says how surprising the ups and downs are. The sign test ignores by how
much a problem moved; the Cochran-Mantel-Haenszel test does not: it takes each problem as a
stratum of two independent samplings (before and after), so it asks whether the pass rate rose
within problems, whatever each problem's own difficulty. Problems sampled by only one of the two
evaluations are left out of the pairing and counted.
"""

from __future__ import annotations

import collections
import math
import os
from typing import Any, Iterable, Mapping

from kernelzero_jax.evaluation.driver import VERDICTS_FILE
from kernelzero_jax.metrics import read_jsonl


def sign_test_p(up: int, down: int) -> float:
  """Two-sided exact sign test: the chance, with every move up or down at 1/2, of a split at
  least as uneven as (up, down). 1.0 when nothing moved."""
  if up < 0 or down < 0:
    raise ValueError(f"up and down must be >= 0, got {up}, {down}")
  moved = up + down
  if moved == 0:
    return 1.0
  tail = sum(math.comb(moved, i) for i in range(min(up, down) + 1)) / 2 ** moved
  return min(1.0, 2 * tail)


def cmh_p(strata: Iterable[tuple[int, int, int, int]], correction: bool = True) -> float:
  """Two-sided Cochran-Mantel-Haenszel test over strata of (correct before, samples before,
  correct after, samples after): the chance, with each stratum's pass rate the same before and
  after, of a summed difference at least this large (chi-square with 1 degree of freedom, with
  the continuity correction unless `correction` is False). 1.0 when no stratum varies."""
  deviation, variance = 0.0, 0.0
  for correct_before, samples_before, correct_after, samples_after in strata:
    n = samples_before + samples_after
    correct = correct_before + correct_after
    if n < 2:
      continue
    deviation += correct_after - samples_after * correct / n
    variance += (samples_before * samples_after * correct * (n - correct)) / (n * n * (n - 1))
  if variance == 0:
    return 1.0
  statistic = max(abs(deviation) - (0.5 if correction else 0.0), 0.0) ** 2 / variance
  return math.erfc(math.sqrt(statistic / 2))  # the chi-square(1) survival function


def read_eval(path: str) -> list[dict[str, Any]]:
  """The verdicts of an evaluation: its directory (holding verdicts.jsonl) or a .jsonl file."""
  file = os.path.join(path, VERDICTS_FILE) if os.path.isdir(path) else path
  if not os.path.isfile(file):
    raise FileNotFoundError(f"no verdicts at {path} (expected a .jsonl file or a directory "
                            f"holding {VERDICTS_FILE})")
  return read_jsonl(file)


def correct_per_problem(verdicts: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
  """{problem: (correct samples, samples)}."""
  counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  for verdict in verdicts:
    entry = counts[verdict["problem"]]
    entry[0] += int(bool(verdict["correct"]))
    entry[1] += 1
  return {problem: (c, n) for problem, (c, n) in counts.items()}


def compare(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
            group_of=None) -> dict[str, Any]:
  """Correct samples before and after over the problems both evaluated, the problems that went
  up, down or stayed, the sign test's and the CMH test's p-values, and the same per group
  (`group_of(problem)`, e.g. the module kind; None: no groups)."""
  old, new = correct_per_problem(before), correct_per_problem(after)
  shared = sorted(set(old) & set(new))

  def summarise(problems):
    up = sum(new[p][0] > old[p][0] for p in problems)
    down = sum(new[p][0] < old[p][0] for p in problems)
    return {"problems": len(problems),
            "correct_before": sum(old[p][0] for p in problems),
            "samples_before": sum(old[p][1] for p in problems),
            "correct_after": sum(new[p][0] for p in problems),
            "samples_after": sum(new[p][1] for p in problems),
            "up": up, "down": down, "same": len(problems) - up - down,
            "sign_test_p": sign_test_p(up, down),
            "cmh_p": cmh_p((*old[p], *new[p]) for p in problems)}

  result = summarise(shared)
  result["only_before"] = len(set(old) - set(new))
  result["only_after"] = len(set(new) - set(old))
  if group_of is not None:
    groups = collections.defaultdict(list)
    for problem in shared:
      groups[group_of(problem)].append(problem)
    result["by_group"] = {g: summarise(ps) for g, ps in sorted(groups.items())}
  return result

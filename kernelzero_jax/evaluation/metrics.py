"""KernelBench metrics over evaluated samples: pass@k, fast_p, speedups and verdict statuses.

A record is one evaluated sample (one candidate for one problem), as the evaluation driver writes
it:

    {"level": int | None, "problem": "level1/19_ReLU", "sample": int, "status": str,
     "correct": bool, "speedup": float | None, "speedup_vs_compile": float | None,
     "degenerate": list[str], "reference_error": bool, "tolerance": dict}

Extra keys are ignored. `status` is a verdict status (kernelzero_jax/sandbox/verdict.py) and
decides correctness; `correct`, when given, must agree with it.

Definitions (every average over problems weighs each problem equally, whatever its n):
- pass@k: the unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al. 2021) per problem with n
  samples of which c are correct, averaged over problems; computed only for k <= the smallest n
  in the group (else None, and k is listed in `pass_at_k_skipped`). pass@1 is the mean of c/n.
- fast_p: per problem, the fraction of its samples that are correct AND have speedup > p
  (strictly), averaged over problems (KernelBench's fast_p). A correct sample without a speedup
  (e.g. judged on a CPU) is not fast; `num_correct_untimed` says how many there were.
- geomean speedup: over all correct samples that have a speedup (pooled, not per problem).
- A problem is degenerate when any of its records has a non-empty `degenerate` list or
  `reference_error`; `summarize` reports everything again without those problems.

Everything returned is deterministic, JSON-serialisable and free of NaN (missing values are None).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Iterable, Mapping, Sequence

from kernelzero_jax.sandbox import verdict

Record = Mapping[str, Any]

ALL = "all"  # The group of every problem, next to the per-level groups.
OTHER_LEVEL = "other"  # Problems outside a KernelBench level (e.g. Proposer modules).
REFERENCE_ERROR = "reference_error"  # Counted as a degenerate kind: a broken reference.
DEFAULT_KS = (1, 5, 10)
DEFAULT_FAST_THRESHOLDS = (1.0, 1.2)
# Failures first, in the order a candidate meets them, then the one success.
STATUS_ORDER = (verdict.COMPILE_ERROR, verdict.RUNTIME_ERROR, verdict.INCORRECT, verdict.REJECTED,
                verdict.TIMEOUT, verdict.FORMAT_ERROR, verdict.UNSUPPORTED, verdict.CORRECT)
assert sorted(STATUS_ORDER) == sorted(verdict.STATUSES)

_LEVEL_PREFIX_RE = re.compile(r"^level(\d+)/")


def pass_at_k(n: int, c: int, k: int) -> float:
  """Probability that at least one of k samples drawn without replacement from n is correct.

  1 - C(n-c, k) / C(n, k), in the product form 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never
  forms the huge binomials (Chen et al. 2021, Codex paper).
  """
  for name, value in (("n", n), ("c", c), ("k", k)):
    if isinstance(value, bool) or not isinstance(value, int):
      raise ValueError(f"pass_at_k: {name} must be an int, got {value!r}")
  if n < 1:
    raise ValueError(f"pass_at_k: n must be >= 1, got {n}")
  if not 0 <= c <= n:
    raise ValueError(f"pass_at_k: c must be in [0, n={n}], got {c}")
  if not 1 <= k <= n:
    raise ValueError(f"pass_at_k: k must be in [1, n={n}], got {k}")
  if n - c < k:
    return 1.0  # Every draw of k samples holds a correct one.
  miss = 1.0
  for i in range(n - c + 1, n + 1):
    miss *= 1.0 - k / i
  return 1.0 - miss


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float | None:
  """pass@k averaged over problems given as (n, c); None when empty or some n < k."""
  if not counts or any(n < k for n, _ in counts):
    return None
  return math.fsum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def pass_key(k: int) -> str:
  return f"pass@{k}"


def fast_key(threshold: float) -> str:
  """fast_1, fast_1.2, fast_0.5: the name KernelBench uses, and the report's column header."""
  text = repr(float(threshold))
  return "fast_" + (text[:-2] if text.endswith(".0") else text)


def level_sort_key(level: str) -> tuple:
  """level1 < level2 < level10 < other < all."""
  m = re.fullmatch(r"level(\d+)", level)
  if m:
    return (0, int(m.group(1)), level)
  return (1 if level == OTHER_LEVEL else 2, 0, level)


def _natural_key(text: str) -> tuple:
  """level1/2_X sorts before level1/10_Y."""
  return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
               for part in re.split(r"(\d+)", text))


@dataclasses.dataclass(frozen=True)
class Sample:
  """The parts of one record that the metrics use."""

  sample: int
  status: str
  speedup: float | None
  speedup_vs_compile: float | None

  @property
  def correct(self) -> bool:
    return self.status == verdict.CORRECT


@dataclasses.dataclass
class ProblemResult:
  """All samples of one problem, and what is known about its reference."""

  problem: str
  level: str  # "level1", ..., or OTHER_LEVEL.
  samples: list[Sample]
  degenerate_kinds: list[str]  # Sorted union over its records; REFERENCE_ERROR included.
  tolerances: list[dict[str, Any]]  # Distinct, sorted by their JSON text.

  @property
  def n(self) -> int:
    return len(self.samples)

  @property
  def c(self) -> int:
    return sum(s.correct for s in self.samples)

  @property
  def is_degenerate(self) -> bool:
    return bool(self.degenerate_kinds)


def _level_of(record: Record) -> str:
  level = record.get("level")
  if level is not None:
    if isinstance(level, bool) or not isinstance(level, int):
      raise ValueError(f"record {record.get('problem')!r}: level must be an int or None, "
                       f"got {level!r}")
    return f"level{level}"
  m = _LEVEL_PREFIX_RE.match(str(record["problem"]))
  return f"level{int(m.group(1))}" if m else OTHER_LEVEL


def _speedup_of(record: Record, key: str) -> float | None:
  value = record.get(key)
  if value is None:
    return None
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    raise ValueError(f"record {record['problem']!r} sample {record['sample']}: {key} must be a "
                     f"number or None, got {value!r}")
  # The sandbox's speedups are ratios of positive medians; anything else is an upstream bug that
  # would poison a geometric mean, so it is refused rather than silently dropped.
  if not math.isfinite(value) or value <= 0:
    raise ValueError(f"record {record['problem']!r} sample {record['sample']}: {key} must be "
                     f"positive and finite, got {value!r}")
  return float(value)


def _sample_of(record: Record) -> Sample:
  for key in ("problem", "sample", "status"):
    if key not in record:
      raise ValueError(f"record without {key!r}: {dict(record)!r}")
  status = record["status"]
  if status not in verdict.STATUSES:
    raise ValueError(f"record {record['problem']!r} sample {record['sample']}: unknown status "
                     f"{status!r}; expected one of {verdict.STATUSES}")
  if "correct" in record and bool(record["correct"]) != (status == verdict.CORRECT):
    raise ValueError(f"record {record['problem']!r} sample {record['sample']}: correct="
                     f"{record['correct']!r} disagrees with status {status!r}")
  return Sample(sample=record["sample"], status=status,
                speedup=_speedup_of(record, "speedup"),
                speedup_vs_compile=_speedup_of(record, "speedup_vs_compile"))


def group_by_problem(records: Iterable[Record]) -> list[ProblemResult]:
  """One ProblemResult per problem, in natural order of problem names; samples sorted by index.

  Raises ValueError on malformed records, a repeated (problem, sample) pair (it would be counted
  twice) or a problem whose records disagree on the level.
  """
  by_problem: dict[str, ProblemResult] = {}
  tolerance_texts: dict[str, set[str]] = {}
  for record in records:
    sample = _sample_of(record)
    problem, level = str(record["problem"]), _level_of(record)
    result = by_problem.get(problem)
    if result is None:
      result = by_problem[problem] = ProblemResult(problem, level, [], [], [])
      tolerance_texts[problem] = set()
    elif result.level != level:
      raise ValueError(f"problem {problem!r} has records at both {result.level} and {level}")
    result.samples.append(sample)
    kinds = set(result.degenerate_kinds) | set(record.get("degenerate") or ())
    if record.get("reference_error"):
      kinds.add(REFERENCE_ERROR)
    result.degenerate_kinds = sorted(kinds)
    if record.get("tolerance"):
      tolerance_texts[problem].add(json.dumps(record["tolerance"], sort_keys=True))
  for problem, result in by_problem.items():
    result.samples.sort(key=lambda s: s.sample)
    indices = [s.sample for s in result.samples]
    if len(set(indices)) != len(indices):
      raise ValueError(f"problem {problem!r} has repeated sample indices: {indices}")
    result.tolerances = [json.loads(t) for t in sorted(tolerance_texts[problem])]
  return [by_problem[p] for p in sorted(by_problem, key=_natural_key)]


def problems_by_level(problems: Sequence[ProblemResult]) -> dict[str, list[ProblemResult]]:
  """{"level1": [...], "level2": [...], ..., "all": [...]}, levels in level_sort_key order."""
  groups: dict[str, list[ProblemResult]] = {}
  for p in problems:
    groups.setdefault(p.level, []).append(p)
  ordered = {level: groups[level] for level in sorted(groups, key=level_sort_key)}
  ordered[ALL] = list(problems)
  return ordered


def _geomean(values: Sequence[float]) -> float | None:
  if not values:
    return None
  return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def _fast_fractions(problems: Sequence[ProblemResult], thresholds: Sequence[float],
                    attr: str) -> dict[str, float | None]:
  out = {}
  for p in thresholds:
    if not problems:
      out[fast_key(p)] = None
      continue
    per_problem = [sum(s.correct and getattr(s, attr) is not None and getattr(s, attr) > p
                       for s in prob.samples) / prob.n for prob in problems]
    out[fast_key(p)] = math.fsum(per_problem) / len(problems)
  return out


def _tolerance_summary(problems: Sequence[ProblemResult]) -> tuple[list[str], list[dict]]:
  texts = sorted({json.dumps(t, sort_keys=True) for p in problems for t in p.tolerances})
  tolerances = [json.loads(t) for t in texts]
  # The sandbox names its preset under "name"; a dict without one is still a distinct setting.
  names = sorted({str(t.get("name", "unnamed")) for t in tolerances})
  return names, tolerances


def summarize_problems(problems: Sequence[ProblemResult], ks: Sequence[int] = DEFAULT_KS,
                       fast_thresholds: Sequence[float] = DEFAULT_FAST_THRESHOLDS,
                       with_compile: bool = False) -> dict[str, Any]:
  """The metrics of one group of problems (a level, or all). See the module docstring."""
  samples = [s for p in problems for s in p.samples]
  counts = [(p.n, p.c) for p in problems]
  min_n = min((p.n for p in problems), default=None)
  correct = [s for s in samples if s.correct]
  timed = [s.speedup for s in correct if s.speedup is not None]
  status_counts = {status: sum(s.status == status for s in samples) for status in STATUS_ORDER}
  names, tolerances = _tolerance_summary(problems)
  summary: dict[str, Any] = {
      "num_problems": len(problems),
      "num_samples": len(samples),
      "samples_per_problem": {"min": min_n, "max": max((p.n for p in problems), default=None)},
      "num_correct": len(correct),
      "pass_at_k": {pass_key(k): mean_pass_at_k(counts, k) for k in ks},
      # Only "too few samples" skips a k; an empty group has every value None and skips nothing.
      "pass_at_k_skipped": [k for k in ks if min_n is not None and k > min_n],
      "fast_p": _fast_fractions(problems, fast_thresholds, "speedup"),
      "num_correct_timed": len(timed),
      "num_correct_untimed": len(correct) - len(timed),
      "geomean_speedup": {"value": _geomean(timed), "count": len(timed)},
      "status": {
          "counts": status_counts,
          "fractions": {k: (v / len(samples) if samples else None)
                        for k, v in status_counts.items()},
      },
      "tolerance_presets": names,
      "tolerances": tolerances,
  }
  if with_compile:
    timed_vs_compile = [s.speedup_vs_compile for s in correct if s.speedup_vs_compile is not None]
    summary["fast_p_vs_compile"] = _fast_fractions(problems, fast_thresholds, "speedup_vs_compile")
    summary["geomean_speedup_vs_compile"] = {"value": _geomean(timed_vs_compile),
                                             "count": len(timed_vs_compile)}
  else:
    summary["fast_p_vs_compile"] = None
    summary["geomean_speedup_vs_compile"] = None
  return summary


def _check_options(ks: Sequence[int], fast_thresholds: Sequence[float]):
  for k in ks:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
      raise ValueError(f"ks must be positive ints, got {list(ks)!r}")
  for p in fast_thresholds:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p < 0:
      raise ValueError(f"fast_thresholds must be finite numbers >= 0, "
                       f"got {list(fast_thresholds)!r}")
  keys = [fast_key(p) for p in sorted(set(map(float, fast_thresholds)))]
  if len(set(keys)) != len(keys):
    raise ValueError(f"fast_thresholds {list(fast_thresholds)!r} give clashing names {keys}")


def summarize(records: Iterable[Record], ks: Sequence[int] = DEFAULT_KS,
              fast_thresholds: Sequence[float] = DEFAULT_FAST_THRESHOLDS) -> dict[str, Any]:
  """pass@k, fast_p, speedups and statuses per level and for all, then without degenerate problems.

  Returns {"ks", "fast_thresholds", "level_order", "has_speedup_vs_compile", "levels": {level:
  group summary}, "excluding_degenerate": {"num_excluded", "excluded_problems",
  "degenerate_kinds" (problems per kind), "levels": {level: group summary}}}. "level_order" lists
  the level keys in display order (level1 < level2 < level10 < other < all), since JSON with sorted
  keys would put level10 before level2.
  """
  _check_options(ks, fast_thresholds)
  ks = sorted(set(ks))
  thresholds = sorted(set(map(float, fast_thresholds)))
  problems = group_by_problem(records)
  with_compile = any(s.speedup_vs_compile is not None for p in problems for s in p.samples)
  groups = problems_by_level(problems)
  kept = [p for p in problems if not p.is_degenerate]
  kept_groups = problems_by_level(kept)
  kinds: dict[str, int] = {}
  for p in problems:
    for kind in p.degenerate_kinds:
      kinds[kind] = kinds.get(kind, 0) + 1

  def group_summaries(level_groups):
    # The same level keys in both views, so a level with only degenerate problems shows as empty.
    return {level: summarize_problems(level_groups.get(level, []), ks, thresholds, with_compile)
            for level in groups}

  return {
      "ks": ks,
      "fast_thresholds": thresholds,
      "level_order": list(groups),
      "has_speedup_vs_compile": with_compile,
      "levels": group_summaries(groups),
      "excluding_degenerate": {
          "num_excluded": len(problems) - len(kept),
          "excluded_problems": [p.problem for p in problems if p.is_degenerate],
          "degenerate_kinds": dict(sorted(kinds.items())),
          "levels": group_summaries(kept_groups),
      },
  }


def per_problem(records: Iterable[Record]) -> list[dict[str, Any]]:
  """One row per problem: n, c, pass@1, best speedups, status counts and degenerate kinds."""
  rows = []
  for p in group_by_problem(records):
    speedups = [s.speedup for s in p.samples if s.correct and s.speedup is not None]
    vs_compile = [s.speedup_vs_compile for s in p.samples
                  if s.correct and s.speedup_vs_compile is not None]
    statuses = {status: sum(s.status == status for s in p.samples) for status in STATUS_ORDER}
    rows.append({
        "problem": p.problem,
        "level": p.level,
        "n": p.n,
        "c": p.c,
        "pass@1": p.c / p.n,
        "best_speedup": max(speedups, default=None),
        "best_speedup_vs_compile": max(vs_compile, default=None),
        "statuses": {k: v for k, v in statuses.items() if v},
        "degenerate": p.degenerate_kinds,
    })
  return rows

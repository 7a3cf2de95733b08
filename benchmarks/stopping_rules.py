r"""How a timing's stopping rule trades trials for precision, weighed offline on recorded trials.

    python -m benchmarks.stopping_rules \
        --verdicts=OUT/tp_b259.json.PATH.verdicts.jsonl.gz \
        [--precisions=0.005,0.01,0.02] [--min_trials=5,10]

Verdicts since 2026-12-05 (evening) keep each timing's trials (evidence["timing_times_ms"]:
timing.time_forward). On those of a path whose timings ran to their target (`prec0` in
sandbox_throughput), each rule of the grid (timing.precise_enough at a precision, after at least
min_trials trials) is replayed on every recorded series of 10 or more trials, candidates' and
references' measured there: where it would have stopped, and how far the median of the trials it
kept lies from the median of them all (what the run reported). Prints, per rule, the trials it
keeps (and their share), and those distances: median, 90th percentile, largest, and how many
lie over 2%. (The warm-up calls are not recorded, so a rule is weighed at the warm-up count the
run had.)
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from absl import app
from absl import flags

from benchmarks.gpu_steps import read_verdicts, rounded_p90
from kernelzero_jax.sandbox import timing

OFF_PCT = 2.0  # a kept median this far (%) from the whole series' is counted


def recorded_series(rows: list[dict], least: int = 10) -> list[list[float]]:
  """Every timing's recorded trials (candidates'; references' where measured, not reused), of
  at least `least` trials."""
  series = []
  for r in rows:
    ev = r.get("evidence") or {}
    for side in ("candidate", "reference"):
      if side == "reference" and ev.get("reference_reused"):
        continue
      times = (ev.get("timing_times_ms") or {}).get(side)
      if isinstance(times, list) and len(times) >= least:
        series.append([float(x) for x in times])
  return series


def stop_at(times: Sequence[float], precision: float, min_trials: int) -> int:
  """How many of `times` a precision-stopped timing would have run (timing.time_forward's rule,
  audits aside): the first n >= min_trials whose first n trials are precise enough, else all."""
  for n in range(min_trials, len(times)):
    if timing.precise_enough(times[:n], precision):
      return n
  return len(times)


def weigh(series: list[list[float]], precision: float, min_trials: int) -> dict[str, Any]:
  """One rule over every series: the trials kept and the kept medians' distances (%) from the
  whole series' medians."""
  kept, off = 0, []
  for times in series:
    n = stop_at(times, precision, min_trials)
    kept += n
    off.append(100.0 * abs(statistics.median(times[:n]) / statistics.median(times) - 1.0))
  off.sort()
  total = sum(map(len, series))
  return {"precision": precision, "min_trials": min_trials, "trials": kept,
          "share": round(kept / total, 3) if total else None,
          "median_off_pct": round(statistics.median(off), 3) if off else None,
          "p90_off_pct": rounded_p90(off),
          "max_off_pct": round(off[-1], 3) if off else None,
          f"over_{OFF_PCT:g}pct": sum(x > OFF_PCT for x in off)}


def _define_flags() -> None:
  flags.DEFINE_list("verdicts", None, "Verdict logs (JSONL, optionally gzipped) of a path whose "
                    "timings ran to their target.")
  flags.DEFINE_list("precisions", ["0.005", "0.01", "0.02"], "Precisions to replay.")
  flags.DEFINE_list("min_trials", ["5", "10"], "Least trials to replay.")
  flags.mark_flag_as_required("verdicts")


def main(argv: list[str]) -> None:
  del argv
  args = flags.FLAGS
  series = recorded_series(read_verdicts(args.verdicts))
  if not series:
    raise app.UsageError("no verdict here records its timings' trials (evidence['timing_times_ms']"
                         ", since 2026-12-05) with 10 or more of them")
  print(f"{len(series)} timings, {sum(map(len, series))} trials recorded")
  for precision in map(float, args.precisions):
    for least in map(int, args.min_trials):
      print(weigh(series, precision, least))


if __name__ == "__main__":
  _define_flags()
  app.run(main)

r"""How a timing's stopping rule trades trials for precision, weighed offline on recorded trials.

    python -m benchmarks.stopping_rules \
        --verdicts=OUT/tp_b259.json.PATH.verdicts.jsonl.gz \
        [--precisions=0.005,0.01,0.02] [--min_trials=5,10] \
        [--bands=1:3 [--slow_starts=0.25] [--far_factors=3 [--far_trials=3]]]

Verdicts since 2026-12-05 (evening) keep each timing's trials (evidence["timing_times_ms"]:
timing.time_forward). On those of a path whose timings ran to their target (`prec0` in
sandbox_throughput), each rule of the grid (timing.precise_enough at a precision, after at least
min_trials trials) is replayed on every recorded series of 10 or more trials, candidates' and
references' measured there: where it would have stopped, and how far the median of the trials it
kept lies from the median of them all (what the run reported). Prints, per rule, the trials it
keeps (and their share), and those distances: median, 90th percentile, largest, and how many
lie over 2%. (The warm-up calls are not recorded, so a rule is weighed at the warm-up count the
run had.)

With `--bands` (SandboxConfig.speedup_band, e.g. `1:3`, or `1:inf`), each candidate's recorded
series is also replayed through timing.time_forward itself, its timer handing back the recorded
times in order, at SandboxConfig's precision and trials, with the band in times from the
verdict's reference time and each of `--slow_starts`, and `--draws` draws of the audited
positions (the judge draws them at random): the trials and the measured milliseconds kept, the
kept medians' distances, and how many speedups it put on the other side of either end of the
band than the whole series did. With `--far_factors` (SandboxConfig.band_far_factor), each band
is replayed with each of them too, and every recorded candidate's series, whatever its length,
is weighed for the far rule alone (`far_starts`): which of them it would have stopped, and where
their whole series' medians lay.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from typing import Any, Sequence

from absl import app
from absl import flags

from benchmarks.gpu_steps import read_verdicts, rounded_median, rounded_p90
from kernelzero_jax.sandbox import timing
from kernelzero_jax.sandbox.config import SandboxConfig

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
  """How many of `times` a precision-stopped timing would have run (timing.time_forward itself,
  through replay, without audits): the first n >= min_trials whose first n trials are precise
  enough, else all."""
  cfg = dataclasses.replace(SandboxConfig(), timing_precision=precision, min_trials=min_trials)
  return len(replay(times, (), cfg, None))


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


def early_low_ends(series: list[list[float]], least: int = 5, most: int = 9) -> dict[str, Any]:
  """How slow a timing's start can make a band's stop (SandboxConfig.band_slow_start): per
  series, the largest low end of the median's interval (timing.median_interval) over its first n
  trials, n from `least` to `most`, over the whole series' median. A band stops a timing for
  being slow only where that low end lies over the band's slow side, so these ratios bound the
  margin a faster kernel needs not to be taken for a slower one."""
  ratios = []
  for times in series:
    whole = statistics.median(times)
    ends = [interval[0] / whole for n in range(least, min(most, len(times)) + 1)
            if (interval := timing.median_interval(times[:n]))]
    if ends:
      ratios.append(max(ends))
  ratios.sort()
  return {"timings": len(ratios), "median": rounded_median(ratios), "p90": rounded_p90(ratios),
          "max": round(ratios[-1], 3) if ratios else None,
          "over_1.1": sum(r > 1.1 for r in ratios), "over_1.2": sum(r > 1.2 for r in ratios)}


class ReplayTimer:
  """timing.Timer's time_call, handing back recorded times in order (the call itself runs)."""

  def __init__(self, times: Sequence[float]):
    self.times, self.last_stream_ms = list(times), None

  def time_call(self, fn):
    return self.times.pop(0), fn()


def replay(times: Sequence[float], audits: Sequence[int], cfg: SandboxConfig,
           outside_ms: Sequence[float] | None) -> list[float]:
  """The trials of `times` a timing would have kept (timing.time_forward, at `cfg`'s precision,
  least trials and warm-ups, audits at `audits`) where the whole series was what it planned."""
  warm = [times[0]] * cfg.warmup  # warm-ups are not recorded; they only plan the trials
  seeds = range(cfg.warmup + len(times) + len(audits))
  far_ms = outside_ms and cfg.band_far_factor and outside_ms[1] * cfg.band_far_factor
  got = timing.time_forward(ReplayTimer(warm + list(times)), lambda: None, lambda seed: [],
                            seeds, cfg.warmup, 1e9, cfg.min_trials + len(audits),
                            on_audit=lambda seed, inputs: None, audit_positions=audits,
                            precision=cfg.timing_precision, outside_ms=outside_ms,
                            outside_min_trials=cfg.band_min_trials, far_ms=far_ms,
                            far_min_trials=cfg.band_far_trials)
  return got["times_ms"]


def _candidate_series(rows: list[dict], named: bool = False):
  """(the verdict's reference time, its candidate's recorded trials[, the verdict's problem and
  name]) of every correct candidate whose verdict has both."""
  for r in rows:
    times = ((r.get("evidence") or {}).get("timing_times_ms") or {}).get("candidate")
    ref = r.get("reference_ms")
    if r.get("status") == "correct" and ref and isinstance(times, list) and times:
      got = float(ref), [float(x) for x in times]
      yield (*got, f"{r.get('problem')} {r.get('name')}") if named else got


def weigh_band(rows: list[dict], band: Sequence[float] | None, slow_start: float,
               draws: int = 20, least: int = 10, seed: int = 0,
               far_factor: float | None = None) -> dict[str, Any]:
  """One band (None: precision alone) over every correct candidate's recorded series of at
  least `least` trials: what its timings keep, and the speedups it moves across the band's ends.
  `far_factor`: with the far rule too (SandboxConfig.band_far_factor)."""
  cfg = SandboxConfig(band_far_factor=far_factor)
  rng = random.Random(seed)
  total = kept = 0
  total_ms = kept_ms = 0.0
  off, crossed = [], 0
  for ref, times in _candidate_series(rows):
    if len(times) < least:
      continue
    whole = statistics.median(times)
    for _ in range(draws):
      audits = sorted(rng.sample(range(cfg.min_trials), min(cfg.num_audits, cfg.min_trials)))
      got = replay(times, audits, cfg, timing.band_ms(ref, band, slow_start))
      total, kept = total + len(times), kept + len(got)
      total_ms, kept_ms = total_ms + sum(times), kept_ms + sum(got)
      median = statistics.median(got)
      off.append(100.0 * abs(median / whole - 1.0))
      ends = band or (1.0,)
      crossed += any((ref / median > end) != (ref / whole > end) for end in ends)
  off.sort()
  return {"band": band and list(band), "slow_start": slow_start, "far_factor": far_factor,
          "timings": len(off) // draws,
          "draws": draws, "trials_share": round(kept / total, 3) if total else None,
          "ms_share": round(kept_ms / total_ms, 3) if total_ms else None,
          "kept_s": round(kept_ms / draws / 1000.0, 1),
          "recorded_s": round(total_ms / draws / 1000.0, 1),
          "median_off_pct": round(statistics.median(off), 3) if off else None,
          "p90_off_pct": rounded_p90(off), "max_off_pct": round(off[-1], 3) if off else None,
          "crossed_an_end": crossed}


def far_starts(rows: list[dict], band: Sequence[float], slow_start: float, factor: float,
               trials: int) -> dict[str, Any]:
  """The far rule alone (SandboxConfig.band_far_factor at `factor`, band_far_trials at
  `trials`) over every correct candidate's recorded series of more than `trials` trials, however
  its timing stopped: those whose first `trials` would have stopped it, the trials they recorded
  and their seconds (with what the rule keeps of them: their first `trials`), and their whole
  series' medians over the band's slow end (`band_ms`'s, with `slow_start`): the least of those
  ratios, and how many lie under `factor` / 1.5 and under 1 (a speedup the stop would have put
  under the band wrongly); the stopped one with the least ratio, named, with its first trials
  over its reference's time; and over every timing weighed, stopped or not, the slowest start:
  the least of its first `trials` over its whole median (a timing whose start is slower than F
  times its median can be stopped wrongly), named."""
  stopped = recorded = timings = 0
  recorded_ms = kept_ms = 0.0
  ratios, closest, slowest = [], None, None
  for ref, times, name in _candidate_series(rows, named=True):
    if len(times) <= trials:
      continue
    timings += 1
    start = min(times[:trials]) / statistics.median(times)
    if slowest is None or start > slowest[0]:
      slowest = (start, name)
    slow_ms = timing.band_ms(ref, band, slow_start)[1]
    if min(times[:trials]) > factor * slow_ms:
      stopped, recorded = stopped + 1, recorded + len(times)
      recorded_ms, kept_ms = recorded_ms + sum(times), kept_ms + sum(times[:trials])
      ratio = statistics.median(times) / slow_ms
      if closest is None or ratio < closest[0]:
        closest = (ratio, name, [round(t / ref, 2) for t in times[:trials + 2]])
      ratios.append(ratio)
  ratios.sort()
  return {"band": list(band), "factor": factor, "trials": trials, "timings": timings,
          "stopped": stopped, "their_trials": recorded,
          "their_s": round(recorded_ms / 1e3, 1), "kept_s": round(kept_ms / 1e3, 1),
          "least_whole_over_slow_end": round(ratios[0], 3) if ratios else None,
          "under_factor_by_1.5": sum(r < factor / 1.5 for r in ratios),
          "under_slow_end": sum(r < 1.0 for r in ratios),
          "closest": closest and {"name": closest[1], "first_over_reference": closest[2]},
          "slowest_start": slowest and {"name": slowest[1], "over_whole": round(slowest[0], 3)}}


def _define_flags() -> None:
  flags.DEFINE_list("verdicts", None, "Verdict logs (JSONL, optionally gzipped) of a path whose "
                    "timings ran to their target.")
  flags.DEFINE_list("precisions", ["0.005", "0.01", "0.02"], "Precisions to replay.")
  flags.DEFINE_list("min_trials", ["5", "10"], "Least trials to replay.")
  flags.DEFINE_list("bands", [], "Speedup bands to replay, low:high (high may be inf).")
  flags.DEFINE_list("slow_starts", ["0.25"], "band_slow_start values to replay with each band.")
  flags.DEFINE_integer("draws", 20, "Draws of the audited positions per series.")
  flags.DEFINE_list("far_factors", [], "band_far_factor values to replay with each band.")
  flags.DEFINE_list("far_trials", ["3"], "band_far_trials values to weigh each far factor at.")
  flags.mark_flag_as_required("verdicts")


def main(argv: list[str]) -> None:
  del argv
  args = flags.FLAGS
  if args.far_factors and not args.bands:
    raise app.UsageError("--far_factors weighs a rule of a band's timings: give --bands too")
  rows = read_verdicts(args.verdicts)
  series = recorded_series(rows)
  if not series:
    raise app.UsageError("no verdict here records its timings' trials (evidence['timing_times_ms']"
                         ", since 2026-12-05) with 10 or more of them")
  print(f"{len(series)} timings, {sum(map(len, series))} trials recorded")
  for precision in map(float, args.precisions):
    for least in map(int, args.min_trials):
      print(weigh(series, precision, least))
  print("the first 5-9 trials' interval low end over the whole median (slow starts):",
        early_low_ends(series))
  if args.bands:
    print("candidates' timings replayed with audits, at SandboxConfig's precision and trials:")
    print(weigh_band(rows, None, 0.0, args.draws))
    for text in args.bands:
      band = tuple(float(x) for x in text.split(":"))
      for slow_start in map(float, args.slow_starts):
        print(weigh_band(rows, band, slow_start, args.draws))
        for factor in map(float, args.far_factors):
          print(weigh_band(rows, band, slow_start, args.draws, far_factor=factor))
          for trials in map(int, args.far_trials):
            print(" the far rule alone, on every recorded series:",
                  far_starts(rows, band, slow_start, factor, trials))


if __name__ == "__main__":
  _define_flags()
  app.run(main)

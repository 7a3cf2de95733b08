"""The report of a KernelBench evaluation: a markdown summary, two figures and per-problem rows.

`write_report(records, summary, out_dir)` writes, into out_dir:
- report.md: the KernelZero paper's table (rows Level 1, Level 2, ..., All; columns pass@k for the
  k that were computed, fast_p, geomean speedup), the same table without degenerate problems,
  verdict statuses, sample counts, the tolerance preset(s) and how many correct samples had no
  timing;
- speedup_hist.png: speedups of correct samples per level (log x, a line at 1x);
- pass_at_k.png: pass@k against k per level, for every k up to the smallest n of the level;
- per_problem.jsonl: one JSON object per problem (metrics.per_problem).

Number format in report.md: pass@k and fast_p are percentages with one decimal ("37.5%"), means
over problems; speedups are geometric means with two decimals and the number of samples they are
taken over ("1.23× (n=4)"); "—" marks a value that was not computed (no samples, or k larger than
some problem's n).

Figures are drawn on bare Figures with the Agg canvas, never through pyplot: no display is needed,
the process's global backend is left alone, and nothing stays registered (a pyplot figure would
have to be closed; these are freed with their last reference).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Iterable, Mapping, Sequence

from kernelzero_jax.evaluation import metrics

REPORT_MD = "report.md"
SPEEDUP_HIST_PNG = "speedup_hist.png"
PASS_AT_K_PNG = "pass_at_k.png"
PER_PROBLEM_JSONL = "per_problem.jsonl"
MISSING = "—"


def level_label(level: str) -> str:
  """A level key as a row label: level1 -> Level 1, all -> All, other -> Other."""
  if level.startswith("level") and level[5:].isdigit():
    return f"Level {int(level[5:])}"
  return level.capitalize()


def format_percent(fraction: float | None) -> str:
  return MISSING if fraction is None else f"{100.0 * fraction:.1f}%"


def format_speedup(geomean: Mapping[str, Any] | None) -> str:
  if not geomean or geomean["value"] is None:
    return MISSING
  return f"{geomean['value']:.2f}× (n={geomean['count']})"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
  lines = ["| " + " | ".join(header) + " |",
           "|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|"]
  lines += ["| " + " | ".join(row) + " |" for row in rows]
  return lines


def _computed_ks(summary: Mapping[str, Any]) -> list[int]:
  """pass@1 and the k whose pass@k exists for some level: a column of only dashes says nothing."""
  return [k for k in summary["ks"]
          if k == 1 or any(g["pass_at_k"][metrics.pass_key(k)] is not None
                 for g in summary["levels"].values())]


def _results_table(summary: Mapping[str, Any], groups: Mapping[str, Any]) -> list[str]:
  ks = _computed_ks(summary)
  fast_keys = [metrics.fast_key(p) for p in summary["fast_thresholds"]]
  header = ["", "Problems"] + [metrics.pass_key(k) for k in ks] + fast_keys + ["Geomean speedup"]
  rows = []
  for level in summary["level_order"]:
    g = groups[level]
    rows.append([level_label(level), str(g["num_problems"])]
                + [format_percent(g["pass_at_k"][metrics.pass_key(k)]) for k in ks]
                + [format_percent(g["fast_p"][key]) for key in fast_keys]
                + [format_speedup(g["geomean_speedup"])])
  return _table(header, rows)


def _compile_table(summary: Mapping[str, Any], groups: Mapping[str, Any]) -> list[str]:
  fast_keys = [metrics.fast_key(p) for p in summary["fast_thresholds"]]
  header = [""] + fast_keys + ["Geomean speedup"]
  rows = [[level_label(level)]
          + [format_percent(groups[level]["fast_p_vs_compile"][key]) for key in fast_keys]
          + [format_speedup(groups[level]["geomean_speedup_vs_compile"])]
          for level in summary["level_order"]]
  return _table(header, rows)


def _notes(summary: Mapping[str, Any], groups: Mapping[str, Any]) -> list[str]:
  notes = []
  for k in summary["ks"]:
    skipped = [level_label(level) for level in summary["level_order"]
               if k in groups[level]["pass_at_k_skipped"]]
    if skipped:
      smallest = min(groups[level]["samples_per_problem"]["min"]
                     for level in summary["level_order"] if k in groups[level]["pass_at_k_skipped"])
      notes.append(f"- {metrics.pass_key(k)} not computed for {', '.join(skipped)}: some problem "
                   f"has fewer than {k} samples (smallest n: {smallest}).")
  everything = groups[metrics.ALL]
  correct, untimed = everything["num_correct"], everything["num_correct_untimed"]
  if correct == 0:
    notes.append("- No correct samples: fast_p is 0 and there is no speedup to average.")
  else:
    notes.append(f"- {untimed} of {correct} correct samples had no timing (speedup null, e.g. "
                 f"judged on a CPU): they count as correct but not as fast, and are not in the "
                 f"geomean.")
  return notes


def _status_table(summary: Mapping[str, Any]) -> list[str]:
  header = ["", "Samples"] + list(metrics.STATUS_ORDER)
  rows = []
  for level in summary["level_order"]:
    status = summary["levels"][level]["status"]
    rows.append([level_label(level), str(summary["levels"][level]["num_samples"])]
                + [f"{status['counts'][s]} ({format_percent(status['fractions'][s])})"
                   for s in metrics.STATUS_ORDER])
  return _table(header, rows)


def _samples_table(summary: Mapping[str, Any]) -> list[str]:
  rows = []
  for level in summary["level_order"]:
    g = summary["levels"][level]
    lo, hi = g["samples_per_problem"]["min"], g["samples_per_problem"]["max"]
    per_problem = MISSING if lo is None else (str(lo) if lo == hi else f"{lo}–{hi}")
    rows.append([level_label(level), str(g["num_problems"]), str(g["num_samples"]), per_problem,
                 str(g["num_correct"]), str(g["num_correct_timed"])])
  return _table(["", "Problems", "Samples", "Samples per problem", "Correct", "Correct and timed"],
                rows)


def _tolerance_value(value: Any) -> str:
  # The judge records each dtype's tolerance as [atol, rtol] (sandbox/judge.py).
  if (isinstance(value, (list, tuple)) and len(value) == 2
      and all(isinstance(x, (int, float)) for x in value)):
    return f"atol={value[0]:g}, rtol={value[1]:g}"
  return str(value)


def _tolerance_lines(summary: Mapping[str, Any]) -> list[str]:
  tolerances = summary["levels"][metrics.ALL]["tolerances"]
  if not tolerances:
    return ["No tolerance recorded (no sample reached the correctness check)."]
  lines = []
  for t in tolerances:
    details = "; ".join(f"{key} {_tolerance_value(value)}" for key, value in sorted(t.items())
                        if key != "name")
    lines.append(f"- `{t.get('name', 'unnamed')}`" + (f": {details}" if details else ""))
  if len(tolerances) > 1:
    lines.append("")
    lines.append("Warning: samples were judged under different tolerances.")
  return lines


def _excluded_lines(summary: Mapping[str, Any]) -> list[str]:
  excluded = summary["excluding_degenerate"]
  total = summary["levels"][metrics.ALL]["num_problems"]
  if not excluded["num_excluded"]:
    return [f"No degenerate problems: all {total} problems kept."]
  kinds = ", ".join(f"{kind}: {count}" for kind, count in excluded["degenerate_kinds"].items())
  return [f"Excluded {excluded['num_excluded']} of {total} problems (problems per kind: {kinds}):",
          ", ".join(f"`{p}`" for p in excluded["excluded_problems"]) + "."]


def render_markdown(summary: Mapping[str, Any], title: str) -> str:
  """report.md's text, from a metrics.summarize result."""
  everything = summary["levels"][metrics.ALL]
  presets = ", ".join(everything["tolerance_presets"]) or MISSING
  lines = [f"# {title}", "",
           f"{everything['num_problems']} problems, {everything['num_samples']} samples; "
           f"tolerance preset: {presets}.", "",
           "pass@k and fast_p: percent of problems (mean over problems, one decimal). Geomean "
           "speedup: geometric mean of reference time / candidate time over correct, timed "
           "samples (n of them). fast_p counts correct samples with speedup strictly above p. "
           f"{MISSING}: not computed.", "",
           "## Results", ""]
  lines += _results_table(summary, summary["levels"]) + [""]
  lines += _notes(summary, summary["levels"]) + [""]
  if summary["has_speedup_vs_compile"]:
    lines += ["## Against torch.compile", ""]
    lines += _compile_table(summary, summary["levels"]) + [""]
  excluded_groups = summary["excluding_degenerate"]["levels"]
  lines += ["## Excluding degenerate problems", ""] + _excluded_lines(summary) + [""]
  lines += _results_table(summary, excluded_groups) + [""]
  if summary["has_speedup_vs_compile"]:
    lines += ["Against torch.compile:", ""] + _compile_table(summary, excluded_groups) + [""]
  lines += ["## Verdict statuses", "", "Count (percent of samples) per status.", ""]
  lines += _status_table(summary) + [""]
  lines += ["## Samples", ""] + _samples_table(summary) + [""]
  # The driver adds the problem files that did not load; they are in no number above.
  unloaded = summary.get("skipped_problems") or []
  if unloaded:
    lines += [f"{len(unloaded)} problem file(s) did not load and are not counted:", ""]
    lines += [f"- {reason}" for reason in unloaded] + [""]
  lines += ["## Tolerance", ""] + _tolerance_lines(summary) + [""]
  lines += ["## Figures", "",
            f"![Speedups of correct samples]({SPEEDUP_HIST_PNG})", "",
            f"![pass@k against k]({PASS_AT_K_PNG})", "",
            f"Per-problem results: [{PER_PROBLEM_JSONL}]({PER_PROBLEM_JSONL}).", ""]
  return "\n".join(lines)


def _new_figure(width_in: float, height_in: float):
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure
  fig = Figure(figsize=(width_in, height_in), layout="constrained")
  FigureCanvasAgg(fig)
  return fig


def _speedup_ticks(lo: float, hi: float) -> list[float]:
  """Round ticks inside [lo, hi] ("1.5×, 2×", not matplotlib's "2×10^0"); fewer when wide."""
  for mantissas in ((1, 1.5, 2, 3, 5), (1, 2, 5), (1,)):
    ticks = [m * 10.0**e for e in range(-4, 5) for m in mantissas if lo <= m * 10.0**e <= hi]
    if len(ticks) <= 8:
      return ticks
  return ticks


def plot_speedup_hist(groups: Mapping[str, Sequence[metrics.ProblemResult]], path: str):
  """One panel per level (not All): speedups of correct samples, log bins, a dashed line at 1x."""
  import numpy as np
  from matplotlib import ticker
  levels = [level for level in groups if level != metrics.ALL] or [metrics.ALL]
  speedups = {level: [s.speedup for p in groups[level] for s in p.samples
                      if s.correct and s.speedup is not None] for level in levels}
  pooled = [x for xs in speedups.values() for x in xs]
  # Eighth-of-a-doubling bins with 1x on an edge, over a range that always holds 1x, so the
  # reference line is on every plot, even with no speedups (a bin is [a, b): 1.0 lies right of it).
  bins_per_doubling = 8
  first = math.floor(math.log2(min(pooled + [1.0])) * bins_per_doubling) - 1
  last = math.ceil(math.log2(max(pooled + [1.0])) * bins_per_doubling) + 2
  bins = 2.0 ** (np.arange(first, last + 1) / bins_per_doubling)
  lo, hi = float(bins[0]), float(bins[-1])
  fig = _new_figure(7.0, 1.0 + 2.2 * len(levels))
  axes = fig.subplots(len(levels), 1, sharex=True, squeeze=False)[:, 0]
  for ax, level in zip(axes, levels):
    xs = speedups[level]
    untimed = sum(s.correct and s.speedup is None for p in groups[level] for s in p.samples)
    if xs:
      ax.hist(xs, bins=bins, color="tab:blue", edgecolor="white")
      geomean = math.exp(math.fsum(math.log(x) for x in xs) / len(xs))
      ax.set_title(f"{level_label(level)}: {len(xs)} timed correct samples, geomean "
                   f"{geomean:.2f}×" + (f" ({untimed} correct untimed)" if untimed else ""),
                   fontsize=10)
    else:
      ax.text(0.5, 0.5, f"no timed correct samples ({untimed} correct without timing)",
              ha="center", va="center", transform=ax.transAxes)
      ax.set_title(level_label(level), fontsize=10)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(ticker.FixedLocator(_speedup_ticks(lo, hi)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}×"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_ylabel("samples")
  axes[-1].set_xlabel("speedup over the eager reference (log scale)")
  fig.savefig(path, dpi=100)


def plot_pass_at_k(groups: Mapping[str, Sequence[metrics.ProblemResult]], path: str):
  """pass@k for k = 1 .. the smallest n of each level; one line per level, All in black."""
  from matplotlib import ticker
  fig = _new_figure(6.0, 4.0)
  ax = fig.subplots()
  largest_k = 1
  for level, problems in groups.items():
    # With one level, All is the same line drawn on top of it.
    if not problems or (level == metrics.ALL and len(groups) == 2):
      continue
    counts = [(p.n, p.c) for p in problems]
    ks = list(range(1, min(n for n, _ in counts) + 1))
    largest_k = max(largest_k, ks[-1])
    values = [100.0 * metrics.mean_pass_at_k(counts, k) for k in ks]
    style = {"color": "black", "linewidth": 2} if level == metrics.ALL else {}
    ax.plot(ks, values, marker="o", label=level_label(level), **style)
  if not any(groups.values()):
    ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
  elif largest_k == 1:
    ax.text(0.5, 0.5, "one sample per problem: only pass@1 can be computed", ha="center",
            va="center", transform=ax.transAxes)
  ax.set_xlim(0.5, largest_k + 0.5)
  ax.set_ylim(0, 105)  # Room for markers at 100%.
  ax.set_yticks([0, 20, 40, 60, 80, 100])
  ax.set_xlabel("k")
  ax.set_ylabel("pass@k (% of problems)")
  ax.xaxis.set_major_locator(ticker.FixedLocator(range(1, largest_k + 1)) if largest_k <= 20
                             else ticker.MaxNLocator(integer=True))
  if any(groups.values()):
    ax.legend(loc="lower right")
  fig.savefig(path, dpi=100)


def write_per_problem(records: Iterable[metrics.Record], path: str):
  with open(path, "w", encoding="utf-8") as f:
    for row in metrics.per_problem(records):
      f.write(json.dumps(row, sort_keys=True, allow_nan=False) + "\n")


def write_report(records: Iterable[metrics.Record], summary: Mapping[str, Any], out_dir: str,
                 title: str = "KernelBench evaluation") -> dict[str, str]:
  """Writes report.md, speedup_hist.png, pass_at_k.png and per_problem.jsonl; returns their paths.

  `summary` is metrics.summarize(records, ...): its ks and thresholds choose the table's columns.
  """
  records = list(records)  # Read three times below; a generator would be spent after the first.
  os.makedirs(out_dir, exist_ok=True)
  paths = {"report": os.path.join(out_dir, REPORT_MD),
           "speedup_hist": os.path.join(out_dir, SPEEDUP_HIST_PNG),
           "pass_at_k": os.path.join(out_dir, PASS_AT_K_PNG),
           "per_problem": os.path.join(out_dir, PER_PROBLEM_JSONL)}
  groups = metrics.problems_by_level(metrics.group_by_problem(records))
  plot_speedup_hist(groups, paths["speedup_hist"])
  plot_pass_at_k(groups, paths["pass_at_k"])
  write_per_problem(records, paths["per_problem"])
  with open(paths["report"], "w", encoding="utf-8") as f:
    f.write(render_markdown(summary, title))
  return paths

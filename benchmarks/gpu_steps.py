r"""What judges did while they held the GPU, read from the verdicts a throughput run logged.

    python -m benchmarks.gpu_steps --verdicts=OUT/tp.json.PATH.verdicts.jsonl \
        [--problem_regex='level1/(19|23)_'] [--backend=triton] [--smi_csv=OUT/mem.csv] \
        [--apps_csv=OUT/apps.csv]

`benchmarks/sandbox_throughput.py` writes every verdict to `<out>.<path>.verdicts.jsonl` as it
arrives (and all of them, every path's, to `<out>` at the end, which this reads too). Each
verdict's `evidence["gpu_seconds"]` splits the judge's work after the build into
steps; all of them run while the judge holds the GPU (checks shared or alone, timing alone)
except those in OFF_HOLD. On one GPU that held time bounds the throughput, so this prints, for
the verdicts given: the steps summed and their medians, and per problem the median of a few
steps and of the held time per candidate. With `--smi_csv` (what `nvidia-smi
--query-gpu=memory.used,utilization.gpu --format=csv,noheader -lms 1000` printed beside the
run), also the GPU's peak memory and its utilisation from the first sample above 2 GiB on.
Verdicts since c869d18 also carry the wall-clock bounds of each hold (`evidence["gpu_holds"]`);
laid side by side they give how long a judge held the GPU alone, how long nobody held it, and
how many judges held it at once, and whether the timings that other judges' CUDA context
start-ups overlapped ran slower than their copies. With `--apps_csv` (gpu_apps.py's
per-process samples), what judges and workers held on the GPU outside their holds. And the
floor under all of it: how long the forwards alone took (forward_floor), from the times the run
measured, against the time the holds kept the GPU busy. And how fast the verdicts came: the whole
batch's rate against that of its middle 80% (completion_rates), its start and end apart.
"""

from __future__ import annotations

import collections
import gzip
import json
import re
import statistics
from typing import Any, Iterable

from absl import app
from absl import flags

from kernelzero_jax.rl import rewards
from kernelzero_jax.sandbox import worker_handle
from kernelzero_jax.sandbox.judge import STEPS_OFF_THE_HOLD as OFF_HOLD

# Allocated memory that a judge or worker may keep after a release: its model's parameters (a few
# hundred MiB at most in KernelBench levels 1 and 2), not an input set.
MIB_LEFT_OK = 1024
PER_PROBLEM = ("candidate_construct", "candidate_init", "compare", "audits", "reference_checks")


def rounded_median(values: list[float]) -> float | None:
  """The median to 3 decimals, None for no values."""
  return round(statistics.median(values), 3) if values else None


def step_medians(steps: list[dict[str, float] | None]) -> dict[str, float]:
  """Median seconds of each named step over the candidates that have it, in first-seen order."""
  steps = [s or {} for s in steps]
  names = list(dict.fromkeys(name for s in steps for name in s))
  return {name: rounded_median([s[name] for s in steps if name in s]) for name in names}


def startup_medians(rows: list[dict]) -> dict[str, dict[str, float]]:
  """Median seconds of each worker and judge start-up step (evidence["startup_seconds"]) over
  the candidates that were built, in the order the steps ran."""
  return {side: step_medians([((r.get("evidence") or {}).get("startup_seconds") or {}).get(side)
                              for r in rows]) for side in ("worker", "judge")}


def rounded_p90(values: list[float], digits: int = 3) -> float | None:
  """The 90th percentile (the nearest rank below) of `values`, rounded; None for no values."""
  ordered = sorted(values)
  return round(ordered[int(0.9 * (len(ordered) - 1))], digits) if ordered else None


def held_seconds(verdict: dict[str, Any]) -> float:
  """The seconds a judge held the GPU for this verdict (its steps, less OFF_HOLD)."""
  steps = (verdict.get("evidence") or {}).get("gpu_seconds") or {}
  return sum(v for k, v in steps.items() if k not in OFF_HOLD)


def _open_text(path: str):
  """A results file, gzipped (name ending .gz, as stored under benchmarks/results) or not."""
  return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(
      path, encoding="utf-8")


def read_verdicts(paths: Iterable[str], problem_regex: str | None = None,
                  backend: str | None = None) -> list[dict]:
  """Verdicts from verdict logs (JSONL), or from the JSON a throughput run wrote (every
  path's rows)."""
  rows = []
  for path in paths:
    with _open_text(path) as f:
      if path.removesuffix(".gz").endswith(".jsonl"):
        rows += [json.loads(line) for line in f if line.strip()]
      else:
        rows += [r for result in json.load(f)["results"].values() for r in result["rows"]]
  if problem_regex:
    rows = [r for r in rows if re.search(problem_regex, r.get("problem") or "")]
  if backend:
    rows = [r for r in rows if r.get("backend") == backend]
  return rows


def summarize(rows: list[dict]) -> dict[str, Any]:
  """Step sums and medians over `rows`, and per problem the medians of PER_PROBLEM and of the
  held seconds (a step a verdict lacks counts as 0 s there)."""
  steps: dict[str, list[float]] = collections.defaultdict(list)
  for r in rows:
    for name, seconds in ((r.get("evidence") or {}).get("gpu_seconds") or {}).items():
      steps[name].append(seconds)
  by_problem: dict[str, list[dict]] = collections.defaultdict(list)
  for r in rows:
    by_problem[r.get("problem") or "?"].append(r)
  problems = {}
  for problem, group in by_problem.items():
    step = lambda name: statistics.median(  # pylint: disable=cell-var-from-loop
        ((r.get("evidence") or {}).get("gpu_seconds") or {}).get(name, 0.0) for r in group)
    problems[problem] = {
        "n": len(group),
        "checks_alone": sum("checks_alone" in (r.get("evidence") or {}) for r in group),
        "checks_wide": sum("check_width" in (r.get("evidence") or {}) for r in group),
        **{name: round(step(name), 3) for name in PER_PROBLEM},
        "held_s": round(statistics.median(held_seconds(r) for r in group), 2)}
  totals = lambda rs: [r["stage_seconds"]["total"] for r in rs
                       if "total" in (r.get("stage_seconds") or {})]
  precompiled = [(r.get("evidence") or {}).get("triton_precompile") for r in rows]
  precompiled = [p for p in precompiled if p]
  return {
      "num": len(rows),
      "status": dict(collections.Counter(r.get("status") for r in rows)),
      "median_total_s": {"all": rounded_median(totals(rows)),
                         "correct": rounded_median(totals([r for r in rows if r.get("correct")]))},
      "num_correct": sum(bool(r.get("correct")) for r in rows),
      # Triton candidates on a GPU: their precompilers' steps, and Triton seeds planted
      "triton_precompile": {"n": len(precompiled), **{
          key: rounded_median([p[key] for p in precompiled if key in p])
          for key in ("seconds", "utils_s", "kernels_s", "launchers_s", "waited_s")}},
      "triton_seed_planted": sum(bool(((r.get("evidence") or {}).get("triton_seed") or {})
                                      .get("planted")) for r in rows),
      "held_s_sum": round(sum(held_seconds(r) for r in rows), 1),
      "steps": {name: {"n": len(v), "sum": round(sum(v), 1),
                       "median": round(statistics.median(v), 3)} for name, v in steps.items()},
      "problems": problems}


def _holds(verdict: dict[str, Any]) -> list[tuple[float, float, str]]:
  """The verdict's well-formed GPU holds (`evidence["gpu_holds"]`): (start, end, kind)."""
  return [(start, end, kind) for start, end, kind, _ in _holds_with_slots(verdict)]


def _holds_with_slots(verdict: dict[str, Any]) -> list[tuple[float, float, str, int | None]]:
  """_holds with the slots each took: recorded since 2026-12-06; before, a shared hold's read
  from the judge's check width (evidence["check_width"], else 1: what Judge._held_stages gave
  it), and an alone hold's None."""
  evidence = verdict.get("evidence") or {}
  width = (evidence.get("check_width") or {}).get("width") or 1
  return [(float(h[0]), float(h[1]), h[2],
           int(h[3]) if len(h) == 4 else (int(width) if h[2] == "shared" else None))
          for h in evidence.get("gpu_holds") or []
          if len(h) in (3, 4) and h[0] is not None and h[1] is not None and h[1] >= h[0]]


def hold_timeline(rows: list[dict], slack_s: float = 0.002) -> dict[str, Any]:
  """The judges' GPU holds (`evidence["gpu_holds"]`: wall-clock start, end, "alone" or
  "shared") laid side by side: from the first hold's start to the last one's end, the seconds
  in which somebody held the GPU, someone held it alone (of them, the judges of problems too
  large to share it: `checks_alone`), and nobody held it; the alone seconds per judged
  candidate, and the most candidates a minute that leaves (were the shared checks free); the
  mean and the largest number of holders while somebody held it; and how many alone holds
  overlapped another hold by more than `slack_s` (the timestamps' rounding): the lock's
  promise, which must be 0. Also the seconds in which the shared holders took 1, 2, ... slots
  in all (`slots_when_shared`; nobody holding it alone; _holds_with_slots) and their mean:
  whether the checks between timings filled the GPU's slots or left some free."""
  holds, large = [], 0.0
  judged = 0  # verdicts with a hold
  for r in rows:
    mine = _holds_with_slots(r)
    holds += mine
    judged += bool(mine)
    if "checks_alone" in (r.get("evidence") or {}):
      large += sum(end - start for start, end, kind, _ in mine if kind == "alone")
  if not holds:
    return {"holds": 0}
  events = sorted([(start, 1, kind, slots) for start, _, kind, slots in holds] +
                  [(end, -1, kind, slots) for _, end, kind, slots in holds],
                  key=lambda e: (e[0], e[1]))
  count = {"alone": 0, "shared": 0}
  busy = alone = holder_seconds = 0.0
  shared_slots, by_slots = 0, collections.Counter()
  most = 0
  last = events[0][0]
  for t, step, kind, slots in events:
    held = count["alone"] + count["shared"]
    if held:
      busy += t - last
      holder_seconds += (t - last) * held
    if count["alone"]:
      alone += t - last
    elif count["shared"]:
      by_slots[shared_slots] += t - last
    count[kind] += step
    if kind == "shared":
      shared_slots += step * (slots or 0)
    most = max(most, count["alone"] + count["shared"])
    last = t
  overlapped = 0
  for i, (start, end, kind, _) in enumerate(holds):
    if kind == "alone" and any(min(end, e) - max(start, s) > slack_s
                               for j, (s, e, _, _) in enumerate(holds) if j != i):
      overlapped += 1
  span = max(h[1] for h in holds) - min(h[0] for h in holds)
  return {"holds": len(holds), "span_s": round(span, 1), "busy_s": round(busy, 1),
          "alone_s": round(alone, 1), "alone_large_problems_s": round(large, 1),
          "alone_per_candidate_s": round(alone / judged, 3),
          "per_minute_bound": round(60 * judged / alone, 1) if alone else None,
          "idle_s": round(span - busy, 1),
          "mean_holders_when_busy": round(holder_seconds / busy, 2) if busy else None,
          "max_holders": most,
          "alone_overlapped": overlapped,
          **_slots_when_shared(holds, by_slots)}


def _slots_when_shared(holds: list[tuple], by_slots: collections.Counter) -> dict[str, Any]:
  """hold_timeline's slot counts, where there were shared holds."""
  if not any(kind == "shared" for _, _, kind, _ in holds):
    return {}
  seconds = sum(by_slots.values())
  return {"slots_when_shared": {str(n): round(by_slots[n], 1) for n in sorted(by_slots)},
          "mean_slots_when_shared": (round(sum(n * s for n, s in by_slots.items()) / seconds, 2)
                                     if seconds else None)}


def timing_gaps(rows: list[dict], long_s: float = 0.4) -> dict[str, Any]:
  """The gaps between one alone hold (a timing, mostly) and the next, laid side by side
  (_holds): how many, their seconds in all, median and 90th percentile; the seconds in which
  shared holds (checks) held the GPU in them and in which nobody did; how many checks started in
  a gap (median); and the gaps over `long_s`, with the seconds of those in which another
  timing waited from the gap's start to its end (its alone hold began at the gap's end or
  later, and it had asked for it before the gap began: the hold's start less its wait for the
  start-up fence, evidence["fence_wait_s"]["timing"], a lower bound on its wait). The gaps that
  checks fill while timings wait are what SandboxConfig.timings_first is for. Where the verdicts
  tell them (since 2026-12-06), the seconds of the gaps in which start-ups held the start-up
  fence (evidence["fence_holds"] other than timings', a new worker's included), which keeps
  the next timing out, and in which the next timing had the fence and waited for the checks'
  slots (evidence["alone_asked"]; in older verdicts estimated, `slot_waits_estimated`:
  _slots_asked_estimate); None where they do not."""
  holds = sorted(h for r in rows for h in _holds(r))
  alone = [h for h in holds if h[2] == "alone"]
  shared = [h for h in holds if h[2] != "alone"]
  if len(alone) < 2:
    return {"gaps": 0}
  # (asked at, its alone hold's start) of each candidate timing after its checks, whose wait
  # for the fence evidence["fence_wait_s"]["timing"] is (_timing_after_checks)
  asked = [(hold[0] - waited, hold[0]) for _, hold, waited in
           filter(None, (_timing_after_checks(r) for r in rows))]
  startups = [(float(h[1]), float(h[2])) for r in rows
              for h in (r.get("evidence") or {}).get("fence_holds") or []
              if len(h) == 3 and h[0] not in TIMING_FENCES and h[2] >= h[1]]
  # When each alone hold asked for the slots (evidence["alone_asked"]: [asked, got]), by got;
  # in verdicts without it, estimated (_slots_asked_estimate).
  slots_asked = {round(float(got), 3): float(at) for r in rows
                 for at, got in (r.get("evidence") or {}).get("alone_asked") or []}
  estimated = not slots_asked
  if estimated:
    slots_asked = dict(filter(None, (_slots_asked_estimate(r) for r in rows)))
  gaps, covered, started, long_gaps, waited_through = [], 0.0, [], [], 0.0
  fenced, slot_waits = [0.0, 0.0], [0.0, 0.0]  # (all gaps, the long ones)
  shared_spans = [(s, e) for s, e, _ in shared]
  for (_, end, _), (start, _, _) in zip(alone, alone[1:]):
    gap = max(0.0, start - end)
    gaps.append(gap)
    covered += _union_within(shared_spans, end, start)
    started.append(sum(1 for s, _, _ in shared if end <= s < start))
    within = (_union_within(startups, end, start),
              min(gap, max(0.0, start - slots_asked.get(round(start, 3), start))))
    for i in (0, 1) if gap > long_s else (0,):
      fenced[i] += within[0]
      slot_waits[i] += within[1]
    if gap > long_s:
      long_gaps.append(gap)
      if any(a <= end and begin >= start - 1e-3 for a, begin in asked):
        waited_through += gap
  ordered = sorted(gaps)
  told = lambda x, known=True: round(x, 1) if known else None
  return {"gaps": len(gaps), "sum_s": round(sum(gaps), 1),
          "median_s": round(statistics.median(gaps), 3),
          "p90_s": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
          "checks_held_s": round(covered, 1), "nobody_held_s": round(sum(gaps) - covered, 1),
          "checks_started_median": statistics.median(started),
          "startups_fenced_s": told(fenced[0], bool(startups)),
          "next_timing_waited_for_slots_s": told(slot_waits[0], bool(slots_asked)),
          "slot_waits_estimated": estimated and bool(slots_asked),
          f"over_{long_s}s": {"n": len(long_gaps), "sum_s": round(sum(long_gaps), 1),
                              "another_timing_waited_through_s": round(waited_through, 1),
                              "startups_fenced_s": told(fenced[1], bool(startups)),
                              "next_timing_waited_for_slots_s": told(slot_waits[1],
                                                                     bool(slots_asked))}}


def _timing_after_checks(verdict: dict[str, Any]) -> tuple[tuple, tuple, float] | None:
  """(its checks' hold, its timing's alone hold, the timing's wait for the start-up fence) of a
  verdict whose candidate was timed after its checks (Judge._timed_apart: the first alone hold
  that follows a shared one, with evidence["fence_wait_s"]["timing"]); None for one timed
  otherwise (in the hold of its whole evaluation) or not at all. The reference measured first
  (Judge._reference_first) holds the GPU alone before the checks, with a fence of its own."""
  waited = ((verdict.get("evidence") or {}).get("fence_wait_s") or {}).get("timing")
  if not isinstance(waited, (int, float)):
    return None
  holds = _holds(verdict)
  return next(((before, hold, float(waited)) for before, hold in zip(holds, holds[1:])
               if hold[2] == "alone" and before[2] == "shared"), None)


def _slots_asked_estimate(verdict: dict[str, Any]) -> tuple[float, float] | None:
  """(its alone hold's start, when it asked for the slots) for a verdict that does not tell
  (before evidence["alone_asked"]) where its candidate was timed after its checks
  (_timing_after_checks): the checks' hold's end plus the timing's wait for the start-up fence,
  which it takes between the two (its slot wait is then the rest, up to its start)."""
  found = _timing_after_checks(verdict)
  if found is None:
    return None
  before, hold, waited = found
  return round(hold[0], 3), min(hold[0], before[1] + waited)


def new_workers(rows: list[dict], per_worker: int = 8) -> dict[str, Any]:
  """The workers a batch started (evidence["worker_start"] other than "kept"), by why, read from
  each judge process's jobs in turn (evidence["judge_process"]), the first reason that holds, in
  this order: its first job's; one after a job that failed (its worker killed); one the pool
  chose to be fresh (a reference that passes rarely: evidence["worker_choice"]); one after the
  last kept worker served `per_worker` candidates (SandboxConfig.candidates_per_worker, 8 on a
  GPU by default); or other (a lite build that failed in its prebuilder, a kept worker that
  failed its look, a job that took no kept worker). With each kind's seconds of start-up steps
  taken with the start-up fence held ("device" and "observers", worker.py), which keep timings
  out; a kept worker takes none."""
  by_judge: dict[Any, list[tuple[int, dict]]] = collections.defaultdict(list)
  for r in rows:
    process = (r.get("evidence") or {}).get("judge_process") or {}
    if isinstance(process.get("job"), int):
      by_judge[process.get("pid")].append((process["job"], r))
  counts: collections.Counter = collections.Counter()
  fenced: dict[str, float] = collections.defaultdict(float)
  for jobs in by_judge.values():
    jobs.sort(key=lambda job: job[0])
    served, before = 0, None
    for number, r in jobs:
      evidence = r.get("evidence") or {}
      start = evidence.get("worker_start")
      if start == "kept":
        served = int((evidence.get("worker_reuse") or {}).get("served") or served) + 1
      elif start is not None:
        why = ("first_job" if number == 1 or before is None
               else "after_a_failure" if not before.get("correct")
               else "fresh_by_pass_rate" if (evidence.get("worker_choice") or {}).get(
                   "fresh_worker")
               else "served_all" if served >= per_worker else "other")
        counts[why] += 1
        steps = (evidence.get("startup_seconds") or {}).get("worker") or {}
        fenced[why] += sum(float(steps.get(k) or 0.0) for k in ("device", "observers"))
        served = 1
      before = r
  return {"kept": sum(1 for r in rows if (r.get("evidence") or {}).get("worker_start") == "kept"),
          "started": {why: counts[why] for why in sorted(counts)},
          "fenced_s": {why: round(fenced[why], 1) for why in sorted(counts)}}


# The start-up fence's holds that are timings (Judge._fence's names); the others are start-ups.
TIMING_FENCES = ("timing", "candidate_timing", "reference_timing", "reference_first")


def _union_within(spans: list[tuple[float, float]], start: float, end: float) -> float:
  """The seconds of [start, end] that the union of `spans` covers."""
  covered, reach = 0.0, start
  for s, e in sorted((max(s, start), min(e, end)) for s, e in spans if e > start and s < end):
    covered += max(0.0, e - max(s, reach))
    reach = max(reach, e)
  return covered


def forward_floor(rows: list[dict], warmup: int = 3, audits: int = 2,
                  busy_s: float | None = None) -> dict[str, Any]:
  """The GPU seconds of the forwards alone in the verdicts' holds, from the times they measured
  (SandboxConfig's `warmup` warm-ups and `audits` audited calls per timing, its defaults here):
  per timed candidate, its trials, warm-ups and audited calls at its median time
  (`candidate_ms`); where its judge timed the reference (a "reference_timing" step), the
  reference's trials and warm-ups at `reference_ms`; in its checks, the candidate's and the
  reference's forward on each input set (`num_correct_trials`, and the last check of a correct
  one), the reference again on each audited call's inputs, and where its judge ran the reference
  checks (a "reference_checks" step) three reference forwards. Nothing else the holds do: no
  input sets made, no uploads, copies or comparisons, no start-ups. With the holds' busy time
  (`busy_s`, hold_timeline's, which it computes where not given), what share of it those
  forwards were, and how many candidates a minute the GPU would judge were they all it did
  (each forward as fast as its timing measured it, one after another)."""
  timing = reference_timing = checks = 0.0
  judged = 0
  for r in rows:
    ev = r.get("evidence") or {}
    steps = ev.get("gpu_seconds") or {}
    if not steps:
      continue
    judged += 1
    cand, ref = r.get("candidate_ms") or 0.0, r.get("reference_ms") or 0.0
    trials = ev.get("timing_trials") or {}
    if r.get("candidate_ms") and trials.get("candidate"):
      timing += (trials["candidate"] + warmup + audits) * cand
      checks += audits * ref
    if "reference_timing" in steps and trials.get("reference"):
      reference_timing += (trials["reference"] + warmup) * ref
    sets = (r.get("num_correct_trials") or 0) + (r.get("status") == "correct")
    checks += sets * (cand + ref)
    if "reference_checks" in steps:
      checks += 3 * ref
  forward = (timing + reference_timing + checks) / 1000.0
  busy = hold_timeline(rows).get("busy_s") if busy_s is None else busy_s
  return {"candidates": judged, "forward_s": round(forward, 1),
          "candidate_timing_s": round(timing / 1000.0, 1),
          "reference_timing_s": round(reference_timing / 1000.0, 1),
          "checks_s": round(checks / 1000.0, 1), "busy_s": busy,
          "forward_share_of_busy": round(forward / busy, 3) if busy else None,
          "per_minute_bound": round(60 * judged / forward, 1) if forward else None}


def left_after_release(rows: list[dict]) -> dict[str, Any]:
  """What judges and workers still had allocated on the GPU after giving back a check's or a
  timing's memory before leaving a hold (`evidence["left_after_release"]`: [judge bytes, worker
  bytes] per release): how many releases, the largest of each side in MiB, and how many left
  more than `MIB_LEFT_OK` MiB on either side (memory that the next holder's checks would not
  find, as checks_fit counts nobody outside the holds)."""
  pairs = [p for r in rows for p in (r.get("evidence") or {}).get("left_after_release") or []]
  mib = lambda side: [p[side] / 2**20 for p in pairs if isinstance(p[side], (int, float))]
  judge, worker = mib(0), mib(1)
  return {"releases": len(pairs),
          "judge_max_mib": round(max(judge), 1) if judge else None,
          "worker_max_mib": round(max(worker), 1) if worker else None,
          "over_ok": sum(any(isinstance(b, (int, float)) and b / 2**20 > MIB_LEFT_OK for b in p)
                         for p in pairs)}


def _startup_window(verdict: dict[str, Any]) -> tuple[float, float] | None:
  """When the judge of `verdict` and its worker created their CUDA contexts, in wall-clock
  seconds, approximately: the judge started `stage_seconds["total"]` before its last hold ended
  (its end, less its last cleanup), and its and its worker's contexts took their start-up's
  "device" step (evidence["startup_seconds"])."""
  holds = _holds(verdict)
  startup = (verdict.get("evidence") or {}).get("startup_seconds") or {}
  total = (verdict.get("stage_seconds") or {}).get("total")
  if not holds or not total or not startup:
    return None
  start = holds[-1][1] - total
  device = max(startup.get(side, {}).get("device", 0.0) for side in ("judge", "worker"))
  return start, start + device


def timed_copies(rows: list[dict]) -> dict[str, list[tuple[int, dict, list[tuple]]]]:
  """The correct, timed verdicts that held the GPU alone, by candidate: its copies
  (sandbox_throughput names them NAME/0, NAME/1, ...) -> [(index in `rows`, verdict, its alone
  holds in order)]."""
  timed = collections.defaultdict(list)
  for i, r in enumerate(rows):
    alone = [h for h in _holds(r) if h[2] == "alone"]
    if r.get("status") == "correct" and r.get("candidate_ms") and alone:
      timed[re.sub(r"/\d+$", "", r.get("name") or "")].append((i, r, alone))
  return timed


def timings_beside_startups(rows: list[dict]) -> dict[str, Any]:
  """Whether a candidate's timing ran slower while another judge or worker created its CUDA
  context (benchmarks/hold_interference.py: context start-ups stretch a timed interval). For
  each correct candidate timed in a hold alone, its time's deviation from the median over the
  copies of the same candidate (in percent), split by whether another judge's start-up window
  (_startup_window) overlapped that hold: for each side, how many, and their median, mean, 90th
  percentile and largest deviation."""
  windows = [(i, _startup_window(r)) for i, r in enumerate(rows)]
  deviations: dict[bool, list[float]] = {True: [], False: []}
  for copies in timed_copies(rows).values():
    median = statistics.median(r["candidate_ms"] for _, r, _ in copies)
    for i, r, alone in copies:
      t0, t1 = alone[0][0], alone[0][1]
      beside = any(j != i and w is not None and w[0] < t1 and w[1] > t0 for j, w in windows)
      deviations[beside].append(100.0 * (r["candidate_ms"] - median) / median)

  def side(values: list[float]) -> dict[str, Any]:
    values = sorted(values)
    if not values:
      return {"n": 0}
    return {"n": len(values), "median_pct": round(statistics.median(values), 2),
            "mean_pct": round(statistics.mean(values), 2),
            "p90_pct": rounded_p90(values, 2),
            "max_pct": round(values[-1], 2)}
  return {"beside_a_startup": side(deviations[True]), "clear": side(deviations[False])}


def disturbed_timings(rows: list[dict]) -> dict[str, Any]:
  """Timings disturbed, their intervals held too long past their forward's end
  (evidence["timing_disturbed"], GpuSteps._timing_disturbed), and those told only for the setup
  windows with kernels beside them (setup_windows.py): how many timings so, how many made again,
  how many verdicts kept a disturbed one (their last told timing disturbed and not made again:
  since dccd1ae, evidence["timing_unreliable"], no speedup), how many looks found such code
  still running; each made again as its disturbed and its final time
  (ms); and the judges' waits after their timings for that code to end (s)."""
  disturbed = beside = retimed = unresolved = 0
  pairs, waits = [], []
  for r in rows:
    e = r.get("evidence") or {}
    if isinstance(e.get("setup_window_wait_s"), (int, float)):
      waits.append(float(e["setup_window_wait_s"]))
    for d in e.get("timing_disturbed") or []:
      disturbed += bool(d.get("after_forward_ms"))
      beside += bool(d.get("windows") and not d.get("after_forward_ms"))
      unresolved += bool(d.get("unresolved"))
      if d.get("retimed"):
        retimed += 1
        pairs.append((d.get("candidate_ms"), r.get("candidate_ms"), r.get("name")))
  left = sum(1 for r in rows if (told := (r.get("evidence") or {}).get("timing_disturbed"))
             and told[-1].get("after_forward_ms") and not told[-1].get("retimed"))
  return {"timings_disturbed": disturbed, "retimed": retimed, "left_disturbed": left,
          "beside_windows_only": beside, "unresolved": unresolved,
          "retimed_ms": [(_round(a), _round(b), n) for a, b, n in pairs[:8]],
          "wait_s": ({"n": len(waits), "sum": round(sum(waits), 3),
                      "median": rounded_median(waits), "max": round(max(waits), 3)}
                     if waits else {"n": 0})}


def disturbance_classes(rows: list[dict], off: float = 1.3) -> dict[str, Any]:
  """Whether what a judge told of a timing (evidence["timing_disturbed"]) says how far off it
  was: each told timing's candidate and reference times against the median of the correct
  verdicts' final ones of its problem (candidates: of its kind, teacher copies or extras), by
  what was told: "stretched" (its intervals past the forward's end: a disturbed timing),
  "windows" (only setup windows with kernels beside it), "unresolved" (only windows still open);
  and "nothing told", the correct verdicts' final timings with no such entry. For each: how many,
  and how many measured more than `off` times that median (with those ratios)."""
  times: dict[tuple, list[float]] = collections.defaultdict(list)
  refs: dict[str, list[float]] = collections.defaultdict(list)
  for r in rows:
    if r.get("status") == "correct" and r.get("candidate_ms") and r.get("reference_ms"):
      times[(r.get("problem"), r.get("kind"))].append(r["candidate_ms"])
      refs[r.get("problem")].append(r["reference_ms"])
  cand_median = {k: statistics.median(v) for k, v in times.items()}
  ref_median = {k: statistics.median(v) for k, v in refs.items()}
  classes: dict[str, list[tuple]] = {"stretched": [], "windows": [], "unresolved": [],
                                     "nothing told": []}

  def ratios(r: dict, cand: Any, ref: Any) -> tuple:
    c_med, r_med = cand_median.get((r.get("problem"), r.get("kind"))), ref_median.get(
        r.get("problem"))
    return (round(cand / c_med, 2) if isinstance(cand, (int, float)) and c_med else None,
            round(ref / r_med, 2) if isinstance(ref, (int, float)) and r_med else None)

  for r in rows:
    told = (r.get("evidence") or {}).get("timing_disturbed") or []
    for d in told:
      kind = ("stretched" if d.get("after_forward_ms") else "windows" if d.get("windows")
              else "unresolved")
      classes[kind].append(ratios(r, d.get("candidate_ms"), d.get("reference_ms")))
    if not told and r.get("status") == "correct":
      classes["nothing told"].append(ratios(r, r.get("candidate_ms"), r.get("reference_ms")))
  report = {}
  for kind, pairs in classes.items():
    far = [p for p in pairs if any(x is not None and x > off for x in p)]
    report[kind] = {"n": len(pairs), f"over_{off}x": len(far), "ratios": far[:24]}
  return report


def _round(x: Any) -> Any:
  return round(x, 3) if isinstance(x, (int, float)) else x


# A process's GPU memory that is its CUDA context, not its checks' (an H200, torch 2.11: a judge
# 518-712 MiB, a worker 880 MiB with its timer's L2-flush buffer).
CONTEXT_MIB = 1024


def _attempts(evidence: dict, judge: dict) -> list[tuple[dict, dict]]:
  """(facts, the judge process they ran in where they do not say) of a verdict and of each
  attempt before it that was judged again, nested ones too (verdict.first_attempt). An attempt
  judged again beside a kept worker ran in the judge process of the attempt that followed it."""
  if not evidence:
    return []
  judge = evidence.get("judge_process") or judge
  return ([(evidence, judge)] + _attempts(evidence.get("shared_gpu_oom_attempt") or {}, {})
          + _attempts(evidence.get("judged_again") or {}, judge))


def _processes_and_holds(rows: list[dict]) -> tuple[dict[int, str], dict[int, list]]:
  """({pid: "judge" or "worker"}, {pid: [(start, end) of each GPU hold it was in]}) from the
  verdicts' judge and worker pids (evidence["judge_process"]["pid"], ["worker_pid"]) and those
  of failed attempts that were judged again (["shared_gpu_oom_attempt"], ["judged_again"]),
  with their holds."""
  role: dict[int, str] = {}
  holds: dict[int, list[tuple[float, float]]] = {}
  for r in rows:
    for facts, judge in _attempts(r.get("evidence") or {}, {}):
      spans = [(start, end) for start, end, _ in _holds({"evidence": facts})]
      for name, pid in (("judge", (facts.get("judge_process") or judge).get("pid")),
                        ("worker", facts.get("worker_pid"))):
        if isinstance(pid, int):
          role[pid] = name
          holds.setdefault(pid, []).extend(spans)
  return role, holds


def memory_outside_holds(rows: list[dict], samples: list[tuple[float, int, int]],
                         slack_s: float = 0.5) -> dict[str, Any]:
  """What judges and workers held on the GPU while they held no slot, from per-process samples
  (gpu_apps.py: time, pid, MiB) and the verdicts' holds with their judge's and worker's pids,
  failed attempts judged again included (_processes_and_holds). A process counts as holding from
  `slack_s` before a hold to `slack_s` after it (a sample's time is when nvidia-smi answered).
  Per role: the largest sum, at one sample time, of the MiB above CONTEXT_MIB of that role's
  processes outside their holds, and the largest single one (pid, MiB, seconds from the first
  sample)."""
  role, holds = _processes_and_holds(rows)
  if not samples:
    return {"samples": 0}
  first = min(t for t, _, _ in samples)
  out: dict[str, Any] = {"samples": len({t for t, _, _ in samples})}
  for name in ("judge", "worker"):
    by_time: dict[float, int] = {}
    largest = (None, 0, None)
    for t, pid, mib in samples:
      if role.get(pid) != name or any(s - slack_s <= t <= e + slack_s
                                      for s, e in holds.get(pid, [])):
        continue
      extra = max(0, mib - CONTEXT_MIB)
      by_time[t] = by_time.get(t, 0) + extra
      if mib > largest[1]:
        largest = (pid, mib, round(t - first, 1))
    out[name] = {"processes": sum(1 for p in role.values() if p == name),
                 "outside_holds_peak_sum_mib": max(by_time.values(), default=0),
                 "outside_holds_largest": list(largest)}
  return out


_OOM = re.compile(r"Tried to allocate ([\d.]+) ([GM]iB)(.*?)(?:Including non-PyTorch|$)", re.S)
_OOM_PROCESS = re.compile(r"Process (\d+) has ([\d.]+) ([GM]iB) memory in use")


def oom_processes(rows: list[dict], least_gib: float = 2.0) -> list[dict[str, Any]]:
  """The processes that torch's out-of-memory messages list (pid and memory, at the moment
  one ran out), those above `least_gib`, each a judge's or a worker's where a verdict names its
  pid (evidence["judge_process"], ["worker_pid"], and those of attempts judged again), and
  whether it held a slot then: where the failed attempt's holds are known
  (evidence["shared_gpu_oom_attempt"], ["judged_again"]), the moment is its last hold's end."""
  role, holds = _processes_and_holds(rows)
  attempts = []  # (name, reasons, that attempt's facts)
  for r in rows:
    evidence = r.get("evidence") or {}
    attempts += [(r.get("name"), list(r.get("reasons") or []), evidence),
                 (r.get("name"), list(evidence.get("shared_gpu_oom") or []),
                  evidence.get("shared_gpu_oom_attempt") or {}),
                 (r.get("name"), list((evidence.get("judged_again") or {}).get("reasons") or []),
                  evidence.get("judged_again") or {})]
  out = []
  for name, reasons, facts in attempts:
    for reason in reasons:
      found = _OOM.search(str(reason))
      if not found:
        continue
      own = [float(h[1]) for h in facts.get("gpu_holds") or [] if len(h) in (3, 4) and h[1]]
      at = max(own) if own else None
      listed = []
      for pid, amount, unit in _OOM_PROCESS.findall(found.group(3)):
        gib = float(amount) / (1 if unit == "GiB" else 1024)
        if gib < least_gib:
          continue
        pid = int(pid)
        in_hold = (None if at is None or pid not in role else
                   any(s - 0.5 <= at <= e + 0.5 for s, e in holds.get(pid, [])))
        listed.append([pid, round(gib, 1), role.get(pid, "unknown"), in_hold])
      gib = float(found.group(1)) / (1 if found.group(2) == "GiB" else 1024)
      out.append({"candidate": name, "asked_gib": round(gib, 2), "processes": listed})
      break
  return out


def verdicts_differ(rows: list[dict], others: list[dict]) -> dict[str, Any]:
  """Two runs of one batch, name by name: how many names both judged, the names only one did,
  and every name whose status or stage differs (sandbox_throughput compares paths of one run
  so; this compares separate runs)."""
  key = lambda r: (r.get("status"), r.get("stage"))
  mine, theirs = {r["name"]: r for r in rows}, {r["name"]: r for r in others}
  both = sorted(set(mine) & set(theirs))
  return {"compared": len(both), "only_one": sorted(set(mine) ^ set(theirs)),
          "differ": [{"name": n, "this": key(mine[n]), "other": key(theirs[n])}
                     for n in both if key(mine[n]) != key(theirs[n])]}


def timing_trials_summary(rows: list[dict]) -> dict[str, Any]:
  """How many trials the timings ran and why they stopped (evidence["timing_trials"] and
  ["timing_stopped"]: timing.time_forward), per side: timings, trials summed and at the median,
  and how many stopped for each reason ("precision", "outside" a speedup band, "far" over it)
  or ran as planned (reference: only where measured, not reused)."""
  out = {}
  for side in ("candidate", "reference"):
    trials, stopped = [], collections.Counter()
    for r in rows:
      ev = r.get("evidence") or {}
      if side == "reference" and ev.get("reference_reused"):
        continue
      n = (ev.get("timing_trials") or {}).get(side)
      if isinstance(n, int) and not isinstance(n, bool):
        trials.append(n)
        stopped[(ev.get("timing_stopped") or {}).get(side, "unknown")] += 1
    out[side] = {"timings": len(trials), "trials": sum(trials),
                 "median": rounded_median(trials), "stopped": dict(sorted(stopped.items()))}
  return out


# The fence waits a judge made with every GPU slot held (Judge._fence's `holding_gpu`): the
# reference timed in a whole evaluation's hold (and, before 2026-12-05's night, measured first),
# and the candidate timed there. The GPU stays idle while they last.
FENCE_WAITS_HOLDING_GPU = ("reference_timing", "candidate_timing")


def fence_waits_holding_gpu(rows: list[dict], least_s: float = 0.01) -> dict[str, Any]:
  """The seconds timings waited for the start-up fence with the GPU held (see
  FENCE_WAITS_HOLDING_GPU), per step: how many waited at least `least_s`, their sum, and the
  largest; with the waits the reference measured first made before it takes the GPU
  ("reference_first", since then), which leave it free."""
  out = {}
  for step in FENCE_WAITS_HOLDING_GPU + ("reference_first",):
    waits, first = [], 0.0
    for r in rows:
      ev = r.get("evidence") or {}
      w = (ev.get("fence_wait_s") or {}).get(step)
      if isinstance(w, (int, float)) and w >= least_s:
        waits.append(w)
        first += w if (ev.get("reference_first") or {}).get("timed") else 0.0
    if waits:
      out[step] = {"n": len(waits), "sum_s": round(sum(waits), 1), "max_s": round(max(waits), 2),
                   "holding_gpu": step != "reference_first"}
      if step == "reference_timing":  # of which the reference measured first
        out[step]["measured_first_s"] = round(first, 1)
  return out


def times_against(rows: list[dict], others: list[dict]) -> dict[str, Any]:
  """Two judgings of one batch, name by name (two paths of a run, or two runs): each candidate
  timed in both, its candidate_ms and speedup in `others` over those in `rows`, as percent
  differences; their median, 90th percentile and largest magnitude. A change to how timings
  are made that keeps these within the copies' spread (copy_spread) changed nothing a reward
  sees beyond the noise."""
  theirs = {r["name"]: r for r in others}
  out = {}
  for key in ("candidate_ms", "speedup"):
    pcts = []
    for r in rows:
      o = theirs.get(r["name"])
      a, b = r.get(key), (o or {}).get(key)
      if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0:
        pcts.append(100.0 * (b - a) / a)
    mags = sorted(abs(x) for x in pcts)
    out[key] = {"n": len(pcts), "median_pct": rounded_median(pcts),
                "p90_abs_pct": rounded_p90(mags),
                "max_abs_pct": round(mags[-1], 3) if mags else None}
  return out


def speed_terms_against(rows: list[dict], others: list[dict],
                        config: rewards.RewardConfig = rewards.RewardConfig()) -> dict[str, Any]:
  """What two judgings of one batch give a reward, name by name: each candidate correct in both,
  its speed term S (rewards.speed_term under `config`) in each; how many differ, by how much in
  all and at most, and how many speedups lie on different sides of the ends of the band that
  term rewards (rewards.SPEED_TERM_BANDS; none for a term without one). Where a timing rule
  (SandboxConfig.speedup_band) keeps these as small as two runs of one rule do, no reward saw it."""
  theirs = {r["name"]: r for r in others}
  band = rewards.SPEED_TERM_BANDS.get(config.speed_term)
  ends = band(config) if band else ()
  deltas, crossed = [], []
  for r in rows:
    o = theirs.get(r["name"])
    if not (r.get("correct") and o and o.get("correct")):
      continue
    a, b = rewards.speed_term(r, config), rewards.speed_term(o, config)
    deltas.append(abs(a - b))
    sa, sb = r.get("speedup"), o.get("speedup")
    if isinstance(sa, (int, float)) and isinstance(sb, (int, float)) and any(
        (sa > end) != (sb > end) for end in ends):
      crossed.append((r["name"], round(sa, 3), round(sb, 3)))
  return {"n": len(deltas), "differ": sum(d > 0 for d in deltas),
          "sum_abs": round(sum(deltas), 4), "max_abs": round(max(deltas, default=0.0), 4),
          "band": list(ends) or None, "crossed": crossed}


def prebuilds_against(rows: list[dict], others: list[dict]) -> dict[str, Any]:
  """Two judgings of one batch, name by name: each CUDA candidate that its prebuilder built in
  both (evidence["cuda_prebuild"]: ok, with its seconds), the build's seconds in each; their
  medians, the median of each candidate's difference (`others` less `rows`) and the ratio of
  their sums (`others` over `rows`). Where two paths build differently (a path token such as
  `stdtext`), this is the build's own change, apart from where in the batch each ran."""
  def built_s(row: dict | None) -> float | None:
    done = ((row or {}).get("evidence") or {}).get("cuda_prebuild") or {}
    seconds = done.get("seconds")
    return float(seconds) if done.get("ok") and isinstance(seconds, (int, float)) else None

  theirs = {r["name"]: r for r in others}
  pairs = [(a, b) for a, b in ((built_s(r), built_s(theirs.get(r["name"]))) for r in rows)
           if a is not None and b is not None]
  mine = sum(a for a, _ in pairs)
  return {"n": len(pairs), "median_s": rounded_median([a for a, _ in pairs]),
          "others_median_s": rounded_median([b for _, b in pairs]),
          "median_difference_s": rounded_median([b - a for a, b in pairs]),
          "others_over_these": round(sum(b for _, b in pairs) / mine, 3) if mine > 0 else None}


def weights_apart_by_problem(rows: list[dict]) -> dict[str, dict[str, Any]]:
  """Per problem, the judges whose weights were kept off the GPU between holds for want of room
  in the ledger (evidence["weights_apart"] with "kept_by_others_bytes": Judge._weights_apart),
  whose whole evaluations held the GPU alone: how many, their weights (GiB), what the other
  judges kept when each asked (GiB, least and most), the smallest share of the GPU's memory
  (SandboxConfig.weights_kept_share) with which every one of them would have kept its own (the
  others' and twice its own), and the GPU-seconds they held (held_seconds). Of those seconds,
  what a place in the ledger would not have taken out of the GPU's alone time: the reference's
  upload (`reference_upload_s`; a judge that keeps its weights uploads it at its start-up, under
  the fence that timings keep apart) and the timings (`timings_s`); the candidate's upload into
  its worker (`candidate_init_s`, in a kept judge's first shared hold) and the rest
  (`rest_s`: its checks) are what shared holds could have taken."""
  gib = 2.0 ** 30
  found = collections.defaultdict(list)  # problem -> [(others, weights, total, held s, steps)]
  for r in rows:
    evidence = r.get("evidence") or {}
    apart = evidence.get("weights_apart") or {}
    sizes = [apart.get(k) for k in ("kept_by_others_bytes", "weight_bytes", "gpu_bytes")]
    if all(isinstance(x, (int, float)) for x in sizes) and sizes[2] > 0:
      found[str(r.get("problem"))].append(
          (*sizes, held_seconds(r), evidence.get("gpu_seconds") or {}))
  split = lambda judges, *names: sum(j[4].get(name, 0.0) for j in judges for name in names)
  summary = {}
  for problem, judges in sorted(found.items()):
    held = sum(j[3] for j in judges)
    parts = {"reference_upload_s": split(judges, "reference_upload"),
             "timings_s": split(judges, "candidate_timing", "reference_timing"),
             "candidate_init_s": split(judges, "candidate_init")}
    summary[problem] = {
        "n": len(judges), "weight_gib": round(max(j[1] for j in judges) / gib, 2),
        "others_gib": [round(min(j[0] for j in judges) / gib, 2),
                       round(max(j[0] for j in judges) / gib, 2)],
        "share_to_keep": round(max((j[0] + 2 * j[1]) / j[2] for j in judges), 3),
        "held_s": round(held, 2),
        **{name: round(seconds, 2) for name, seconds in parts.items()},
        "rest_s": round(held - sum(parts.values()), 2)}
  return summary


def constructions_by_problem(rows: list[dict], least_s: float = 1.0) -> dict[str, dict[str, Any]]:
  """Per problem whose models take a while to build on the CPU (the median of the two below at
  least `least_s`), the judges' seconds building them, one after the other, outside every hold:
  the reference at the judge's start-up (every judge of a problem builds the same seeded model;
  evidence["reference_construct_s"], recorded since 2026-12-07; in older verdicts the start-up's
  "reference" step of a judge whose weights stayed on the CPU, which then holds no upload, less
  its wait for a host-memory slot) and the candidate's in its worker
  (evidence["gpu_seconds"]["candidate_construct"]): medians, their range, and their sum over
  the problem's judges; with the verdicts' median total. What a reference built once for the
  pool's judges, or the candidate's built beside it, could spare."""
  found = collections.defaultdict(list)  # problem -> [(reference s, candidate s, total s)]
  for r in rows:
    evidence = r.get("evidence") or {}
    reference = evidence.get("reference_construct_s")
    if reference is None and "weights_apart" in evidence:
      reference = ((evidence.get("startup_seconds") or {}).get("judge") or {}).get("reference")
      waited = evidence["weights_apart"].get("host_wait_s")  # (for a host-memory slot, before)
      if isinstance(reference, (int, float)) and isinstance(waited, (int, float)):
        reference -= waited
    candidate = (evidence.get("gpu_seconds") or {}).get("candidate_construct")
    total = (r.get("stage_seconds") or {}).get("total")
    if isinstance(reference, (int, float)) and isinstance(candidate, (int, float)):
      found[str(r.get("problem"))].append((float(reference), float(candidate), total))
  spread = lambda xs: {"median": rounded_median(xs), "range": [round(min(xs), 2),
                                                               round(max(xs), 2)]}
  summary = {}
  for problem, judges in sorted(found.items()):
    references, candidates = [j[0] for j in judges], [j[1] for j in judges]
    if max(statistics.median(references), statistics.median(candidates)) < least_s:
      continue
    summary[problem] = {
        "n": len(judges), "reference_s": spread(references), "candidate_s": spread(candidates),
        "sum_s": round(sum(references) + sum(candidates), 1),
        "median_total_s": rounded_median([float(j[2]) for j in judges
                                          if isinstance(j[2], (int, float))])}
  return summary


def fence_waits_by_level(rows: list[dict]) -> dict[str, dict[str, Any]]:
  """Per KernelBench level (the problem's name up to "/"), medians over the correct verdicts of
  what lies on a CUDA candidate's way to its verdict: its judge's wait for the start-up fence to
  upload its reference (evidence["fence_wait_s"]["upload"]; n: the verdicts that waited for it
  at all), its prebuilder's build (evidence["cuda_prebuild"]["seconds"]), the build stage (to
  the worker built and the judge's own start-up done), its timing's wait for the fence, and
  the total. Where the upload's wait passes the prebuilder's build, the judge, not the build,
  kept the candidate from the GPU."""
  def median_of(values: list) -> dict[str, Any]:
    values = [float(v) for v in values if isinstance(v, (int, float))]
    return {"n": len(values), "median": rounded_median(values)}

  out: dict[str, dict[str, Any]] = {}
  levels = collections.defaultdict(list)
  for r in rows:
    if r.get("status") == "correct" and r.get("problem"):
      levels[str(r["problem"]).split("/", 1)[0]].append(r)
  for level, group in sorted(levels.items()):
    evidence = [r.get("evidence") or {} for r in group]
    stages = [r.get("stage_seconds") or {} for r in group]
    out[level] = {
        "candidates": len(group),
        "upload_fence_wait": median_of([(e.get("fence_wait_s") or {}).get("upload")
                                        for e in evidence]),
        "prebuild": median_of([(e.get("cuda_prebuild") or {}).get("seconds") for e in evidence]),
        "build_stage": median_of([s.get("build") for s in stages]),
        "timing_fence_wait": median_of([(e.get("fence_wait_s") or {}).get("timing")
                                        for e in evidence]),
        "total": median_of([s.get("total") for s in stages])}
  return out


def completion_rates(rows: list[dict], middle: float = 0.8) -> dict[str, Any]:
  """How fast the verdicts came, from each row's `seconds` (sandbox_throughput logs when a
  verdict arrived, counted from the batch's submission): the whole batch's rate (to its last
  verdict), when its 10th came, and the rate of its `middle` share, from the verdict at the
  bottom (1 - middle) / 2 of the arrival order to the one at the top: the pool's rate once its
  judges have started and before the batch runs out of work, which a larger batch (an RL step's)
  would keep to for longer. What the start and the end cost against that rate: `start_lost_s`,
  the time to the middle's first verdict less what its verdicts before would take at the
  middle's rate (a pipeline's fill: at least one candidate's time from source to verdict, which
  every batch submitted at once pays, an RL step's too); `end_lost_s`, the same for the verdicts
  after the middle. {} for fewer than two timed rows."""
  times = sorted(float(r["seconds"]) for r in rows if isinstance(r.get("seconds"), (int, float)))
  n = len(times)
  if n < 2 or times[-1] <= 0:
    return {}
  lo = int(round(n * (1 - middle) / 2))
  hi = n - 1 - lo
  out: dict[str, Any] = {"n": n, "last_s": times[-1], "per_minute": round(n / times[-1] * 60, 1),
                         "tenth_s": times[min(9, n - 1)]}
  if hi > lo and times[hi] > times[lo]:
    per_s = (hi - lo) / (times[hi] - times[lo])
    out["middle"] = {"share": middle, "from_s": times[lo], "to_s": times[hi],
                     "verdicts": hi - lo, "per_minute": round(per_s * 60, 1),
                     "start_lost_s": round(times[lo] - lo / per_s, 1),
                     "end_lost_s": round(times[-1] - times[hi] - (n - 1 - hi) / per_s, 1)}
  return out


def first_wave(rows: list[dict], within_s: float = 1.0) -> dict[str, Any]:
  """The jobs that started at the submission (stage_seconds["queue"] under `within_s`: one per
  judge the pool runs at once) against the correct ones that started later, medians (s): their
  build stage, the judge's start-up step "device" (its CUDA context, fence included: 0 in a judge
  process that made it before, judge_host.py, judge_start.py) and the worker's wait for the
  start-up fence, and their whole time from start to verdict. What a batch loses at its start
  (completion_rates' start_lost_s) is mostly the first wave's longer way."""
  def medians(found: list[dict]) -> dict[str, Any]:
    stages = step_medians([r["stage_seconds"] for r in found])
    startup = startup_medians(found)
    return {"n": len(found), "build": stages.get("build"),
            "judge_device": startup["judge"].get("device"),
            "worker_fence": startup["worker"].get("fence"), "total": stages.get("total")}
  timed = [r for r in rows if isinstance((r.get("stage_seconds") or {}).get("queue"), (int, float))]
  return {"first": medians([r for r in timed if r["stage_seconds"]["queue"] < within_s]),
          "later_correct": medians([r for r in timed if r["stage_seconds"]["queue"] >= within_s
                                    and r.get("status") == "correct"])}


def idle_by_window(rows: list[dict], window_s: float = 10.0) -> list[float]:
  """The seconds nobody held the GPU in each `window_s` from the first hold's start (the last
  window ends with the last hold): where a batch leaves its GPU idle, at its start, between, or
  at its end. [] without holds."""
  holds = [(start, end) for r in rows for start, end, _ in _holds(r)]
  if not holds:
    return []
  at, last = min(start for start, _ in holds), max(end for _, end in holds)
  out = []
  while at < last:
    until = min(at + window_s, last)
    out.append(round(until - at - _union_within(holds, at, until), 1))
    at += window_s
  return out


def slow_reference_steps(rows: list[dict], least_s: float = 20.0) -> dict[str, Any]:
  """Per problem one of whose judges took `least_s` or more in its start-up step "reference"
  (its reference built on the CPU and moved to the GPU, with the waits for a host-memory slot,
  the weights ledger's place or the start-up fence): how many judges, when they started (their
  queue seconds, from the submission), that step's median and range, and when the problem's
  last verdict came; and the batch's last two verdicts (arrival seconds, name): whether the
  batch ended on such a problem."""
  found = collections.defaultdict(list)  # problem -> [(queue s, reference step s, arrival s)]
  for r in rows:
    step = (((r.get("evidence") or {}).get("startup_seconds") or {}).get("judge") or {}).get(
        "reference")
    queue = (r.get("stage_seconds") or {}).get("queue")
    if all(isinstance(x, (int, float)) for x in (step, queue, r.get("seconds"))):
      found[str(r.get("problem"))].append((float(queue), float(step), float(r["seconds"])))
  problems = {}
  for problem, judges in sorted(found.items()):
    steps = [j[1] for j in judges]
    if max(steps) >= least_s:
      problems[problem] = {
          "n": len(judges), "started_s": [round(min(j[0] for j in judges), 1),
                                          round(max(j[0] for j in judges), 1)],
          "reference_step_s": {"median": rounded_median(steps),
                               "range": [round(min(steps), 1), round(max(steps), 1)]},
          "last_verdict_s": round(max(j[2] for j in judges), 1)}
  arrived = sorted((float(r["seconds"]), str(r.get("name"))) for r in rows
                   if isinstance(r.get("seconds"), (int, float)))
  return {"problems": problems, "last_verdicts": [(round(t, 1), name) for t, name in arrived[-2:]]}


def read_apps(path: str) -> list[tuple[float, int, int]]:
  """gpu_apps.py's samples; lines that are not `time,pid,MiB` are skipped."""
  out = []
  with _open_text(path) as f:
    for line in f:
      parts = line.strip().split(",")
      try:
        out.append((float(parts[0]), int(parts[1]), int(parts[2])))
      except (ValueError, IndexError):
        continue
  return out


def smi_summary(path: str) -> dict[str, Any]:
  """Peak memory (MiB) and utilisation (%) from the first sample above 2 GiB on."""
  samples = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      parts = [p.strip().split()[0] for p in line.split(",")[:2]]
      if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
        samples.append((int(parts[0]), int(parts[1])))
  busy = next((i for i, (mib, _) in enumerate(samples) if mib > 2048), len(samples))
  samples = samples[busy:]
  if not samples:
    return {"samples": 0}
  return {"samples": len(samples), "peak_mib": max(m for m, _ in samples),
          "utilization_mean": round(statistics.mean(u for _, u in samples), 1),
          "utilization_median": statistics.median(u for _, u in samples)}


def timing_calls_beyond(rows: list[dict], warmup: int = 3, audits: int = 2) -> dict[str, Any]:
  """What a timing's calls cost beyond the forward time they measured, per side, median over
  verdicts (ms a call). Inferred from a timing step's seconds (its fence wait taken off) less
  its calls at the median time measured: the candidate's trials, `warmup` warm-ups and `audits`
  audited calls (SandboxConfig's defaults here); the reference's trials and warm-ups, where its
  judge timed it. Verdicts since c3e4f6b also say it themselves (evidence["timing_loop_ms"]:
  the timed trials' own `beyond_ms` and their input sets' `inputs_ms`): under "said", with how
  many verdicts said it."""
  out: dict[str, Any] = {}
  for side, extra in (("candidate", warmup + audits), ("reference", warmup)):
    inferred, said = [], []
    for r in rows:
      ev = r.get("evidence") or {}
      if timed := _timing_held(r, side, extra):
        held_ms, calls, ms = timed
        inferred.append((held_ms - calls * ms) / calls)
      if side in (loop := ev.get("timing_loop_ms") or {}):
        said.append(loop[side])
    said_medians = {key: rounded_median([d[key] for d in said if key in d])
                    for key in ("inputs_ms", "beyond_ms")}
    out[side] = {"n": len(inferred), "median_ms": rounded_median(inferred),
                 "said": {"n": len(said), **said_medians}}
  return out


def _timing_held(r: dict, side: str, extra: int) -> tuple[float, int, float] | None:
  """A verdict's `side` ("candidate" or "reference") timing: (the ms its step held the GPU,
  its fence wait taken off; its calls, the trials and `extra` more; its median ms a call), or
  None where it was not timed there."""
  ev = r.get("evidence") or {}
  steps, trials = ev.get("gpu_seconds") or {}, ev.get("timing_trials") or {}
  step, ms = f"{side}_timing", r.get(f"{side}_ms")
  if not (step in steps and ms and trials.get(side)):
    return None
  held_ms = 1000.0 * (steps[step] - ((ev.get("fence_wait_s") or {}).get(step) or 0.0))
  return held_ms, trials[side] + extra, ms


def timing_wall_ratios(rows: list[dict], warmup: int = 3, audits: int = 2) -> dict[str, Any]:
  """How the judge's own clock bounds a candidate's timing: per verdict, the timing step's
  seconds under the hold (its fence wait taken off) over the time the worker said its calls
  took (the trials, `warmup` warm-ups and `audits` audited calls at its median). The worker
  shares its process with the candidate, whose native code could forge that reply; a forgery
  claiming k times faster multiplies this ratio by k, so the ratios of honest candidates say
  how far a bound on it would let one go unnoticed. Their spread (min, median, max) over the
  verdicts, and the problems of the five largest; and under "inputs_counted", the same with
  each call's fresh input set counted at the time the judge took to make one (verdicts since
  evidence["input_set_ms"])."""
  found, counted = [], []
  for r in rows:
    if timed := _timing_held(r, "candidate", warmup + audits):
      held_ms, calls, ms = timed
      found.append((held_ms / (calls * ms), r.get("problem")))
      if isinstance(inputs_ms := (r.get("evidence") or {}).get("input_set_ms"), (int, float)):
        counted.append((held_ms / (calls * (ms + inputs_ms)), r.get("problem")))
  return dict(_spread(found), inputs_counted=_spread(counted))


def _spread(found: list[tuple[float, Any]]) -> dict[str, Any]:
  if not found:
    return {"n": 0}
  ratios = sorted(ratio for ratio, _ in found)
  return {"n": len(found), "min": round(ratios[0], 2), "median": rounded_median(ratios),
          "max": round(ratios[-1], 2),
          "largest": [(round(x, 2), p) for x, p in sorted(found, key=lambda f: -f[0])[:5]]}


def check_waits(rows: list[dict], checks: int = 4) -> dict[str, Any]:
  """What a check's exchange with the worker holds beyond the GPU work it must: per verdict,
  the mean time from a check's "run" command to its reply's read (evidence["messages"]; in
  verdicts from before it, the "reference_run" step over all `checks` + 2 checks and the
  "candidate_run" step over the `checks` unprofiled ones) less the candidate's and the
  reference's forward at their timed medians and, where the judge timed its input sets
  (evidence["input_set_ms"]), two of them (the worker's and the judge's). The reference is
  computed during the worker's run (SandboxConfig.concurrent_reference), so both forwards fall
  in that time. What is left: the worker's own work around its forward (the profiler's in the
  first and last check), the messages and their CUDA IPC handles, and on a shared GPU the other
  holders' work. Median, min and max over the verdicts (ms), how many counted their input sets,
  and per problem the median."""
  found, per_problem, counted = [], collections.defaultdict(list), 0
  for r in rows:
    ev = r.get("evidence") or {}
    steps, run = ev.get("gpu_seconds") or {}, (ev.get("messages") or {}).get("run") or {}
    cand, ref = r.get("candidate_ms"), r.get("reference_ms")
    if isinstance(run.get("n"), int) and run["n"] and "until_read_s" in run:
      wait_ms = 1000.0 * run["until_read_s"] / run["n"]
    elif "candidate_run" in steps and "reference_run" in steps:
      wait_ms = 1000.0 * (steps["reference_run"] / (checks + 2) + steps["candidate_run"] / checks)
    else:
      continue
    if not (cand and ref):
      continue
    inputs = ev.get("input_set_ms")
    timed_inputs = isinstance(inputs, (int, float))
    counted += timed_inputs
    beyond = wait_ms - cand - ref - (2 * inputs if timed_inputs else 0.0)
    found.append(beyond)
    per_problem[r.get("problem")].append(beyond)
  if not found:
    return {"n": 0}
  return {"n": len(found), "inputs_counted": counted, "median_ms": rounded_median(found),
          "min_ms": round(min(found), 3), "max_ms": round(max(found), 3),
          "per_problem_ms": {p: rounded_median(v) for p, v in sorted(per_problem.items())}}


MESSAGE_PARTS = ("until_read_s", "read_s", "worker_s", "worker_send_s", "views_dropped_s",
                 *(f"worker_{step}_s" for step in worker_handle.RUN_STEPS))


def message_costs(rows: list[dict]) -> dict[str, dict[str, Any]]:
  """Where the judge's exchanges with its worker went, per command (verdicts since this was
  added: evidence["messages"], WorkerHandle._account): how many, and each part's seconds summed
  over the verdicts and per message (ms): "until_read_s", from the command's send to the start
  of its reply's read (for "run", the judge's reference forward on the same inputs in between);
  "read_s", the read (on a GPU, the CUDA IPC handles of the reply's tensors opened);
  "worker_s" and "worker_send_s", the worker's own account of its time on the command and of
  sending the reply (its CUDA IPC handles made); "views_dropped_s", the judge's views of a
  check's tensors let go (their handles closed)."""
  totals: dict[str, dict[str, float]] = {}
  for r in rows:
    for cmd, stats in ((r.get("evidence") or {}).get("messages") or {}).items():
      if not isinstance(stats, dict):
        continue
      total = totals.setdefault(cmd, {"n": 0})
      for key in ("n", *MESSAGE_PARTS):
        if isinstance(stats.get(key), (int, float)):
          total[key] = total.get(key, 0) + stats[key]
  out = {}
  for cmd, total in sorted(totals.items(), key=lambda kv: -kv[1].get("until_read_s", 0.0)):
    n = int(total["n"])
    out[cmd] = {"n": n, **{key: round(total[key], 3) for key in MESSAGE_PARTS if key in total},
                "per_message_ms": {key[:-2]: round(1000.0 * total[key] / n, 3)
                                   for key in MESSAGE_PARTS if key in total and n}}
  return out


def _define_flags() -> None:
  """The command line, defined only when this runs as a program: tests import this module
  beside other benchmarks whose flags have the same names."""
  flags.DEFINE_list("verdicts", None, "Verdict logs (JSONL), one or more.")
  flags.DEFINE_string("problem_regex", None, "Only these problems.")
  flags.DEFINE_string("backend", None, "Only candidates of this backend (cuda, triton).")
  flags.DEFINE_string("smi_csv", None, "nvidia-smi samples: memory.used, utilization.gpu.")
  flags.DEFINE_string("apps_csv", None, "Per-process GPU memory samples (gpu_apps.py).")
  flags.DEFINE_list("against", None, "Verdict logs of another run of the same batch: whether "
                    "every candidate's status and stage agree, name by name.")
  flags.DEFINE_integer("warmup", 3, "Warm-ups per timing in the run (SandboxConfig.warmup).")
  flags.DEFINE_integer("num_audits", 2, "Audited calls per timing (SandboxConfig.num_audits).")
  flags.DEFINE_integer("num_correct_trials", 5,
                       "Checks before the timing (SandboxConfig.num_correct_trials).")
  flags.DEFINE_integer("per_worker", 8, "Candidates a worker served at most in the run "
                       "(SandboxConfig.candidates_per_worker).")
  flags.mark_flag_as_required("verdicts")


def main(argv: list[str]) -> None:
  del argv
  args = flags.FLAGS
  rows = read_verdicts(args.verdicts, args.problem_regex, args.backend)
  summary = summarize(rows)
  print(f"{summary['num']} verdicts {summary['status']}; GPU held {summary['held_s_sum']} s in all")
  print(f"median total: {summary['median_total_s']['all']} s, "
        f"{summary['median_total_s']['correct']} s over the {summary['num_correct']} correct")
  if summary["triton_precompile"]["n"]:
    print(f"Triton precompilers (medians, s): {summary['triton_precompile']}; "
          f"seeds planted: {summary['triton_seed_planted']}")
  print(f"{'step':28s} {'n':>4s} {'sum s':>8s} {'median s':>9s}")
  for name, s in sorted(summary["steps"].items(), key=lambda kv: -kv[1]["sum"]):
    held = "" if name not in OFF_HOLD else "  (not under the hold)"
    print(f"{name:28s} {s['n']:4d} {s['sum']:8.1f} {s['median']:9.3f}{held}")
  print(f"\n{'problem':42s} {'n':>3s} {'alone':>5s} {'wide':>4s} "
        + " ".join(f"{n[:12]:>12s}" for n in PER_PROBLEM) + f" {'held s':>7s}")
  for problem, p in summary["problems"].items():
    print(f"{problem[:42]:42s} {p['n']:3d} {p['checks_alone']:5d} {p['checks_wide']:4d} "
          + " ".join(f"{p[n]:12.3f}" for n in PER_PROBLEM) + f" {p['held_s']:7.2f}")
  timeline = hold_timeline(rows)
  print("\nverdicts as they came (s from the submission; the middle 80% of them):",
        completion_rates(rows))
  print("the first wave (started at the submission) against later correct ones (medians, s):",
        first_wave(rows))
  print("\nGPU holds side by side:", timeline)
  print("the GPU idle (s) in each 10 s from the first hold:", idle_by_window(rows))
  print("problems whose judges' reference step took 20 s or more, and the last two verdicts:",
        slow_reference_steps(rows))
  print("\nthe gaps between timings (alone holds), and the checks in them:", timing_gaps(rows))
  print("\nthe workers started, by why, and their start-ups' seconds with the fence held:",
        new_workers(rows, args.per_worker))
  print("\nthe forwards alone in those holds (s), and the bound they leave:",
        forward_floor(rows, args.warmup, args.num_audits, timeline.get("busy_s")))
  print("\na timing's calls beyond the forward time they measured (ms a call):",
        timing_calls_beyond(rows, args.warmup, args.num_audits))
  print("\na check's wait for its worker beyond both forwards (and their input sets, where "
        "timed), ms:", check_waits(rows, args.num_correct_trials - 1))
  print("\na timing's held time over the time its calls were said to take (a bound on a "
        "forged timing):", timing_wall_ratios(rows, args.warmup, args.num_audits))
  if messages := message_costs(rows):
    print("\nthe judge's exchanges with its worker, per command (s; per message, ms):")
    for cmd, m in messages.items():
      print(f"  {cmd}: {m}")
  print("\nthe timings' trials, and why they stopped:", timing_trials_summary(rows))
  print("\ntimings' waits for the start-up fence, with the GPU held (idle meanwhile) or before "
        "it:", fence_waits_holding_gpu(rows))
  print("\ntimings disturbed by other candidates' kernels outside every hold "
        f"(setup_windows.py): {disturbed_timings(rows)}")
  print("\ntold timings against their problem's median, by what was told (candidate, reference "
        f"ratios): {disturbance_classes(rows)}")
  print("\ntimings against their copies' median, beside another's CUDA context start-up or "
        "clear of one (%):", timings_beside_startups(rows))
  print("\njudges whose weights the ledger had no room for, by problem:",
        weights_apart_by_problem(rows))
  print("\na candidate's waits for the start-up fence beside its build, by level (medians of "
        "the correct, s):", fence_waits_by_level(rows))
  print("\nmodels built on the CPU for a second or more a judge, by problem (reference at the "
        "judge's start-up, then the candidate's in its worker; s):", constructions_by_problem(rows))
  if flags.FLAGS.smi_csv:
    print("\nnvidia-smi:", smi_summary(flags.FLAGS.smi_csv))
  for oom in oom_processes(rows):
    print("\nout of GPU memory:", oom)
  if flags.FLAGS.against:
    others = read_verdicts(flags.FLAGS.against, args.problem_regex, args.backend)
    print("\nagainst the other run's verdicts:", verdicts_differ(rows, others))
    print("the other run's times and speedups against these (%):", times_against(rows, others))
    print("the speed term S of the default reward (rewards.RewardConfig) in both:",
          speed_terms_against(rows, others))
    print("the CUDA prebuilders' builds in both (s):", prebuilds_against(rows, others))
  if flags.FLAGS.apps_csv:
    print("\nGPU memory outside the holds:",
          memory_outside_holds(rows, read_apps(flags.FLAGS.apps_csv)))


if __name__ == "__main__":
  _define_flags()
  app.run(main)

r"""What a candidate's timing trial costs beyond the time it measures, and where that goes.

    python -m benchmarks.trial_overhead --kernelbench_dir=.kb --out=/tmp/trial_overhead.json

The stored verdicts on an H200 say that a candidate's timing calls cost 1.6-3.2 ms each beyond
the forward time they measured (median; the lone runs and the batches of 70 and 259 of
"A judge's worker server forked from it" in BENCHMARKS.md), against 0.19-0.36 ms for the
reference's, which reuse one input set (SandboxConfig.reference_reuses_inputs). In one run
where a path timed the reference on a fresh input set per trial as the candidate's are
(`refregen`, run 2 of "Kept workers by default"), its calls cost 3.3 ms each against 0.35 ms
on the default path:

    python -m benchmarks.gpu_steps --verdicts=benchmarks/results/sandbox_kept_workers_h200_2026-12-04/run2_batch70/tp_cuda69.json.zygote_lite_pch_reuse_gpu4_refregen_gcscan.verdicts.jsonl.gz

So the fresh input set each candidate trial gets (problem.make_inputs, anti-replay) is the
suspect. Yet level 2 problem 12's set is 32 MiB, and its calls still cost 2.15 ms each in that
batch of 259 (level 1 problem 19's 6 GiB set: 4.1 ms; gpu_steps --problem_regex=level2/12_).
This finds out, per problem, on one GPU:

- `seed_ms`: torch.manual_seed (every generator: the CPU's, CUDA's, and the lazy XPU/MTIA/MPS
  calls torch makes), and `seed_cpu_ms`, `seed_cuda_ms`, `seed_other_ms` for its parts;
  `seed_torch_ms`: problem.seed_torch, which make_inputs seeds with (the CPU's and CUDA's alone);
- `device_ctx_ms`: entering and leaving `with torch.device(device)` (make_inputs' context);
- `get_inputs_ms`: get_inputs() under that context, to its tensors being ready (synchronised);
- `make_inputs_ms`: problem.make_inputs, the whole call, synchronised (`..._allseed_ms`: seeded by
  torch.manual_seed, KZ_SEED_ALL_BACKENDS=1, as before problem.seed_torch); `make_gpu_ms`: its
  GPU time (CUDA events);
- `trial_fresh_ms`, `trial_reused_ms`: what timing.time_forward says a timed trial cost beyond its
  measurement (beyond_ms, as in every verdict's evidence["timing_loop_ms"] since this script),
  for a forward that launches nothing (it returns its first input), with a fresh input set per
  trial and with one reused: the sandbox's loop itself (`trial_fresh_allseed_ms`: fresh
  sets seeded by torch.manual_seed);
- the Python functions that make_inputs spends its time in (cProfile, `--profile_top`). On the
  CPU here, torch.manual_seed formats the caller's stack for each backend it seeds lazily (XPU,
  MTIA, and CUDA until initialised): `seed_ms` 0.15 ms against `seed_cpu_ms` 0.001 ms (level 2
  problem 12, `--device=cpu --calls=20`).

On an H200 (BENCHMARKS.md, "Five sandbox changes"): the fresh set is GPU work, 2.5-3.4 ms for
the 6-8 GiB sets (torch.rand at 2.56 TB/s), and the loop itself 0.09-0.12 ms a trial; with
torch.manual_seed, make_inputs took 0.13-0.15 ms more.

Medians over `--calls` calls each. `--device=cpu` runs the same on the CPU (a smoke test).
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import statistics
import time
from typing import Any, Callable
from unittest import mock

from absl import app
from absl import flags


def _define_flags() -> None:
  """The flags, defined when this runs as a script only: the tests import measure() beside
  other benchmarks' flags of the same names in one process."""
  flags.DEFINE_string("kernelbench_dir", None, "KernelBench root (levels 1 and 2).")
  flags.DEFINE_list("problems", ["level2/12_", "level1/1_", "level1/19_", "level1/4_"],
                    "Problems by key prefix (level2/12_ is level 2 problem 12).")
  flags.DEFINE_enum("device", "cuda", ["cuda", "cpu"], "Where inputs are made.")
  flags.DEFINE_integer("calls", 50, "Calls per measurement.")
  flags.DEFINE_integer("profile_top", 15, "Functions shown from cProfile (by cumulative time).")
  flags.DEFINE_string("out", None, "Write the results here (JSON).")


def _median_ms(fn: Callable[[], Any], calls: int, sync: Callable[[], None]) -> float:
  """Median wall time of fn() in ms, each call synchronised after (one untimed call first)."""
  fn()
  sync()
  times = []
  for _ in range(calls):
    t0 = time.perf_counter()
    fn()
    sync()
    times.append((time.perf_counter() - t0) * 1e3)
  return round(statistics.median(times), 4)


def _seed_parts(torch, seed_torch) -> dict[str, Callable[[int], Any]]:
  """torch.manual_seed and what it calls (torch/random.py), each on its own, and `seed_torch`."""
  def other(seed: int) -> None:
    for name in ("mps", "xpu", "mtia"):
      module = getattr(torch, name, None)
      if module is not None and not module._is_in_bad_fork():  # pylint: disable=protected-access
        getattr(module, "manual_seed_all", getattr(module, "manual_seed", None))(seed)
  parts = {"seed_ms": torch.manual_seed, "seed_cpu_ms": torch.default_generator.manual_seed,
           "seed_other_ms": other, "seed_torch_ms": seed_torch}
  if torch.cuda.is_initialized():
    parts["seed_cuda_ms"] = torch.cuda.manual_seed_all
  return parts


def _gpu_ms(torch, fn: Callable[[], Any], calls: int) -> float:
  """Median GPU time of fn() in ms (CUDA events around it)."""
  times = []
  for _ in range(calls):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    times.append(start.elapsed_time(end))
  return round(statistics.median(times), 4)


def _trial_overhead_ms(timing, timer, make: Callable[[int], list], calls: int,
                       reuse: bool) -> float:
  """What timing.time_forward says a timed trial cost beyond its measurement (its beyond_ms,
  as in verdicts' evidence["timing_loop_ms"]), for a forward that launches nothing."""
  seeds = list(range(1000, 1000 + 3 + calls))
  res = timing.time_forward(timer, lambda *xs: xs[0], make, seeds, warmup=3, target_s=1e9,
                            min_trials=calls, reuse_inputs=reuse)
  return res["beyond_ms"]


class _WallTimer:
  """timing.Timer's interface on the CPU (no events): wall time of each call."""

  last_stream_ms = None

  def time_call(self, fn):
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def measure(source: str, device_name: str, calls: int, profile_top: int) -> dict[str, Any]:
  """The measurements of the module docstring for one reference `source`."""
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import problem, timing  # pylint: disable=import-outside-toplevel
  device = torch.device(device_name)
  cuda = device.type == "cuda"
  sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
  module = problem.load_module(source, "kz_trial_overhead_reference")
  get_inputs = module.get_inputs
  row: dict[str, Any] = {"input_bytes": problem.input_bytes(get_inputs)}
  counter = iter(range(10**9))
  for name, seed_fn in _seed_parts(torch, problem.seed_torch).items():
    row[name] = _median_ms(lambda f=seed_fn: f(next(counter)), calls, lambda: None)

  def in_context():
    with torch.device(device):
      pass
  row["device_ctx_ms"] = _median_ms(in_context, calls, lambda: None)

  def get():
    with torch.device(device):
      return list(get_inputs())
  row["get_inputs_ms"] = _median_ms(get, calls, sync)
  make = lambda seed: problem.make_inputs(get_inputs, seed, device)
  all_seeded = lambda: mock.patch.dict(os.environ, {"KZ_SEED_ALL_BACKENDS": "1"})
  row["make_inputs_ms"] = _median_ms(lambda: make(next(counter)), calls, sync)
  with all_seeded():
    row["make_inputs_allseed_ms"] = _median_ms(lambda: make(next(counter)), calls, sync)
  row["make_gpu_ms"] = _gpu_ms(torch, lambda: make(next(counter)), calls) if cuda else None
  timer = timing.Timer(device) if cuda else _WallTimer()
  row["trial_fresh_ms"] = _trial_overhead_ms(timing, timer, make, calls, reuse=False)
  row["trial_reused_ms"] = _trial_overhead_ms(timing, timer, make, calls, reuse=True)
  with all_seeded():
    row["trial_fresh_allseed_ms"] = _trial_overhead_ms(timing, timer, make, calls, reuse=False)
  del timer
  profiler = cProfile.Profile()
  profiler.enable()
  for _ in range(calls):
    make(next(counter))
    sync()
  profiler.disable()
  text = io.StringIO()
  pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(profile_top)
  row["profile"] = [line for line in text.getvalue().splitlines() if line.strip()][-profile_top:]
  if cuda:
    torch.cuda.empty_cache()
  return row


def main(argv: list[str]) -> None:
  del argv
  args = flags.FLAGS
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.tasks import kernelbench  # pylint: disable=import-outside-toplevel
  if args.device == "cuda":
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the context, before any measurement
  tasks = kernelbench.list_tasks(args.kernelbench_dir)
  results: dict[str, Any] = {"device": (torch.cuda.get_device_name() if args.device == "cuda"
                                        else "cpu"),
                             "torch": torch.__version__, "calls": args.calls, "problems": {}}
  for prefix in args.problems:
    matches = [t for t in tasks if t.key.startswith(prefix)]
    if len(matches) != 1:
      raise app.UsageError(f"--problems: {prefix!r} names {len(matches)} problems, not one")
    task = matches[0]
    row = measure(task.source, args.device, args.calls, args.profile_top)
    results["problems"][task.key] = row
    print(f"{task.key} ({row['input_bytes']} input bytes): " + ", ".join(
        f"{k} {v}" for k, v in row.items() if k.endswith("_ms")), flush=True)
    for line in row["profile"]:
      print("    " + line)
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  _define_flags()
  app.run(main)

r"""Does a busy CPU change what the sandbox's timer measures? One GPU, one process, one run.

    python -m benchmarks.timing_noise --out=/tmp/timing_noise.json

In a batch, a judge times its candidate with the GPU to itself, but the machine's CPU cores are
busy with other candidates' builds and start-ups. The sandbox's timer (sandbox/timing.py) records
its end event after a device-wide synchronize, so the interval also holds the host's delays: the
forward's launch, and the wake-up after the synchronize. This times one memory-bound forward
(GELU on a 6 GiB float32 input by default, fresh inputs each trial, as the sandbox does) with the
CPU idle, with `--burners` processes spinning, and with them spinning at niceness 10 (as the
sandbox's prebuilders and precompilers run: SandboxConfig.build_nice), `--repeats` times each,
and prints each estimator's median over the repeats and its spread ((max - min) / median):

- `sync`: the sandbox's time (end event after the device-wide synchronize), median over trials;
- `stream`: an end event recorded on the stream right after the forward returns, before that
  synchronize (what the GPU did, without the wake-up; misses work left on other streams);
- `sync_min`: the smallest `sync` trial.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags

_ROWS = flags.DEFINE_integer("rows", 4096, "Input rows.")
_COLS = flags.DEFINE_integer("cols", 393216, "Input columns (4096 x 393216 float32: 6 GiB).")
_BURNERS = flags.DEFINE_integer("burners", 0, "Spinning processes; 0: two per CPU core.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timings per load.")
_TARGET = flags.DEFINE_float("target_s", 0.25, "Timed seconds per timing, as the sandbox's.")
_OUT = flags.DEFINE_string("out", None, "Write the results here (JSON).")


WARMUP = 3  # untimed calls before each timing's trials, as SandboxConfig.warmup


def _spread(values: list[float]) -> float:
  return round(100 * (max(values) - min(values)) / statistics.median(values), 2)


def main(argv: list[str]) -> None:
  del argv
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import timing  # pylint: disable=import-outside-toplevel

  class StreamLog(timing.Timer):
    """The sandbox's timer, keeping each call's time to its end on the stream."""

    def __init__(self, device):
      super().__init__(device)
      self.stream_ms: list[float] = []

    def time_call(self, fn):
      measured = super().time_call(fn)
      self.stream_ms.append(self.last_stream_ms)
      return measured

  device = torch.device("cuda")
  rows, cols = _ROWS.value, _COLS.value
  make = lambda seed: [torch.rand(rows, cols, device=device,
                                  generator=torch.Generator(device).manual_seed(seed))]
  forward = torch.nn.functional.gelu
  burners = _BURNERS.value or 2 * (os.cpu_count() or 1)
  results = {"device": torch.cuda.get_device_name(), "cpus": os.cpu_count(), "burners": burners,
             "shape": [rows, cols], "target_s": _TARGET.value, "loads": {}}
  seed = 0
  for load in ("idle", "busy", "busy_niced"):
    procs = []
    if load != "idle":
      nice = (lambda: os.nice(10)) if load == "busy_niced" else None
      procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=nice)
               for _ in range(burners)]
      time.sleep(1.0)
    try:
      per = {"sync": [], "stream": [], "sync_min": [], "trials": []}
      for _ in range(_REPEATS.value):
        timer = StreamLog(device)
        seeds = list(range(seed, seed + 200))
        seed += 200
        res = timing.time_forward(timer, forward, make, seeds, warmup=WARMUP,
                                  target_s=_TARGET.value, min_trials=10)
        stream = timer.stream_ms[WARMUP:]  # the warmup's calls come first
        per["sync"].append(res["median_ms"])
        per["stream"].append(statistics.median(stream))
        per["sync_min"].append(min(res["times_ms"]))
        per["trials"].append(res["trials"])
        del timer
        torch.cuda.empty_cache()
    finally:
      for proc in procs:
        proc.kill()
      for proc in procs:
        proc.wait()
    results["loads"][load] = {
        name: {"values": [round(v, 4) for v in vals],
               "median": round(statistics.median(vals), 4), "spread_pct": _spread(vals)}
        for name, vals in per.items() if name != "trials"}
    results["loads"][load]["trials"] = per["trials"]
    print(f"{load}: " + "; ".join(
        f"{name} median {row['median']} ms, spread {row['spread_pct']}%"
        for name, row in results["loads"][load].items() if name != "trials")
          + f"; trials {per['trials']}", flush=True)
  idle = results["loads"]["idle"]
  for load in ("busy", "busy_niced"):
    for name in ("sync", "stream", "sync_min"):
      row = results["loads"][load][name]
      print(f"{name}: {load} / idle = {row['median'] / idle[name]['median']:.3f}, "
            f"spread {row['spread_pct']}% against {idle[name]['spread_pct']}%")
  if _OUT.value:
    with open(_OUT.value, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  app.run(main)

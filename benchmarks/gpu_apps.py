r"""Samples each process's GPU memory beside a run, with wall-clock times, for gpu_steps.py.

    python -m benchmarks.gpu_apps --out=OUT/apps.csv &   # then the run; kill it after

Every `--interval_s` it asks `nvidia-smi --query-compute-apps=pid,used_memory` and appends one
line per process: `time,pid,MiB` (time.time() when the answer came). gpu_steps.py
`--apps_csv` lays these beside the verdicts' GPU holds and their judges' and workers' pids: what
a judge or a worker held on the GPU while it held no slot, which no check's memory budget counts
(gpu_budget.check_width). Runs until killed, or for `--seconds`.
"""

from __future__ import annotations

import subprocess
import time

from absl import app
from absl import flags

QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


def parse(text: str, at: float) -> list[tuple[float, int, int]]:
  """(time, pid, MiB) for each well-formed line of nvidia-smi's answer."""
  out = []
  for line in text.splitlines():
    parts = [p.strip() for p in line.split(",")]
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
      out.append((at, int(parts[0]), int(parts[1])))
  return out


def sample(out_path: str, interval_s: float, seconds: float | None) -> None:
  end = None if seconds is None else time.time() + seconds
  with open(out_path, "a", encoding="utf-8") as f:
    while end is None or time.time() < end:
      t0 = time.time()
      try:
        text = subprocess.run(QUERY, capture_output=True, text=True, timeout=10).stdout
      except (OSError, subprocess.TimeoutExpired):
        text = ""
      for at, pid, mib in parse(text, time.time()):
        f.write(f"{at:.3f},{pid},{mib}\n")
      f.flush()
      time.sleep(max(0.0, interval_s - (time.time() - t0)))


def main(argv: list[str]) -> None:
  del argv
  sample(flags.FLAGS.out, flags.FLAGS.interval_s, flags.FLAGS.seconds)


if __name__ == "__main__":
  flags.DEFINE_string("out", None, "CSV to append to.", required=True)
  flags.DEFINE_float("interval_s", 0.5, "Seconds between samples.")
  flags.DEFINE_float("seconds", None, "Stop after this long (default: when killed).")
  app.run(main)

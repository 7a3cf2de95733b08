r"""What the worker's look for processes its candidate started costs, beside many processes.

    python -m benchmarks.process_look --others=200 --looks=50

After every command, under its judge's GPU hold, the worker looks for processes descended from
it (evidence.thread_and_process_violations). This starts `--others` sleeping processes that are
not its own (as the other judges, workers and compilers of a batch are not a worker's), then
times `--looks` looks each way: process_tree.descendant_pids (the children files of the
process's threads, and of its descendants') and psutil's children(recursive=True), the look it
replaced, which reads the parent of every process on the machine. (A judge looks at its
worker's processes too: it watches their memory every 50 ms while it waits.) Prints the medians
(ms) and their ratio.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import time

from absl import app
from absl import flags

import psutil

from kernelzero_jax.sandbox import process_tree


def _median_ms(look, looks: int) -> float:
  times = []
  for _ in range(looks):
    t0 = time.perf_counter()
    look()
    times.append(1000 * (time.perf_counter() - t0))
  return round(statistics.median(times), 3)


def compare(looks: int) -> dict[str, float]:
  """Both looks' median milliseconds, and psutil's over descendant_pids'."""
  ours = _median_ms(process_tree.descendant_pids, looks)
  theirs = _median_ms(lambda: psutil.Process().children(recursive=True), looks)
  return {"processes": len(psutil.pids()), "descendant_pids_ms": ours,
          "psutil_children_ms": theirs, "psutil_over_ours": round(theirs / max(ours, 1e-6), 1)}


def main(argv: list[str]) -> None:
  del argv
  args = flags.FLAGS
  # Sleepers started by a shell that a shell started in the background and left: adopted by
  # init (or the nearest subreaper), they are not this process's descendants. They share the
  # first shell's new process group; their own shell waits for them, so that it reaps them when
  # they are killed (an init that reaps nothing would keep them as zombies).
  starter = subprocess.Popen(
      ["sh", "-c", f"sh -c 'for i in $(seq {args.others}); do sleep 600 & done; wait' &"],
      start_new_session=True)
  starter.wait()
  group = starter.pid  # (a session's leader leads its process group)
  try:
    deadline = time.monotonic() + 30
    while len(_sleepers(group)) < args.others:
      if time.monotonic() > deadline:
        raise RuntimeError("the other processes did not start")
      time.sleep(0.05)
    print(json.dumps(compare(args.looks)))
  finally:
    for pid in _sleepers(group):
      with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _sleepers(group: int) -> list[int]:
  found = []
  for p in psutil.process_iter(["name"]):
    with contextlib.suppress(OSError, psutil.Error):
      if p.info["name"] == "sleep" and os.getpgid(p.pid) == group and p.status() != "zombie":
        found.append(p.pid)
  return found


if __name__ == "__main__":
  flags.DEFINE_integer("others", 200, "Sleeping processes started beside this one.")
  flags.DEFINE_integer("looks", 50, "Looks timed each way.")
  app.run(main)

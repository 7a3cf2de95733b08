r"""How long a forked judge or worker takes to get its CUDA context, alone and N at once.

    python -m benchmarks.cuda_context --counts=1,4,16,32

The sandbox forks every judge from a server with torch imported and no CUDA context (zygote.py),
and each judge forks its worker; both then create a context (`torch.zeros(1, device="cuda")`,
what worker.py's "device" start-up step does). This forks `count` processes the same way, at
once, and prints the median and maximum seconds each took to create its context: the cost a
candidate pays before anything of its own runs, and how it grows when a batch starts together.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import time

from absl import app
from absl import flags

_COUNTS = flags.DEFINE_list("counts", ["1", "4", "16", "32"], "Processes started at once.")
_OUT = flags.DEFINE_string("out", None, "Write the results here (JSON).")


def _child(start: multiprocessing.synchronize.Event, queue: multiprocessing.Queue) -> None:
  import torch  # pylint: disable=import-outside-toplevel
  start.wait()
  began = time.perf_counter()
  torch.zeros(1, device="cuda")
  torch.cuda.synchronize()
  queue.put(time.perf_counter() - began)


def contexts_at_once(count: int) -> list[float]:
  """Seconds each of `count` processes, forked and released together, took for its context."""
  context = multiprocessing.get_context("fork")
  start, queue = context.Event(), context.Queue()
  children = [context.Process(target=_child, args=(start, queue)) for _ in range(count)]
  for child in children:
    child.start()
  time.sleep(0.5)  # every child is waiting on the event
  start.set()
  seconds = sorted(queue.get(timeout=600) for _ in children)
  for child in children:
    child.join()
  return seconds


def main(argv: list[str]) -> None:
  del argv
  os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
  import torch  # pylint: disable=import-outside-toplevel
  assert not torch.cuda.is_initialized()
  results = []  # one row per --counts entry, repeats included (the first pays for the driver)
  for count in map(int, _COUNTS.value):
    seconds = contexts_at_once(count)
    results.append(dict(count=count, median_s=round(statistics.median(seconds), 3),
                        max_s=round(max(seconds), 3)))
    print(f"{count:3d} at once: median {results[-1]['median_s']:.2f} s, "
          f"max {results[-1]['max_s']:.2f} s per context", flush=True)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
  app.run(main)

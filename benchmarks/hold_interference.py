r"""What slows a judge's host work under the GPU hold when other judges start and end beside it
(GPU only).

    python -m benchmarks.hold_interference --out=OUT/hold_interference.json

In a batch, the steps a judge runs under the GPU hold that are mostly host work took ten times
longer in the middle of the batch than at its ends (BENCHMARKS.md, "Where a judge's held time
goes"): its release of GPU memory (`torch.cuda.empty_cache`, then a round trip to its worker)
0.1-0.25 s against 0.003-0.015 s. Two suspects, which this separates:

- the CPU: a woken judge or worker waits for a core that other judges' start-ups take (they run
  at the same niceness; only the builders are niced);
- the GPU driver: other processes creating and destroying CUDA contexts, and allocating and
  freeing GPU memory, beside a judge whose own frees wait for them.

A holder process (forked from one with torch imported and no CUDA context, as the sandbox's
judges are) repeats what a judge does under a hold, each part timed: a check (input made on the
GPU, copied, a forward, the copy compared), the forward timed as the sandbox times it
(sandbox/timing.py's interval, in GPU time: `timed`), a release (`empty_cache`), and a round
trip to a forked peer over a pipe. It does so alone, then beside each load of --loads:

- `cpu`: two spinning processes per core, at niceness 0;
- `cpu_niced`: the same at niceness 10 (what the builders run at);
- `cpu_boosted`: the spinners of `cpu`, with the holder and its peer at niceness -10 (what a
  judge and its worker raising their priority under a hold would get; it takes root);
- `contexts`: processes that each create a CUDA context, allocate 512 MiB, and exit, in a loop
  (the judges' and workers' start-ups and ends);
- `alloc`: processes with a context that allocate and free 1 GiB in a loop;
- `kernels`: one process that runs a ReLU over 1 GiB on the GPU in a loop: what a candidate's
  import or constructor can queue outside its judge's holds (the cheats busy_at_import and
  busy_in_constructor in benchmarks/candidates/cheats/; SandboxConfig.setup_kernel_ms_limit).

The other GPU loads launch no kernels.

It prints each part's median and 90th percentile per load.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import time

from absl import app
from absl import flags

_LOADS = flags.DEFINE_list("loads", ["cpu", "cpu_niced", "cpu_boosted", "contexts", "alloc",
                                     "kernels"],
                           "Loads to compare against none.")
_LOAD_PROCS = flags.DEFINE_integer("load_procs", 8, "Processes of a GPU load (contexts, alloc).")
_MIB = flags.DEFINE_integer("mib", 256, "The check's input, MiB of float32.")
_REPEATS = flags.DEFINE_integer("repeats", 40, "Repeats per load.")
_OUT = flags.DEFINE_string("out", None, "Write the results here (JSON).")

LOADS = ("cpu", "cpu_niced", "cpu_boosted", "contexts", "alloc", "kernels")
HOLDER_NICE = {"cpu_boosted": -10}


def _spin(nice: int) -> None:
  os.nice(nice)
  while True:
    pass


def _context_churn(ctx) -> None:
  """Forever: a child that creates a context, allocates 512 MiB, and exits."""
  while True:
    child = ctx.Process(target=_one_context)
    child.start()
    child.join()


# The GPU loads but `kernels` run no kernels: in a batch, every judge's kernels run under its
# hold, and what other judges do on the GPU outside theirs is driver work (contexts, allocations,
# frees); `kernels` is what a candidate's import or constructor could add (setup_kernel_ms_limit).
def _one_context() -> None:
  import torch  # pylint: disable=import-outside-toplevel
  torch.empty(128 * 2**20, dtype=torch.float32, device="cuda")
  torch.cuda.synchronize()


def _alloc_churn() -> None:
  import torch  # pylint: disable=import-outside-toplevel
  while True:
    x = torch.empty(256 * 2**20, dtype=torch.float32, device="cuda")
    del x
    torch.cuda.empty_cache()


def _kernel_churn() -> None:
  import torch  # pylint: disable=import-outside-toplevel
  x = torch.zeros(256 * 2**20, dtype=torch.float32, device="cuda")
  while True:
    for _ in range(100):
      torch.relu_(x)
    torch.cuda.synchronize()


def _peer(conn, nice: int) -> None:
  os.setpriority(os.PRIO_PROCESS, 0, nice)
  while True:
    msg = conn.recv_bytes()
    if msg == b"stop":
      return
    conn.send_bytes(b"ok")


def _holder(mib: int, repeats: int, nice: int, ready, go, queue) -> None:
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import timing  # pylint: disable=import-outside-toplevel
  os.setpriority(os.PRIO_PROCESS, 0, nice)
  ctx = multiprocessing.get_context("fork")
  mine, theirs = ctx.Pipe()
  peer = ctx.Process(target=_peer, args=(theirs, nice))
  peer.start()
  device = torch.device("cuda:0")
  torch.cuda.set_device(device)
  n = mib * 2**20 // 4
  x = torch.randn(n, device=device)  # the context, the RNG and the kernels, before the clock
  torch.relu(x)
  del x
  timer = timing.Timer(device)
  torch.cuda.synchronize()
  ready.set()
  go.wait()
  parts: dict[str, list[float]] = {"check": [], "timed": [], "release": [], "round_trip": []}
  for i in range(repeats):
    t0 = time.perf_counter()
    torch.manual_seed(i)
    x = torch.randn(n, device=device)
    pristine = x.clone()
    y = torch.relu(x)
    same = torch.equal(x, pristine)
    parts["check"].append(time.perf_counter() - t0)
    assert same
    measured_ms, y = timer.time_call(lambda: torch.relu(x))
    parts["timed"].append(measured_ms / 1000)
    del x, pristine, y
    t0 = time.perf_counter()
    torch.cuda.empty_cache()
    parts["release"].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    mine.send_bytes(b"go")
    mine.recv_bytes()
    parts["round_trip"].append(time.perf_counter() - t0)
  mine.send_bytes(b"stop")
  peer.join()
  queue.put(parts)


def _start_load(name: str, ctx, procs: int) -> list:
  cores = os.cpu_count() or 1
  if name in ("cpu", "cpu_niced", "cpu_boosted"):
    nice = 10 if name == "cpu_niced" else 0
    return [ctx.Process(target=_spin, args=(nice,), daemon=True) for _ in range(2 * cores)]
  if name == "contexts":
    return [ctx.Process(target=_context_churn, args=(ctx,)) for _ in range(procs)]
  if name == "kernels":
    return [ctx.Process(target=_kernel_churn, daemon=True)]
  return [ctx.Process(target=_alloc_churn, daemon=True) for _ in range(procs)]


def _kill(processes: list) -> None:
  for p in processes:
    p.kill()  # a context churner's last child ends by itself
  for p in processes:
    p.join()


def measure(load: str | None, mib: int, repeats: int, procs: int) -> dict:
  ctx = multiprocessing.get_context("fork")
  ready, go, queue = ctx.Event(), ctx.Event(), ctx.Queue()
  holder = ctx.Process(target=_holder, args=(mib, repeats, HOLDER_NICE.get(load, 0), ready, go,
                                             queue))
  holder.start()
  ready.wait(timeout=300)
  background = _start_load(load, ctx, procs) if load else []
  for p in background:
    p.start()
  if background:
    time.sleep(2.0)  # the load under way
  go.set()
  parts = queue.get(timeout=600)
  holder.join()
  _kill(background)
  summary = {}
  for name, values in parts.items():
    values = sorted(values)
    summary[name] = {"median_ms": round(1000 * statistics.median(values), 3),
                     "p90_ms": round(1000 * values[int(0.9 * (len(values) - 1))], 3)}
  return summary


def main(argv: list[str]) -> None:
  del argv
  import torch  # pylint: disable=import-outside-toplevel
  assert not torch.cuda.is_initialized(), "the children fork without a CUDA context"
  unknown = sorted(set(_LOADS.value) - set(LOADS))
  if unknown:
    raise app.UsageError(f"unknown --loads {unknown}; known: {LOADS}")
  results = {}
  for load in [None, *_LOADS.value]:
    name = load or "none"
    results[name] = measure(load, _MIB.value, _REPEATS.value, _LOAD_PROCS.value)
    print(name, json.dumps(results[name]), flush=True)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                 "mib": _MIB.value, "repeats": _REPEATS.value, "load_procs": _LOAD_PROCS.value,
                 "results": results}, f, indent=1)


if __name__ == "__main__":
  app.run(main)

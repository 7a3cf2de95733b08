r"""What handing a check's tensors from a worker to its judge costs on a GPU: CUDA IPC each time,
as the sandbox does, against buffers the judge shared once.

    python -m benchmarks.cuda_ipc --sizes_mib=32,256,2048,6144 --rounds=12 --out=OUT/ipc.json

In every check the judge's worker runs the candidate on a fresh input set and replies with its
outputs and its inputs as the forward left them (worker_run.RunSteps.run); they travel by CUDA
IPC (channel.py): the worker makes a memory handle and an event for each tensor's allocation,
the judge opens them, reads the tensors (the comparison, the inputs' check) and closes them when
it lets go. Opening maps the worker's allocation into the judge's address space, so its cost may
grow with the allocation. In a batch of 259 CUDA candidates on an H200 the checks' steps held
the GPU for 92 s, their forwards for 31 s of it (1536 checks; BENCHMARKS.md, "What a batch's
forwards alone leave"); this measures how much of the rest the handles could be, two processes
and nothing else on the GPU:

- `ipc`: per round, the producer (the worker's stand-in) makes an input of each size with
  torch.rand and an output (input * 2), as a check does, and sends both (torch's ForkingPickler,
  as channel.send); the consumer (the judge's) opens them, reads both (a sum each, synchronized)
  and lets go of them. Each step timed: `make_ms`, `share_ms` (the pickling, in the producer),
  `open_ms`, `read_ms`, `close_ms`, and `round_ms`, from the consumer's command to its let-go;
- `buffer`: the consumer allocates an output and an input buffer once and shares them once;
  per round the producer makes the same tensors and copies them into the buffers (`copy_ms`,
  synchronized), then replies with a plain message; the consumer reads the buffers.

It prints one line per size and way (medians over the rounds after the first two), then per
size `round_ms` of `ipc` over `buffer`.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any

from absl import app
from absl import flags

from benchmarks.gpu_steps import rounded_median

WARMUP_ROUNDS = 2  # rounds left out of the medians (first handles, the allocator's first blocks)


def _producer(conn) -> None:
  """The worker's stand-in: answers "ipc" (fresh tensors sent by CUDA IPC), "buffers" (the
  consumer's buffers, opened once) and "copy" (fresh tensors copied into those buffers)."""
  import torch  # pylint: disable=import-outside-toplevel
  torch.zeros(1, device="cuda")
  held: list = []  # the last round's tensors, alive until the next command, as in worker.py
  buffers = None
  while True:
    msg = pickle.loads(conn.recv_bytes())
    held.clear()
    if msg["cmd"] == "exit":
      return
    if msg["cmd"] == "buffers":
      buffers = msg["buffers"]
      conn.send_bytes(pickle.dumps({"ok": True}))
      continue
    t0 = time.perf_counter()
    x = torch.rand(msg["numel"], device="cuda")
    y = x * 2
    torch.cuda.synchronize()
    times = {"make_ms": 1000 * (time.perf_counter() - t0)}
    if msg["cmd"] == "ipc":
      t0 = time.perf_counter()
      data = ForkingPickler.dumps([y, x])
      times["share_ms"] = 1000 * (time.perf_counter() - t0)
      held[:] = [x, y]
      conn.send_bytes(data)
    else:  # "copy"
      t0 = time.perf_counter()
      buffers[0].copy_(y)
      buffers[1].copy_(x)
      torch.cuda.synchronize()
      times["copy_ms"] = 1000 * (time.perf_counter() - t0)
    del x, y
    conn.send_bytes(pickle.dumps(times))


def _read(tensors) -> None:
  for t in tensors:
    t.sum().item()


def ipc_round(conn, numel: int) -> dict[str, float]:
  """One round of the `ipc` way (module docstring); its steps' milliseconds."""
  t_start = time.perf_counter()
  conn.send_bytes(pickle.dumps({"cmd": "ipc", "numel": numel}))
  data = conn.recv_bytes()
  t0 = time.perf_counter()
  tensors = pickle.loads(data)
  t1 = time.perf_counter()
  _read(tensors)
  t2 = time.perf_counter()
  del tensors
  t3 = time.perf_counter()
  times = pickle.loads(conn.recv_bytes())
  return {**times, "open_ms": 1000 * (t1 - t0), "read_ms": 1000 * (t2 - t1),
          "close_ms": 1000 * (t3 - t2), "round_ms": 1000 * (t3 - t_start)}


def buffer_round(conn, numel: int, buffers) -> dict[str, float]:
  """One round of the `buffer` way (module docstring); its steps' milliseconds."""
  t_start = time.perf_counter()
  conn.send_bytes(pickle.dumps({"cmd": "copy", "numel": numel}))
  times = pickle.loads(conn.recv_bytes())
  t0 = time.perf_counter()
  _read(buffers)
  t1 = time.perf_counter()
  return {**times, "read_ms": 1000 * (t1 - t0), "round_ms": 1000 * (t1 - t_start)}


def summarize(rounds: list[dict[str, float]], warmup: int = WARMUP_ROUNDS) -> dict[str, float]:
  """Each step's median over the rounds after the first `warmup`, rounded to µs."""
  kept = rounds[warmup:]
  if not kept:
    raise ValueError(f"no rounds after the first {warmup}")
  return {key: rounded_median([r[key] for r in kept]) for key in kept[0]}


def ratios(rows: list[dict[str, Any]]) -> dict[int, float]:
  """Per size, the `ipc` way's median round over the `buffer` way's."""
  by = {(r["mib"], r["way"]): r["round_ms"] for r in rows}
  return {mib: round(by[(mib, "ipc")] / by[(mib, "buffer")], 2)
          for mib, way in by if way == "ipc" and (mib, "buffer") in by}


def main(argv: list[str]) -> None:
  del argv
  import torch  # pylint: disable=import-outside-toplevel
  args = flags.FLAGS
  torch.zeros(1, device="cuda")
  ctx = multiprocessing.get_context("spawn")
  conn, child = ctx.Pipe(duplex=True)
  proc = ctx.Process(target=_producer, args=(child,), daemon=True)
  proc.start()
  child.close()
  rows = []
  try:
    for mib in map(int, args.sizes_mib):
      numel = mib * 2**20 // 4
      rounds = [ipc_round(conn, numel) for _ in range(args.rounds)]
      rows.append({"mib": mib, "way": "ipc", **summarize(rounds)})
      print(json.dumps(rows[-1]), flush=True)
      buffers = [torch.empty(numel, device="cuda"), torch.empty(numel, device="cuda")]
      conn.send_bytes(ForkingPickler.dumps({"cmd": "buffers", "buffers": buffers}))
      pickle.loads(conn.recv_bytes())
      rounds = [buffer_round(conn, numel, buffers) for _ in range(args.rounds)]
      rows.append({"mib": mib, "way": "buffer", **summarize(rounds)})
      print(json.dumps(rows[-1]), flush=True)
      # The producer lets go of its views of these buffers with its next command's "held" reset;
      # they are freed here once it has.
      conn.send_bytes(pickle.dumps({"cmd": "buffers", "buffers": None}))
      pickle.loads(conn.recv_bytes())
      del buffers
      torch.cuda.empty_cache()
  finally:
    conn.send_bytes(pickle.dumps({"cmd": "exit"}))
    proc.join(30)
  out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows,
         "ipc_over_buffer": ratios(rows)}
  print("round_ms, ipc over buffer:", json.dumps(out["ipc_over_buffer"]))
  if args.out:
    with open(args.out, "w") as f:
      json.dump(out, f, indent=1)


def _define_flags() -> None:
  """Defined only when this runs as a program (tests import the module)."""
  flags.DEFINE_list("sizes_mib", ["32", "256", "2048", "6144"],
                    "Each tensor's size (MiB, fp32): an input and an output of it per round.")
  flags.DEFINE_integer("rounds", 12, f"Rounds per size and way ({WARMUP_ROUNDS} left out).")
  flags.DEFINE_string("out", None, "Write the results here (JSON).")


if __name__ == "__main__":
  _define_flags()
  app.run(main)

r"""The judge's output comparison: problem._close_stats against the version before it.

    python -m benchmarks.compare_outputs --shape=4096,393216 --repeats=5

The judge compares a candidate's outputs with the reference's six times per candidate (five
checks and the post-check) and twice more in the timing's audits, while it holds the GPU. On
KernelBench's level-1 elementwise problems an output is 4096 x 393216 float32 (6 GiB). This times
both versions on one pair of such outputs (the candidate's: the reference plus small noise, with
a few values out of tolerance), checks that they agree on what they both count, and prints the
median seconds and their ratio. The earlier version is copied here as it was at dc25759
(and before): it synchronised five times per chunk and picked the finite errors with boolean indexing.
"""

from __future__ import annotations

import json
import math
import statistics
import time

from absl import app
from absl import flags
import torch

from kernelzero_jax.sandbox import problem

_SHAPE = flags.DEFINE_list("shape", ["4096", "393216"], "Output shape.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed comparisons per version.")
_DEVICE = flags.DEFINE_string("device", "cuda", "cuda or cpu.")
_OUT = flags.DEFINE_string("out", None, "Write the results here (JSON).")


def close_stats_before(c: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> dict:
  """problem._close_stats before this benchmark's commit."""
  bad = nonfinite = 0
  max_abs = max_rel = 0.0
  for cc, rc in problem._chunks(c, r):  # pylint: disable=protected-access
    diff = (cc - rc).abs()
    close = (cc == rc) | (diff <= atol + rtol * rc.abs())
    bad += int((~close).sum().item())
    nonfinite += int((~torch.isfinite(cc)).sum().item())
    finite = torch.isfinite(diff)
    if not bool(finite.all()):
      max_abs = max_rel = math.inf
    if finite.any():
      d = diff[finite]
      max_abs = max(max_abs, d.max().item())
      max_rel = max(max_rel, (d / rc.abs()[finite].clamp_min(1e-12)).max().item())
  return {"bad": bad, "nonfinite": nonfinite, "max_abs": max_abs, "max_rel": max_rel}


def _time(fn, c, r, repeats: int, device: torch.device) -> tuple[list[float], dict]:
  seconds, stats = [], {}
  for _ in range(repeats + 1):  # the first call warms the allocator and kernels up
    if device.type == "cuda":
      torch.cuda.synchronize()
    t0 = time.perf_counter()
    stats = fn(c, r, 1e-2, 1e-2)
    if device.type == "cuda":
      torch.cuda.synchronize()
    seconds.append(time.perf_counter() - t0)
  return seconds[1:], stats


def main(argv: list[str]) -> None:
  del argv
  device = torch.device(_DEVICE.value)
  shape = tuple(int(s) for s in _SHAPE.value)
  gen = torch.Generator(device=device).manual_seed(0)
  r = torch.randn(shape, generator=gen, device=device)
  c = r + 1e-3 * torch.randn(shape, generator=gen, device=device)
  c.view(-1)[::1_000_003] += 1.0  # a few values out of tolerance
  rows = {}
  for name, fn in (("before", close_stats_before), ("now", problem._close_stats)):  # pylint: disable=protected-access
    seconds, stats = _time(fn, c, r, _REPEATS.value, device)
    rows[name] = {"median_s": round(statistics.median(seconds), 4),
                  "seconds": [round(s, 4) for s in seconds], "stats": stats}
    print(f"{name:7s} median {rows[name]['median_s']:.4f} s  {stats}")
  agree = rows["before"]["stats"] == rows["now"]["stats"]
  ratio = rows["before"]["median_s"] / rows["now"]["median_s"]
  print(f"shape {shape} on {device}: now x{ratio:.2f} faster; the stats agree: {agree}")
  result = {"shape": list(shape), "device": str(device), "ratio": round(ratio, 2),
            "agree": agree, **rows}
  if device.type == "cuda":
    result["gpu"] = torch.cuda.get_device_name(device)
  if _OUT.value:
    with open(_OUT.value, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)


if __name__ == "__main__":
  app.run(main)

r"""The judge's output comparison: problem._close_stats against the version before it, and
against the fused kernel (sandbox/fused_compare.py) on a GPU.

    python -m benchmarks.compare_outputs --shape=4096,393216 --repeats=5

The judge compares a candidate's outputs with the reference's six times per candidate (five
checks and the post-check) and twice more in the timing's audits, while it holds the GPU. On
KernelBench's level-1 elementwise problems an output is 4096 x 393216 float32 (6 GiB). This times
both versions on one pair of such outputs (the candidate's: the reference plus small noise, with
a few values out of tolerance), checks that they agree on what they both count, and prints the
median seconds and their ratio. The earlier version is copied here as it was at dc25759
(and before): it synchronised five times per chunk and picked the finite errors with boolean indexing.

On a GPU it also times the fused kernel on the same pair, and checks it against
problem._close_stats on crafted pairs (`--cases`, on by default): every combination of NaN and
infinities in the candidate and the reference, errors exactly at the tolerance and one float
above it, subnormals, differences and relative errors that overflow, tolerances of both presets,
sizes that fill no block evenly, and a pair of more than 2**31 values. The four numbers must be
equal, bit for bit; the script exits 1 if any differs.
"""

from __future__ import annotations

import json
import math
import statistics
import time

from absl import app
from absl import flags
import torch

from kernelzero_jax.sandbox import fused_compare
from kernelzero_jax.sandbox import problem

_SHAPE = flags.DEFINE_list("shape", ["4096", "393216"], "Output shape.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed comparisons per version.")
_DEVICE = flags.DEFINE_string("device", "cuda", "cuda or cpu.")
_OUT = flags.DEFINE_string("out", None, "Write the results here (JSON).")
_CASES = flags.DEFINE_bool("cases", True, "On a GPU: check the fused kernel on crafted pairs.")
_HUGE = flags.DEFINE_bool("huge", True, "...including one of 2**31 + 7 values (17 GiB).")


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


def crafted_cases(device: torch.device, huge: bool):
  """(name, candidate, reference, atol, rtol): the pairs on which the fused kernel must give
  problem._close_stats' numbers exactly."""
  f32 = lambda values: torch.tensor(values, dtype=torch.float32, device=device)
  inf, nan = math.inf, math.nan
  specials = [0.0, -0.0, 1.0, -2.5, inf, -inf, nan, 3e38, -3e38, 1e-40, -1e-45]
  # every (candidate, reference) combination of the special values
  cs, rs = zip(*[(a, b) for a in specials for b in specials])
  yield "special value pairs", f32(cs), f32(rs), 1e-2, 1e-2
  yield "special value pairs, kernelbench fp32", f32(cs), f32(rs), 1e-4, 1e-4
  gen = torch.Generator(device=device).manual_seed(1)
  r = torch.randn(1_000_003, generator=gen, device=device) * 10
  for atol, rtol in ((1e-2, 1e-2), (1e-4, 1e-4), (0.0, 1e-3), (1e-3, 0.0)):
    bound = (r.abs() * rtol) + atol  # torch's own rounding of the bound, op by op
    at = r + bound  # the error is then the bound, give or take the subtraction's rounding
    above = torch.nextafter(at, torch.full_like(at, inf))
    below = torch.nextafter(at, torch.full_like(at, -inf))
    yield f"at the tolerance atol={atol} rtol={rtol}", at, r, atol, rtol
    yield f"one float above atol={atol} rtol={rtol}", above, r, atol, rtol
    yield f"one float below atol={atol} rtol={rtol}", below, r, atol, rtol
  tiny = torch.randn(4099, generator=gen, device=device) * 1e-39  # subnormals
  yield "subnormals", tiny + 1e-45, tiny, 0.0, 1e-2
  yield "relative error overflows", f32([1.0, 2.0, 1e30]), f32([0.0, 1e-30, 0.0]), 1e-2, 1e-2
  for n in (1, 31, 255, 257, 1 << 20):
    r = torch.randn(n, generator=gen, device=device)
    c = r + 0.02 * torch.randn(n, generator=gen, device=device)
    yield f"noise, {n} values", c, r, 1e-2, 1e-2
  r = torch.randn(64, 1000, generator=gen, device=device)
  c = r.clone()
  c[3, 7], c[40, 999] = nan, inf
  yield "noise with a NaN and an inf", c, r, 1e-2, 1e-2
  if huge:  # indices past 2**31: the kernel's 64-bit count and its split size argument
    n = (1 << 31) + 7
    r = torch.zeros(n, device=device)
    c = torch.zeros(n, device=device)
    c[-1], c[(1 << 31) + 1], c[5] = 1.0, nan, 0.5
    yield "2**31 + 7 values, errors past 2**31", c, r, 1e-2, 1e-2


def check_cases(device: torch.device, huge: bool) -> list[dict]:
  fused = fused_compare.FusedCloseStats(device)
  rows = []
  for name, c, r, atol, rtol in crafted_cases(device, huge):
    want = problem._close_stats(c, r, atol, rtol)  # pylint: disable=protected-access
    got = fused(c, r, atol, rtol)
    same = json.dumps(got) == json.dumps(want)  # NaN-free; inf as Infinity; exact floats
    rows.append({"case": name, "numel": r.numel(), "same": same, "torch": want, "fused": got})
    print(f"{'same' if same else 'DIFFERENT':9s} {name} ({r.numel()} values): {got}"
          + ("" if same else f" != torch {want}"))
    del c, r
  if fused.fallbacks:
    raise RuntimeError(f"the fused kernel declined {fused.fallbacks} pairs")
  return rows


def main(argv: list[str]) -> None:
  del argv
  device = torch.device(_DEVICE.value)
  shape = tuple(int(s) for s in _SHAPE.value)
  result = {"shape": list(shape), "device": str(device)}
  if device.type == "cuda":
    result["gpu"] = torch.cuda.get_device_name(device)
    t0 = time.perf_counter()
    fused = fused_compare.FusedCloseStats(device)
    result["fused_setup_s"] = round(time.perf_counter() - t0, 4)
    result["fused_compile_s"] = fused.compile_s
    print(f"fused kernel: compiled by NVRTC in {fused.compile_s:.3f} s, loaded in "
          f"{result['fused_setup_s'] - fused.compile_s:.3f} s")
    if _CASES.value:
      result["cases"] = check_cases(device, _HUGE.value)
      result["cases_same"] = all(row["same"] for row in result["cases"])
  gen = torch.Generator(device=device).manual_seed(0)
  r = torch.randn(shape, generator=gen, device=device)
  c = r + 1e-3 * torch.randn(shape, generator=gen, device=device)
  c.view(-1)[::1_000_003] += 1.0  # a few values out of tolerance
  versions = [("before", close_stats_before), ("now", problem._close_stats)]  # pylint: disable=protected-access
  if device.type == "cuda":
    versions.append(("fused", fused))
  rows = {}
  for name, fn in versions:
    seconds, stats = _time(fn, c, r, _REPEATS.value, device)
    rows[name] = {"median_s": round(statistics.median(seconds), 4),
                  "seconds": [round(s, 4) for s in seconds], "stats": stats}
    print(f"{name:7s} median {rows[name]['median_s']:.4f} s  {stats}")
  agree = all(row["stats"] == rows["now"]["stats"] for row in rows.values())
  ratio = rows["before"]["median_s"] / rows["now"]["median_s"]
  print(f"shape {shape} on {device}: now x{ratio:.2f} faster than before; the stats agree: {agree}")
  result.update(ratio=round(ratio, 2), agree=agree, **rows)
  if "fused" in rows:
    result["fused_ratio"] = round(rows["now"]["median_s"] / rows["fused"]["median_s"], 2)
    gbps = 2 * r.numel() * r.element_size() / rows["fused"]["median_s"] / 1e9
    result["fused_read_gb_per_s"] = round(gbps, 1)
    print(f"fused x{result['fused_ratio']:.2f} faster than now ({gbps:.0f} GB/s read); "
          f"crafted cases the same: {result.get('cases_same')}")
  if _OUT.value:
    with open(_OUT.value, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
  if not agree or result.get("cases_same") is False:
    raise SystemExit(1)


if __name__ == "__main__":
  app.run(main)

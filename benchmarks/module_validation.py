r"""Module validation (the Proposer's runtime checks) over honest modules: verdicts and speed.

    python -m benchmarks.module_validation --kernelbench_dir=.kb --levels=2 --teacher_modules=32 \
        --device=cuda --out=/tmp/module_validation.json

Validates, with `SandboxPool.validate_modules` (one worker per module, as in the Proposer phase),
the reference modules of the chosen KernelBench levels and `--teacher_modules` full-size modules
of the teacher's family. These are honest modules written by people or by rule, so the rules
should accept them, except where a module really breaks one (KernelBench has problems whose
output is constant, and level-1 inputs of billions of elements). Prints each rejection with its
reason, the counts per rejection, the median and 90th-percentile time per module and the
throughput; writes every verdict as JSON. The element and time limits are raised by default so
that the semantic rules (determinism, input dependence, constant output) are what is measured.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter

from absl import app
from absl import flags

from kernelzero_jax.sandbox import SandboxConfig, SandboxPool
from kernelzero_jax.sandbox.module_check import ModuleLimits
from kernelzero_jax.tasks import kernelbench as tasks
from kernelzero_jax.teacher.generator import generate_modules

_KB = flags.DEFINE_string("kernelbench_dir", None, "KernelBench problems (level1/, level2/).")
_LEVELS = flags.DEFINE_list("levels", ["2"], "KernelBench levels to validate (empty: none).")
_TEACHER = flags.DEFINE_integer("teacher_modules", 32, "Full-size teacher-family modules.")
_DEVICE = flags.DEFINE_string("device", "cuda", "cuda, or cpu.")
_PARALLEL = flags.DEFINE_integer("max_parallel", 16, "Concurrent validations.")
_MAX_ELEMENTS = flags.DEFINE_integer("max_elements", 2 ** 32, "Limit per tensor.")
_MAX_MS = flags.DEFINE_float("max_forward_ms", 10_000.0, "Limit per forward.")
_OUT = flags.DEFINE_string("out", None, "Write every verdict here (JSON).")


def main(argv):
  del argv
  modules: list[tuple[str, str]] = []
  if _LEVELS.value:
    found, broken = tasks.scan_tasks(_KB.value, [int(x) for x in _LEVELS.value])
    modules += [(t.key, t.source) for t in found]
    for b in broken:
      print(f"skipped (does not load): {b}")
  modules += [(name, source) for name, source, _ in
              generate_modules(_TEACHER.value, seed=0, split="train", size="full")]
  limits = ModuleLimits(max_forward_ms=_MAX_MS.value, max_elements=_MAX_ELEMENTS.value)
  config = SandboxConfig(device=_DEVICE.value, timing=False)
  print(f"validating {len(modules)} modules on {_DEVICE.value} with {_PARALLEL.value} in "
        f"parallel ({limits})", flush=True)
  t0 = time.perf_counter()
  with SandboxPool(config, max_parallel=_PARALLEL.value) as pool:
    verdicts = pool.validate_modules([s for _, s in modules], limits, progress=True)
  wall = time.perf_counter() - t0
  counts = Counter(v.rejection or "valid" for v in verdicts)
  for (name, _), v in zip(modules, verdicts):
    if not v.valid:
      print(f"  {name}: {v.rejection}: {'; '.join(v.reasons)[:300]}")
  times = sorted(v.seconds for v in verdicts)
  p90 = times[int(0.9 * (len(times) - 1))] if times else float("nan")
  print(f"\n{len(modules)} modules in {wall:.1f} s: {60 * len(modules) / wall:.1f} per minute; "
        f"per module median {statistics.median(times):.2f} s, p90 {p90:.2f} s")
  print("verdicts: " + ", ".join(f"{k} {n}" for k, n in counts.most_common()))
  if _OUT.value:
    with open(_OUT.value, "w", encoding="utf-8") as f:
      json.dump({"device": _DEVICE.value, "wall_s": wall, "counts": dict(counts),
                 "modules": [{"name": n, **v.to_dict()}
                             for (n, _), v in zip(modules, verdicts)]},
                f, indent=1)


if __name__ == "__main__":
  app.run(main)

r"""What a judge's first reference check costs over its later ones, and what a warm-up before
the GPU hold takes off it (GPU only).

    python -m benchmarks.first_run --kernelbench_dir=.kb --out=OUT/first_run.json

A judge checks the reference on fresh input sets under the GPU hold (sandbox/judge.py,
`_reference`: the inputs, their pristine copy, the forward, the check that the inputs are
unchanged). For every problem of --problems and every warm-up of --warmups, this forks a process
from one with torch imported and no CUDA context, as the sandbox forks its judges, builds the
reference on the GPU the judge's way (outside the hold), runs the warm-up, then --runs checks,
each part synchronized, and prints each part's seconds per run: the first run's excess over the
last is what the warm-up did not take off. Warm-ups:

- `none`: what a judge does now;
- `rng`: one input of one element made on the GPU the sandbox's way (problem.make_inputs), as
  the worker warms its observers;
- `blas`: `rng`, and the cuBLAS handle and a 16 x 16 matmul;
- `judge`: what a judge runs when it starts (sandbox/judge_gpu.warm_up_device, with
  SandboxConfig.judge_warm_up): `blas`, and torch.equal on 256 elements;
- `forward`: `blas`, and a whole check at full size: not a warm-up a judge could run outside
  the hold (it is GPU work beside other judges' timing), but the most any warm-up can take off.
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import time

from absl import app
from absl import flags

_KB = flags.DEFINE_string("kernelbench_dir", None, "KernelBench problems (level1/, level2/).")
_PROBLEMS = flags.DEFINE_list(
    "problems", ["level1/1_Square_matrix_multiplication_", "level1/19_ReLU", "level1/23_Softmax",
                 "level2/76_Gemm_Add_ReLU", "level2/12_Gemm_Multiply_LeakyReLU"],
    "Problem keys (a prefix of the file name under its level's folder).")
_WARMUPS = flags.DEFINE_list("warmups", ["none", "rng", "blas", "judge", "forward"],
                             "Warm-ups to compare.")
_RUNS = flags.DEFINE_integer("runs", 3, "Checks per process after the warm-up.")
_OUT = flags.DEFINE_string("out", None, "Write the results here (JSON).")

WARMUPS = ("none", "rng", "blas", "judge", "forward")


def _warm_up(name: str, torch, problem, ref_mod, model, device) -> None:
  if name == "none":
    return
  if name == "judge":
    from kernelzero_jax.sandbox import judge_gpu  # pylint: disable=import-outside-toplevel
    judge_gpu.warm_up_device(torch, problem, device)
    return
  problem.make_inputs(lambda: [torch.rand(1)], 0, device)
  if name in ("blas", "forward"):
    torch.cuda.current_blas_handle()
    a = torch.ones(16, 16, device=device)
    torch.mm(a, a)
  if name == "forward":
    _check(torch, problem, ref_mod, model, device, seed=12345)
  torch.cuda.synchronize()


def _check(torch, problem, ref_mod, model, device, seed: int) -> dict[str, float]:
  """One judge-style reference check, each part synchronized: seconds per part."""
  parts = {}
  t0 = time.perf_counter()
  inputs = problem.make_inputs(ref_mod.get_inputs, seed, device)
  torch.cuda.synchronize()
  parts["inputs"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  pristine = problem.clone_leaves(inputs)
  torch.cuda.synchronize()
  parts["clone"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  out = model(*inputs)
  torch.cuda.synchronize()
  parts["forward"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  problem.inputs_unchanged(inputs, pristine)
  parts["unchanged"] = time.perf_counter() - t0
  del out, inputs, pristine
  return parts


def _child(source: str, warmup: str, runs: int, queue) -> None:
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.sandbox import problem  # pylint: disable=import-outside-toplevel
  device = torch.device("cuda:0")
  torch.cuda.set_device(device)
  torch.set_grad_enabled(False)
  t0 = time.perf_counter()
  ref_mod = problem.load_module(source, "kz_reference")
  model = problem.make_model(ref_mod.Model, ref_mod.get_init_inputs, 0, device)
  torch.cuda.synchronize()
  setup_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  _warm_up(warmup, torch, problem, ref_mod, model, device)
  warmup_s = time.perf_counter() - t0
  checks = [_check(torch, problem, ref_mod, model, device, seed=1 + i) for i in range(runs)]
  queue.put({"setup_s": setup_s, "warmup_s": warmup_s, "checks": checks})


def measure(source: str, warmup: str, runs: int) -> dict:
  context = multiprocessing.get_context("fork")
  queue = context.Queue()
  child = context.Process(target=_child, args=(source, warmup, runs, queue))
  child.start()
  result = queue.get(timeout=600)
  child.join()
  return result


def main(argv: list[str]) -> None:
  del argv
  import torch  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.tasks import kernelbench as tasks  # pylint: disable=import-outside-toplevel
  assert not torch.cuda.is_initialized(), "the children fork without a CUDA context"
  unknown = sorted(set(_WARMUPS.value) - set(WARMUPS))
  if unknown:
    raise app.UsageError(f"unknown --warmups {unknown}; known: {WARMUPS}")
  all_tasks, _ = tasks.scan_tasks(_KB.value, (1, 2))
  by_key = {t.key: t for t in all_tasks}
  results = []
  for key in _PROBLEMS.value:
    matches = [k for k in by_key if k.startswith(key)]
    if len(matches) != 1:
      raise app.UsageError(f"--problems {key!r} matches {matches or 'no problem'}")
    for warmup in _WARMUPS.value:
      r = measure(by_key[matches[0]].source, warmup, _RUNS.value)
      totals = [sum(c.values()) for c in r["checks"]]
      row = {"problem": matches[0], "warmup": warmup, "setup_s": round(r["setup_s"], 4),
             "warmup_s": round(r["warmup_s"], 4), "check_s": [round(t, 4) for t in totals],
             "first_excess_s": round(totals[0] - statistics.median(totals[1:]), 4),
             "first_parts_s": {k: round(v, 4) for k, v in r["checks"][0].items()},
             "last_parts_s": {k: round(v, 4) for k, v in r["checks"][-1].items()}}
      results.append(row)
      print(json.dumps(row), flush=True)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                 "results": results}, f, indent=1)


if __name__ == "__main__":
  app.run(main)

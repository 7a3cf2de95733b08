r"""Which KernelBench problems a judge checks alone, or on several slots, at a given
gpu_concurrency (CPU only).

    python -m benchmarks.checks_alone --kernelbench_dir=../shared/kernelbench \
        --slots=2,4,8,16 --gpu_gib=139.8 --judges=16

For every level-1/2 problem: its input bytes and what its forward makes (its outputs, or the
largest result inside it where larger), read on the meta device (sandbox/problem.input_bytes,
output_bytes), one check's memory from them (sandbox/gpu_budget.check_bytes), and for each slot
count whether that many correctness checks fit
in a GPU of --gpu_gib at once beside --judges judges' processes (SandboxPool's max_parallel per
GPU; sandbox/gpu_budget.checks_fit); when they do not, a check holds as many slots as its memory
needs (sandbox/gpu_budget.check_width), all of them being the GPU alone. 139.8 GiB is the H200's
total memory as torch reports it. Also the problems whose weights are too large to keep on the
GPU between a judge's holds beside --judges judges (sandbox/problem.weight_bytes,
sandbox/gpu_budget.weights_kept_fit): each of their evaluations runs in one hold of the whole GPU.
"""

from __future__ import annotations

from absl import app
from absl import flags

from kernelzero_jax.sandbox import gpu_budget, problem
from kernelzero_jax.tasks import kernelbench as tasks

_KB = flags.DEFINE_string("kernelbench_dir", None, "KernelBench problems (level1/, level2/).")
_SLOTS = flags.DEFINE_list("slots", ["2", "4", "8", "16"], "gpu_concurrency values.")
_GPU_GIB = flags.DEFINE_float("gpu_gib", 139.8, "The GPU's total memory, GiB.")
_JUDGES = flags.DEFINE_integer("judges", 16, "Judges running on the GPU at once.")


def main(argv):
  del argv
  all_tasks, _ = tasks.scan_tasks(_KB.value, (1, 2))
  sizes, unknown, weights = {}, [], {}
  for task in all_tasks:
    try:
      ref = problem.load_module(task.source, "kz_reference")
      nbytes = problem.input_bytes(ref.get_inputs)
      made = problem.output_bytes(ref.Model, ref.get_init_inputs, ref.get_inputs)
      weights[task.key] = problem.weight_bytes(ref.Model, ref.get_init_inputs)
    except Exception:  # pylint: disable=broad-except
      nbytes = None
    if nbytes is None:
      unknown.append(task.key)
    else:
      sizes[task.key] = (nbytes, made)
  print(f"{len(sizes)} problems with known input sizes; unknown (checked as fitting): "
        f"{len(unknown)} {unknown}")
  makes_more = sorted(k for k, (i, m) in sizes.items() if m is not None and m > max(2 * i, 2**30))
  print(f"{len(makes_more)} make more than twice their inputs and over 1 GiB (counted in input "
        f"sets alone, their checks passed for less): {makes_more}")
  gpu_bytes = int(_GPU_GIB.value * 2**30)
  apart = {k: w for k, w in weights.items()
           if w is not None and not gpu_budget.weights_kept_fit(w, gpu_bytes, _JUDGES.value)}
  print(f"{len(apart)} with weights too large to keep between holds beside {_JUDGES.value} "
        "judges (one hold of the whole GPU each): "
        + ", ".join(f"{k} ({w / 2**30:.2f} GiB)" for k, w in sorted(apart.items())))
  for slots in map(int, _SLOTS.value):
    widths = {k: gpu_budget.check_width(gpu_budget.check_bytes(*b), slots, gpu_bytes, _JUDGES.value)
              for k, b in sizes.items()}
    wide = sorted(k for k, w in widths.items() if w > 1)
    print(f"gpu_concurrency={slots}, {_JUDGES.value} judges: "
          f"{sum(w == slots for w in widths.values())} of {len(sizes)} checked alone, "
          f"{sum(1 < w < slots for w in widths.values())} on several slots")
    for key in wide:
      where = "alone" if widths[key] == slots else f"{widths[key]} slots"
      inputs, made = sizes[key]
      made = "unknown" if made is None else f"{made / 2**30:.2f} GiB"
      print(f"  {key}: inputs {inputs / 2**30:.2f} GiB, its forward makes {made}, {where}")


if __name__ == "__main__":
  app.run(main)

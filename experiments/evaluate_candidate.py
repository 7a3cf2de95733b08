r"""The sandbox CLI: judge one candidate against one reference.

    python -m experiments.evaluate_candidate --reference=REF.py --candidate=CAND.py \
        --backend=cuda|triton [--device=cuda|cpu] [--json_out=PATH]
    python -m experiments.evaluate_candidate --level=1 --problem_id=19 --candidate=CAND.py ...

Prints exactly one JSON verdict on the last line of stdout (and writes it to --json_out), and
exits 0 whenever a verdict was produced, whatever it says. Bad usage exits 2.
"""

from absl import app
from absl import flags

from kernelzero_jax.sandbox import cli

_REFERENCE = flags.DEFINE_string("reference", None, "Reference module (KernelBench format).")
_LEVEL = flags.DEFINE_integer("level", None, "KernelBench level (instead of --reference).")
_PROBLEM_ID = flags.DEFINE_integer("problem_id", None, "KernelBench problem id (with --level).")
_KERNELBENCH_DIR = flags.DEFINE_string(
    "kernelbench_dir", None, "KernelBench problems (holds level1/, level2/); default: "
    "$KERNELBENCH_DIR or ../shared/kernelbench.")
_CANDIDATE = flags.DEFINE_string("candidate", None, "Candidate source defining ModelNew.")
_BACKEND = flags.DEFINE_enum("backend", None, ["cuda", "triton"], "Candidate backend.")
_DEVICE = flags.DEFINE_enum("device", None, ["cuda", "cpu"],
                            "Where to run (default: cuda if an NVIDIA device is present).")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Also write the verdict JSON here.")
_TOLERANCE = flags.DEFINE_string("tolerance", "kernelzero", "Preset: kernelzero | kernelbench.")
_ATOL = flags.DEFINE_float("atol", None, "Explicit absolute tolerance (with --rtol).")
_RTOL = flags.DEFINE_float("rtol", None, "Explicit relative tolerance (with --atol).")
_NUM_TRIALS = flags.DEFINE_integer("num_correct_trials", 5, "Fresh random input sets to check.")
_SEED = flags.DEFINE_integer("seed", 0, "Base seed of the input sets.")
_TIMING = flags.DEFINE_bool("timing", True, "Time reference and candidate (GPU only).")
_COMPILE = flags.DEFINE_bool("compare_torch_compile", False,
                             "Also time torch.compile of the reference.")

flags.mark_flag_as_required("candidate")
flags.mark_flag_as_required("backend")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  cli.evaluate_from_flags(
      reference=_REFERENCE.value, level=_LEVEL.value, problem_id=_PROBLEM_ID.value,
      kernelbench_dir=_KERNELBENCH_DIR.value, candidate=_CANDIDATE.value, backend=_BACKEND.value,
      device=_DEVICE.value, json_out=_JSON_OUT.value,
      config_overrides=dict(tolerance=_TOLERANCE.value, atol=_ATOL.value, rtol=_RTOL.value,
                            num_correct_trials=_NUM_TRIALS.value, seed=_SEED.value,
                            timing=_TIMING.value, compare_torch_compile=_COMPILE.value))


if __name__ == "__main__":
  app.run(main)

r"""SFT pairs for the Coder's warm start, written by the teacher and checked by the sandbox.

    python -m experiments.make_teacher_data --num_modules=200 --seed=0 --split=train \
        --backend=triton --device=cpu --size=small --prompt_style=zero_shot --out=/tmp/teacher.jsonl

Draws modules of the teacher's family (kernelzero_jax/teacher), writes the teacher's ModelNew for
each, judges them all in the sandbox and keeps the correct ones as {"messages", "completion",
"meta"} lines in --out. Prints the report (pass rate by kind, failures with reasons) as one JSON
object on the last line of stdout.
"""

import json

from absl import app
from absl import flags

from kernelzero_jax.coder.prompts import PROMPT_STYLES
from kernelzero_jax.teacher import pairs

_NUM_MODULES = flags.DEFINE_integer("num_modules", 100, "How many modules to draw.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the module generator.")
_SPLIT = flags.DEFINE_enum("split", "train", ["train", "heldout"],
                           "Which op structures to draw from (held-out ones never reach train).")
_BACKEND = flags.DEFINE_enum("backend", "triton", ["triton", "cuda"], "Candidate backend.")
_DEVICE = flags.DEFINE_enum("device", None, ["cuda", "cpu"],
                            "Where the sandbox runs candidates (cpu: Triton's interpreter); "
                            "default: cuda if an NVIDIA device is present.")
_SIZE = flags.DEFINE_enum("size", "small", ["small", "full"],
                          "small: <= 64k elements per tensor (CPU friendly); full: GPU sizes.")
_PROMPT_STYLE = flags.DEFINE_enum("prompt_style", "zero_shot", list(PROMPT_STYLES),
                                  "The Coder prompt of the pairs (coder/prompts.py).")
_COMMENTS = flags.DEFINE_bool("comments", True,
                              "Keep the teacher's comments in the completions.")
_OUT = flags.DEFINE_string("out", None, "Output JSONL path.")
_MAX_PARALLEL = flags.DEFINE_integer("max_parallel", None,
                                     "Concurrent sandbox judges (default: the CPU count).")
_TIMING = flags.DEFINE_bool("timing", True, "Time the candidates (GPU only) for meta.speedup.")

flags.mark_flag_as_required("out")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  report = pairs.make_teacher_data(
      num_modules=_NUM_MODULES.value, seed=_SEED.value, split=_SPLIT.value,
      backend=_BACKEND.value, device=_DEVICE.value, size=_SIZE.value,
      prompt_style=_PROMPT_STYLE.value, comments=_COMMENTS.value, out=_OUT.value, max_parallel=_MAX_PARALLEL.value, timing=_TIMING.value)
  print(json.dumps(report))


if __name__ == "__main__":
  app.run(main)

r"""KernelBench evaluation: pass@k, fast_p and speedups for a policy or a directory of kernels.

    # kernels generated elsewhere (KernelBench's run layout, see kernelzero_jax/evaluation/samples.py)
    python -m experiments.eval_kernelbench --samples_dir=runs/my_run --levels=1,2 \
        --backend=cuda --num_samples=1 --workdir=/tmp/eval
    # a Hugging Face checkpoint, sampled with our JAX sampler
    python -m experiments.eval_kernelbench --model_dir=/ckpt/Qwen2.5-Coder-7B-Instruct \
        --num_samples=10 --temperature=0.7 --workdir=/tmp/eval_qwen
    # our own RL/SFT checkpoint on an architecture
    python -m experiments.eval_kernelbench --policy_checkpoint=/tmp/coder_run --preset=tiny ...
    # the rule-based teacher (kernelzero_jax/teacher) as a baseline Coder
    python -m experiments.eval_kernelbench --teacher --backend=triton --workdir=/tmp/eval_teacher

Every verdict is appended to WORKDIR/verdicts.jsonl when it exists; rerunning the same command
skips what is done. The report (report.md, speedup_hist.png, pass_at_k.png, per_problem.jsonl,
summary.json) is written to the workdir; the last stdout line is the overall summary as JSON.
"""

import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the sandbox shares the GPU

# pylint: disable=wrong-import-position
from absl import app
from absl import flags

from kernelzero_jax.coder.prompts import PROMPT_STYLES
from kernelzero_jax.evaluation.driver import EvalConfig, run_eval
from kernelzero_jax.sandbox.config import SandboxConfig
from kernelzero_jax.tasks.kernelbench import TaskError

_KB = flags.DEFINE_string("kernelbench_dir", None, "KernelBench folder holding level1/, level2/ "
                          "(default: $KERNELBENCH_DIR or ../shared/kernelbench).")
_LEVELS = flags.DEFINE_list("levels", ["1", "2"], "KernelBench levels.")
_PROBLEMS = flags.DEFINE_list("problem_ids", [], "Only these problems (default: all): 19 is "
                              "problem 19 of every level, 2/12 problem 12 of level 2.")
_BACKEND = flags.DEFINE_enum("backend", "cuda", ["cuda", "triton"], "Kernel language.")
_N = flags.DEFINE_integer("num_samples", 1, "Samples per problem (n of pass@k).")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.0, "Sampling temperature (0: greedy).")
_TOP_P = flags.DEFINE_float("top_p", 1.0, "Nucleus sampling.")
_MAX_NEW = flags.DEFINE_integer("max_new_tokens", 4096, "Completion length cap.")
_SEED = flags.DEFINE_integer("seed", 0, "Sampling seed.")
_SAMPLES_DIR = flags.DEFINE_string("samples_dir", None, "Already-generated kernels.")
_MODEL_DIR = flags.DEFINE_string("model_dir", None, "Hugging Face checkpoint to sample from.")
_POLICY = flags.DEFINE_string("policy_checkpoint", None, "Our Orbax workdir (train_sft / "
                              "train_coder) to sample from, on --model_dir's or --preset's "
                              "architecture.")
_TEACHER = flags.DEFINE_bool("teacher", False, "Evaluate the rule-based teacher as the Coder.")
_PRESET = flags.DEFINE_string("preset", "tiny", "Architecture for --policy_checkpoint alone.")
_TOKENIZER = flags.DEFINE_string("tokenizer_dir", None, "Tokenizer (default: the model's).")
_PROMPT_STYLE = flags.DEFINE_enum("prompt_style", "one_shot", list(PROMPT_STYLES),
                                  "The Coder prompt (coder/prompts.py); one_shot is KernelBench's.")
_DEVICE = flags.DEFINE_enum("device", "cuda", ["cuda", "cpu"], "Where candidates run.")
_TOLERANCE = flags.DEFINE_string("tolerance", "kernelzero", "Tolerance preset.")
_COMPILE = flags.DEFINE_bool("compare_torch_compile", False, "Also time torch.compile.")
_MAX_PARALLEL = flags.DEFINE_integer("max_parallel", 0, "Concurrent judges (0: CPU cores).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Results directory (resumed if it exists).")
flags.mark_flag_as_required("workdir")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    config = EvalConfig(
        workdir=_WORKDIR.value, kernelbench_dir=_KB.value,
        levels=tuple(int(x) for x in _LEVELS.value),
        problem_ids=tuple(_PROBLEMS.value), backend=_BACKEND.value,
        num_samples=_N.value, samples_dir=_SAMPLES_DIR.value, model_dir=_MODEL_DIR.value,
        policy_checkpoint=_POLICY.value, teacher=_TEACHER.value, preset=_PRESET.value, tokenizer_dir=_TOKENIZER.value,
        temperature=_TEMPERATURE.value, top_p=_TOP_P.value, max_new_tokens=_MAX_NEW.value,
        seed=_SEED.value, prompt_style=_PROMPT_STYLE.value, max_parallel=_MAX_PARALLEL.value,
        sandbox=SandboxConfig(device=_DEVICE.value, tolerance=_TOLERANCE.value,
                              compare_torch_compile=_COMPILE.value,
                              timing=_DEVICE.value == "cuda"))
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  try:
    summary = run_eval(config)
  except (FileNotFoundError, TaskError) as e:  # bad input: a clear message, not a traceback
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  print(json.dumps({"report": os.path.join(config.workdir, "report.md"),
                    **summary["levels"]["all"]},
                   default=str))


if __name__ == "__main__":
  app.run(main)

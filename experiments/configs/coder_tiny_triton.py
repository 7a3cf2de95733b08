r"""The embedded default of the Coder's RL stage: the tiny policy, Triton, on a CPU.

    python -m experiments.train_coder --config=experiments/configs/coder_tiny_triton.py \
        --workdir=/tmp/coder_tiny

Runs 2 CA-GRPO steps of the tiny random-weight policy (PRESETS["tiny"], bundled tokenizer) on
the reference modules that ship with the package, judging candidates with the sandbox on the CPU
(Triton interpreter, no timing). It takes about 1.5 minutes on 2 cores and exercises the whole
loop: prompts, sampling, extraction, sandbox, rewards, update, metrics, samples and checkpoints.
A random policy writes no parseable kernel, so expect accuracy 0 and count_by_status/format_error
equal to prompts_per_step * group_size (8) in workdir/metrics.jsonl; a warm-started policy is
what makes the numbers move.
"""

from kernelzero_jax import configs
from kernelzero_jax.coder.train import CoderRunConfig


def get_config():
  return configs.config_dict(
      CoderRunConfig,
      backend="triton",
      sandbox=dict(device="cpu", timing=False, num_correct_trials=2),
      max_parallel=2,
      learner=dict(
          num_steps=2,
          rollout=dict(prompts_per_step=2, group_size=4, max_new_tokens=64),
          optimizer=dict(learning_rate=1e-5, warmup_steps=1, total_steps=2),
          compute_dtype="float32", sample_dtype="float32",
      ))

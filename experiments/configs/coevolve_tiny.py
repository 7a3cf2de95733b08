r"""The embedded default of the main job: co-evolution of two tiny policies on a CPU.

    python -m experiments.coevolve --config=experiments/configs/coevolve_tiny.py \
        --workdir=/tmp/coevolve_tiny

Two rounds of a 2-step Proposer phase and a 2-step Coder phase. Both policies are
PRESETS["tiny"] at random weights (seeds 1 and 0) with the bundled tokenizer; API sets come from
the co-occurrence of the installed transformers' model files (mined once, cached in the workdir);
Coder candidates are Triton kernels judged by the sandbox on the CPU (the Triton interpreter,
untimed). The pool starts from the two example references that ship with the package.

What it should produce: every stage runs (API-set prompts, sampling, proposal reading and
validation, the Coder's probe, CA-GRPO on pool modules, both updates, a checkpoint per step with
both policies and the pool) in a few minutes on 2 cores. Random-weight policies write neither a
module nor a kernel: expect validity 0 with every proposal rejected as no_module (reward -0.5),
Coder accuracy 0 with every kernel a format_error, a pool of the 2 seed modules and a frontier of
0. The log says so. Warm-started policies are what make these numbers move.
"""

from kernelzero_jax import configs
from kernelzero_jax.coevolve import CoevolveConfig


def get_config():
  tiny_learner = dict(num_steps=2, compute_dtype="float32", sample_dtype="float32",
                      optimizer=dict(learning_rate=1e-5, warmup_steps=0, total_steps=4))
  return configs.config_dict(
      CoevolveConfig,
      seed=0,
      num_rounds=2,
      proposer_policy=dict(preset="tiny", init_seed=1),
      coder_policy=dict(preset="tiny", init_seed=0),
      proposer=dict(rollout=dict(prompts_per_step=2, group_size=4, max_new_tokens=64),
                    **tiny_learner),
      coder=dict(rollout=dict(prompts_per_step=2, group_size=4, max_new_tokens=64),
                 **tiny_learner),
      frontier=dict(samples_per_module=8),
      backend="triton",
      sandbox=dict(device="cpu", timing=False, num_correct_trials=2),
      max_parallel=2)

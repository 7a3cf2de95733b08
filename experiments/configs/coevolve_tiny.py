r"""The embedded default of the main job: co-evolution on a CPU, the Coder warm-started.

    python -m experiments.coevolve --config=experiments/configs/coevolve_tiny.py \
        --workdir=/tmp/coevolve_tiny

Two rounds of a 2-step Proposer phase and a 2-step Coder phase.
- Coder: the warm start shipped in kernelzero_jax/assets/coder_tiny_warm (PRESETS["coder-tiny"]
  SFT'd on 600 teacher pairs of at most two operations by experiments/configs/warm_start_tiny.py
  in 7 minutes on 2 cores, exported with experiments.export_policy; its README says how),
  compact prompts, Triton kernels judged by the sandbox on the CPU (the Triton interpreter,
  untimed), sampled at temperature 0.3.
- Proposer: PRESETS["tiny"] at random weights (no warm start exists for it yet), with API sets
  from the co-occurrence of the installed transformers' model files (mined once, cached in the
  workdir).
- Pool: the package's two example references and 8 small train-split modules of the teacher's
  family of one operation each (elementwise, reduction or softmax: the warm start solves such
  modules sometimes and longer chains almost never; the train split has no one-operation matmul).

What it should produce: every stage runs (API-set prompts, sampling, proposal reading and
validation, CA-GRPO on pool modules, both updates, a checkpoint per step with both policies and
the pool), then one line that says what each policy achieved. Measured on 2 CPU cores
(2026-12-01, the warm start made by warm_start_tiny.py): 118 s. The random Proposer wrote no
module (32 of 32 proposals no_module, reward -0.5). The warm-started Coder wrote 11 correct
kernels in 64 samples (4 of 32 and 7 of 32 in the two Coder phases); 2 of the pool's 10 modules
are at its frontier, 25-50% of the groups untie in 3 of its 4 steps and those updates move the
policy (gradient norm 0.04-0.09). The warm start it replaced (warm_start_tiny_long.py, 40 min to
make) gave the same 11 of 64. Before the pool was restricted to one-operation modules
(2026-11-30, 8 modules of any length) the Coder wrote none in 64, every group tied and no update
moved it.
"""

import os

import kernelzero_jax
from kernelzero_jax import configs
from kernelzero_jax.coevolve import CoevolveConfig

CODER_WARM_START = os.path.join(os.path.dirname(kernelzero_jax.__file__), "assets",
                                "coder_tiny_warm")


def get_config():
  tiny_learner = dict(num_steps=2, compute_dtype="float32", sample_dtype="float32",
                      optimizer=dict(learning_rate=1e-5, warmup_steps=0, total_steps=4))
  return configs.config_dict(
      CoevolveConfig,
      seed=0,
      num_rounds=2,
      proposer_policy=dict(preset="tiny", init_seed=1),
      coder_policy=dict(model_dir=CODER_WARM_START),
      proposer=dict(rollout=dict(prompts_per_step=2, group_size=4, max_new_tokens=64),
                    **tiny_learner),
      coder=dict(rollout=dict(prompts_per_step=4, group_size=4, max_new_tokens=1024,
                              temperature=0.3),
                 **tiny_learner),
      prompt_style="compact",  # what the warm start was trained on
      # One-operation modules, which the Coder's warm start solves sometimes (see above), so
      # that groups untie and its updates move it. The train split has no one-operation matmul.
      seed_teacher_modules=8, seed_teacher_max_ops=1,
      seed_teacher_kinds=("elementwise", "reduction", "softmax"),
      frontier=dict(samples_per_module=8),
      backend="triton",
      sandbox=dict(device="cpu", timing=False, num_correct_trials=2),
      max_parallel=2)

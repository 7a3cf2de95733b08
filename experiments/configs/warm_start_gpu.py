r"""The Coder's warm start, larger recipe for one GPU: PRESETS["coder-small"] (25M parameters).

    python -m experiments.warm_start --config=experiments/configs/warm_start_gpu.py \
        --workdir=/tmp/warm_start_gpu [--config.data_from=/tmp/warm_start_tiny]

The same data fields as warm_start_tiny.py (400 train, 64 held-out, 64 RL modules of the
teacher's family, compact prompts, comment-free targets), so --config.data_from can reuse the
tiny recipe's sandbox-checked pairs and tokenizer; without it the data stage runs here (Triton
compiled on the GPU). A 25M-parameter policy, SFT for 25 epochs in bf16, greedy held-out pass
rate, then CA-GRPO (8 modules x 8 samples per step) judged by the GPU sandbox without timing (the
reward is correctness; the speed term needs timed candidates), and the held-out pass rate again.

RESULTS_PLACEHOLDER
"""

from kernelzero_jax import configs
from kernelzero_jax.warm_start import WarmStartConfig


def get_config():
  return configs.config_dict(
      WarmStartConfig,
      seed=0,
      num_train_modules=400, num_heldout_modules=64, num_rl_modules=64,
      policy=dict(preset="coder-small", init_seed=0),
      sft=dict(seed=0, num_steps=200, batch_size=16, seq_len=1152, compute_dtype="bfloat16",
               eval_every=25, checkpoint_every=100,
               optimizer=dict(learning_rate=1e-3, warmup_steps=20, total_steps=200,
                              schedule="cosine", weight_decay=0.01)),
      eval_samples=1, eval_temperature=0.0, eval_max_new_tokens=1024,
      learner=dict(
          seed=0, num_steps=2, num_micro_batches=8,
          rollout=dict(prompts_per_step=8, group_size=8, max_new_tokens=1024, temperature=1.0),
          optimizer=dict(learning_rate=2e-5, warmup_steps=1, total_steps=2),
          compute_dtype="bfloat16", sample_dtype="bfloat16"),
      sandbox=dict(device="cuda", timing=False, num_correct_trials=2),
      max_parallel=16)

r"""The Coder's warm start, larger recipe for one GPU: PRESETS["coder-small"] (25M parameters).

    python -m experiments.warm_start --config=experiments/configs/warm_start_gpu.py \
        --workdir=/tmp/warm_start_gpu [--config.data_from=/tmp/warm_start_tiny]

warm_start_tiny.py with a larger policy, bf16 and the GPU sandbox. The data fields are the tiny
recipe's (this file starts from its config), so --config.data_from can reuse the tiny run's
sandbox-checked pairs and tokenizer; without it the data stage runs here (Triton compiled on the
GPU). SFT for 200 steps of 16 packed rows (12.6 epochs), greedy held-out pass rate, then CA-GRPO
(8 modules x 8 samples per step, in 8 micro-batches) judged by the GPU sandbox without timing (the
reward is correctness; the speed term needs timed candidates), and the held-out pass rate again.

Measured on one H200 (2026-11-30, benchmarks/warm_start_gpu.sh with data_from the tiny run;
BENCHMARKS.md): 412 s in all; SFT 40 s to held-out loss 0.049; held-out pass rate 3 / 58 (5.2%)
after SFT and 3 / 58 after the two RL steps (RL-module accuracy 0 -> 6.25%).
"""

from experiments.configs import warm_start_tiny


def get_config():
  config = warm_start_tiny.get_config()
  config.policy.preset = "coder-small"
  config.sft.update(num_steps=200, batch_size=16, compute_dtype="bfloat16", eval_every=25,
                    checkpoint_every=100)
  config.sft.optimizer.update(learning_rate=1e-3, warmup_steps=20, total_steps=200)
  config.learner.update(num_steps=2, compute_dtype="bfloat16", sample_dtype="bfloat16")
  config.learner.optimizer.update(learning_rate=2e-5, warmup_steps=1, total_steps=2)
  config.sandbox.device = "cuda"
  config.max_parallel = 16
  return config

r"""The Coder's warm start, larger recipe for one GPU: PRESETS["coder-small"] (25M parameters).

    python -m experiments.warm_start --config=experiments/configs/warm_start_gpu.py \
        --workdir=/tmp/warm_start_gpu [--config.data_from=/tmp/warm_start_tiny_long]

warm_start_tiny_long.py with a larger policy, bf16 and the GPU sandbox. The data fields are that
recipe's (this file starts from its config), so --config.data_from can reuse its run's
sandbox-checked pairs and tokenizer; without it the data stage runs here (Triton compiled on the
GPU). SFT for 600 steps of 16 packed rows (about 10 epochs of the 2000 modules' pairs); held-out
pass@1 over 4 samples per problem at temperature 0.7; CA-GRPO for 12 steps (8 modules x 8
samples at temperature 0.7, in 8 micro-batches) judged by the GPU sandbox without timing (the
reward is correctness; the speed term needs timed candidates); the held-out pass rate again.
The first 16 RL modules are evaluated the same way before and after RL (probe_sft/,
probe_rl/): whether RL improves what it trains on, whatever it does to held-out op chains; and
64 modules of trained op structures that neither SFT nor RL saw (unseen_sft/, unseen_rl/,
added after the runs below): whether that carries over to new modules of known op chains.

Measured on one H200 (2026-11-30, benchmarks/warm_start_gpu.sh with data_from
warm_start_tiny_long.py's 2000-module data; BENCHMARKS.md), this config:
  SFT       63 s to held-out loss 0.015
  held-out  58 / 232 correct after SFT (pass@1 25.0%); 179 s with 8 judges at once
  RL        12 steps at lr 1e-5, tokens scored at the rollout temperature: 13-59 s per step;
            62-100% of the groups tie (the SFT'd policy's entropy is under 0.01 nats/token)
  held-out  59 / 232 after RL (25.4%): held, not raised.
SFT is not bit-reproducible on the GPU: four runs gave 54, 76, 58 and 74 of 232 after SFT. An
earlier run at lr 5e-5, scoring tokens at temperature 1, went from 76 to 46 of 232; one with
--config.learner.dynamic_sampling_max_rounds=4 --config.learner.rollout.temperature=1.0
--config.learner.optimizer.learning_rate=3e-5 (every batch 8 untied groups) from 74 to 61.
From a 150-step SFT (--config.sft.num_steps=150 --config.sft.optimizer.total_steps=150; 2 / 232
held-out), 16 such RL steps at lr 1e-5 took the RL-module probe from 7 to 12 of 64 and held-out
from 2 to 1 of 232: RL sharpens what the policy already solves sometimes, nothing more yet.
From a 300-step SFT, over 512 RL modules (--config.num_rl_modules=512), everything scored at
temperature 1 (--config.eval_temperature=1.0): held-out 26 -> 21 of 232, probe 12 -> 13 of 64.
The same with the sandbox on the CPU cores and 30 RL steps at lr 2e-5 is warm_start_gpu_rl.py:
unseen modules 22 -> 42 of 256, held-out not raised.
"""

from experiments.configs import warm_start_tiny_long


def get_config():
  config = warm_start_tiny_long.get_config()
  config.policy.preset = "coder-small"
  config.sft.update(num_steps=600, batch_size=16, compute_dtype="bfloat16", eval_every=50,
                    checkpoint_every=200)
  config.sft.optimizer.update(learning_rate=1e-3, warmup_steps=30, total_steps=600)
  # pass@1 over 4 samples per held-out problem at the rollout temperature: what RL optimises,
  # and 4x the samples of one greedy answer each.
  config.update(eval_samples=4, eval_temperature=0.7, probe_rl_modules=16,
                num_unseen_modules=64)
  config.learner.update(num_steps=12, compute_dtype="bfloat16", sample_dtype="bfloat16")
  config.learner.rollout.temperature = 0.7
  # No warmup: with a dozen steps, a first update at learning rate 0 is a step lost.
  config.learner.optimizer.update(learning_rate=1e-5, warmup_steps=0, total_steps=12)
  config.sandbox.device = "cuda"
  # Small modules, untimed: 16 judges check at once on the GPU instead of one (the held-out
  # evaluation took 351 s one at a time, 179-189 s with 8; a round of 64 RL samples about 17 s
  # with 8, 6.5-12 s with 16).
  config.sandbox.gpu_concurrency = 16
  config.max_parallel = 16
  return config

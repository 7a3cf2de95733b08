r"""The tiny warm start of the Coder, from nothing, on a CPU (Triton interpreter), in minutes.

    python -m experiments.warm_start --config=experiments/configs/warm_start_tiny.py \
        --workdir=/tmp/warm_start_tiny

Stages (kernelzero_jax/warm_start.py): 600 train-split and 64 held-out-split modules of the
teacher's family with at most two operations each (small sizes), the teacher's comment-free
Triton kernels for them checked by the sandbox; a byte-level BPE trained on the train pairs; SFT
of PRESETS["coder-tiny"] from random weights (seed 0) on compact prompts, 2 packed rows a step;
greedy held-out pass rate; a short CA-GRPO run from the SFT checkpoint on 64 fresh train-split
modules; held-out pass rate again; warm_start.png.

Short chains make short kernels (260-640 tokens), which the 0.66M policy learns in minutes;
the same policy SFT'd on chains of any length (warm_start_tiny_long.py: 2000 modules, about 40
min) is no better a Coder for the main job. Also evaluated before and after RL: 64 unseen modules
of trained op chains (num_unseen_modules).

Measured on 2 cores of an Intel Xeon, 2026-12-01 (BENCHMARKS.md, "The Coder's warm start on the
CPU in 7 minutes"; SFT is bit-reproducible on the CPU: two runs gave the same held-out loss):
  data      600 / 600 train pairs, 64 / 64 held-out (59 usable problems); 215 s with 3 judges
  tokenizer 1028 tokens
  SFT       220 s (500 steps, 2 epochs): train loss 0.071, held-out loss 0.070
            -> the tiny warm start is built in 7.3 min (data, tokenizer, SFT)
  held-out  0 / 59 correct, greedy (26 runtime errors, 20 format errors, 9 incorrect, 4 rejected)
  unseen    4 / 64 correct, greedy (all 4 softmax modules)
  RL        3 steps, 59 s each: accuracy 3, 0 and 6 of 64 samples at temperature 0.5; 88-100% of
            the groups tie; held-out 0 -> 0, unseen 4 -> 4
  total     12.6 min
Expected: held-out 0%, unseen about 6%. Its SFT checkpoint, exported, is the main job's Coder
(kernelzero_jax/assets/coder_tiny_warm), where it writes correct kernels for one-operation pool
modules (11 of 64 samples) and learns from them.
"""

from kernelzero_jax import configs
from kernelzero_jax.warm_start import WarmStartConfig


def get_config():
  return configs.config_dict(
      WarmStartConfig,
      seed=0, max_ops=2,
      num_train_modules=600, num_heldout_modules=64, num_rl_modules=64, num_unseen_modules=64,
      policy=dict(preset="coder-tiny", init_seed=0),
      sft=dict(seed=0, num_steps=500, batch_size=2, seq_len=896, compute_dtype="float32",
               eval_every=100, checkpoint_every=100,
               optimizer=dict(learning_rate=3e-3, warmup_steps=10, total_steps=500,
                              schedule="cosine", weight_decay=0.01)),
      eval_samples=1, eval_temperature=0.0, eval_max_new_tokens=1024,
      learner=dict(
          seed=0, num_steps=3, num_micro_batches=8,
          rollout=dict(prompts_per_step=8, group_size=8, max_new_tokens=1024, temperature=0.5),
          optimizer=dict(learning_rate=1e-4, warmup_steps=0, total_steps=3),
          compute_dtype="float32", sample_dtype="float32"),
      sandbox=dict(device="cpu", timing=False, num_correct_trials=2),
      max_parallel=3)

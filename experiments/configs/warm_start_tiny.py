r"""The tiny warm start of the Coder, from nothing, on a CPU (Triton interpreter).

    python -m experiments.warm_start --config=experiments/configs/warm_start_tiny.py \
        --workdir=/tmp/warm_start_tiny

Stages (kernelzero_jax/warm_start.py): 400 train-split and 64 held-out-split modules of the
teacher's family (small sizes), the teacher's comment-free Triton kernels for them checked by the
sandbox; a byte-level BPE trained on the train pairs; SFT of PRESETS["coder-tiny"] from random
weights (seed 0) on compact prompts; greedy held-out pass rate; CA-GRPO from the SFT checkpoint on
64 fresh train-split modules; held-out pass rate again; warm_start.png.

Measured on 2 cores of an Intel Xeon, 2026-11-30 (BENCHMARKS.md, "warm start on the CPU"):
  data      398 / 400 train pairs (the other 2 were judges killed from outside the run),
            64 / 64 held-out, 58 usable held-out problems; about 45 min with 2 judges
  tokenizer 1030 tokens; prompts about 200 and completions about 370 tokens
  SFT       22 min (about 3000 tokens/s): train loss 0.047, held-out loss 0.060
  held-out  0 / 58 correct after SFT (25 incorrect, 17 rejected, 13 runtime errors, 3 format)
  RL        step 1: 54 of 64 samples at temperature 1 are format errors, none correct, so every
            group ties and no update moves the policy; stopped there (about 4 min per step).
This recipe does not yet produce a policy that passes held-out modules; the larger GPU recipe
(warm_start_gpu.py) reaches 5%.
"""

from kernelzero_jax import configs
from kernelzero_jax.warm_start import WarmStartConfig


def get_config():
  return configs.config_dict(
      WarmStartConfig,
      seed=0,
      num_train_modules=2000, num_heldout_modules=64, num_rl_modules=64,
      policy=dict(preset="coder-tiny", init_seed=0),
      sft=dict(seed=0, num_steps=400, batch_size=8, seq_len=1152, compute_dtype="float32",
               eval_every=50, checkpoint_every=50,
               optimizer=dict(learning_rate=3e-3, warmup_steps=10, total_steps=400,
                              schedule="cosine", weight_decay=0.01)),
      eval_samples=1, eval_temperature=0.0, eval_max_new_tokens=1024,
      learner=dict(
          seed=0, num_steps=10, num_micro_batches=8,
          rollout=dict(prompts_per_step=8, group_size=8, max_new_tokens=1024, temperature=1.0),
          optimizer=dict(learning_rate=1e-4, warmup_steps=1, total_steps=10),
          compute_dtype="float32", sample_dtype="float32"),
      sandbox=dict(device="cpu", timing=False, num_correct_trials=2),
      max_parallel=2)

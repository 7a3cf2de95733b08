r"""The tiny warm start on chains of any length: 2000 modules, about 40 min on a CPU.

    python -m experiments.warm_start --config=experiments/configs/warm_start_tiny_long.py \
        --workdir=/tmp/warm_start_tiny_long

Named warm_start_tiny.py until 2026-12-01, when the few-minute recipe on short chains took that
name. Its data (with --config.num_train_modules=6000 for warm_start_gpu_6k.py, and
--config.stop_after=tokenizer) is what the GPU recipes reuse through --config.data_from, and its
SFT checkpoint was the main job's first Coder warm start.

Stages (kernelzero_jax/warm_start.py): 2000 train-split and 64 held-out-split modules of the
teacher's family (small sizes), the teacher's comment-free Triton kernels for them checked by the
sandbox; a byte-level BPE trained on the train pairs; SFT of PRESETS["coder-tiny"] from random
weights (seed 0) on compact prompts; greedy held-out pass rate; CA-GRPO from the SFT checkpoint on
64 fresh train-split modules; held-out pass rate again; warm_start.png.

Measured on 2 cores of an Intel Xeon, 2026-11-30 (BENCHMARKS.md, "warm start on the CPU, 2000
train modules"):
  data      2000 / 2000 train pairs, 64 / 64 held-out, 58 usable held-out problems; 21 min
  tokenizer 1032 tokens
  SFT       18.6 min (2.5 epochs): train loss 0.043, held-out loss 0.055
  held-out  0 / 58 correct after SFT (26 incorrect, 18 runtime errors, 11 rejected, 3 format)
  RL        steps 1-2: 45-47 of 64 samples at temperature 1 are format errors, none correct, so
            every group ties and no update moves the policy; stopped (about 140 s per step).
This recipe does not yet produce a policy that passes held-out modules; the larger GPU recipe
(warm_start_gpu.py) on the same data reaches 23% pass@1.
"""

from experiments.configs import warm_start_tiny


def get_config():
  """warm_start_tiny.py's recipe on chains of any length, with the SFT and RL it was run with."""
  config = warm_start_tiny.get_config()
  config.max_ops = None
  config.update(num_train_modules=2000, num_unseen_modules=0, max_parallel=2)
  config.sft.update(num_steps=400, batch_size=8, seq_len=1152, eval_every=50, checkpoint_every=50)
  config.sft.optimizer.total_steps = 400
  config.learner.num_steps = 10
  config.learner.rollout.temperature = 1.0
  config.learner.optimizer.total_steps = 10
  return config

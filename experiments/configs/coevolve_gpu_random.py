r"""One round of co-evolution on one GPU with small random-weight policies: the loop's stage
times on real hardware, the base of the throughput work.

    python -m experiments.coevolve --config=experiments/configs/coevolve_gpu_random.py \
        --workdir=/tmp/coevolve_gpu [--config.backend=triton]

Both policies are PRESETS["coder-small"] (25M parameters) at random weights with the bundled
tokenizer. One round: 2 Proposer steps (8 API sets x 8 proposals, 1024 new tokens) and 2 Coder
steps (8 pool modules x 8 samples, 1024 new tokens) in bf16, candidates judged on the GPU.
Random weights write neither modules nor kernels, so validity and accuracy are 0 and the stage
times are those of sampling and the updates; benchmarks/coevolve_gpu.sh also times module
validation on the GPU. Results: BENCHMARKS.md ("co-evolution on an H200").
"""

from kernelzero_jax import configs
from kernelzero_jax.coevolve import CoevolveConfig


def get_config():
  # cuDNN's fused attention: the einsum path keeps every layer's T x T scores for the backward
  # pass (163 GiB for 32 rows of 4096 tokens).
  small = dict(num_steps=2, compute_dtype="bfloat16", sample_dtype="bfloat16",
               num_micro_batches=8, forward=dict(attention="cudnn"),
               rollout=dict(prompts_per_step=8, group_size=8, max_new_tokens=1024),
               optimizer=dict(learning_rate=1e-5, warmup_steps=0, total_steps=2))
  return configs.config_dict(
      CoevolveConfig,
      num_rounds=1,
      proposer_policy=dict(preset="coder-small", init_seed=1),
      coder_policy=dict(preset="coder-small", init_seed=0),
      proposer=dict(reward_schedule="environment", **small),
      coder=small,
      backend="cuda",
      sandbox=dict(device="cuda", gpu_concurrency=8),
      max_parallel=16)

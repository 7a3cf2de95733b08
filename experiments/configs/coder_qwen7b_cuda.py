r"""The paper's Coder RL stage: Qwen2.5-Coder-7B (or a warm-started 7B), CUDA kernels, one H200.

    python -m experiments.train_coder --config=experiments/configs/coder_qwen7b_cuda.py \
        --workdir=runs/coder_7b --config.policy.model_dir=/path/to/Qwen2.5-Coder-7B-Instruct \
        --config.modules='("/path/to/training_modules",)'

CA-GRPO with the defaults of DESIGN.md: group size 16, clip 0.2 / 0.28, no KL, AdamW lr 1e-6
with warm-up, token-mean aggregation, gate alpha = 0.5, beta = 0.1, speed term
clip(speedup - 1, 0, 2); 20 steps (the paper's phase length). Candidates are judged on the GPU
with the `kernelzero` tolerance preset over 5 input sets, and timed.

Memory. fp32 master weights and AdamW state of a 7.6B policy take 122 GB, so the policy is laid
out on a mesh of all visible GPUs (use_mesh; FSDP over the devices): on 4 H200s that is about
31 GB per GPU, plus cuDNN-attention activations with per-layer remat, leaving room for the
sandbox's judges (sandbox.gpu_memory_fraction of each GPU). This config has not been run yet;
the train step's speed at 1.5B is in BENCHMARKS.md.

Training modules come from --config.modules (files or directories of KernelBench-format
modules, e.g. the Proposer's accepted pool). KernelBench itself is the test set: do not train on
it. Expected: accuracy and reward in metrics.jsonl rising over the 20 steps from the policy's
starting pass rate; the paper reports KernelBench L1/L2 CUDA pass@1 75.8% / 69.6% after its full
Proposer/Coder co-evolution (not this stage alone).
"""

from kernelzero_jax import configs
from kernelzero_jax.coder.train import CoderRunConfig


def get_config():
  return configs.config_dict(
      CoderRunConfig,
      backend="cuda",
      sandbox=dict(device="cuda", tolerance="kernelzero"),
      learner=dict(
          num_steps=20,
          rollout=dict(prompts_per_step=16, group_size=16, max_new_tokens=4096,
                       temperature=1.0),
          optimizer=dict(learning_rate=1e-6, warmup_steps=2, total_steps=20,
                         schedule="constant"),
          num_micro_batches=16,
          compute_dtype="bfloat16", sample_dtype="bfloat16",
          forward=dict(attention="cudnn", remat="dots"),
      ),
      use_mesh=True)

r"""The Coder's CA-GRPO stage alone, on reference modules judged by the sandbox.

    python -m experiments.train_coder --config=experiments/configs/coder_tiny_triton.py \
        --workdir=/tmp/coder_tiny [--config.learner.num_steps=4 --config.backend=triton ...]

The config file returns a ConfigDict mirroring `kernelzero_jax.coder.train.CoderRunConfig`;
every field can be overridden with --config.x=y, and an unknown field is an error. Rerunning the
same command resumes from the workdir's latest checkpoint.
"""

from experiments import config_main  # first: it sets up the environment before jax loads
from kernelzero_jax.coder import train

if __name__ == "__main__":
  config_main.run(train.CoderRunConfig, train.train)

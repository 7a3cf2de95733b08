r"""Supervised fine-tuning of a policy on (prompt, completion) pairs from JSONL.

    python -m experiments.train_sft --config=experiments/configs/sft_tiny_triton.py \
        --workdir=/tmp/sft_tiny --config.train_data=train.jsonl --config.heldout_data=heldout.jsonl

The config file returns a ConfigDict mirroring `kernelzero_jax.sft.run.SFTRunConfig`; every
field can be overridden with --config.x=y. Rerunning the same command resumes from the workdir.
"""

from experiments import config_main  # first: it sets up the environment before jax loads
from kernelzero_jax.sft import run

if __name__ == "__main__":
  config_main.run(run.SFTRunConfig, run.train)

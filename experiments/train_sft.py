r"""Supervised fine-tuning of a policy on (prompt, completion) pairs from JSONL.

    python -m experiments.train_sft --config=experiments/configs/sft_tiny_triton.py \
        --workdir=/tmp/sft_tiny --config.train_data=train.jsonl --config.heldout_data=heldout.jsonl

The config file returns a ConfigDict mirroring `kernelzero_jax.sft.run.SFTRunConfig`; every
field can be overridden with --config.x=y. Rerunning the same command resumes from the workdir.
"""

import os

# Before jax is imported, as in train_coder: leave GPU memory to other processes.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# pylint: disable=wrong-import-position
from absl import app
from absl import flags
from ml_collections import config_flags

from kernelzero_jax import configs
from kernelzero_jax.sft import run

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (created; resumed if it exists).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  run.train(configs.from_mapping(run.SFTRunConfig, _CONFIG.value), _WORKDIR.value)


if __name__ == "__main__":
  app.run(main)

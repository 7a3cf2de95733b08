r"""The Coder's CA-GRPO stage alone, on reference modules judged by the sandbox.

    python -m experiments.train_coder --config=experiments/configs/coder_tiny_triton.py \
        --workdir=/tmp/coder_tiny [--config.learner.num_steps=4 --config.backend=triton ...]

The config file returns a ConfigDict mirroring `kernelzero_jax.coder.train.CoderRunConfig`;
every field can be overridden with --config.x=y, and an unknown field is an error. Rerunning the
same command resumes from the workdir's latest checkpoint.
"""

import os

# Before jax is imported: the sandbox's judges run kernels on the same GPUs as this process, so
# JAX must not reserve most of their memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# pylint: disable=wrong-import-position
from absl import app
from absl import flags
from ml_collections import config_flags

from kernelzero_jax import configs
from kernelzero_jax.coder import train

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (created; resumed if it exists).")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  train.train(configs.from_mapping(train.CoderRunConfig, _CONFIG.value), _WORKDIR.value)


if __name__ == "__main__":
  app.run(main)

"""The shared main of the config-file experiments (coevolve, train_coder, train_sft, warm_start):

    python -m experiments.NAME --config=experiments/configs/FILE.py --workdir=DIR [--config.x=y]

`--config` is an ml_collections config file whose ConfigDict mirrors the stage's run-config
dataclass; `from_mapping` turns it into that dataclass strictly (an unknown key is an error).
"""

import os

# Before jax is imported: the sandbox's judges run kernels on the same GPUs as the trainer, so
# JAX must not reserve most of their memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# pylint: disable=wrong-import-position
from typing import Any, Callable

from absl import app
from absl import flags
from ml_collections import config_flags

from kernelzero_jax import configs

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (created; resumed if it exists).")
flags.mark_flags_as_required(["config", "workdir"])


def run(config_class: type, train: Callable[[Any, str], Any]) -> None:
  """Parses the flags and calls `train(config_class from --config, --workdir)`."""

  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    train(configs.from_mapping(config_class, _CONFIG.value), _WORKDIR.value)

  app.run(main)

r"""SFT pairs for the Proposer's warm start (kernelzero_jax/proposer/teacher_pairs.py).

    python -m experiments.make_proposer_pairs --out=/tmp/proposer_data --num_train=2000 \
        --num_heldout=64

Prints a JSON report: pairs per split, modules skipped and why, the APIs the pairs use.
"""

import json

from absl import app
from absl import flags

from kernelzero_jax.proposer.teacher_pairs import write_pairs

_OUT = flags.DEFINE_string("out", None, "Output directory.")
_TRAIN = flags.DEFINE_integer("num_train", 2000, "Train-split modules.")
_HELDOUT = flags.DEFINE_integer("num_heldout", 64, "Held-out-split modules.")
_SEED = flags.DEFINE_integer("seed", 0, "Generator seed.")
flags.mark_flags_as_required(["out"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  print(json.dumps(write_pairs(_OUT.value, _TRAIN.value, _HELDOUT.value, _SEED.value)))


if __name__ == "__main__":
  app.run(main)

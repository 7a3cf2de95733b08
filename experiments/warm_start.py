r"""The Coder's warm start from nothing: teacher data, tokenizer, SFT, held-out pass rate,
CA-GRPO, held-out pass rate again (kernelzero_jax/warm_start.py).

    python -m experiments.warm_start --config=experiments/configs/warm_start_tiny.py \
        --workdir=/tmp/warm_start_tiny [--config.x=y]

Resumes from the workdir; prints summary.json's numbers at the end.
"""

import json

from experiments import config_main
from kernelzero_jax.warm_start import WarmStartConfig, run


def _run(config, workdir):
  summary = run(config, workdir)
  print(json.dumps({k: v for k, v in summary.items() if k != "plot"}, indent=1, default=str))


if __name__ == "__main__":
  config_main.run(WarmStartConfig, _run)

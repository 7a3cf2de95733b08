"""What `python -m experiments.train_sft` runs: SFT of one policy on JSONL pairs.

The workdir holds config.json (a resumed run must use the same config, except sft.num_steps),
metrics.jsonl with the held-out loss, tb/, and Orbax checkpoints that a later stage loads with
`--config.policy.init_from=WORKDIR` (e.g. train_coder).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Optional

from kernelzero_jax import configs
from kernelzero_jax.policy import PolicyConfig, load_policy
from kernelzero_jax.sft.data import DataError, load_packed
from kernelzero_jax.sft.trainer import SFTConfig, SFTTrainer


@dataclasses.dataclass(frozen=True)
class SFTRunConfig:
  policy: PolicyConfig = PolicyConfig()
  sft: SFTConfig = SFTConfig()
  train_data: Optional[str] = None    # JSONL of pairs (see kernelzero_jax/sft/data.py)
  heldout_data: Optional[str] = None  # JSONL of pairs never trained on: the held-out loss


def train(config: SFTRunConfig, workdir: str, progress: bool = True) -> dict[str, Any]:
  if config.train_data is None:
    raise configs.ConfigError("set train_data (a JSONL file of prompt/completion pairs)")
  # Micro-batching changes memory, not the update, so it may change on resume (e.g. after OOM).
  configs.check_workdir_config(workdir, config,
                               resumable=("sft.num_steps", "sft.num_micro_batches"))
  model, tokenizer = load_policy(config.policy, "float32")
  train_rows = load_packed(config.train_data, tokenizer, config.sft.seq_len)
  heldout = (load_packed(config.heldout_data, tokenizer, config.sft.seq_len)
             if config.heldout_data else None)
  for name, rows in (("train", train_rows), ("heldout", heldout)):
    if rows is not None:
      logging.info("%s: %d examples in %d rows of %d tokens; %d longer than a row dropped",
                   name, rows.num_examples, len(rows), config.sft.seq_len, rows.num_dropped)
  if len(train_rows) == 0:
    raise DataError(f"every example of {config.train_data} is longer than seq_len "
                    f"{config.sft.seq_len}")
  return SFTTrainer(config.sft, model, train_rows, heldout, progress=progress).run(workdir)

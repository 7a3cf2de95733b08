"""Supervised fine-tuning of a policy on (prompt, completion) pairs: the Coder's warm start."""

from kernelzero_jax.sft.data import DataError, PackedRows, encode_pair, load_packed, pack, read_pairs
from kernelzero_jax.sft.trainer import SFTConfig, SFTTrainer, cross_entropy_objective

__all__ = ["DataError", "PackedRows", "SFTConfig", "SFTTrainer", "cross_entropy_objective",
           "encode_pair", "load_packed", "pack", "read_pairs"]

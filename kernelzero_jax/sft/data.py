"""SFT data: (prompt, completion) pairs from JSONL, tokenized and packed into fixed-length rows.

A JSONL line is one pair, either
  {"prompt": "<text>", "completion": "<text>"}               (the prompt is used as is), or
  {"messages": [{"role": ..., "content": ...}, ...], "completion": "<text>"}
in which case the prompt is the tokenizer's chat template of the messages with the generation
prompt, as the Coder sees it at sampling time (`kernelzero_jax.coder.prompts.encode_prompt`).
The completion is followed by the end-of-turn token, so the policy learns to stop.

Packing. Examples are laid end to end into rows of `seq_len` tokens, first fit in the data's
order; `segment_ids` number the examples of a row from 1 (0 is padding), so attention stays
within an example (see `train_step.sequence_logprobs`). `loss_mask` is 1 on completion tokens.
An example longer than `seq_len` is dropped and counted, never silently truncated: a cut
completion would teach the policy to stop mid-kernel.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

import numpy as np


class DataError(ValueError):
  """A pairs file or line that cannot be used."""


def read_pairs(path: str) -> list[dict[str, Any]]:
  """The pairs of a JSONL file; a malformed line is an error that names its number."""
  pairs = []
  try:
    f = open(path, encoding="utf-8")
  except OSError as e:
    raise DataError(f"cannot read {path}: {e}") from e
  with f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        item = json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(f"{path}:{n}: not JSON: {e}") from e
      if not isinstance(item, dict) or not isinstance(item.get("completion"), str):
        raise DataError(f"{path}:{n}: expected an object with a string 'completion'")
      if isinstance(item.get("prompt"), str) == ("messages" in item):
        raise DataError(f"{path}:{n}: give exactly one of 'prompt' (text) or 'messages' (chat)")
      if "messages" in item and not (isinstance(item["messages"], list) and all(
          isinstance(m, dict) and isinstance(m.get("content"), str) for m in item["messages"])):
        raise DataError(f"{path}:{n}: 'messages' must be a list of {{role, content}} objects")
      pairs.append(item)
  if not pairs:
    raise DataError(f"{path} holds no pairs")
  return pairs


def end_of_turn_id(tokenizer) -> int:
  """The token that ends an answer: the tokenizer's eos (e.g. <|im_end|> for chat models)."""
  if tokenizer.eos_token_id is None:
    raise DataError("the tokenizer has no eos token to end completions with")
  return int(tokenizer.eos_token_id)


def encode_pair(tokenizer, pair: dict[str, Any]) -> tuple[list[int], list[int]]:
  """(prompt ids, completion ids + end of turn)."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.coder.prompts import encode_prompt
  if "messages" in pair:
    prompt = encode_prompt(tokenizer, pair["messages"])
  else:
    prompt = list(tokenizer.encode(pair["prompt"], add_special_tokens=False))
  completion = list(tokenizer.encode(pair["completion"], add_special_tokens=False))
  return prompt, completion + [end_of_turn_id(tokenizer)]


@dataclasses.dataclass
class PackedRows:
  tokens: np.ndarray       # [N, L] int32
  segment_ids: np.ndarray  # [N, L] int32, 1.. per example, 0 padding
  loss_mask: np.ndarray    # [N, L] float32, 1 on completion tokens
  num_examples: int
  num_dropped: int         # examples longer than a row

  def __len__(self) -> int:
    return self.tokens.shape[0]

  def batch(self, rows: Sequence[int]) -> dict[str, np.ndarray]:
    """The train step's batch of these rows."""
    rows = np.asarray(rows)
    segment_ids = self.segment_ids[rows]
    return dict(tokens_BxT=self.tokens[rows], valid_BxT=segment_ids > 0,
                segment_ids_BxT=segment_ids, completion_mask_BxT=self.loss_mask[rows])


def pack(examples: Sequence[tuple[Sequence[int], Sequence[int]]], seq_len: int,
         pad_id: int = 0) -> PackedRows:
  """First-fit packing of (prompt ids, completion ids) examples into rows of `seq_len`."""
  if seq_len < 2:
    raise ValueError(f"seq_len must be >= 2, got {seq_len}")
  rows: list[list[tuple[list[int], list[int]]]] = []
  free: list[int] = []
  dropped = 0
  for prompt, completion in examples:
    n = len(prompt) + len(completion)
    if n > seq_len:
      dropped += 1
      continue
    for i, room in enumerate(free):
      if room >= n:
        rows[i].append((list(prompt), list(completion)))
        free[i] -= n
        break
    else:
      rows.append([(list(prompt), list(completion))])
      free.append(seq_len - n)
  tokens = np.full((len(rows), seq_len), pad_id, np.int32)
  segments = np.zeros((len(rows), seq_len), np.int32)
  loss = np.zeros((len(rows), seq_len), np.float32)
  for r, row in enumerate(rows):
    t = 0
    for s, (prompt, completion) in enumerate(row, 1):
      n_p, n_c = len(prompt), len(completion)
      tokens[r, t:t + n_p + n_c] = prompt + completion
      segments[r, t:t + n_p + n_c] = s
      loss[r, t + n_p:t + n_p + n_c] = 1.0
      t += n_p + n_c
  return PackedRows(tokens=tokens, segment_ids=segments, loss_mask=loss,
                    num_examples=len(examples) - dropped, num_dropped=dropped)


def load_packed(path: str, tokenizer, seq_len: int) -> PackedRows:
  pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
  return pack([encode_pair(tokenizer, p) for p in read_pairs(path)], seq_len, pad_id)

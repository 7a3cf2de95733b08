"""Hugging Face tokenizers for the policies, and the tiny tokenizer that ships with the package.

`load_tokenizer()` without a directory gives the bundled byte-level BPE of exactly
PRESETS["tiny"].vocab_size tokens (made by kernelzero_jax/assets/make_tiny_tokenizer.py), so the
tiny model runs end to end with no model hub. With a directory (a Qwen2.5 checkpoint), it is the
checkpoint's own tokenizer.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

TINY_TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets",
                                  "tiny_tokenizer")


class TokenizerError(ValueError):
  """A tokenizer directory that cannot be loaded or used."""


def load_tokenizer(model_dir: str | None = None):
  """A transformers fast tokenizer from `model_dir`, or the bundled tiny one when it is None."""
  from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
  path = TINY_TOKENIZER_DIR if model_dir is None else model_dir
  if not os.path.isdir(path):
    # Checked here because AutoTokenizer would take a missing path for a hub model id and fail
    # with a network error that hides the typo.
    raise TokenizerError(f"tokenizer directory {path} does not exist")
  if not any(os.path.exists(os.path.join(path, name))
             for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
    raise TokenizerError(f"{path} has no tokenizer.json, tokenizer_config.json or vocab.json")
  try:
    return AutoTokenizer.from_pretrained(path, local_files_only=True)
  except (OSError, ValueError) as e:
    raise TokenizerError(f"cannot load the tokenizer in {path}: {e}") from e


def _ids(value: Any) -> list[int]:
  if value is None:
    return []
  if isinstance(value, int):
    return [value]
  return [int(v) for v in value]


def eos_token_ids(tokenizer, config: Any = None) -> list[int]:
  """Token ids that end a completion: the tokenizer's eos plus the model config's eos ids.

  Both matter for Qwen2.5: an instruct tokenizer's eos is <|im_end|> while config.json may name
  <|endoftext|> (or a list of both). `config` is a ModelConfig, a Hugging Face config object, or
  a config.json dict. The result is sorted and has no duplicates.
  """
  ids = set(_ids(tokenizer.eos_token_id))
  if config is not None:
    if isinstance(config, Mapping):
      ids.update(_ids(config.get("eos_token_id")))
    else:
      ids.update(_ids(getattr(config, "eos_token_id", None)))
  return sorted(ids)


def pad_token_id(tokenizer, eos_ids: Sequence[int]) -> int:
  """The id that pads sampled rows: the tokenizer's pad token, else the first eos id, else 0."""
  if tokenizer.pad_token_id is not None:
    return tokenizer.pad_token_id
  return eos_ids[0] if eos_ids else 0


def render_chat(tokenizer, messages: Sequence[Mapping[str, str]],
                add_generation_prompt: bool = True) -> str:
  """The prompt text the tokenizer's chat template makes of `messages`."""
  if not getattr(tokenizer, "chat_template", None):
    raise TokenizerError("the tokenizer has no chat_template")
  return tokenizer.apply_chat_template(list(messages), tokenize=False,
                                       add_generation_prompt=add_generation_prompt)


def apply_chat_template(tokenizer, messages: Iterable[Mapping[str, str]],
                        add_generation_prompt: bool = True) -> list[int]:
  """Token ids of the chat prompt for `messages` ({"role": ..., "content": ...} dicts).

  Renders to text and encodes it, rather than asking apply_chat_template to tokenize, because
  what that returns changed between transformers 4 (a list) and 5 (a BatchEncoding). The
  template already writes every special token, so the tokenizer adds none.
  """
  text = render_chat(tokenizer, list(messages), add_generation_prompt)
  return list(tokenizer.encode(text, add_special_tokens=False))

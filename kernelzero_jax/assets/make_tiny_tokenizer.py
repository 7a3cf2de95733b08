"""Builds the tokenizer that ships with the package for the `tiny` model preset.

A byte-level BPE with exactly 1024 tokens (PRESETS["tiny"].vocab_size): the 256 byte symbols,
the ChatML special tokens Qwen uses, and merges learned from the Python sources of the installed
`torch.nn` package (torch/nn/*.py and torch/nn/modules/*.py). That text is code in the style the
policies write, it is on every machine that runs this project, and it is not KernelBench, so the
tokenizer leaks nothing about the evaluation set.

The pre-tokenizer, normalizer and decoder copy Qwen2's tokenizer.json, so the tiny tokenizer
splits text the way the real Qwen2.5 tokenizers do, only with far fewer merges.

The output is deterministic for a given torch version (the training files are read in sorted
order and the trainer runs on one thread). Rerun from the repository root with

    python -m kernelzero_jax.assets.make_tiny_tokenizer

(`--out_dir=DIR` writes elsewhere; the default is kernelzero_jax/assets/tiny_tokenizer.)
"""

from __future__ import annotations

import argparse
import glob
import json
import os

# Qwen2's split pattern (from its tokenizer.json): contractions, letter runs, single digits,
# punctuation runs, newlines, and whitespace runs that keep indentation apart from the next word.
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

VOCAB_SIZE = 1024
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]

# ChatML, as Qwen2.5's template renders it, without Qwen's default system prompt or tool calls
# (the tiny model is for tests and smoke runs, so the prompt should be exactly what is given).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")

DEFAULT_OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_tokenizer")


def training_files() -> list[str]:
  import torch  # pylint: disable=import-outside-toplevel
  nn_dir = os.path.join(os.path.dirname(torch.__file__), "nn")
  files = (glob.glob(os.path.join(nn_dir, "*.py"))
           + glob.glob(os.path.join(nn_dir, "modules", "*.py")))
  if not files:
    raise FileNotFoundError(f"no Python sources under {nn_dir}")
  return sorted(files)


def read_texts(files: list[str]) -> list[str]:
  texts = []
  for path in files:
    with open(path, encoding="utf-8") as f:
      texts.append(f.read())
  return texts


def build_tokenizer(texts: list[str], vocab_size: int = VOCAB_SIZE, min_frequency: int = 2):
  """A byte-level BPE of at most `vocab_size` tokens (special tokens included) trained on
  `texts`; fewer when the texts hold fewer mergeable pairs (see write())."""
  # pylint: disable-next=import-outside-toplevel
  from tokenizers import (Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                          trainers)
  tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
  tokenizer.normalizer = normalizers.NFC()
  tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated", invert=False),
      pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
  ])
  tokenizer.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                         use_regex=False)
  trainer = trainers.BpeTrainer(
      vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS,
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
  tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
  return tokenizer


def write(out_dir: str, texts: list[str] | None = None, vocab_size: int = VOCAB_SIZE,
          exact_size: bool = True) -> int:
  """Trains on `texts` (default: the torch.nn sources) and saves a transformers tokenizer
  directory; returns the vocabulary size. `exact_size=False` accepts a smaller vocabulary than
  `vocab_size` (a narrow corpus such as the teacher's kernels runs out of pairs to merge)."""
  # One thread: the trainer's parallel word counting is the only source of nondeterminism.
  os.environ["RAYON_NUM_THREADS"] = "1"
  os.environ["TOKENIZERS_PARALLELISM"] = "false"
  if texts is None:
    texts = read_texts(training_files())
  tokenizer = build_tokenizer(texts, vocab_size)
  if tokenizer.get_vocab_size() > vocab_size or (exact_size
                                                 and tokenizer.get_vocab_size() != vocab_size):
    raise RuntimeError(f"trained vocabulary has {tokenizer.get_vocab_size()} tokens, "
                       f"wanted {vocab_size} (too little training text?)")
  os.makedirs(out_dir, exist_ok=True)
  tokenizer.save(os.path.join(out_dir, "tokenizer.json"), pretty=True)
  added = {
      str(tokenizer.token_to_id(tok)): {
          "content": tok, "lstrip": False, "normalized": False, "rstrip": False,
          "single_word": False, "special": True}
      for tok in SPECIAL_TOKENS}
  # Qwen2.5-Instruct's choices: a chat turn ends with <|im_end|>, padding is <|endoftext|>.
  tokenizer_config = {
      "tokenizer_class": "PreTrainedTokenizerFast",
      "added_tokens_decoder": added,
      "additional_special_tokens": [IM_START, IM_END],
      "bos_token": None,
      "eos_token": IM_END,
      "pad_token": ENDOFTEXT,
      "unk_token": None,
      "clean_up_tokenization_spaces": False,
      "model_max_length": 4096,
      "split_special_tokens": False,
      "chat_template": CHAT_TEMPLATE,
  }
  with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
    json.dump(tokenizer_config, f, indent=2, sort_keys=True)
    f.write("\n")
  special_tokens_map = {"additional_special_tokens": [IM_START, IM_END], "eos_token": IM_END,
                        "pad_token": ENDOFTEXT}
  with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
    json.dump(special_tokens_map, f, indent=2, sort_keys=True)
    f.write("\n")
  return tokenizer.get_vocab_size()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out_dir", default=DEFAULT_OUT_DIR)
  args = parser.parse_args()
  write(args.out_dir)
  print(f"wrote {args.out_dir}")


if __name__ == "__main__":
  main()

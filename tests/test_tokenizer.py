"""The tokenizer wrapper and the tiny tokenizer that ships with the package."""

from __future__ import annotations

import json
import os

import pytest

from kernelzero_jax import tokenizer as tok_lib
from kernelzero_jax.model.config import PRESETS, ModelConfig

_CODE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Matmul, then a scaled ReLU."""

    def __init__(self, scale: float = 2.5):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return torch.relu(a @ b) * self.scale  # naïve: 3 kernels, not 1\t\r\n
'''


@pytest.fixture(scope="module")
def tiny():
  return tok_lib.load_tokenizer()


def test_bundled_asset_is_small_and_complete():
  files = sorted(os.listdir(tok_lib.TINY_TOKENIZER_DIR))
  assert {"tokenizer.json", "tokenizer_config.json"} <= set(files)
  total = sum(os.path.getsize(os.path.join(tok_lib.TINY_TOKENIZER_DIR, f)) for f in files)
  assert total < 200_000


def test_vocab_size_matches_tiny_preset(tiny):
  assert len(tiny) == 1024 == PRESETS["tiny"].vocab_size
  assert max(tiny.get_vocab().values()) == 1023
  for special in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
    assert tiny.convert_tokens_to_ids(special) < 1024
  assert tiny.eos_token == "<|im_end|>"
  assert tiny.pad_token == "<|endoftext|>"


def test_round_trip_code(tiny):
  ids = tiny.encode(_CODE, add_special_tokens=False)
  assert tiny.decode(ids) == _CODE
  # Trained on code, so it compresses code: well under one token per character.
  assert len(ids) < 0.6 * len(_CODE)
  assert all(0 <= i < 1024 for i in ids)


def test_special_tokens_are_single_tokens(tiny):
  ids = tiny.encode("<|im_start|>user\nhi<|im_end|>", add_special_tokens=False)
  assert ids[0] == tiny.convert_tokens_to_ids("<|im_start|>")
  assert ids[-1] == tiny.convert_tokens_to_ids("<|im_end|>")
  # Special tokens are not skipped on a plain decode, and are on request.
  assert tiny.decode(ids) == "<|im_start|>user\nhi<|im_end|>"
  assert tiny.decode(ids, skip_special_tokens=True) == "user\nhi"


def test_chat_template_renders_chatml(tiny):
  messages = [{"role": "system", "content": "You write kernels."},
              {"role": "user", "content": "def f(x):\n    return x"}]
  expected = ("<|im_start|>system\nYou write kernels.<|im_end|>\n"
              "<|im_start|>user\ndef f(x):\n    return x<|im_end|>\n")
  assert tok_lib.render_chat(tiny, messages, add_generation_prompt=False) == expected
  assert tok_lib.render_chat(tiny, messages) == expected + "<|im_start|>assistant\n"
  ids = tok_lib.apply_chat_template(tiny, messages)
  assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
  assert ids == tiny.encode(expected + "<|im_start|>assistant\n", add_special_tokens=False)
  assert ids[0] == tiny.convert_tokens_to_ids("<|im_start|>")
  assert tiny.decode(ids) == expected + "<|im_start|>assistant\n"
  no_prompt = tok_lib.apply_chat_template(tiny, messages, add_generation_prompt=False)
  assert ids[:len(no_prompt)] == no_prompt and len(ids) > len(no_prompt)


def test_eos_token_ids(tiny):
  im_end = tiny.convert_tokens_to_ids("<|im_end|>")
  endoftext = tiny.convert_tokens_to_ids("<|endoftext|>")
  assert tok_lib.eos_token_ids(tiny) == [im_end]
  assert tok_lib.eos_token_ids(tiny, PRESETS["tiny"]) == [im_end]
  cfg = ModelConfig.from_hf_dict({
      "vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
      "num_attention_heads": 4, "eos_token_id": endoftext})
  assert tok_lib.eos_token_ids(tiny, cfg) == sorted({im_end, endoftext})
  assert tok_lib.eos_token_ids(tiny, {"eos_token_id": [endoftext, im_end]}) == sorted(
      {im_end, endoftext})
  assert tok_lib.eos_token_ids(tiny, {"eos_token_id": None}) == [im_end]


def test_pad_token_id_falls_back_to_eos_then_zero():
  class Tok:  # only what pad_token_id reads
    def __init__(self, pad):
      self.pad_token_id = pad

  assert tok_lib.pad_token_id(Tok(7), [3, 5]) == 7
  assert tok_lib.pad_token_id(Tok(0), [3]) == 0
  assert tok_lib.pad_token_id(Tok(None), [3, 5]) == 3
  assert tok_lib.pad_token_id(Tok(None), []) == 0


def test_load_saved_tokenizer(tiny, tmp_path):
  tiny.save_pretrained(str(tmp_path))
  loaded = tok_lib.load_tokenizer(str(tmp_path))
  assert len(loaded) == 1024
  assert loaded.encode(_CODE, add_special_tokens=False) == tiny.encode(
      _CODE, add_special_tokens=False)
  messages = [{"role": "user", "content": "hi"}]
  assert tok_lib.apply_chat_template(loaded, messages) == tok_lib.apply_chat_template(
      tiny, messages)
  assert loaded.eos_token_id == tiny.eos_token_id


def test_missing_dir_error(tmp_path):
  with pytest.raises(tok_lib.TokenizerError, match="does not exist"):
    tok_lib.load_tokenizer(str(tmp_path / "nope"))
  with pytest.raises(tok_lib.TokenizerError, match="has no tokenizer.json"):
    tok_lib.load_tokenizer(str(tmp_path))


def test_no_chat_template_error(tiny, tmp_path):
  tiny.save_pretrained(str(tmp_path))
  # transformers 5 writes the template to chat_template.jinja, 4 into tokenizer_config.json.
  jinja = tmp_path / "chat_template.jinja"
  if jinja.exists():
    jinja.unlink()
  config_path = tmp_path / "tokenizer_config.json"
  config = json.loads(config_path.read_text())
  config.pop("chat_template", None)
  config_path.write_text(json.dumps(config))
  loaded = tok_lib.load_tokenizer(str(tmp_path))
  with pytest.raises(tok_lib.TokenizerError, match="no chat_template"):
    tok_lib.apply_chat_template(loaded, [{"role": "user", "content": "hi"}])

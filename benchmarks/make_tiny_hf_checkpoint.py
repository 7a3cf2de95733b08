r"""A random-weight Hugging Face checkpoint of the tiny preset, with the bundled tokenizer.

    python -m benchmarks.make_tiny_hf_checkpoint --out=/tmp/tiny_hf

Made by transformers (Qwen2ForCausalLM from a Qwen2Config of PRESETS["tiny"], saved as
safetensors) so that `--model_dir` paths (eval_kernelbench, generate) can be exercised end to end
on a machine with no model hub. Its completions are noise: a pass rate of 0 is expected.
"""

from __future__ import annotations

import os
import shutil

from absl import app
from absl import flags

from kernelzero_jax.model.config import PRESETS
from kernelzero_jax.tokenizer import TINY_TOKENIZER_DIR

_OUT = flags.DEFINE_string("out", None, "Checkpoint directory to write.")
_SEED = flags.DEFINE_integer("seed", 0, "torch seed of the random weights.")
flags.mark_flag_as_required("out")


def main(argv):
  del argv
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  cfg = PRESETS["tiny"]
  hf_config = transformers.Qwen2Config(
      vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
      intermediate_size=cfg.intermediate_size, num_hidden_layers=cfg.num_hidden_layers,
      num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
      rope_theta=cfg.rope_theta, rms_norm_eps=cfg.rms_norm_eps,
      max_position_embeddings=cfg.max_position_embeddings,
      tie_word_embeddings=cfg.tie_word_embeddings)
  torch.manual_seed(_SEED.value)
  model = transformers.Qwen2ForCausalLM(hf_config).to(torch.float32)
  model.save_pretrained(_OUT.value)
  for name in os.listdir(TINY_TOKENIZER_DIR):
    shutil.copy(os.path.join(TINY_TOKENIZER_DIR, name), _OUT.value)
  print(_OUT.value)


if __name__ == "__main__":
  app.run(main)

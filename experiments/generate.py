r"""Sample from a policy: a Hugging Face Qwen2 checkpoint, or the tiny embedded model.

    python -m experiments.generate --model_dir=DIR --prompt=TEXT --max_new_tokens=256 \
        --temperature=0.7 --num_samples=4 --seed=0 [--top_p=0.95 --top_k=50 --chat --ignore_eos]
    python -m experiments.generate --prompt_token_ids=5,17,42 --max_new_tokens=8 --temperature=0

Without --model_dir it uses PRESETS["tiny"] with seed-0 random weights and the bundled tiny
tokenizer. --temperature=0 is greedy. Prints exactly one JSON object on the last stdout line:
{"samples": [{"text", "token_ids", "logprobs", "finish_reason"}, ...]} (prompt-major; token_ids
exclude the prompt and include the stop token that ended a sample). Bad usage exits 2.
"""

import sys

from absl import app
from absl import flags

from kernelzero_jax.sampling import cli

_MODEL_DIR = flags.DEFINE_string("model_dir", None, "Hugging Face checkpoint directory "
                                 "(default: the tiny embedded model).")
_TOKENIZER_DIR = flags.DEFINE_string("tokenizer_dir", None, "Tokenizer directory (default: "
                                     "--model_dir, or the bundled tiny tokenizer).")
_DTYPE = flags.DEFINE_enum("dtype", None, ["bfloat16", "float32"],
                           "Parameter dtype (default: bfloat16 for --model_dir, else float32).")
_PROMPT = flags.DEFINE_string("prompt", None, "Prompt text.")
_PROMPT_FILE = flags.DEFINE_string("prompt_file", None, "File holding one prompt (or, .jsonl, "
                                   "one JSON string or {\"prompt\": ...} per line).")
_PROMPT_TOKEN_IDS = flags.DEFINE_list("prompt_token_ids", None, "Raw prompt ids: 5,17,42.")
_CHAT = flags.DEFINE_bool("chat", False, "Wrap the prompt in the tokenizer's chat template.")
_SYSTEM = flags.DEFINE_string("system", None, "System message for --chat.")
_MAX_NEW_TOKENS = flags.DEFINE_integer("max_new_tokens", 256, "Tokens to generate at most.")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "0 means greedy.")
_TOP_P = flags.DEFINE_float("top_p", 1.0, "Nucleus sampling mass (1: off).")
_TOP_K = flags.DEFINE_integer("top_k", 0, "Keep the k most likely tokens (0: off).")
_NUM_SAMPLES = flags.DEFINE_integer("num_samples", 1, "Samples per prompt.")
_SEED = flags.DEFINE_integer("seed", 0, "Sampling seed.")
_IGNORE_EOS = flags.DEFINE_bool("ignore_eos", False, "Do not stop at EOS.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  sys.exit(cli.generate_from_flags(
      model_dir=_MODEL_DIR.value, tokenizer_dir=_TOKENIZER_DIR.value, dtype=_DTYPE.value,
      prompt=_PROMPT.value, prompt_file=_PROMPT_FILE.value,
      prompt_token_ids=_PROMPT_TOKEN_IDS.value, chat=_CHAT.value, system=_SYSTEM.value,
      max_new_tokens=_MAX_NEW_TOKENS.value, temperature=_TEMPERATURE.value, top_p=_TOP_P.value,
      top_k=_TOP_K.value, num_samples=_NUM_SAMPLES.value, seed=_SEED.value,
      ignore_eos=_IGNORE_EOS.value))


if __name__ == "__main__":
  app.run(main)

"""What `python -m experiments.generate` does: load a policy (or the tiny embedded one), sample,
and print one JSON object on the last stdout line.

    {"samples": [{"text": ..., "token_ids": [...], "logprobs": [...], "finish_reason": ...}, ...]}

Samples are prompt-major: the `num_samples` samples of the first prompt come first. `token_ids`
are the generated ids only (a stop token or EOS that ended the sample is included as the last
id); `text` decodes them, skipping special tokens.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence

import jax.numpy as jnp

from kernelzero_jax.sampling.sampler import Sampler

_DTYPES = {"bfloat16": jnp.bfloat16, "float32": jnp.float32}


class UsageError(ValueError):
  """Flags that do not describe a generation request."""


def read_prompts(prompt: str | None, prompt_file: str | None,
                 prompt_token_ids: Sequence[str] | str | None) -> tuple[list[str], list[list[int]]]:
  """Exactly one source: text prompts (a file is one prompt; a .jsonl file holds one JSON string
  or {"prompt": ...} per line), or raw comma-separated token ids. Returns (texts, id lists);
  one of the two is empty."""
  given = [x for x in (prompt, prompt_file, prompt_token_ids) if x not in (None, "", [])]
  if len(given) != 1:
    raise UsageError("give exactly one of --prompt, --prompt_file, --prompt_token_ids")
  if prompt_token_ids:
    parts = prompt_token_ids.split(",") if isinstance(prompt_token_ids, str) else prompt_token_ids
    try:
      ids = [int(p) for p in parts if str(p).strip()]
    except ValueError as e:
      raise UsageError(f"--prompt_token_ids must be comma-separated integers: {e}") from e
    if not ids:
      raise UsageError("--prompt_token_ids is empty")
    return [], [ids]
  if prompt is not None and prompt != "":
    return [prompt], []
  try:
    with open(prompt_file) as f:
      content = f.read()
  except OSError as e:
    raise UsageError(f"cannot read --prompt_file: {e}") from e
  if not prompt_file.endswith(".jsonl"):
    return [content], []
  texts = []
  for n, line in enumerate(content.splitlines(), 1):
    if not line.strip():
      continue
    item = json.loads(line)
    if isinstance(item, dict):
      item = item.get("prompt")
    if not isinstance(item, str):
      raise UsageError(f"{prompt_file}:{n}: expected a JSON string or an object with 'prompt'")
    texts.append(item)
  return texts, []


def load_policy(model_dir: str | None, dtype: str | None, tokenizer_dir: str | None = None):
  """(model, tokenizer): a Hugging Face checkpoint and its tokenizer, or without a directory the
  tiny preset with seed-0 random weights and the bundled tiny tokenizer."""
  # Imported here so that `--help` does not pay for transformers.
  # pylint: disable=import-outside-toplevel
  from flax import nnx
  from kernelzero_jax.model.checkpoint import load_hf_checkpoint
  from kernelzero_jax.model.config import PRESETS
  from kernelzero_jax.model.qwen2 import Qwen2
  from kernelzero_jax.tokenizer import load_tokenizer
  if dtype is not None and dtype not in _DTYPES:
    raise UsageError(f"--dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
  if model_dir is None:
    model = Qwen2(PRESETS["tiny"], rngs=nnx.Rngs(0), dtype=_DTYPES[dtype or "float32"])
    return model, load_tokenizer(tokenizer_dir)
  model = load_hf_checkpoint(model_dir, dtype=_DTYPES[dtype or "bfloat16"])
  return model, load_tokenizer(tokenizer_dir or model_dir)


def generate(*, model_dir: str | None = None, prompt: str | None = None,
             prompt_file: str | None = None, prompt_token_ids: Sequence[str] | str | None = None,
             max_new_tokens: int = 256, temperature: float = 1.0, top_p: float = 1.0,
             top_k: int = 0, num_samples: int = 1, seed: int = 0, ignore_eos: bool = False,
             chat: bool = False, system: str | None = None, dtype: str | None = None,
             tokenizer_dir: str | None = None) -> dict[str, Any]:
  """Runs one generation request; returns the JSON-ready result."""
  # pylint: disable-next=import-outside-toplevel
  from kernelzero_jax.tokenizer import apply_chat_template, eos_token_ids, pad_token_id
  texts, id_prompts = read_prompts(prompt, prompt_file, prompt_token_ids)
  if chat and id_prompts:
    raise UsageError("--chat needs text prompts, not --prompt_token_ids")
  model, tokenizer = load_policy(model_dir, dtype, tokenizer_dir)
  if texts:
    if chat:
      prefix = [{"role": "system", "content": system}] if system else []
      id_prompts = [apply_chat_template(tokenizer, prefix + [{"role": "user", "content": t}])
                    for t in texts]
    else:
      id_prompts = [list(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
  eos = eos_token_ids(tokenizer, model.config)
  sampler = Sampler(model, eos_ids=eos, pad_id=pad_token_id(tokenizer, eos))
  out = sampler.sample(id_prompts, max_new_tokens, seed=seed, temperature=temperature,
                       top_p=top_p, top_k=top_k, num_samples=num_samples, ignore_eos=ignore_eos)
  samples = []
  for ids, logprobs, reason in zip(out.tokens, out.logprobs, out.finish_reasons):
    samples.append({"text": tokenizer.decode(ids, skip_special_tokens=True), "token_ids": ids,
                    "logprobs": logprobs, "finish_reason": reason})
  return {"samples": samples}


def generate_from_flags(**kwargs) -> int:
  """Prints the result as one JSON line (last on stdout); usage errors go to stderr, exit 2."""
  try:
    result = generate(**kwargs)
  except UsageError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  sys.stdout.flush()
  print(json.dumps(result), flush=True)
  return 0


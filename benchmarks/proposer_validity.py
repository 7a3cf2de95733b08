r"""How often a Proposer policy writes a valid module: static reading, then runtime validation.

    python -m benchmarks.proposer_validity --run=/tmp/proposer_sft --preset=coder-tiny \
        --tokenizer_dir=kernelzero_jax/assets/coder_tiny_warm \
        --apis_file=/tmp/proposer_data/apis.json --temperature=0.3 --device=cpu

Draws `--num_sets` API sets of 2 or 3 APIs as the co-evolution does (ApiSetSampler over the
installed transformers' co-occurrence, restricted to `--apis_file`'s vocabulary if given), or
takes the held-out pairs' own API sets with `--pairs=heldout.jsonl`; samples `--samples`
proposals for each; reads every one (prompts.read_proposal) and validates the distinct
statically sound ones in sandbox workers (sandbox.validate_module). Prints the counts per
rejection and the number of valid distinct modules.
"""

from __future__ import annotations

import collections
import json

import numpy as np
from absl import app
from absl import flags

_RUN = flags.DEFINE_string("run", None, "A run directory to take the parameters from.")
_MODEL_DIR = flags.DEFINE_string("model_dir", None, "Or a Hugging Face checkpoint directory.")
_PRESET = flags.DEFINE_string("preset", "tiny", "Architecture of --run without --model_dir.")
_TOKENIZER = flags.DEFINE_string("tokenizer_dir", None, "Tokenizer (default: the model's).")
_APIS = flags.DEFINE_string("apis_file", None, "JSON list of the API vocabulary.")
_PAIRS = flags.DEFINE_string("pairs", None, "Use the API sets of these pairs instead.")
_SETS = flags.DEFINE_integer("num_sets", 8, "API sets.")
_SAMPLES = flags.DEFINE_integer("samples", 4, "Proposals per API set.")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.7, "Sampling temperature.")
_MAX_TOKENS = flags.DEFINE_integer("max_new_tokens", 384, "Tokens per proposal.")
_DEVICE = flags.DEFINE_string("device", "cpu", "Sandbox device for validation.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the API sets and the sampling.")


def main(argv):
  del argv
  # pylint: disable=import-outside-toplevel
  from kernelzero_jax.coder.prompts import encode_prompt
  from kernelzero_jax.policy import PolicyConfig, load_policy
  from kernelzero_jax.proposer.api_sets import ApiSetSampler, transformers_cooccurrence
  from kernelzero_jax.proposer.prompts import proposer_messages, read_proposal
  from kernelzero_jax.sampling import Sampler
  from kernelzero_jax.sandbox import SandboxConfig, SandboxPool
  from kernelzero_jax.tokenizer import eos_token_ids, pad_token_id
  model, tokenizer = load_policy(PolicyConfig(model_dir=_MODEL_DIR.value, preset=_PRESET.value,
                                              tokenizer_dir=_TOKENIZER.value,
                                              init_from=_RUN.value))
  if _PAIRS.value:
    with open(_PAIRS.value, encoding="utf-8") as f:
      sets = [tuple(json.loads(line)["meta"]["apis"]) for line in f][:_SETS.value]
  else:
    apis = None
    if _APIS.value:
      with open(_APIS.value, encoding="utf-8") as f:
        apis = json.load(f)
    sampler = ApiSetSampler(transformers_cooccurrence(), apis=apis)
    rng = np.random.default_rng(_SEED.value)
    sets = [sampler.sample(rng, int(rng.choice([2, 3]))) for _ in range(_SETS.value)]
  eos = eos_token_ids(tokenizer, model.config)
  out = Sampler(model, eos_ids=eos, pad_id=pad_token_id(tokenizer, eos)).sample(
      [encode_prompt(tokenizer, proposer_messages(a)) for a in sets], _MAX_TOKENS.value,
      seed=_SEED.value, temperature=_TEMPERATURE.value, num_samples=_SAMPLES.value)
  counts: collections.Counter = collections.Counter()
  sound = []
  for i, tokens in zip(out.prompt_index, out.tokens):
    proposal = read_proposal(tokenizer.decode(tokens, skip_special_tokens=False), sets[i])
    counts[proposal.rejection or "statically sound"] += 1
    if proposal.ok:
      sound.append(proposal.source)
  distinct = sorted(set(sound))
  with SandboxPool(SandboxConfig(device=_DEVICE.value, timing=False), max_parallel=2) as pool:
    verdicts = pool.validate_modules(distinct) if distinct else []
  runtime = collections.Counter(v.rejection or "valid" for v in verdicts)
  print(json.dumps({"api_sets": [list(s) for s in sets], "proposals": len(out.tokens),
                    "static": dict(counts), "distinct_sound": len(distinct),
                    "runtime": dict(runtime), "valid_distinct": runtime.get("valid", 0)}))


if __name__ == "__main__":
  app.run(main)

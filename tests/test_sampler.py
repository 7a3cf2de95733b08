"""The JAX sampler against transformers' generate, and its sampling, stopping, grouping,
compilation and CLI contracts. CPU, float32, a tiny random Qwen2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from kernelzero_jax.model.checkpoint import load_hf_checkpoint
from kernelzero_jax.model.qwen2 import causal_padding_mask, positions_from_valid
from kernelzero_jax.sampling import FINISH_LENGTH, FINISH_STOP, Sampler
from kernelzero_jax.tokenizer import TINY_TOKENIZER_DIR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAD = 0
# Lengths 3..21: two prompt buckets' worth of padding (bucket 32), rows of very different length.
PROMPTS = [[5, 17, 42], list(range(30, 51)), [7, 7, 8, 9, 100, 200, 3, 4, 5, 6, 11], [250, 1]]
NEW = 40


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> str:
  """A random tiny transformers Qwen2 (eos disabled), saved with the bundled tokenizer."""
  from transformers import Qwen2Config, Qwen2ForCausalLM  # pylint: disable=import-outside-toplevel
  # A larger init than the default 0.02 gives peaked logits, so greedy argmaxes are not near-ties
  # that float32 rounding differences between the two implementations could flip.
  config = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                       rope_theta=10000.0, tie_word_embeddings=False, initializer_range=0.15,
                       eos_token_id=None, bos_token_id=None, pad_token_id=PAD)
  torch.manual_seed(0)
  model = Qwen2ForCausalLM(config).eval()
  with torch.no_grad():  # biases are zero-initialised; make them matter
    for name, p in model.named_parameters():
      if name.endswith("bias"):
        p.normal_(0, 0.1)
  path = str(tmp_path_factory.mktemp("tiny_qwen2"))
  model.save_pretrained(path)
  for name in os.listdir(TINY_TOKENIZER_DIR):
    shutil.copy(os.path.join(TINY_TOKENIZER_DIR, name), path)
  return path


@pytest.fixture(scope="module")
def model(hf_dir):
  return load_hf_checkpoint(hf_dir, dtype=jnp.float32)


@pytest.fixture(scope="module")
def sampler(model) -> Sampler:
  return Sampler(model, eos_ids=[], pad_id=PAD)


def _hf_greedy(hf_dir: str, prompts, new: int):
  from transformers import Qwen2ForCausalLM  # pylint: disable=import-outside-toplevel
  hf = Qwen2ForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
  p = max(len(x) for x in prompts)
  ids = torch.tensor([[PAD] * (p - len(x)) + x for x in prompts])
  mask = torch.tensor([[0] * (p - len(x)) + [1] * len(x) for x in prompts])
  with torch.no_grad():
    out = hf.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=new,
                      min_new_tokens=new, pad_token_id=PAD, eos_token_id=None,
                      return_dict_in_generate=True, output_logits=True)
  tokens = out.sequences[:, p:].numpy()
  logits = torch.stack(out.logits, dim=1)  # [B, new, V], raw
  return tokens, torch.log_softmax(logits, dim=-1).numpy()


@pytest.fixture(scope="module")
def own_logprobs(sampler):
  """(prompt, generated, T) -> (log_softmax(logits / T) [len(generated), V], at the generated
  tokens), from one full forward of our model without a cache."""

  @jax.jit
  def forward(state, seq_1xT: jax.Array, temperature: jax.Array) -> jax.Array:
    model = nnx.merge(sampler.graphdef, state)
    valid_1xT = jnp.ones_like(seq_1xT, bool)
    logits_1xTxV, _ = model(seq_1xT, positions_from_valid(valid_1xT),
                            causal_padding_mask(valid_1xT))
    return jax.nn.log_softmax(logits_1xTxV[0] / temperature, axis=-1)

  def compute(prompt: list[int], generated: list[int], temperature: float):
    # Right-padded to 64 so that one compilation serves every row: under the causal mask, what
    # follows a token does not change its logits.
    seq = prompt + generated
    padded = jnp.asarray([seq + [PAD] * (64 - len(seq))], jnp.int32)
    logp_TxV = np.asarray(forward(sampler.state, padded, jnp.float32(temperature)))
    logp_TxV = logp_TxV[len(prompt) - 1:len(seq) - 1]
    return logp_TxV, logp_TxV[np.arange(len(generated)), generated]

  return compute


def test_greedy_matches_transformers_token_for_token(hf_dir, sampler):
  out = sampler.sample(PROMPTS, NEW, seed=0, temperature=0)
  hf_tokens, hf_logp = _hf_greedy(hf_dir, PROMPTS, NEW)
  assert out.lengths == [NEW] * len(PROMPTS)
  assert out.finish_reasons == [FINISH_LENGTH] * len(PROMPTS)
  assert out.prompt_index == list(range(len(PROMPTS)))
  np.testing.assert_array_equal(np.asarray(out.tokens), hf_tokens)
  expected = np.take_along_axis(hf_logp, hf_tokens[..., None], axis=-1)[..., 0]
  np.testing.assert_allclose(np.asarray(out.logprobs), expected, atol=1e-4)
  assert len({tuple(t) for t in out.tokens}) > 1  # not a degenerate model


def test_seeded_sampling_is_reproducible_and_seeds_differ(sampler):
  a = sampler.sample(PROMPTS, 16, seed=1, temperature=1.0)
  b = sampler.sample(PROMPTS, 16, seed=1, temperature=1.0)
  c = sampler.sample(PROMPTS, 16, seed=2, temperature=1.0)
  assert a.tokens == b.tokens and a.logprobs == b.logprobs
  assert a.tokens != c.tokens
  # Seeds are not truncated to 32 bits.
  assert sampler.sample(PROMPTS, 16, seed=1 + 2**32, temperature=1.0).tokens != a.tokens


def test_top_k_one_and_tiny_top_p_are_greedy(sampler):
  greedy = sampler.sample(PROMPTS, 16, seed=0, temperature=0)
  top_k = sampler.sample(PROMPTS, 16, seed=3, temperature=1.0, top_k=1)
  top_p = sampler.sample(PROMPTS, 16, seed=4, temperature=0.8, top_p=1e-6)
  assert top_k.tokens == greedy.tokens
  assert top_p.tokens == greedy.tokens
  # One token left: it has probability 1 under the sampling distribution.
  np.testing.assert_allclose(np.asarray(top_k.logprobs), 0.0, atol=1e-6)


def test_temperature_logprobs_are_those_of_the_sampling_distribution(sampler, own_logprobs):
  temperature = 0.7
  out = sampler.sample(PROMPTS, 16, seed=5, temperature=temperature)
  for prompt, generated, logprobs in zip(PROMPTS, out.tokens, out.logprobs):
    _, expected = own_logprobs(prompt, generated, temperature)
    np.testing.assert_allclose(logprobs, expected, atol=1e-4)
  # With top-k and top-p the distribution is renormalised over the kept tokens.
  top_k, top_p = 20, 0.9
  out = sampler.sample(PROMPTS, 16, seed=6, temperature=temperature, top_k=top_k, top_p=top_p)
  for prompt, generated, logprobs in zip(PROMPTS, out.tokens, out.logprobs):
    full, _ = own_logprobs(prompt, generated, temperature)
    for step, token in enumerate(generated):
      order = np.argsort(-full[step])[:top_k]
      probs = np.exp(full[step][order])
      probs /= probs.sum()
      kept = order[:int(np.sum(np.cumsum(probs) - probs < top_p))]
      assert token in kept
      renorm = full[step][kept] - np.log(np.sum(np.exp(full[step][kept])))
      np.testing.assert_allclose(logprobs[step], renorm[list(kept).index(token)], atol=1e-4)


def test_stop_tokens_and_eos_end_rows_while_others_continue(model, sampler):
  greedy = sampler.sample(PROMPTS, 16, seed=0, temperature=0)
  others = set(t for row in greedy.tokens[1:] for t in row)
  step, stop = next((i, t) for i, t in enumerate(greedy.tokens[0]) if t not in others and i > 2)
  # Per-prompt stop lists: only row 0 has the token; it is included as the row's last token.
  out = sampler.sample(PROMPTS, 16, seed=0, temperature=0,
                       stop_token_ids=[[stop], [], [], []])
  assert out.tokens[0] == greedy.tokens[0][:step + 1] and out.tokens[0][-1] == stop
  assert out.lengths[0] == step + 1 and out.finish_reasons[0] == FINISH_STOP
  assert len(out.logprobs[0]) == step + 1
  assert out.tokens[1:] == greedy.tokens[1:]
  assert out.finish_reasons[1:] == [FINISH_LENGTH] * 3 and out.lengths[1:] == [16] * 3
  # The same token as EOS (shared by all rows), and ignore_eos switching it off.
  eos_sampler = Sampler(model, eos_ids=[stop], pad_id=PAD)
  out = eos_sampler.sample(PROMPTS, 16, seed=0, temperature=0)
  assert out.lengths == [step + 1, 16, 16, 16]
  assert out.finish_reasons == [FINISH_STOP] + [FINISH_LENGTH] * 3
  out = eos_sampler.sample(PROMPTS, 16, seed=0, temperature=0, ignore_eos=True)
  assert out.tokens == greedy.tokens and out.finish_reasons == [FINISH_LENGTH] * 4
  # Every row stopping: the loop ends early, lengths are per row.
  first = [row[0] for row in greedy.tokens]
  out = sampler.sample(PROMPTS, 16, seed=0, temperature=0, stop_token_ids=first)
  assert out.lengths == [1, 1, 1, 1] and out.finish_reasons == [FINISH_STOP] * 4


def test_group_sampling_shares_the_prefill_and_differs(sampler, own_logprobs):
  groups = 4
  out = sampler.sample(PROMPTS[:3], 16, seed=7, temperature=1.0, num_samples=groups)
  assert len(out.tokens) == 3 * groups
  assert out.prompt_index == [i for i in range(3) for _ in range(groups)]
  for i in range(3):
    rows = out.tokens[i * groups:(i + 1) * groups]
    assert len({tuple(r) for r in rows}) == groups  # the samples of one prompt differ
    for generated, logprobs in zip(rows, out.logprobs[i * groups:(i + 1) * groups]):
      _, expected = own_logprobs(PROMPTS[i], generated, 1.0)  # continues *its* prompt
      np.testing.assert_allclose(logprobs, expected, atol=1e-4)


def test_compiles_once_per_bucket(model):
  fresh = Sampler(model, eos_ids=[], pad_id=PAD)
  rng = np.random.default_rng(0)
  for call in range(10):
    num_prompts = int(rng.integers(3, 5))  # batch bucket 4
    prompts = [rng.integers(1, 256, size=int(rng.integers(17, 33))).tolist()  # prompt bucket 32
               for _ in range(num_prompts)]
    fresh.sample(prompts, int(rng.integers(9, 17)), seed=call,  # generation bucket 16
                 temperature=float(rng.uniform(0.5, 1.5)), stop_token_ids=[int(call)])
  assert fresh.compile_counts == {"prefill": 1, "decode": 1}


def test_jit_and_no_jit_agree(sampler):
  prompts = [PROMPTS[0], PROMPTS[2]]  # bucket 16: the eager run is slow enough
  jitted = sampler.sample(prompts, 4, seed=0, temperature=0)
  with jax.disable_jit():
    eager = sampler.sample(prompts, 4, seed=0, temperature=0)
  assert eager.tokens == jitted.tokens
  np.testing.assert_allclose(eager.logprobs, jitted.logprobs, atol=1e-5)


def test_bad_requests_are_rejected(sampler):
  with pytest.raises(ValueError, match="empty"):
    sampler.sample([[1], []], 4, seed=0)
  with pytest.raises(ValueError, match="outside"):
    sampler.sample([[1, 256]], 4, seed=0)
  with pytest.raises(ValueError, match="max_new_tokens"):
    sampler.sample([[1]], 0, seed=0)
  with pytest.raises(ValueError, match="stop_token_ids"):
    sampler.sample([[1], [2]], 4, seed=0, stop_token_ids=[[1], [2], [3]])


def _cli(*args) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, "-m", "experiments.generate", *args], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))


def _json_samples(proc: subprocess.Popen) -> list[dict]:
  stdout, stderr = proc.communicate(timeout=300)
  assert proc.returncode == 0, stderr
  result = json.loads(stdout.strip().splitlines()[-1])
  assert set(result) == {"samples"}
  for s in result["samples"]:
    assert set(s) == {"text", "token_ids", "logprobs", "finish_reason"}
    assert len(s["token_ids"]) == len(s["logprobs"]) and isinstance(s["text"], str)
  return result["samples"]


def test_cli_tiny_model_and_model_dir(hf_dir, sampler):
  # Both subprocesses run at once: most of their time is imports and compilation.
  tiny = _cli("--prompt_token_ids=5,17,42", "--max_new_tokens=8", "--temperature=0")
  from_dir = _cli(f"--model_dir={hf_dir}", "--dtype=float32", "--prompt_token_ids=5,17,42",
                  "--max_new_tokens=8", "--temperature=0", "--num_samples=2", "--ignore_eos")
  samples = _json_samples(tiny)
  assert len(samples) == 1 and len(samples[0]["token_ids"]) == 8
  assert samples[0]["finish_reason"] == "length"
  assert all(0 <= t < 1024 and lp <= 0 for t, lp in zip(samples[0]["token_ids"],
                                                          samples[0]["logprobs"]))
  samples = _json_samples(from_dir)
  expected = sampler.sample([[5, 17, 42]], 8, seed=0, temperature=0)
  assert [s["token_ids"] for s in samples] == expected.tokens * 2  # greedy: both samples agree
  np.testing.assert_allclose(samples[0]["logprobs"], expected.logprobs[0], atol=1e-5)

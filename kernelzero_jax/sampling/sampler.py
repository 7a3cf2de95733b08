"""Batched autoregressive sampling from the Qwen2 policy: a jitted prefill, then a jitted
`lax.while_loop` decode over a preallocated KV cache.

Layout. Prompts are LEFT-padded to a common bucketed length P, so every row writes the cache at
the same index (the model's contract) while each row's positions start at 0 at its first real
token. The cache holds S = P + N positions, N the bucketed generation length; generated token j
of every row lives at cache index P + j and at position prompt_len + j.

Compilation is bounded. Three sizes are bucketed up to powers of two: the prompt length (at least
`min_prompt_bucket`), the generation length (at least `min_gen_bucket`) and the number of prompts;
the stop-token table is padded to a power of two as well. `max_new_tokens`, temperature, top-k,
top-p and the seed are traced values, so changing them does not recompile; only the sampling
*mode* (greedy, plain temperature, or filtered with top-k/top-p) is static. `compile_counts`
counts traces (a Python side effect that only runs while tracing).

Group sampling. `num_samples=G` samples per prompt share one prefill: the B prompt rows are
prefilled once, then the cache and the last logits are repeated G times along the batch axis, so
rows are prompt-major (the G samples of prompt 0 come first).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from kernelzero_jax.model.qwen2 import KVCache, Qwen2, causal_padding_mask, positions_from_valid

FINISH_STOP = "stop"
FINISH_LENGTH = "length"


@dataclasses.dataclass
class SampleOutput:
  """One row per sample, prompt-major: row r is sample r % G of prompt `prompt_index[r]`.

  tokens: the generated ids only (no prompt). A row that ended on a stop token or EOS includes
    that token as its last element, with finish reason "stop"; otherwise it has exactly
    `max_new_tokens` tokens and finish reason "length".
  logprobs: per generated token, its log-probability under the distribution it was sampled from
    (after temperature, top-k and top-p); for greedy decoding (temperature 0) the log-softmax of
    the raw logits.
  """
  tokens: list[list[int]]
  logprobs: list[list[float]]
  lengths: list[int]
  finish_reasons: list[str]
  prompt_index: list[int]


def next_power_of_two(n: int, minimum: int = 1) -> int:
  n = max(int(n), int(minimum), 1)
  return 1 << (n - 1).bit_length()


def sample_logits(logits_BxV: jax.Array, key: jax.Array, temperature: jax.Array,
                  top_k: jax.Array, top_p: jax.Array, *, greedy: bool, filtered: bool
                  ) -> tuple[jax.Array, jax.Array]:
  """Draws one token per row; returns (tokens [B] int32, their log-probabilities [B] float32).

  Order as in transformers: temperature, then top-k, then top-p on the top-k-renormalised
  distribution. The log-probability is under that final (renormalised) distribution, because
  that is the distribution the policy gradient's importance ratio refers to. top_k <= 0 and
  top_p >= 1 disable the filters. Tokens tied with the last kept logit are kept too.
  """
  logits_BxV = logits_BxV.astype(jnp.float32)
  if greedy:
    token_B = jnp.argmax(logits_BxV, axis=-1).astype(jnp.int32)
    logprobs_BxV = jax.nn.log_softmax(logits_BxV, axis=-1)
    return token_B, jnp.take_along_axis(logprobs_BxV, token_B[:, None], axis=-1)[:, 0]
  scaled_BxV = logits_BxV / temperature
  if filtered:
    # One descending sort serves both filters: both keep a prefix of the sorted order, so the
    # kept set is "logit >= the last kept sorted logit", applied back without a scatter.
    sorted_BxV = -jnp.sort(-scaled_BxV, axis=-1)
    rank_V = jnp.arange(sorted_BxV.shape[-1])
    keep_BxV = (top_k <= 0) | (rank_V[None, :] < top_k)
    probs_BxV = jax.nn.softmax(jnp.where(keep_BxV, sorted_BxV, -jnp.inf), axis=-1)
    mass_before_BxV = jnp.cumsum(probs_BxV, axis=-1) - probs_BxV
    keep_BxV &= (mass_before_BxV < top_p) | (top_p >= 1.0)
    num_kept_B = jnp.maximum(jnp.sum(keep_BxV, axis=-1), 1)
    threshold_B = jnp.take_along_axis(sorted_BxV, (num_kept_B - 1)[:, None], axis=-1)
    scaled_BxV = jnp.where(scaled_BxV >= threshold_B, scaled_BxV, -jnp.inf)
  token_B = jax.random.categorical(key, scaled_BxV, axis=-1).astype(jnp.int32)
  logprobs_BxV = jax.nn.log_softmax(scaled_BxV, axis=-1)
  return token_B, jnp.take_along_axis(logprobs_BxV, token_B[:, None], axis=-1)[:, 0]


def key_from_seed(seed: int) -> jax.Array:
  """A PRNG key from any Python int. jax.random.key keeps only the low 32 bits of a seed when
  64-bit mode is off, so the high word is folded in: seeds that differ anywhere differ here."""
  seed = int(seed) % 2**64
  key = jax.random.key(seed & 0xFFFFFFFF)
  return jax.random.fold_in(key, seed >> 32) if seed >> 32 else key


class Sampler:
  """Samples continuations of token-id prompts from a Qwen2 model.

  The model's parameters are split once (`graphdef`, `state`); prefill and decode are jitted
  functions of the state, so the same compiled code serves every call and any updated state of
  the same shapes (pass `state=` to `sample`, e.g. after a training step).
  """

  def __init__(self, model: Qwen2, eos_ids: Sequence[int] | None = None, pad_id: int = 0,
               min_prompt_bucket: int = 16, min_gen_bucket: int = 16,
               cache_dtype=None):
    self.config = model.config
    self.graphdef, self.state = nnx.split(model)
    self.eos_ids = tuple(int(t) for t in (self.config.eos_token_id if eos_ids is None
                                          else eos_ids))
    self.pad_id = int(pad_id)
    self.min_prompt_bucket = min_prompt_bucket
    self.min_gen_bucket = min_gen_bucket
    if cache_dtype is None:
      cache_dtype = model.embed_VxD[...].dtype
    self.cache_dtype = cache_dtype
    self.compile_counts = {"prefill": 0, "decode": 0}
    # Which axis of a cache array is the sequence: found from shapes, not assumed, so that the
    # sampler follows a change of the model's cache layout ([B, K, S, H] today).
    shapes = [jax.eval_shape(lambda n=n: KVCache.init(self.config, 1, n, cache_dtype)).k[0].shape
              for n in (2, 3)]
    self._cache_seq_axis = next(i for i, (x, y) in enumerate(zip(*shapes)) if x != y)
    self._prefill = jax.jit(self._prefill_impl, static_argnames=("num_samples", "gen_len"))
    # The cache is built by prefill and consumed here: donate it so decode updates it in place.
    self._decode = jax.jit(self._decode_impl, static_argnames=("gen_len", "greedy", "filtered"),
                           donate_argnums=(1,))

  # --- jitted pieces -----------------------------------------------------------------------

  def _prefill_impl(self, state, tokens_BxP: jax.Array, valid_BxP: jax.Array, *,
                    num_samples: int, gen_len: int) -> tuple[jax.Array, KVCache]:
    """Runs the B prompts once; returns the last-position logits and a cache of P + gen_len
    positions, both repeated `num_samples` times along the batch (prompt-major)."""
    self.compile_counts["prefill"] += 1  # runs only while tracing
    model = nnx.merge(self.graphdef, state)
    b, p = tokens_BxP.shape
    # A cache of exactly P positions: the prompt attends over P keys, not P + N (the attention
    # logits of a prefill are [B, heads, P, keys] floats, the largest buffer it makes).
    cache = KVCache.init(self.config, b, p, self.cache_dtype)
    # Two calls, so that the [B, P, V] logits of the prompt are never materialised (40 GB in
    # float32 for 64 x 1024 tokens of a 152k vocabulary): the logits of the first P - 1 tokens
    # are unused and XLA drops the head's matmul; the last token (every row's last real token,
    # thanks to left padding) then runs as a one-token step against the filled cache.
    head_valid_BxT = valid_BxP[:, :-1]
    head_mask_BxTxP = jnp.pad(causal_padding_mask(head_valid_BxT), ((0, 0), (0, 0), (0, 1)))
    _, cache = model(tokens_BxP[:, :-1], positions_from_valid(head_valid_BxT), head_mask_BxTxP,
                     cache=cache, cache_index=0)
    last_positions_Bx1 = (jnp.sum(valid_BxP, axis=1, dtype=jnp.int32) - 1)[:, None]
    logits_Bx1xV, cache = model(tokens_BxP[:, -1:], last_positions_Bx1, valid_BxP[:, None, :],
                                cache=cache, cache_index=p - 1)
    logits_BxV = logits_Bx1xV[:, 0]
    seq_axis = self._cache_seq_axis

    def grow(x):  # room for the generated tokens; G copies of each row (prompt-major)
      widths = [(0, 0)] * x.ndim
      widths[seq_axis] = (0, gen_len)
      return jnp.repeat(jnp.pad(x, widths), num_samples, axis=0)

    return jnp.repeat(logits_BxV, num_samples, axis=0), jax.tree.map(grow, cache)

  def _decode_impl(self, state, cache: KVCache, logits_BxV: jax.Array, prompt_len_B: jax.Array,
                   done_B: jax.Array, stop_BxM: jax.Array, key: jax.Array,
                   max_new_tokens: jax.Array, temperature: jax.Array, top_k: jax.Array,
                   top_p: jax.Array, *, gen_len: int, greedy: bool, filtered: bool):
    """Samples up to `max_new_tokens` (<= gen_len) tokens per row; stops early when every row
    is done. Returns tokens [B, N], logprobs [B, N], lengths [B], stopped [B] and the cache."""
    self.compile_counts["decode"] += 1  # runs only while tracing
    model = nnx.merge(self.graphdef, state)
    b = logits_BxV.shape[0]
    s = cache.length
    p = s - gen_len
    prompt_valid_BxP = jnp.arange(p)[None, :] >= (p - prompt_len_B)[:, None]

    def record(i, logits_BxV, tokens_BxN, logprobs_BxN, done_B, stopped_B, length_B):
      token_B, logprob_B = sample_logits(logits_BxV, jax.random.fold_in(key, i), temperature,
                                         top_k, top_p, greedy=greedy, filtered=filtered)
      active_B = ~done_B
      token_B = jnp.where(active_B, token_B, self.pad_id)
      logprob_B = jnp.where(active_B, logprob_B, 0.0)
      tokens_BxN = jax.lax.dynamic_update_slice_in_dim(tokens_BxN, token_B[:, None], i, axis=1)
      logprobs_BxN = jax.lax.dynamic_update_slice_in_dim(logprobs_BxN, logprob_B[:, None], i,
                                                         axis=1)
      hit_B = active_B & jnp.any(token_B[:, None] == stop_BxM, axis=-1)
      stopped_B = stopped_B | hit_B
      length_B = length_B + active_B.astype(jnp.int32)
      done_B = done_B | hit_B | (i + 1 >= max_new_tokens)
      return tokens_BxN, logprobs_BxN, done_B, stopped_B, length_B

    tokens_BxN = jnp.full((b, gen_len), self.pad_id, jnp.int32)
    logprobs_BxN = jnp.zeros((b, gen_len), jnp.float32)
    stopped_B = jnp.zeros((b,), bool)
    length_B = jnp.zeros((b,), jnp.int32)
    # Token 0 comes from the prefill logits, so the loop runs one forward per further token.
    carry = (jnp.int32(1), cache) + record(0, logits_BxV, tokens_BxN, logprobs_BxN, done_B,
                                           stopped_B, length_B)

    def cond(carry):
      i, _, _, _, done_B, _, _ = carry
      return (i < max_new_tokens) & ~jnp.all(done_B)

    def body(carry):
      i, cache, tokens_BxN, logprobs_BxN, done_B, stopped_B, length_B = carry
      prev_B1 = jax.lax.dynamic_slice_in_dim(tokens_BxN, i - 1, 1, axis=1)
      # Keys: the real prompt tokens, and generated tokens 0 .. i-1 (i-1 is written now).
      gen_valid_N = jnp.arange(gen_len) < i
      mask_Bx1xS = jnp.concatenate(
          [prompt_valid_BxP, jnp.broadcast_to(gen_valid_N, (b, gen_len))], axis=1)[:, None, :]
      positions_Bx1 = (prompt_len_B + i - 1)[:, None]
      logits_Bx1xV, cache = model(prev_B1, positions_Bx1, mask_Bx1xS, cache=cache,
                                  cache_index=p + i - 1)
      rest = record(i, logits_Bx1xV[:, 0], tokens_BxN, logprobs_BxN, done_B, stopped_B,
                    length_B)
      return (i + 1, cache) + rest

    _, cache, tokens_BxN, logprobs_BxN, _, stopped_B, length_B = jax.lax.while_loop(
        cond, body, carry)
    # Returning the cache lets XLA alias it to the donated input: the loop updates it in place.
    return tokens_BxN, logprobs_BxN, length_B, stopped_B, cache

  # --- host side ---------------------------------------------------------------------------

  def _stop_table(self, stop_token_ids, num_prompts: int, num_samples: int, rows: int,
                  ignore_eos: bool) -> np.ndarray:
    """[rows, M] stop ids per output row, padded with -1 (never a token) to a power of two."""
    if stop_token_ids is None:
      per_row = [[] for _ in range(num_prompts * num_samples)]
    elif all(isinstance(t, (int, np.integer)) for t in stop_token_ids):
      per_row = [list(stop_token_ids)] * (num_prompts * num_samples)
    elif len(stop_token_ids) == num_prompts:
      per_row = [list(stop_token_ids[i // num_samples]) for i in range(num_prompts * num_samples)]
    elif len(stop_token_ids) == num_prompts * num_samples:
      per_row = [list(s) for s in stop_token_ids]
    else:
      raise ValueError(f"stop_token_ids has {len(stop_token_ids)} lists; expected one shared "
                       f"list of ids, one per prompt ({num_prompts}) or one per sample row "
                       f"({num_prompts * num_samples})")
    eos = [] if ignore_eos else list(self.eos_ids)
    per_row = [sorted(set(r) | set(eos)) for r in per_row]
    m = next_power_of_two(max([len(r) for r in per_row] + [1]), 8)
    table = np.full((rows, m), -1, np.int32)
    for i, r in enumerate(per_row):
      table[i, :len(r)] = r
    return table

  def prepare(self, prompts: Sequence[Sequence[int]], max_new_tokens: int,
              num_samples: int = 1) -> dict:
    """Pads and buckets a batch (host side): the arrays that prefill/decode take."""
    if not prompts:
      raise ValueError("no prompts")
    if max_new_tokens < 1:
      raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if num_samples < 1:
      raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    vocab = self.config.vocab_size
    for i, prompt in enumerate(prompts):
      if len(prompt) == 0:
        raise ValueError(f"prompt {i} is empty")
      if min(prompt) < 0 or max(prompt) >= vocab:
        raise ValueError(f"prompt {i} has token ids outside [0, {vocab})")
    num_prompts = len(prompts)
    batch = next_power_of_two(num_prompts)
    prompt_bucket = next_power_of_two(max(len(p) for p in prompts), self.min_prompt_bucket)
    gen_len = next_power_of_two(max_new_tokens, self.min_gen_bucket)
    tokens_BxP = np.full((batch, prompt_bucket), self.pad_id, np.int32)
    valid_BxP = np.zeros((batch, prompt_bucket), bool)
    prompt_len_B = np.ones((batch,), np.int32)  # bucket-filler rows: one (pad) token
    for i, prompt in enumerate(prompts):
      tokens_BxP[i, prompt_bucket - len(prompt):] = prompt
      valid_BxP[i, prompt_bucket - len(prompt):] = True
      prompt_len_B[i] = len(prompt)
    valid_BxP[num_prompts:, -1] = True  # filler rows attend to something; they start done
    done_B = np.arange(batch * num_samples) >= num_prompts * num_samples
    return dict(tokens_BxP=tokens_BxP, valid_BxP=valid_BxP,
                prompt_len_B=np.repeat(prompt_len_B, num_samples), done_B=done_B,
                num_prompts=num_prompts, num_samples=num_samples, gen_len=gen_len)

  def sample(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, *, seed: int,
             temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
             num_samples: int = 1, stop_token_ids: Sequence | None = None,
             ignore_eos: bool = False, state=None) -> SampleOutput:
    """Samples `num_samples` continuations of each prompt (lists of token ids, any lengths).

    temperature 0 is greedy decoding (top-k/top-p ignored). `stop_token_ids`: None, one list
    of ids shared by all rows, one list per prompt, or one list per output row. A row ends at
    the first stop token or EOS (unless `ignore_eos`), which is INCLUDED as its last token, or
    after `max_new_tokens` tokens. `seed` is required: the same seed and inputs give the same
    samples; there is no hidden fixed key. `state` overrides the model state given at
    construction (same shapes, e.g. freshly trained parameters).
    """
    if temperature < 0:
      raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
      raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    batch = self.prepare(prompts, max_new_tokens, num_samples)
    rows = batch["done_B"].shape[0]
    stop_BxM = self._stop_table(stop_token_ids, batch["num_prompts"], num_samples, rows,
                                ignore_eos)
    state = self.state if state is None else state
    greedy = temperature == 0
    filtered = not greedy and (top_k > 0 or top_p < 1)
    logits_BxV, cache = self._prefill(state, batch["tokens_BxP"], batch["valid_BxP"],
                                      num_samples=num_samples, gen_len=batch["gen_len"])
    tokens_BxN, logprobs_BxN, length_B, stopped_B, _ = self._decode(
        state, cache, logits_BxV, batch["prompt_len_B"], batch["done_B"], stop_BxM,
        key_from_seed(seed), np.int32(max_new_tokens),
        np.float32(temperature if not greedy else 1.0), np.int32(top_k), np.float32(top_p),
        gen_len=batch["gen_len"], greedy=greedy, filtered=filtered)
    tokens_BxN, logprobs_BxN, length_B, stopped_B = jax.device_get(
        (tokens_BxN, logprobs_BxN, length_B, stopped_B))
    n = batch["num_prompts"] * num_samples
    return SampleOutput(
        tokens=[tokens_BxN[r, :length_B[r]].tolist() for r in range(n)],
        logprobs=[logprobs_BxN[r, :length_B[r]].tolist() for r in range(n)],
        lengths=[int(x) for x in length_B[:n]],
        finish_reasons=[FINISH_STOP if stopped_B[r] else FINISH_LENGTH for r in range(n)],
        prompt_index=[r // num_samples for r in range(n)])

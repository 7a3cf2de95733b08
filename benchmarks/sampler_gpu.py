r"""JAX sampler decode speed on a GPU: next to transformers' generate, and against the HBM floor.

    python -m benchmarks.sampler_gpu --out=/tmp/sampler_gpu.json           # H200: 7B, 1024+1024
    python -m benchmarks.sampler_gpu --tiny --batch_sizes=1,2 --prompt_len=16 --new_tokens=8

Qwen2.5-Coder-7B architecture (PRESETS["qwen2.5-coder-7b"]) with random bf16 weights made on the
device (no download), prompts of --prompt_len random tokens, --new_tokens generated tokens (EOS
off, so every row runs to the end), greedy. For each batch size:

- ours: prefill and decode timed apart, after a warm-up call of the same shapes (no compilation
  in the timings); decode step = decode time / (new_tokens - 1), as the first token comes from
  the prefill logits.
- transformers: `generate` on the same GPU with the same architecture and random bf16 weights,
  for each --hf_caches implementation (static triggers torch.compile in generate); its decode step
  is (t(new_tokens) - t(1)) / (new_tokens - 1), each timed after a warm-up of the same shapes.
- the HBM floor of one decode step: (weights read + KV cache read) / copy bandwidth, the
  bandwidth measured here by a large device-to-device jax copy (bytes read + written). Weights
  read excludes the input embedding table of untied models (only B rows are gathered). The KV
  read is the live context, averaged over the decode (prompt + new/2 positions): the floor of an
  ideal kernel. Ours reads the whole preallocated cache every step; that figure is reported too.

Torch runs first and frees the GPU before JAX allocates (JAX preallocation is turned off here).
Prints a table and writes everything as JSON to --out.
"""
# pylint: disable=import-outside-toplevel,protected-access,wrong-import-position

from __future__ import annotations

import os

# Before jax is imported: transformers runs on the same GPU in this process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import gc
import json
import platform
import statistics
import time

from absl import app
from absl import flags
from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from kernelzero_jax.model.config import PRESETS, ModelConfig

_TINY = flags.DEFINE_bool("tiny", False, "Tiny preset on whatever device (a CPU smoke test).")
_PRESET = flags.DEFINE_string("preset", "qwen2.5-coder-7b", "Architecture (PRESETS key).")
_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["1", "16", "64"], "Batch sizes.")
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 1024, "Prompt tokens per row.")
_NEW_TOKENS = flags.DEFINE_integer("new_tokens", 1024, "Generated tokens per row.")
_REPEATS = flags.DEFINE_integer("repeats", 2, "Timed repetitions (the median is reported).")
_HF = flags.DEFINE_bool("hf", True, "Also time transformers' generate.")
_HF_CACHES = flags.DEFINE_list("hf_caches", ["dynamic", "static"],
                               "transformers cache implementations to time (the best is compared).")
_COPY_MIB = flags.DEFINE_integer("copy_mib", 4096, "Array size for the bandwidth measurement.")
_OUT = flags.DEFINE_string("out", "sampler_gpu.json", "Where to write the results (JSON).")


def _median_time(fn, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _prompts(batch: int, length: int, vocab: int, seed: int = 0) -> np.ndarray:
  # Avoid id 0 (pad) so that no prompt token looks like padding.
  return np.random.default_rng(seed).integers(1, vocab, size=(batch, length), dtype=np.int64)


def copy_bandwidth(mib: int, repeats: int = 10) -> float:
  """Bytes/s of a device-to-device elementwise copy (each byte read once and written once)."""
  x = jnp.zeros((mib * 2**20 // 4,), jnp.uint32)
  copy = jax.jit(lambda a: a + 1)  # a real kernel: XLA cannot elide or alias it
  copy(x).block_until_ready()
  seconds = _median_time(lambda: copy(x).block_until_ready(), repeats)
  return 2 * x.nbytes / seconds


def kv_bytes_per_position(cfg: ModelConfig, itemsize: int) -> int:
  return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * itemsize


def weight_bytes_read_per_step(cfg: ModelConfig, total_param_bytes: int, itemsize: int) -> int:
  if cfg.tie_word_embeddings:
    return total_param_bytes  # the table is the output head: read in full
  return total_param_bytes - cfg.vocab_size * cfg.hidden_size * itemsize


# --- transformers ------------------------------------------------------------------------------

def time_transformers(cfg: ModelConfig, batch_sizes: list[int], prompt_len: int, new: int,
                      caches: list[str], repeats: int) -> dict:
  import torch
  from transformers import Qwen2Config, Qwen2ForCausalLM
  device = "cuda" if torch.cuda.is_available() else "cpu"
  hf_config = Qwen2Config(
      vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
      intermediate_size=cfg.intermediate_size, num_hidden_layers=cfg.num_hidden_layers,
      num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
      rope_theta=cfg.rope_theta, rms_norm_eps=cfg.rms_norm_eps,
      max_position_embeddings=max(cfg.max_position_embeddings, prompt_len + new),
      tie_word_embeddings=cfg.tie_word_embeddings, eos_token_id=None, bos_token_id=None,
      pad_token_id=0)
  with torch.device(device):
    model = Qwen2ForCausalLM._from_config(hf_config, dtype=torch.bfloat16).eval()
  results: dict = {"device": device, "torch": torch.__version__}
  if device == "cuda":
    results["gpu"] = torch.cuda.get_device_name()

  def generate(ids, mask, tokens: int, cache: str):
    kwargs = {"cache_implementation": "static"} if cache == "static" else {}
    with torch.inference_mode():
      model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=tokens,
                     min_new_tokens=tokens, pad_token_id=0, eos_token_id=None, **kwargs)
    if device == "cuda":
      torch.cuda.synchronize()

  for batch in batch_sizes:
    ids = torch.from_numpy(_prompts(batch, prompt_len, cfg.vocab_size)).to(device)
    mask = torch.ones_like(ids)
    for cache in caches:
      key = f"{cache}/b{batch}"
      try:
        for tokens in (1, new):  # warm-up (and torch.compile for static) at these shapes
          generate(ids, mask, tokens, cache)
        t_one = _median_time(lambda: generate(ids, mask, 1, cache), repeats)
        t_all = _median_time(lambda: generate(ids, mask, new, cache), repeats)
      except Exception as e:  # pylint: disable=broad-except
        logging.exception("transformers %s failed", key)
        results[key] = {"error": f"{type(e).__name__}: {e}"[:500]}
        continue
      step = (t_all - t_one) / max(new - 1, 1)
      results[key] = {"generate_s": t_all, "prefill_s": t_one, "decode_step_s": step,
                      "decode_tokens_per_s": batch / step}
      logging.info("transformers %s: %.2f ms/step", key, step * 1e3)
  return results  # the model is freed with this frame; see _free_torch_memory


def cache_sized_copies(hlo_text: str, cache_shape: tuple[int, ...], dtype: str) -> int:
  """Copies and transposes of a whole KV-cache array in compiled HLO: each one moves the entire
  cache every decode step (e.g. when the attention's batch axes are not the major ones)."""
  import itertools
  import re
  shapes = {f"{dtype}[{','.join(map(str, p))}]" for p in itertools.permutations(cache_shape)}
  pattern = re.compile(r"=\s*(\S+)\{[^}]*\}\s+(copy|transpose)\(")
  count = 0
  for line in hlo_text.splitlines():
    m = pattern.search(line)
    if m and m.group(1) in shapes:
      count += 1
  return count


# --- ours --------------------------------------------------------------------------------------

def time_ours(cfg: ModelConfig, batch_sizes: list[int], prompt_len: int, new: int,
              repeats: int) -> dict:
  from flax import nnx
  from kernelzero_jax.model.qwen2 import Qwen2
  from kernelzero_jax.sampling import Sampler
  model = Qwen2(cfg, rngs=nnx.Rngs(0), dtype=jnp.bfloat16)  # made on the default device
  sampler = Sampler(model, eos_ids=[], pad_id=0)
  del model
  param_bytes = sum(x.nbytes for x in jax.tree.leaves(sampler.state))
  results: dict = {"param_bytes": param_bytes}
  for batch in batch_sizes:
    prompts = _prompts(batch, prompt_len, cfg.vocab_size).tolist()
    b = sampler.prepare(prompts, new)
    rows = b["done_B"].shape[0]
    stop_BxM = np.full((rows, 8), -1, np.int32)

    def prefill():
      logits, cache = sampler._prefill(sampler.state, b["tokens_BxP"], b["valid_BxP"],
                                       num_samples=1, gen_len=b["gen_len"])
      return jax.block_until_ready((logits, cache))

    def decode(logits, cache):
      out = sampler._decode(sampler.state, cache, logits, b["prompt_len_B"], b["done_B"],
                            stop_BxM, jax.random.key(0), np.int32(new), np.float32(1.0),
                            np.int32(0), np.float32(1.0), gen_len=b["gen_len"], greedy=True,
                            filtered=False)
      return jax.block_until_ready(out)

    out = decode(*prefill())  # warm-up: compiles both
    if batch == batch_sizes[0]:
      # The same program, compiled again from abstract inputs, to read its optimised HLO.
      logits_abs, cache_abs = jax.eval_shape(
          lambda: sampler._prefill(sampler.state, b["tokens_BxP"], b["valid_BxP"],
                                   num_samples=1, gen_len=b["gen_len"]))
      hlo = sampler._decode.lower(
          sampler.state, cache_abs, logits_abs, b["prompt_len_B"], b["done_B"], stop_BxM,
          jax.random.key(0), np.int32(new), np.float32(1.0), np.int32(0), np.float32(1.0),
          gen_len=b["gen_len"], greedy=True, filtered=False).compile().as_text()
      results["decode_cache_sized_copies"] = cache_sized_copies(
          hlo, cache_abs.k[0].shape, "bf16")
      if results["decode_cache_sized_copies"]:
        logging.warning("decode HLO copies or transposes whole cache arrays %d times (per step)",
                        results["decode_cache_sized_copies"])
    assert int(np.min(out[2][:batch])) == new, "a row stopped early"
    del out
    prefill_times, decode_times = [], []
    for _ in range(repeats):
      start = time.perf_counter()
      logits, cache = prefill()
      prefill_times.append(time.perf_counter() - start)
      start = time.perf_counter()
      decode(logits, cache)
      decode_times.append(time.perf_counter() - start)
      del logits, cache
    t_decode = statistics.median(decode_times)
    step = t_decode / max(new - 1, 1)
    sample_s = _median_time(lambda: sampler.sample(prompts, new, seed=0, temperature=0.0),
                            1)  # end to end, host padding and transfers included
    results[f"b{batch}"] = {
        "prefill_s": statistics.median(prefill_times), "decode_s": t_decode,
        "decode_step_s": step, "decode_tokens_per_s": batch / step, "sample_call_s": sample_s,
        "cache_positions": b["tokens_BxP"].shape[1] + b["gen_len"], "rows": rows}
    logging.info("ours b%d: %.2f ms/step", batch, step * 1e3)
  results["compile_counts"] = dict(sampler.compile_counts)
  return results


def _free_torch_memory() -> None:
  import torch
  gc.collect()
  if torch.cuda.is_available():
    torch.cuda.empty_cache()  # give the GPU back before JAX allocates


def run() -> dict:
  cfg = PRESETS["tiny" if _TINY.value else _PRESET.value]
  batch_sizes = [int(b) for b in _BATCH_SIZES.value]
  prompt_len, new, repeats = _PROMPT_LEN.value, _NEW_TOKENS.value, _REPEATS.value
  hf = (time_transformers(cfg, batch_sizes, prompt_len, new, list(_HF_CACHES.value), repeats)
        if _HF.value else {})
  if _HF.value:
    _free_torch_memory()
  bandwidth = copy_bandwidth(min(_COPY_MIB.value, 64) if _TINY.value else _COPY_MIB.value)
  ours = time_ours(cfg, batch_sizes, prompt_len, new, repeats)
  itemsize = 2  # bf16 weights and cache
  weights_read = weight_bytes_read_per_step(cfg, ours["param_bytes"], itemsize)
  rows = []
  for batch in batch_sizes:
    mine = ours[f"b{batch}"]
    kv_live = batch * (prompt_len + new / 2) * kv_bytes_per_position(cfg, itemsize)
    kv_full = mine["rows"] * mine["cache_positions"] * kv_bytes_per_position(cfg, itemsize)
    floor_s = (weights_read + kv_live) / bandwidth
    hf_best = min((v for k, v in hf.items() if k.endswith(f"/b{batch}") and "decode_step_s" in v),
                  key=lambda v: v["decode_step_s"], default=None)
    hf_best_name = next((k.split("/")[0] for k, v in hf.items() if v is hf_best), None)
    rows.append({
        "batch": batch, "ours_tokens_per_s": mine["decode_tokens_per_s"],
        "ours_step_ms": mine["decode_step_s"] * 1e3, "ours_prefill_ms": mine["prefill_s"] * 1e3,
        "hf_cache": hf_best_name,
        "hf_tokens_per_s": hf_best["decode_tokens_per_s"] if hf_best else None,
        "speedup_vs_hf": (mine["decode_tokens_per_s"] / hf_best["decode_tokens_per_s"]
                          if hf_best else None),
        "hbm_floor_ms": floor_s * 1e3, "fraction_of_hbm_floor": floor_s / mine["decode_step_s"],
        "hbm_floor_full_cache_ms": (weights_read + kv_full) / bandwidth * 1e3})
  return {"config": {"preset": "tiny" if _TINY.value else _PRESET.value, "prompt_len": prompt_len,
                     "new_tokens": new, "batch_sizes": batch_sizes, "repeats": repeats},
          "jax": jax.__version__, "jax_device": str(jax.devices()[0]),
          "python": platform.python_version(), "copy_bandwidth_gb_per_s": bandwidth / 1e9,
          "weight_bytes_read_per_step": weights_read,
          "decode_cache_sized_copies": ours.get("decode_cache_sized_copies"),
          "rows": rows, "ours": ours,
          "transformers": hf}


def print_table(result: dict) -> None:
  print(f"{result['config']['preset']}, prompt {result['config']['prompt_len']}, "
        f"{result['config']['new_tokens']} new tokens, greedy; {result['jax_device']}; "
        f"copy bandwidth {result['copy_bandwidth_gb_per_s']:.0f} GB/s")
  if result.get("decode_cache_sized_copies"):
    print(f"note: the decode step copies/transposes whole KV-cache arrays "
          f"{result['decode_cache_sized_copies']} times (see the report on the cache layout)")
  header = (f"{'batch':>5} {'ours tok/s':>11} {'hf tok/s':>10} {'hf cache':>8} {'ours/hf':>8} "
            f"{'step ms':>8} {'floor ms':>9} {'floor/step':>10} {'prefill ms':>10}")
  print(header)
  print("-" * len(header))
  for r in result["rows"]:
    hf = f"{r['hf_tokens_per_s']:10.1f}" if r["hf_tokens_per_s"] else f"{'-':>10}"
    ratio = f"{r['speedup_vs_hf']:8.2f}" if r["speedup_vs_hf"] else f"{'-':>8}"
    print(f"{r['batch']:>5} {r['ours_tokens_per_s']:11.1f} {hf} {r['hf_cache'] or '-':>8} "
          f"{ratio} {r['ours_step_ms']:8.3f} {r['hbm_floor_ms']:9.3f} "
          f"{r['fraction_of_hbm_floor']:10.1%} {r['ours_prefill_ms']:10.1f}")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  result = run()
  print_table(result)
  out_dir = os.path.dirname(os.path.abspath(_OUT.value))
  os.makedirs(out_dir, exist_ok=True)
  with open(_OUT.value, "w") as f:
    json.dump(result, f, indent=2)
  print(f"wrote {_OUT.value}")


if __name__ == "__main__":
  app.run(main)

r"""CA-GRPO training-step speed on a GPU: tokens/s and MFU, next to transformers + torch AdamW.

    python -m benchmarks.train_step_gpu --out=/tmp/train_step_gpu.json   # H200: 1.5B, 16 x 4096
    python -m benchmarks.train_step_gpu --tiny                            # CPU smoke test

Qwen2.5-Coder-1.5B architecture (PRESETS["qwen2.5-coder-1.5b"]) at random weights made on the
device (no download). One optimizer step = --batch_size sequences of --seq_len tokens, all real
(no padding): a --prompt_len-token prompt and a completion that the loss trains
(completion_mask), random tokens, old logprobs near -log(V), one random advantage per sequence.

- ours: `kernelzero_jax.rl.train_step.make_train_step` (token_mean clipped policy loss, the
  entropy metric, global-norm clipping at 1.0, optax AdamW), jitted once with donate_argnums=0;
  fp32 master weights and Adam state, bf16 compute, gradients accumulated over --micro_batches
  equal slices (a lax.scan). Compiled before timing (lower().compile()), then --warmup_steps
  untimed steps and --steps timed ones, each ended by block_until_ready.
  - "fused": the forward options from --attention (auto: cuDNN flash attention on a GPU, XLA's
    dot_product_attention elsewhere) and --remat. If it runs out of memory and --remat_fallback
    is set, it is retried with the next heavier remat ("none" -> "dots" -> "full").
  - "plain" (--plain): the model's default path (einsum attention with materialised [T, T]
    logits, no remat), with --plain_micro_batches (default: one sequence per micro-batch).
- torch (--hf): transformers' Qwen2ForCausalLM from the same config, random weights, fp32
  parameters under torch.autocast(bfloat16) (the same fp32-master / bf16-compute split as ours),
  sdpa attention (causal, no mask: FlashAttention on the GPU), the same micro-batches; per
  micro-batch the same token-level clipped policy loss (fp32 log_softmax of the logits, the
  entropy metric under no_grad), backward; then clip_grad_norm_(1.0) and torch.optim.AdamW
  (fused=True where available). Eager, no torch.compile. Gradient checkpointing with
  --hf_gradient_checkpointing, or as a retry after running out of memory. It runs first and
  frees the GPU before JAX allocates (JAX preallocation is turned off here, and JAX may use up
  to 90% of the GPU). On a CPU (smoke test only) torch runs on one thread.

No new attempt starts after --time_budget_s (a retry or the plain run is then "skipped"), and
the JSON is rewritten after every run, so a run stopped half-way keeps what it finished.

MFU = tokens/s x model FLOPs per token / --peak_tflops. The default 989 TFLOP/s is the H200 SXM
dense bf16 Tensor Core peak (no sparsity). Model FLOPs per token (`train_flops_per_token`) are
PaLM's (Chowdhery et al. 2022, appendix B): 6 x the matmul parameters (the LM head included,
the embedding gather excluded) + 6 x 2 x layers x seq_len x q_heads x head_dim for QK^T and PV
over the full T x T square, WITHOUT causal halving; "mfu_causal" halves that attention term.
Rematerialised FLOPs are not counted (this is MFU, not HFU).

Prints a table and writes everything as JSON to --out.
"""
# pylint: disable=import-outside-toplevel,wrong-import-position

from __future__ import annotations

import os

# Before jax is imported: torch runs on the same GPU in this process first; with preallocation
# off the BFC allocator is still capped at the memory fraction (75% by default).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Exactly one of the two names: jax 0.11's CUDA plugin refuses to start (and jax silently falls
# back to the CPU) when both are set; the older name still works there, with a warning.
if "XLA_CLIENT_MEM_FRACTION" not in os.environ:
  os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.90")

import datetime
import gc
import json
import math
import platform
import statistics
import sys
import time

from absl import app
from absl import flags
from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from kernelzero_jax.model.config import PRESETS, ModelConfig

_TINY = flags.DEFINE_bool("tiny", False, "Tiny preset, short sequences (a CPU smoke test); "
                          "flags given explicitly still win.")
_PRESET = flags.DEFINE_string("preset", "qwen2.5-coder-1.5b", "Architecture (PRESETS key).")
_SEQ_LEN = flags.DEFINE_integer("seq_len", 4096, "Tokens per sequence (prompt + completion).")
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 1024, "Prompt tokens (not trained) per sequence.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 16, "Sequences per optimizer step.")
_MICRO_BATCHES = flags.DEFINE_integer("micro_batches", 8, "Gradient-accumulation slices per step.")
_STEPS = flags.DEFINE_integer("steps", 5, "Timed optimizer steps (the median is reported).")
_WARMUP = flags.DEFINE_integer("warmup_steps", 2, "Untimed steps after compilation.")
_PEAK_TFLOPS = flags.DEFINE_float("peak_tflops", 989.0, "Peak dense bf16 TFLOP/s for the MFU "
                                  "(989: H200 SXM, no sparsity).")
_ATTENTION = flags.DEFINE_enum("attention", "auto", ["auto", "einsum", "xla", "cudnn"],
                               "Attention of the fused run; auto: cudnn on a GPU, else xla.")
_REMAT = flags.DEFINE_enum("remat", "none", ["none", "dots", "full"],
                           "Per-layer rematerialisation of the fused run.")
_REMAT_FALLBACK = flags.DEFINE_bool("remat_fallback", True, "On out-of-memory, retry the fused "
                                    "run with the next heavier remat.")
_PLAIN = flags.DEFINE_bool("plain", True,
                           "Also time the default path (einsum attention, no remat).")
_PLAIN_MICRO = flags.DEFINE_integer("plain_micro_batches", 0,
                                    "Micro-batches of the plain run (0: one sequence each).")
_HF = flags.DEFINE_bool("hf", True, "Also time transformers + torch AdamW (first, same GPU).")
_HF_CKPT = flags.DEFINE_bool("hf_gradient_checkpointing", False, "Gradient checkpointing in the "
                             "transformers model (else only as a retry after out-of-memory).")
_TIME_BUDGET = flags.DEFINE_float("time_budget_s", 300.0, "No new attempt (a remat retry, the "
                                  "plain run) starts after this many seconds; 0: no limit.")
_OUT = flags.DEFINE_string("out", "train_step_gpu.json", "Where to write the results (JSON).")

_REMAT_ORDER = ("none", "dots", "full")
_EPS_LOW, _EPS_HIGH, _MAX_GRAD_NORM, _LR = 0.2, 0.28, 1.0, 1e-6  # ours: LossConfig defaults


def train_flops_per_token(cfg: ModelConfig, seq_len: int) -> dict:
  """Model FLOPs of one training token (forward + backward = 3 x forward), PaLM-style.

  dense: each weight-matrix entry costs 2 FLOPs per token forward and 4 backward (6 in all):
    per layer wq [D, N*H], wk and wv [D, K*H], wo [N*H, D], gate and up [D, F], down [F, D];
    plus the LM head [D, V] (the tied embedding table counts once, as the head: the input
    embedding is a gather, no FLOPs). Biases, norms, RoPE, softmax and the loss are left out.
  attention: per layer and token, QK^T costs 2 x T x N*H forward and PV the same; x3 for the
    backward gives 6 x 2 x L x T x N*H, counted over the full T x T square (PaLM: no causal
    halving). `total_causal` halves it (what a causal kernel actually needs).
  """
  d, f, n_layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
  q_width = cfg.num_attention_heads * cfg.head_dim
  kv_width = cfg.num_key_value_heads * cfg.head_dim
  per_layer = d * q_width + 2 * d * kv_width + q_width * d + 3 * d * f
  matmul_params = n_layers * per_layer + d * cfg.vocab_size
  dense = 6 * matmul_params
  attention = 6 * 2 * n_layers * seq_len * q_width
  return {"matmul_params": matmul_params, "dense": dense, "attention": attention,
          "total": dense + attention, "total_causal": dense + attention // 2}


def make_batch(cfg: ModelConfig, batch: int, seq_len: int, prompt_len: int, seed: int = 0
               ) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  t_T = np.arange(seq_len)
  return {
      # Avoid id 0 (pad) so that no token looks like padding.
      "tokens_BxT": rng.integers(1, cfg.vocab_size, (batch, seq_len), dtype=np.int32),
      "valid_BxT": np.ones((batch, seq_len), bool),
      "completion_mask_BxT": np.broadcast_to(t_T >= prompt_len, (batch, seq_len)).astype(
          np.float32),
      "old_logp_BxT": (-math.log(cfg.vocab_size)
                       + 0.1 * rng.standard_normal((batch, seq_len))).astype(np.float32),
      "adv_B": rng.standard_normal(batch).astype(np.float32),
  }


def _is_oom(e: Exception) -> bool:
  text = str(e)
  return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def _timed_steps(step, state, steps: int, warmup: int, sync) -> tuple[object, list[float], list]:
  for _ in range(warmup):
    state, out = step(state)
    sync(out)
  times, outs = [], []
  for _ in range(steps):
    start = time.perf_counter()
    state, out = step(state)
    sync(out)
    times.append(time.perf_counter() - start)
    outs.append(out)
  return state, times, outs


# --- transformers + torch ----------------------------------------------------------------------

def time_transformers(cfg: ModelConfig, batch: dict, micro: int, steps: int, warmup: int,
                      gradient_checkpointing: bool) -> dict:
  import torch
  from transformers import Qwen2Config, Qwen2ForCausalLM
  device = "cuda" if torch.cuda.is_available() else "cpu"
  if device == "cpu":
    torch.set_num_threads(1)  # smoke test: OpenMP threads crawl on a shared, busy CPU
  seq_len = batch["tokens_BxT"].shape[1]
  hf_config = Qwen2Config(
      vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
      intermediate_size=cfg.intermediate_size, num_hidden_layers=cfg.num_hidden_layers,
      num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
      rope_theta=cfg.rope_theta, rms_norm_eps=cfg.rms_norm_eps,
      max_position_embeddings=max(cfg.max_position_embeddings, seq_len),
      tie_word_embeddings=cfg.tie_word_embeddings, use_cache=False, eos_token_id=None,
      bos_token_id=None, pad_token_id=0)
  with torch.device(device):
    model = Qwen2ForCausalLM._from_config(  # pylint: disable=protected-access
        hf_config, dtype=torch.float32, attn_implementation="sdpa")
  model.train()
  if gradient_checkpointing:  # the old name is deprecated in recent transformers 5 releases
    (getattr(model, "activation_checkpointing_enable", None)
     or model.gradient_checkpointing_enable)()
  params = list(model.parameters())
  try:
    opt = torch.optim.AdamW(params, lr=_LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            fused=True)
    fused = True
  except (RuntimeError, ValueError):
    opt = torch.optim.AdamW(params, lr=_LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    fused = False
  tokens = torch.from_numpy(batch["tokens_BxT"].astype(np.int64)).to(device)
  mask = torch.from_numpy(np.ascontiguousarray(batch["completion_mask_BxT"])).to(device)
  old_logp = torch.from_numpy(batch["old_logp_BxT"]).to(device)
  adv = torch.from_numpy(batch["adv_B"]).to(device)
  b = tokens.shape[0]
  mb = b // micro
  normalizer = mask[:, 1:].sum().clamp(min=1.0)  # token_mean over the whole batch

  def step(_):
    total, entropy = 0.0, 0.0
    for i in range(micro):
      rows = slice(i * mb, (i + 1) * mb)
      with torch.autocast(device_type=device, dtype=torch.bfloat16):
        logits = model(input_ids=tokens[rows], use_cache=False).logits
      logprobs = torch.log_softmax(logits[:, :-1].float(), dim=-1)
      logp = logprobs.gather(-1, tokens[rows, 1:, None]).squeeze(-1)
      ratio = torch.exp(logp - old_logp[rows, 1:])
      a = adv[rows, None]
      loss_t = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - _EPS_LOW, 1 + _EPS_HIGH) * a)
      loss = (loss_t * mask[rows, 1:]).sum() / normalizer
      with torch.no_grad():
        entropy = entropy + ((-(logprobs.exp() * logprobs).sum(-1)) * mask[rows, 1:]).sum()
      loss.backward()
      total = total + loss.detach()
      del logits, logprobs, logp, ratio, loss_t, loss
    torch.nn.utils.clip_grad_norm_(params, _MAX_GRAD_NORM)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return None, total

  def sync(_):
    if device == "cuda":
      torch.cuda.synchronize()

  if device == "cuda":
    torch.cuda.reset_peak_memory_stats()
  _, times, outs = _timed_steps(step, None, steps, warmup, sync)
  logging.info("torch: %.3f s/step", statistics.median(times))
  result = {"device": device, "torch": torch.__version__, "fused_adamw": fused,
            "gradient_checkpointing": gradient_checkpointing, "micro_batches": micro,
            "attention": "sdpa", "precision": "fp32 params, bf16 autocast",
            "step_times_s": times, "step_s": statistics.median(times),
            "loss": float(outs[-1])}
  if device == "cuda":
    result["gpu"] = torch.cuda.get_device_name()
    result["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
  return result  # the model is freed with this frame; see _free_torch_memory


def _free_torch_memory() -> None:
  import torch
  gc.collect()
  if torch.cuda.is_available():
    torch.cuda.empty_cache()  # give the GPU back before JAX allocates


# --- ours --------------------------------------------------------------------------------------

def time_ours(cfg: ModelConfig, batch_np: dict, micro: int, attention: str, remat: str,
              steps: int, warmup: int) -> dict:
  from flax import nnx
  from kernelzero_jax.model.qwen2 import ForwardOptions, Qwen2
  from kernelzero_jax.rl import train_step as ts
  options = ForwardOptions(attention=attention, remat=remat)
  optimizer = ts.make_optimizer(ts.OptimizerConfig(learning_rate=_LR, schedule="constant",
                                                   max_grad_norm=_MAX_GRAD_NORM))
  model = Qwen2(cfg, rngs=nnx.Rngs(0), dtype=jnp.float32)  # made on the default device
  graphdef, state = ts.init_train_state(model, optimizer)
  del model
  batch = {k: jnp.asarray(v) for k, v in batch_np.items()}
  step_fn = jax.jit(ts.make_train_step(graphdef, optimizer, ts.LossConfig(),
                                       num_micro_batches=micro, compute_dtype=jnp.bfloat16,
                                       forward_options=options), donate_argnums=0)
  start = time.perf_counter()
  compiled = step_fn.lower(state, batch).compile()
  compile_s = time.perf_counter() - start
  logging.info("ours attention=%s remat=%s micro=%d: compiled in %.1f s", attention, remat,
               micro, compile_s)
  result: dict = {"attention": attention, "remat": remat, "micro_batches": micro,
                  "compile_s": compile_s}
  try:
    mem = compiled.memory_analysis()
    result["compiled_memory_bytes"] = {
        k: int(getattr(mem, f"{k}_size_in_bytes")) for k in ("argument", "output", "temp",
                                                              "alias")}
  except Exception:  # pylint: disable=broad-except
    pass
  state, times, outs = _timed_steps(lambda s: compiled(s, batch), state, steps, warmup,
                                    jax.block_until_ready)
  metrics = jax.device_get(outs[-1])
  result.update(step_times_s=times, step_s=statistics.median(times),
                loss=float(metrics["loss"]), grad_norm=float(metrics["grad_norm"]),
                num_tokens=int(metrics["num_tokens"]))
  logging.info("ours attention=%s remat=%s: %.3f s/step", attention, remat, result["step_s"])
  stats = jax.devices()[0].memory_stats() or {}
  if "peak_bytes_in_use" in stats:
    result["process_peak_memory_bytes"] = int(stats["peak_bytes_in_use"])  # since the start
  return result  # state and executable are freed with this frame


def _over_budget(start: float) -> bool:
  return _TIME_BUDGET.value > 0 and time.perf_counter() - start > _TIME_BUDGET.value


def _run_ours(name: str, cfg, batch, micro, attention, remats, steps, warmup,
              start: float) -> dict:
  """Times one configuration, trying `remats` in order while it runs out of memory."""
  failures = []
  for remat in remats:
    if _over_budget(start):
      failures.append({"remat": remat, "status": "skipped", "error": "time budget spent"})
      break
    try:
      result = time_ours(cfg, batch, micro, attention, remat, steps, warmup)
      result.update(name=name, status="ok", failures=failures)
      return result
    except Exception as e:  # pylint: disable=broad-except
      oom = _is_oom(e)
      logging.exception("ours %s (attention=%s, remat=%s) failed", name, attention, remat)
      failures.append({"remat": remat, "status": "oom" if oom else "error",
                       "error": f"{type(e).__name__}: {e}"[:800]})
    gc.collect()
    jax.clear_caches()
    if not oom:
      break
  return {"name": name, "attention": attention, "remat": failures[-1]["remat"],
          "micro_batches": micro, "status": failures[-1]["status"], "failures": failures}


def _rates(result: dict, tokens_per_step: int, flops: dict, peak_tflops: float) -> None:
  if "step_s" not in result:
    return
  tps = tokens_per_step / result["step_s"]
  result["tokens_per_s"] = tps
  result["mfu"] = tps * flops["total"] / (peak_tflops * 1e12)
  result["mfu_causal"] = tps * flops["total_causal"] / (peak_tflops * 1e12)


def _versions(hf_ran: bool) -> dict:
  import flax
  import jaxlib
  import optax
  v = {"python": platform.python_version(), "jax": jax.__version__,
       "jaxlib": jaxlib.__version__, "flax": flax.__version__, "optax": optax.__version__}
  try:
    from jax._src.lib import cuda_versions  # pylint: disable=protected-access
    if cuda_versions is not None:
      v["cudnn"] = cuda_versions.cudnn_get_version()
  except Exception:  # pylint: disable=broad-except
    pass
  if hf_ran:
    import torch
    import transformers
    v.update(torch=torch.__version__, transformers=transformers.__version__)
  return v


def _value(flag, tiny_default):
  return tiny_default if _TINY.value and not flag.present else flag.value


def _summary(result: dict) -> None:
  """Rates of every run, the best of ours and its ratio to torch, in place."""
  c = result["config"]
  for r in result["runs"]:
    _rates(r, c["tokens_per_step"], result["flops_per_token"], c["peak_tflops"])
  ours = [r for r in result["runs"] if r["name"] != "torch" and "tokens_per_s" in r]
  best = max(ours, key=lambda r: r["tokens_per_s"], default=None)
  torch_run = next((r for r in result["runs"] if r["name"] == "torch" and "tokens_per_s" in r),
                   None)
  result["best"] = best["name"] if best else None
  result["ours_over_torch"] = (best["tokens_per_s"] / torch_run["tokens_per_s"]
                               if best and torch_run else None)


def _write(result: dict) -> None:
  """Written after every run, so that a run killed half-way still leaves its results."""
  _summary(result)
  out_dir = os.path.dirname(os.path.abspath(_OUT.value))
  os.makedirs(out_dir, exist_ok=True)
  with open(_OUT.value, "w") as f:
    json.dump(result, f, indent=2)


def _time_torch(cfg, batch, micro, steps, warmup) -> dict:
  """transformers + torch, retried with gradient checkpointing after out-of-memory."""
  failures = []
  for checkpointing in dict.fromkeys((_HF_CKPT.value, True)):
    try:
      hf = time_transformers(cfg, batch, micro, steps, warmup, checkpointing)
      hf.update(name="torch", status="ok", failures=failures,
                remat="ckpt" if checkpointing else "none")
      return hf
    except Exception as e:  # pylint: disable=broad-except
      logging.exception("transformers failed (gradient checkpointing %s)", checkpointing)
      failures.append({"remat": "ckpt" if checkpointing else "none",
                       "status": "oom" if _is_oom(e) else "error",
                       "error": f"{type(e).__name__}: {e}"[:800]})
    finally:
      _free_torch_memory()
    if failures[-1]["status"] != "oom":
      break
  return {"name": "torch", "attention": "sdpa", "remat": failures[-1]["remat"],
          "micro_batches": micro, "status": failures[-1]["status"], "failures": failures}


def run() -> dict:
  start = time.perf_counter()
  if not _TINY.value and jax.default_backend() == "cpu":
    # A GPU number measured on the CPU fallback would be silently meaningless.
    raise RuntimeError("JAX runs on the CPU (its GPU plugin did not start; see the log above); "
                       "use --tiny for a CPU smoke test")
  preset = "tiny" if _TINY.value else _PRESET.value
  cfg = PRESETS[preset]
  seq_len = _value(flags.FLAGS["seq_len"], 128)
  prompt_len = _value(flags.FLAGS["prompt_len"], 32)
  batch_size = _value(flags.FLAGS["batch_size"], 4)
  micro = _value(flags.FLAGS["micro_batches"], 2)
  plain_micro = _PLAIN_MICRO.value or batch_size
  steps, warmup = _STEPS.value, _WARMUP.value
  for m in (micro, plain_micro):
    if batch_size % m:
      raise app.UsageError(f"--batch_size {batch_size} is not a multiple of {m} micro-batches")
  batch = make_batch(cfg, batch_size, seq_len, prompt_len)
  result: dict = {
      "config": {"preset": preset, "seq_len": seq_len, "prompt_len": prompt_len,
                 "batch_size": batch_size, "micro_batches": micro,
                 "plain_micro_batches": plain_micro, "steps": steps, "warmup_steps": warmup,
                 "tokens_per_step": batch_size * seq_len,
                 "loss_tokens_per_step": int(batch["completion_mask_BxT"][:, 1:].sum()),
                 "peak_tflops": _PEAK_TFLOPS.value, "attention": _ATTENTION.value,
                 "remat": _REMAT.value, "compute_dtype": "bfloat16",
                 "master_dtype": "float32", "loss": "token_mean clipped policy loss "
                 f"(eps {_EPS_LOW}/{_EPS_HIGH}), global-norm clip {_MAX_GRAD_NORM}, AdamW"},
      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "command": " ".join([os.path.basename(sys.executable), "-m", "benchmarks.train_step_gpu"]
                          + sys.argv[1:]),
      "env": {k: os.environ.get(k) for k in ("XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE",
                                             "XLA_PYTHON_CLIENT_MEM_FRACTION",
                                             "XLA_CLIENT_MEM_FRACTION")},
      "flops_per_token": train_flops_per_token(cfg, seq_len),
      "flops_accounting": "PaLM (Chowdhery et al. 2022, app. B): 6 x matmul params (LM head "
                          "in, embedding gather out) + 12 x L x T x N*H attention, full square "
                          "(no causal halving); mfu_causal halves the attention term",
      "runs": [],
  }
  if _HF.value:  # first: torch gives the GPU back before JAX allocates anything
    result["runs"].append(_time_torch(cfg, batch, micro, steps, warmup))
  device = jax.devices()[0]
  result["hardware"] = {"device_kind": device.device_kind, "platform": device.platform,
                        "jax_device": str(device), "num_devices": jax.device_count(),
                        "host": platform.node(), "cpu_count": os.cpu_count()}
  result["versions"] = _versions(_HF.value)
  attention = _ATTENTION.value
  if attention == "auto":
    attention = "cudnn" if jax.default_backend() == "gpu" else "xla"
  result["config"]["attention"] = attention
  _write(result)
  remats = (_REMAT_ORDER[_REMAT_ORDER.index(_REMAT.value):] if _REMAT_FALLBACK.value
            else (_REMAT.value,))
  result["runs"].append(_run_ours("fused", cfg, batch, micro, attention, remats, steps, warmup,
                                  start))
  _write(result)
  if _PLAIN.value and (attention, _REMAT.value, micro) != ("einsum", "none", plain_micro):
    result["runs"].append(_run_ours("plain", cfg, batch, plain_micro, "einsum", ("none",), steps,
                                    warmup, start))
    _write(result)
  return result


def _si(x: float) -> str:
  for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
    if abs(x) >= scale:
      return f"{x / scale:.3f} {unit}"
  return f"{x:.0f} "


def print_table(result: dict) -> None:
  c, f = result["config"], result["flops_per_token"]
  print(f"{c['preset']}: {c['batch_size']} x {c['seq_len']} tokens per step (prompt "
        f"{c['prompt_len']}), fp32 master + Adam, bf16 compute; {result['hardware']['device_kind']}"
        f"; peak {c['peak_tflops']:.0f} TFLOP/s")
  print(f"model FLOPs/token: {_si(f['total'])} = dense {_si(f['dense'])} (6 x "
        f"{_si(f['matmul_params'])} matmul params) + attention {_si(f['attention'])} (full "
        f"square; causal-halved total {_si(f['total_causal'])})")
  header = (f"{'run':>6} {'attention':>9} {'remat':>5} {'micro':>5} {'step s':>8} "
            f"{'tokens/s':>10} {'MFU':>6} {'MFU caus':>8} {'compile s':>9} {'status':>6}")
  print(header)
  print("-" * len(header))
  for r in result["runs"]:
    if "tokens_per_s" in r:
      nums = (f"{r['step_s']:8.3f} {r['tokens_per_s']:10.0f} {r['mfu']:6.1%} "
              f"{r['mfu_causal']:8.1%} ")
    else:
      nums = f"{'-':>8} {'-':>10} {'-':>6} {'-':>8} "
    compile_s = f"{r['compile_s']:9.1f}" if "compile_s" in r else f"{'-':>9}"
    print(f"{r['name']:>6} {r.get('attention', '-'):>9} {str(r.get('remat', '-')):>5} "
          f"{r.get('micro_batches', '-'):>5} {nums}{compile_s} {r['status']:>6}")
    for fail in r.get("failures", []):
      print(f"{'':>6} remat={fail['remat']}: {fail['status']}: {fail['error'][:150]}")
    if r.get("error"):
      print(f"{'':>6} {r['error'][:200]}")
  if result["ours_over_torch"] is not None:
    print(f"ours ({result['best']}) / torch tokens/s: {result['ours_over_torch']:.2f}")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  result = run()
  print_table(result)
  print(f"wrote {_OUT.value}")


if __name__ == "__main__":
  app.run(main)
